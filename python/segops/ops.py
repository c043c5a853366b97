"""The segops operators' Python API.

Every public op comes with a chain of derivative ops: ``segops::<op>`` (the
forward), ``segops::<op>_grad`` (its backward), ``segops::<op>_grad_grad``
and ``segops::<op>_grad_grad_grad``. The operator library
(``_native/libsegops_ops.so``, loaded with ``_torchops``) defines them all in
C++ from the op library's manifest: schemas, CPU, CUDA, autograd and Meta
kernels, so they run without Python (``torch.ops.load_library`` of that file
in any process). Each runs the op library's kernel of the same name (all
derived by the compiler, none hand-written) for the tensors' dtype and row
width; the backward of each level calls the next level, so derivatives up to
third order stay on segops kernels. This module attaches the package's hooks
to them: the errors users see, and row widths compiled at run time.

A level takes the float tensors of the level below, followed by the
cotangents of its outputs, then ``idx`` and ``num_segments``; it returns the
gradients of those float tensors, in order. A level whose kernel reads
results of the level below (rms_norm's, max's and min's) also has the
overload ``.saved``, which takes those results before the cotangents (what
autograd calls, with the outputs it saved); its default overload recomputes
them.

The public functions (``segops.segmented_sum``...) check their arguments
(types first: the dispatcher would otherwise reject them with a generic
RuntimeError or accept ``True`` as a count) and call ``torch.ops.segops.*``.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from segops import _columns, _extensions, _gpusim, _library, _output_cache, _validation
from segops._dtypes import FLOAT_DTYPES, SIXTEEN_BIT_DTYPES
from segops._op_table import MAX_LEVEL, OPS, SegmentOp, check_dot_shapes, level_name
from segops._validation import (
    INT32_MAX,
    check_float_rows,
    check_index_content,
    check_num_segments,
    check_tensor,
)


def _row_width(first: Tensor) -> int:
    """The row width of a level's first float argument (1 for (N,))."""
    return 1 if first.dim() == 1 else int(first.shape[1])


def _kernel_name(spec: SegmentOp, level: int, first: Tensor) -> str:
    return spec.kernel_name(FLOAT_DTYPES[first.dtype], _row_width(first), level)


def _is_shipped(kernel: str) -> bool:
    """Whether the op library has the kernel (else it is compiled at run
    time: segops._wide)."""
    return kernel in _library.kernels()


def _op_name(spec: SegmentOp, level: int) -> str:
    return level_name(spec.name, level)


def _needs_sorted_index(spec: SegmentOp, level: int, first: Tensor,
                        device: torch.device) -> bool:
    """Whether a kernel's idx must be sorted on `device`: segment kernels on
    CUDA. Row maps take any order; on CPU the C++ kernels run a segment
    kernel on an unsorted index's rows in a stable sort of them."""
    if device.type != "cuda":
        return False
    kernel = _kernel_name(spec, level, first)
    if _is_shipped(kernel):
        return not _library.kernel(kernel).host_rows
    if _run_time_widths is None:
        return True  # no kernel at all: the op's own check reports it
    return not _run_time_widths.host_rows(spec.name, FLOAT_DTYPES[first.dtype],
                                          _row_width(first), level)


@dataclass(frozen=True)
class RunTimeWidths:
    """Kernels for row widths the op library does not ship, compiled at run
    time (segops._wide, which compiles through segops.jit, a layer above
    this module, provides them): each takes (op, dtype, width, level)."""

    # That level, compiled (a _torchops.CompiledKernel, see set_level_hooks).
    compiled_kernel: Callable[[str, str, int, int], Any]
    # Whether that level's host kernel maps rows (any idx order).
    host_rows: Callable[[str, str, int, int], bool]


_run_time_widths: RunTimeWidths | None = None


def provide_run_time_widths(widths: RunTimeWidths) -> None:
    """Installs the provider of kernels for widths the library lacks."""
    global _run_time_widths
    _run_time_widths = widths


# Kernels the operator library leaves out (CUDA where it was built without).
_library_fragment = torch.library.Library("segops", "FRAGMENT")


def _native_ops():
    """The operator library's Python side (segops._native._torchops), which
    loads the operator library; None where it is not built or failed to
    define the ops (its manifest or host kernels missing). With
    SEGOPS_SIMULATE_GPU=1 their CPU kernels run the GPU kernels instead,
    through segrt's GPU launcher over the simulated driver."""
    _torchops = _extensions.torchops()
    if _torchops is None or _torchops.load_error():
        return None
    try:
        if _gpusim.ENABLED:
            _torchops.set_gpu_simulator(str(_gpusim.LIBRARY_PATH))
    except (OSError, RuntimeError):
        return None
    _output_cache.apply_environment(_torchops)
    if _torchops.has_cuda_kernels():
        _torchops.set_ptx_source(_ptx_text)
        _torchops.set_debug_checks(_validation.debug_checks_enabled())
        _validation.on_debug_checks_change(_torchops.set_debug_checks)
    return _torchops


def _ptx_text(device: int) -> str:
    """The op library's PTX for a CUDA device (for the C++ CUDA kernels)."""
    return _library.ptx_for(torch.cuda.get_device_capability(device)).read_text()


def _native_validator(spec: SegmentOp, level: int) -> Callable[..., None]:
    """Raises the error for arguments the C++ kernel rejected (on CUDA in
    debug mode, checks idx before every launch)."""
    def validate(floats: list[Tensor], idx: Tensor, num_segments: Any) -> None:
        if level == 0:
            spec.validate(*floats, idx, num_segments)
        if idx.device.type == "meta":
            return  # a trace's (the Meta kernel's call): no values to check
        if floats and floats[0].dtype in FLOAT_DTYPES and floats[0].dim() in (1, 2, 3):
            require_sorted = _needs_sorted_index(spec, level, floats[0], idx.device)
        else:
            require_sorted = False
        check_index_content(_op_name(spec, level), idx, num_segments, require_sorted)
    return validate


_native = _native_ops()


def native_kernels() -> Any | None:
    """The C++ kernels the ops are registered with (segops._native._torchops,
    loaded and configured), or None where they are missing (every call then
    raises MissingKernelsError)."""
    return _native


class MissingKernelsError(RuntimeError):
    """This build has no C++ kernels for the device (the only kernels)."""


@dataclass(frozen=True)
class OperatorCall:
    """The arguments of a call of a library operator level (a graph node's
    args), placed by the level's signature as the operator library defines
    it: the op's float arguments, what its derivative levels add (each
    level's saved results it reads and its cotangents, in the order of the
    level's derived function), idx and num_segments."""

    arguments: list[Any]
    level_inputs: list[Any]
    idx: Any
    num_segments: Any


@functools.cache
def _signature(level: str) -> Any:
    if _native is None:
        raise MissingKernelsError(f"segops::{level}: the C++ operator kernels are missing")
    return _native.operator_signature(level)


def operator_call(level: str, args: Sequence[Any]) -> OperatorCall | None:
    """`args` of a call of library operator level `level` (segmented_sum_grad)
    by the level's signature; None if they do not fit it."""
    signature = _signature(level)
    if len(args) != signature.num_segments_position + 1:
        return None
    first = signature.num_arguments
    return OperatorCall(list(args[:first]),
                        list(args[first:first + signature.num_level_inputs]),
                        args[signature.idx_position], args[signature.num_segments_position])


def jit_call_op() -> Callable[..., Any]:
    """segops::jit_call (the operator library defines it), or where the
    library is missing a stand-in that raises MissingKernelsError."""
    if _native is None:
        return missing_kernels("segops::jit_call", "CPU")
    return torch.ops.segops.jit_call.default


def specialization_key(args: Sequence[Any], classes: Sequence[int | None] | None = None) -> Any:
    """The one specialization key of segops.jit calls, the operator
    library's (jit_ops.cpp; jit_call's warm path keys by it too): hashable;
    `classes` gives each argument's length class (None: a fixed shape or
    value), else they are inferred from N and S."""
    if _native is None:
        missing_kernels("segops.jit", "CPU")()
    return _native.specialization_key(list(args), None if classes is None else list(classes))


def register_missing_kernels(library: torch.library.Library, name: str) -> None:
    """Registers, for operator `name`, a kernel that raises
    MissingKernelsError on each device the C++ kernels do not serve (where
    the operator is defined at all)."""
    if not hasattr(torch.ops.segops, name):
        return
    keys = ["CPU", "CUDA"] if _native is None else [] if _native.has_cuda_kernels() else ["CUDA"]
    for key in keys:
        library.impl(name, missing_kernels(f"segops::{name}", key), key)


def missing_kernels(what: str, device: str) -> Callable[..., Any]:
    """A kernel for `what` on `device` that says why there is none."""
    def kernel(*args: Any) -> Any:
        if device == "CUDA":
            raise MissingKernelsError(
                f"{what}: this segops build has no CUDA kernels (its C++ operator kernels were "
                "built against a PyTorch without CUDA, or without the CUDA headers); rebuild "
                "segops against this PyTorch")
        raise MissingKernelsError(
            f"{what}: segops' C++ operator kernels (segops._native._torchops) are missing or "
            "failed to load; rebuild segops (`make build`, or pip install . "
            "--no-build-isolation) against this PyTorch")
    return kernel


def _variant_provider(spec: SegmentOp, level: int) -> Callable[[str], Any] | None:
    """Makes the C++ kernels' variant for a row width the op library does
    not ship ("f32_w64"), compiled at run time (provide_run_time_widths)."""
    if not spec.takes_any_width:
        return None

    def provide(key: str) -> Any:
        dtype, _, width = key.partition("_w")
        if (_run_time_widths is None or dtype not in FLOAT_DTYPES.values()
                or not width.isdigit() or int(width) < 1):
            return None
        return _run_time_widths.compiled_kernel(spec.name, dtype, int(width), level)
    return provide


def _attach_hooks(spec: SegmentOp) -> None:
    """The package's hooks on every level of an op the operator library
    defined."""
    for level in range(MAX_LEVEL + 1):
        name = _op_name(spec, level)
        _native.set_level_hooks(name, _native_validator(spec, level),
                                _variant_provider(spec, level))
        register_missing_kernels(_library_fragment, name)


if _native is not None:
    for _spec in OPS.values():
        _attach_hooks(_spec)


# --------------------------------------------------------------------------
# Public API
# --------------------------------------------------------------------------


def _check_types(op: str, tensors: dict[str, object], num_segments: object) -> int:
    """Checks the arguments' types; returns the segment count as an int
    (given as an int, a 0-d integer tensor or a numpy integer). Without the
    operator library there are no operators: raises MissingKernelsError."""
    if _native is None:
        missing_kernels(f"segops::{op}", "CPU")()
    for name, value in tensors.items():
        if not isinstance(value, Tensor):
            check_tensor(op, name, value)
    if type(num_segments) is int and 0 <= num_segments <= INT32_MAX:
        return num_segments  # the common case, without the calls below (host overhead)
    return check_num_segments(op, _validation.as_count(num_segments))


def _as_feature_rows(tensor: Tensor, op: str, name: str, leading: str = "N") -> Tensor:
    """(L, *f) rows as the kernels take them: (L, F), F the product of f (a
    view where the rows are contiguous), or (L,) for one feature; (L,) and
    (L, F) as they are. Rows of no features are refused with the shape the
    user passed."""
    dim = tensor.dim() if isinstance(tensor, Tensor) else 0
    if dim < 2 or (dim == 2 and tensor.shape[1] > 1):
        return tensor
    features = math.prod(tensor.shape[1:])
    if features == 0:  # refused, with the shape passed (not the flattened one)
        check_float_rows(op, name, tensor, leading)
    if features == 1:
        return tensor.reshape(tensor.shape[0])
    return tensor.reshape(tensor.shape[0], features) if tensor.dim() > 2 else tensor


def _has_trailing_shape(tensor: Tensor) -> bool:
    """Whether a result must be given back the rows' (L, *f) shape."""
    return tensor.dim() > 2 or (tensor.dim() == 2 and tensor.shape[1] == 1)


def _blocks_of(op: str, *args: Any) -> int | None:
    """The block width the op runs its (L, F) rows in (segops._columns: a
    width the op library lacks and no compiler, or rows too wide to
    unroll), after the checks the op would make; None: as they are."""
    width = _columns.block_width(args[0])
    if width is not None:
        OPS[op].validate(*args)  # idx's values: segops::column_index checks them
    return width


def _in_float32(op: str, tensor: object) -> bool:
    """Whether `op` runs `tensor`'s 16-bit rows in float32 (then returns its
    result in their dtype)."""
    return (isinstance(tensor, Tensor) and tensor.dtype in SIXTEEN_BIT_DTYPES
            and OPS[op].takes_16_bit)


def _reduce_rows(op: str, x: Tensor, idx: Tensor, num_segments: object) -> Tensor:
    """A reduction of (N, *f) rows to (S, *f): the kernel runs on (N, F)."""
    if _in_float32(op, x):
        return _reduce_rows(op, x.float(), idx, num_segments).to(x.dtype)
    count = _check_types(op, {"x": x, "idx": idx}, num_segments)
    rows = _as_feature_rows(x, op, "x")
    if (width := _blocks_of(op, rows, idx, count)) is not None:
        out = _columns.reduce(op, rows, idx, count, width)
    else:
        out = getattr(torch.ops.segops, op)(rows, idx, count)
    return out.reshape(count, *x.shape[1:]) if _has_trailing_shape(x) else out


def segmented_sum(x: Tensor, idx: Tensor, num_segments: int) -> Tensor:
    """Per-segment sum: ``out[s] = sum(x[i] for i with idx[i] == s)``.

    x: (N,), (N, 3) or rows of any features (N, *f), float32 or float64.
    idx: (N,) sorted segment ids in [0, num_segments), int32 (or int64 with
    values that fit int32). Returns (num_segments, *x.shape[1:]); empty
    segments give 0.
    """
    return _reduce_rows("segmented_sum", x, idx, num_segments)


def segmented_mean(x: Tensor, idx: Tensor, num_segments: int) -> Tensor:
    """Per-segment mean of rows (N, *f) -> (S, *f); 0 for an empty segment
    (never NaN)."""
    return _reduce_rows("segmented_mean", x, idx, num_segments)


def segmented_rms_norm(x: Tensor, idx: Tensor, num_segments: int) -> Tensor:
    """Per-segment RMS norm ``sqrt(mean(|x[i]|^2))`` of rows (N, *f), |x[i]|
    over all their features: (num_segments,); 0 for an empty segment; the
    gradient at an all-zero segment is 0."""
    num_segments = _check_types("segmented_rms_norm", {"x": x, "idx": idx}, num_segments)
    rows = _as_feature_rows(x, "segmented_rms_norm", "x")
    if (width := _blocks_of("segmented_rms_norm", rows, idx, num_segments)) is not None:
        return _columns.rms_norm(rows, idx, num_segments, width)
    return torch.ops.segops.segmented_rms_norm(rows, idx, num_segments)


def segmented_dot(x: Tensor, y: Tensor, idx: Tensor, num_segments: int) -> Tensor:
    """Per-segment dot product ``sum(dot(x[i], y[i]))`` of rows (N, *f), over
    all their features: (num_segments,)."""
    num_segments = _check_types("segmented_dot", {"x": x, "y": y, "idx": idx}, num_segments)
    check_dot_shapes(x, y)
    x, y = _as_feature_rows(x, "segmented_dot", "x"), _as_feature_rows(y, "segmented_dot", "y")
    if (width := _blocks_of("segmented_dot", x, y, idx, num_segments)) is not None:
        return _columns.dot(x, y, idx, num_segments, width)
    return torch.ops.segops.segmented_dot(x, y, idx, num_segments)


def segmented_mul(x: Tensor, y: Tensor, idx: Tensor, num_segments: int) -> Tensor:
    """Scale rows (N, *f) by their segment's scalar: ``out[i] = x[i] *
    y[idx[i]]``. num_segments must equal y.shape[0]."""
    num_segments = _check_types("segmented_mul", {"x": x, "y": y, "idx": idx}, num_segments)
    rows = _as_feature_rows(x, "segmented_mul", "x")
    if (width := _blocks_of("segmented_mul", rows, y, idx, num_segments)) is not None:
        out = _columns.mul(rows, y, idx, num_segments, width)
    else:
        out = torch.ops.segops.segmented_mul(rows, y, idx, num_segments)
    return out.reshape(x.shape) if _has_trailing_shape(x) else out


def segmented_matvec(v: Tensor, m: Tensor, idx: Tensor, num_segments: int) -> Tensor:
    """Per-row matrix-vector product ``out[i] = m[idx[i]]^T @ v[i]``: (N, 3).
    num_segments must equal m.shape[0]."""
    num_segments = _check_types("segmented_matvec", {"v": v, "m": m, "idx": idx}, num_segments)
    return torch.ops.segops.segmented_matvec(v, m, idx, num_segments)


def segmented_gather(y: Tensor, idx: Tensor) -> Tensor:
    """Broadcast per-segment rows to their segment's rows: ``out[i] = y[idx[i]]``
    (the adjoint of segmented_sum)."""
    if _in_float32("segmented_gather", y):
        return segmented_gather(y.float(), idx).to(y.dtype)
    _check_types("segmented_gather", {"y": y, "idx": idx}, 0)
    if y.dim() == 0:
        raise ValueError("segmented_gather: y must have shape (S,) or (S, *f) (one row per "
                         "segment), got a 0-d tensor")
    rows = _as_feature_rows(y, "segmented_gather", "y", "S")
    if (width := _blocks_of("segmented_gather", rows, idx, y.shape[0])) is not None:
        out = _columns.gather(rows, idx, width)
    else:
        out = torch.ops.segops.segmented_gather(rows, idx, y.shape[0])
    return out.reshape(idx.shape[0], *y.shape[1:]) if _has_trailing_shape(y) else out


def segmented_max(x: Tensor, idx: Tensor, num_segments: int) -> Tensor:
    """Per-segment maximum of rows (N, *f), per feature; 0 for an empty
    segment, NaN where a row is NaN. The gradient is split evenly among the
    rows that attain the maximum (NaN in a segment whose maximum is NaN, as
    torch.amax's)."""
    return _reduce_rows("segmented_max", x, idx, num_segments)


def segmented_min(x: Tensor, idx: Tensor, num_segments: int) -> Tensor:
    """Per-segment minimum of rows (N, *f), per feature; 0 for an empty
    segment; the gradient is split evenly among the rows that attain the
    minimum (NaN in a segment whose minimum is NaN, as torch.amin's)."""
    return _reduce_rows("segmented_min", x, idx, num_segments)
