"""The segops operators, registered with torch.library.

Every public op comes with a chain of derivative ops: ``segops::<op>`` (the
forward), ``segops::<op>_grad`` (its backward), ``segops::<op>_grad_grad``
and ``segops::<op>_grad_grad_grad``. Each runs the op library's kernel of the
same name (all derived by the compiler, none hand-written) for the tensors'
dtype and row width, on CPU or CUDA; each has a fake kernel for tracing and
torch.compile; and the backward of each level calls the next level, so
derivatives up to third order stay on segops kernels.

A level takes the float tensors of the level below, followed by the
cotangents of its outputs, then ``idx`` and ``num_segments``; it returns the
gradients of those float tensors, in order.

The public functions (``segops.segmented_sum``...) check their arguments
(types first: the dispatcher would otherwise reject them with a generic
RuntimeError or accept ``True`` as a count) and call ``torch.ops.segops.*``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import cache
from typing import Any

import torch
from torch import Tensor

from segops import _extensions, _gpusim, _library, _output_cache, _validation
from segops._op_table import MAX_LEVEL, OPS, SegmentOp, level_name
from segops._validation import check_index_content, check_num_segments, check_tensor

_DTYPE_NAMES = {torch.float32: "f32", torch.float64: "f64"}


def _kernel_name(spec: SegmentOp, level: int, first: Tensor) -> str:
    return spec.kernel_name(_DTYPE_NAMES[first.dtype], 1 if first.dim() == 1 else 3, level)


@cache
def _output_plan(kernel: str) -> tuple[tuple[tuple[str, ...], torch.dtype], ...]:
    """The kernel's outputs: symbolic shape ("N", "S" or extents) and dtype."""
    entry = _library.kernel_entry(kernel)
    return tuple((tuple(buffer["shape"]), _library.TORCH_DTYPES[buffer["dtype"]])
                 for buffer in entry["buffers"] if buffer["role"] == "output")


def _output_shapes(kernel: str, num_rows: int, num_segments: int) -> list[tuple[list, torch.dtype]]:
    return [(_library.buffer_shape(shape, num_rows, num_segments), dtype)
            for shape, dtype in _output_plan(kernel)]


@cache
def _unused_inputs(kernel: str) -> frozenset[int]:
    """Positions (among the float inputs) of inputs the kernel never reads."""
    floats = [b for b in _library.kernel_entry(kernel)["buffers"]
              if b["role"] == "input" and b["name"] != "idx"]
    return frozenset(i for i, b in enumerate(floats) if not b.get("read", True))


def _schema(spec: SegmentOp, level: int) -> str:
    names, outputs = spec.float_names(level)
    params = ", ".join(f"Tensor {n}" for n in names)
    returns = "Tensor" if outputs == 1 else "(" + ", ".join(["Tensor"] * outputs) + ")"
    return f"{_op_name(spec, level)}({params}, Tensor idx, SymInt num_segments) -> {returns}"


def _op_name(spec: SegmentOp, level: int) -> str:
    return level_name(spec.name, level)


def _needs_sorted_index(kernel: str, device: torch.device) -> bool:
    """Whether a kernel's idx must be sorted on `device`: segment kernels on
    CUDA. Row maps take any order; on CPU the C++ kernels run a segment
    kernel on an unsorted index's rows in a stable sort of them."""
    return device.type == "cuda" and not _library.kernel(kernel).host_rows


def _fake_level(spec: SegmentOp, level: int, floats: Sequence[Tensor], idx: Tensor,
                num_segments: int) -> Tensor | tuple[Tensor, ...]:
    if level == 0:
        spec.validate(*floats, idx, num_segments)
    kernel = _kernel_name(spec, level, floats[0])
    outputs = [floats[0].new_empty(shape, dtype=dtype)
               for shape, dtype in _output_shapes(kernel, idx.shape[0], num_segments)]
    return outputs[0] if len(outputs) == 1 else tuple(outputs)


_library_def = torch.library.Library("segops", "DEF")


def _native_ops():
    """The C++ CPU, CUDA and autograd kernels (segops._native._torchops),
    loaded with the host kernels; None where they are not built or the op
    library is missing. With SEGOPS_SIMULATE_GPU=1 their CPU kernels run the
    GPU kernels instead, through segrt's GPU launcher over the simulated
    driver."""
    _torchops = _extensions.torchops()
    if _torchops is None:
        return None
    try:
        _torchops.load_host_library(str(_library.host_library_path()))
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


def _native_variants(spec: SegmentOp, level: int) -> dict[str, dict]:
    """Every kernel of a level by dtype and width, as _torchops reads them."""
    variants = {}
    num_floats = len(spec.float_names(level)[0])
    for dtype in ("f32", "f64"):
        for width in (1, 3):
            kernel = spec.kernel_name(dtype, width, level)
            if kernel not in _library.kernels():
                continue
            unused = (_unused_inputs(spec.kernel_name(dtype, width, level + 1))
                      if level < MAX_LEVEL else frozenset())
            variants[f"{dtype}_w{width}"] = {
                "kernel": kernel,
                "buffers": _library.kernel_entry(kernel)["buffers"],
                "row_range": _library.kernel(kernel).host_rows,
                "split": _library.kernel_entry(kernel).get("host", {}).get("split"),
                "gpu": _library.kernel_entry(kernel)["gpu"],
                "saved_for_backward": [i not in unused for i in range(num_floats)],
            }
    return variants


def _native_validator(spec: SegmentOp, level: int) -> Callable[..., None]:
    """Raises the error for arguments the C++ kernel rejected (on CUDA in
    debug mode, checks idx before every launch)."""
    def validate(*args) -> None:
        floats, idx, num_segments = args[:-2], args[-2], args[-1]
        if level == 0:
            spec.validate(*floats, idx, num_segments)
        if floats and floats[0].dtype in _DTYPE_NAMES and floats[0].dim() in (1, 2, 3):
            kernel = _kernel_name(spec, level, floats[0])
            require_sorted = _needs_sorted_index(kernel, idx.device)
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


def register_missing_kernels(library: torch.library.Library, name: str) -> None:
    """Registers, for operator `name`, a kernel that raises
    MissingKernelsError on each device the C++ kernels do not serve."""
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


def _register(spec: SegmentOp) -> None:
    # Define every level first: each level's backward calls the next one.
    for level in range(MAX_LEVEL + 1):
        _library_def.define(_schema(spec, level))
    for level in range(MAX_LEVEL + 1):
        name = _op_name(spec, level)

        def fake(*args, _level=level):
            return _fake_level(spec, _level, args[:-2], args[-2], args[-1])

        if _native is not None:
            # CPU, CUDA (where built) and autograd kernels, all in C++.
            names, outputs = spec.float_names(level)
            _native.register_level(
                name, len(names), outputs, _native_variants(spec, level),
                _op_name(spec, level + 1) if level < MAX_LEVEL else "",
                _native_validator(spec, level))
        register_missing_kernels(_library_def, name)
        torch.library.register_fake(f"segops::{name}", fake, lib=_library_def)


for _spec in OPS.values():
    _register(_spec)


# --------------------------------------------------------------------------
# Public API
# --------------------------------------------------------------------------


def _check_types(op: str, tensors: dict[str, object], num_segments: object) -> int:
    """Checks the arguments' types; returns the segment count as an int
    (given as an int, a 0-d integer tensor or a numpy integer)."""
    for name, value in tensors.items():
        check_tensor(op, name, value)
    return check_num_segments(op, _validation.as_count(num_segments))


def segmented_sum(x: Tensor, idx: Tensor, num_segments: int) -> Tensor:
    """Per-segment sum: ``out[s] = sum(x[i] for i with idx[i] == s)``.

    x: (N,) or (N, 3), float32 or float64. idx: (N,) sorted segment ids in
    [0, num_segments), int32 (or int64 with values that fit int32). Returns
    (num_segments,) or (num_segments, 3); empty segments give 0.
    """
    num_segments = _check_types("segmented_sum", {"x": x, "idx": idx}, num_segments)
    return torch.ops.segops.segmented_sum(x, idx, num_segments)


def segmented_mean(x: Tensor, idx: Tensor, num_segments: int) -> Tensor:
    """Per-segment mean of rows; 0 for an empty segment (never NaN)."""
    num_segments = _check_types("segmented_mean", {"x": x, "idx": idx}, num_segments)
    return torch.ops.segops.segmented_mean(x, idx, num_segments)


def segmented_rms_norm(x: Tensor, idx: Tensor, num_segments: int) -> Tensor:
    """Per-segment RMS norm ``sqrt(mean(|x[i]|^2))``: (num_segments,); 0 for an
    empty segment; the gradient at an all-zero segment is 0."""
    num_segments = _check_types("segmented_rms_norm", {"x": x, "idx": idx}, num_segments)
    return torch.ops.segops.segmented_rms_norm(x, idx, num_segments)


def segmented_dot(x: Tensor, y: Tensor, idx: Tensor, num_segments: int) -> Tensor:
    """Per-segment dot product ``sum(dot(x[i], y[i]))``: (num_segments,)."""
    num_segments = _check_types("segmented_dot", {"x": x, "y": y, "idx": idx}, num_segments)
    return torch.ops.segops.segmented_dot(x, y, idx, num_segments)


def segmented_mul(x: Tensor, y: Tensor, idx: Tensor, num_segments: int) -> Tensor:
    """Scale rows by their segment's scalar: ``out[i] = x[i] * y[idx[i]]``.
    num_segments must equal y.shape[0]."""
    num_segments = _check_types("segmented_mul", {"x": x, "y": y, "idx": idx}, num_segments)
    return torch.ops.segops.segmented_mul(x, y, idx, num_segments)


def segmented_matvec(v: Tensor, m: Tensor, idx: Tensor, num_segments: int) -> Tensor:
    """Per-row matrix-vector product ``out[i] = m[idx[i]]^T @ v[i]``: (N, 3).
    num_segments must equal m.shape[0]."""
    num_segments = _check_types("segmented_matvec", {"v": v, "m": m, "idx": idx}, num_segments)
    return torch.ops.segops.segmented_matvec(v, m, idx, num_segments)


def segmented_gather(y: Tensor, idx: Tensor) -> Tensor:
    """Broadcast per-segment rows to their segment's rows: ``out[i] = y[idx[i]]``
    (the adjoint of segmented_sum)."""
    _check_types("segmented_gather", {"y": y, "idx": idx}, 0)
    return torch.ops.segops.segmented_gather(y, idx, y.shape[0])


def segmented_max(x: Tensor, idx: Tensor, num_segments: int) -> Tensor:
    """Per-segment maximum of rows (per component for (N, 3) rows); 0 for an
    empty segment, NaN where a row is NaN. The gradient is split evenly
    among the rows that attain the maximum."""
    num_segments = _check_types("segmented_max", {"x": x, "idx": idx}, num_segments)
    return torch.ops.segops.segmented_max(x, idx, num_segments)


def segmented_min(x: Tensor, idx: Tensor, num_segments: int) -> Tensor:
    """Per-segment minimum of rows (per component); 0 for an empty segment;
    the gradient is split evenly among the rows that attain the minimum."""
    num_segments = _check_types("segmented_min", {"x": x, "idx": idx}, num_segments)
    return torch.ops.segops.segmented_min(x, idx, num_segments)
