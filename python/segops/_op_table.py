"""The segment ops: one table, read by the library ops (ops.py), segops.jit
(_jit_trace) and segops.fusion, and the one parser of derivative-level names.

Each public op is a seg dialect op; ``segops::<op>`` is its forward and
``segops::<op>_grad``, ``_grad_grad``... its derivative levels, each running
the op library's kernel of the same name for the tensors' dtype and row
width. The op library's source, oplib/segops.mlir, is generated from this
table (library_source; `python scripts/generate_oplib.py`), and
test_op_table.py checks that it is.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from torch import Tensor

from segops import _extensions
from segops._validation import (
    DTypeError,
    check_float_rows,
    check_index,
    check_num_segments,
    check_same_device,
    check_tensor,
)

# How derivative levels are named, and the highest one the op library
# ships: segrt/OpLibrary.h's, which the compiler and the operator library
# read too (_segrt exposes them).
GRAD_SUFFIX: str = _extensions.segrt().gradient_suffix
MAX_LEVEL: int = _extensions.segrt().max_derivative_order

ROW, SEGMENT = "row", "segment"

# The function attribute whose derivative levels are derived on saved
# results (the seg dialect's kSavedResultsAttrName): every library op's
# kernel function carries it.
SAVED_RESULTS = "seg.saved_results"


def level_name(base: str, level: int) -> str:
    """The name of derivative level `level` of `base` (an op, a kernel or a
    segops.jit program): segmented_sum_grad_grad is level 2."""
    return base + GRAD_SUFFIX * level


def split_level_name(name: str) -> tuple[str, int]:
    """(base, level) of a derivative-level name; level_name's inverse."""
    base, level = name, 0
    while base.endswith(GRAD_SUFFIX):
        base, level = base[: -len(GRAD_SUFFIX)], level + 1
    return base, level


@dataclass(frozen=True)
class SegmentOp:
    """A public segment op: its name (the torch op's and the kernels'
    stem), its seg dialect op, its float arguments (the first fixes the row
    width) with their spaces, its result's space, whether it takes
    num_segments as an operand, and its argument checks."""

    name: str
    seg_op: str
    float_args: tuple[str, ...]
    operand_spaces: tuple[str, ...]
    result_space: str
    takes_count: bool
    validate: Callable[..., None]
    # Rows of any width F (else 3-vectors only, as matvec's).
    takes_any_width: bool = True
    # Float arguments that are per-segment scalars whatever the width
    # (segmented_mul's y); the others carry the row width.
    scalar_args: frozenset[str] = frozenset()
    # Whether the result carries the row width (else it contracts the
    # features, as dot and rms_norm do: one scalar per segment).
    result_has_width: bool = True
    # Float arguments that are a (F, F) matrix per row or segment
    # (segmented_matvec's m).
    matrix_args: frozenset[str] = frozenset()
    # The row widths the op library ships kernels for.
    library_widths: tuple[int, ...] = (1, 3)
    # Whether it takes bfloat16 and float16 rows (run in float32, the
    # result in the input dtype: segops._dtypes.SIXTEEN_BIT_DTYPES).
    takes_16_bit: bool = False

    @property
    def num_tensors(self) -> int:
        return len(self.float_args)

    def kernel_name(self, dtype: str, width: int, level: int) -> str:
        """The op library's kernel of a level, e.g. segmented_sum_f32_w3_grad."""
        return level_name(f"{self.name}_{dtype}_w{width}", level)

    def kernel_source(self, dtype: str, width: int) -> str:
        """The op's forward kernel function for `dtype` rows of `width`
        features: the op library's functions (library_source) and those of
        widths compiled at run time alike."""
        if not self.takes_any_width and width not in self.library_widths:
            raise ValueError(f"{self.name} takes no rows of {width} features")
        scalar = f"tensor<?x{dtype}>"
        wide = scalar if width == 1 else f"tensor<?x{width}x{dtype}>"
        matrix = f"tensor<?x{width}x{width}x{dtype}>"
        floats = [(name, scalar if name in self.scalar_args
                   else matrix if name in self.matrix_args else wide)
                  for name in self.float_args]
        index = ("idx", "tensor<?xi32>")
        result = wide if self.result_has_width else scalar
        params = ", ".join(f"%{n}: {t}" for n, t in [*floats, index])
        operands = ", ".join(f"%{n}" for n, _ in [*floats, index])
        types = ", ".join(t for _, t in [*floats, index])
        if self.takes_count:
            params, operands = params + ", %n: index", operands + ", %n"
        name = self.kernel_name(dtype, width, 0)
        # Derivative levels take the results the level below returned
        # (autograd saves them) where their rules read them.
        return (f"func.func @{name}({params}) -> {result} attributes {{{SAVED_RESULTS}}} {{\n"
                f"  %0 = {self.seg_op} {operands} : {types} -> {result}\n"
                f"  return %0 : {result}\n}}\n")


# --------------------------------------------------------------------------
# Each op's argument checks (shapes, dtypes, devices; no data reads).
# --------------------------------------------------------------------------


def _check_float_rows(op: str, name: str, value: object, leading: str = "N") -> int:
    """check_float_rows, its dtype error for 16-bit rows naming the ops that
    take them."""
    return check_float_rows(op, name, value, leading, sixteen_bit_ops=SIXTEEN_BIT_OPS)


def _same_dtype(op: str, **tensors: Tensor) -> None:
    dtypes = {t.dtype for t in tensors.values()}
    if len(dtypes) > 1:
        listing = ", ".join(f"{n} is {t.dtype}" for n, t in tensors.items())
        raise DTypeError(f"{op}: all float tensors must have one dtype, got {listing}")


def _check_segment_rows(op: str, name: str, tensor: Tensor, num_segments: int) -> None:
    """A per-segment input must have num_segments rows: its gradient does."""
    if tensor.shape[0] != num_segments:
        raise ValueError(
            f"{op}: num_segments ({num_segments}) must equal {name}.shape[0] "
            f"({tensor.shape[0]}): the gradient of {name} has num_segments rows")


def _validate_reduction(op: str) -> Callable[..., None]:
    def validate(x: Tensor, idx: Tensor, num_segments: int) -> None:
        _check_float_rows(op, "x", x)
        check_index(op, idx, x.shape[0], "x")
        check_num_segments(op, num_segments)
        check_same_device(op, x=x, idx=idx)
    return validate


def _validate_rms_norm(x: Tensor, idx: Tensor, num_segments: int) -> None:
    _validate_reduction("segmented_rms_norm")(x, idx, num_segments)


def check_dot_shapes(x: Tensor, y: Tensor) -> None:
    """segmented_dot's x and y have one shape (checked before (N, *f) rows
    are flattened too: (N, 2, 3) is not (N, 3, 2))."""
    if x.shape != y.shape:
        raise ValueError(f"segmented_dot: x and y must have the same shape, got "
                         f"{tuple(x.shape)} and {tuple(y.shape)}")


def _validate_dot(x: Tensor, y: Tensor, idx: Tensor, num_segments: int) -> None:
    op = "segmented_dot"
    _check_float_rows(op, "x", x)
    _check_float_rows(op, "y", y)
    check_dot_shapes(x, y)
    _same_dtype(op, x=x, y=y)
    check_index(op, idx, x.shape[0], "x")
    check_num_segments(op, num_segments)
    check_same_device(op, x=x, y=y, idx=idx)


def _validate_mul(x: Tensor, y: Tensor, idx: Tensor, num_segments: int) -> None:
    op = "segmented_mul"
    _check_float_rows(op, "x", x)
    check_tensor(op, "y", y)
    if y.dim() != 1:
        raise ValueError(f"{op}: y must have shape (num_segments,), got {tuple(y.shape)}")
    _same_dtype(op, x=x, y=y)
    check_index(op, idx, x.shape[0], "x")
    check_num_segments(op, num_segments)
    _check_segment_rows(op, "y", y, num_segments)
    check_same_device(op, x=x, y=y, idx=idx)


def _validate_matvec(v: Tensor, m: Tensor, idx: Tensor, num_segments: int) -> None:
    op = "segmented_matvec"
    _check_float_rows(op, "v", v)
    if v.dim() != 2 or v.shape[1] != 3:
        raise ValueError(f"{op}: v must have shape (N, 3), got {tuple(v.shape)}")
    check_tensor(op, "m", m)
    if m.dim() != 3 or tuple(m.shape[1:]) != (3, 3):
        raise ValueError(f"{op}: m must have shape (num_segments, 3, 3), got {tuple(m.shape)}")
    _same_dtype(op, v=v, m=m)
    check_index(op, idx, v.shape[0], "v")
    check_num_segments(op, num_segments)
    _check_segment_rows(op, "m", m, num_segments)
    check_same_device(op, v=v, m=m, idx=idx)


def _validate_gather(y: Tensor, idx: Tensor, num_segments: int) -> None:
    op = "segmented_gather"
    _check_float_rows(op, "y", y, leading="S")
    check_index(op, idx, idx.shape[0] if isinstance(idx, Tensor) else 0, "idx")
    check_num_segments(op, num_segments)
    if y.shape[0] != num_segments:
        raise ValueError(f"{op}: num_segments ({num_segments}) must equal y.shape[0] "
                         f"({y.shape[0]})")
    check_same_device(op, y=y, idx=idx)



def _op(name: str, seg_op: str, float_args: tuple[str, ...], operand_spaces: tuple[str, ...],
        result_space: str, validate: Callable[..., None], **width: Any) -> SegmentOp:
    return SegmentOp(name, seg_op, float_args, operand_spaces, result_space,
                     takes_count=result_space == SEGMENT, validate=validate, **width)


# The ops, in registration order.
OPS: dict[str, SegmentOp] = {op.name: op for op in [
    _op("segmented_sum", "seg.sum", ("x",), (ROW,), SEGMENT,
        _validate_reduction("segmented_sum"), takes_16_bit=True),
    _op("segmented_mean", "seg.mean", ("x",), (ROW,), SEGMENT,
        _validate_reduction("segmented_mean"), takes_16_bit=True),
    _op("segmented_rms_norm", "seg.rms_norm", ("x",), (ROW,), SEGMENT, _validate_rms_norm,
        result_has_width=False),
    _op("segmented_dot", "seg.dot", ("x", "y"), (ROW, ROW), SEGMENT, _validate_dot,
        result_has_width=False),
    _op("segmented_mul", "seg.mul", ("x", "y"), (ROW, SEGMENT), ROW, _validate_mul,
        scalar_args=frozenset({"y"})),
    _op("segmented_matvec", "seg.matvec", ("v", "m"), (ROW, SEGMENT), ROW, _validate_matvec,
        takes_any_width=False, matrix_args=frozenset({"m"}), library_widths=(3,)),
    _op("segmented_gather", "seg.gather", ("y",), (SEGMENT,), ROW, _validate_gather,
        takes_16_bit=True),
    _op("segmented_max", "seg.max", ("x",), (ROW,), SEGMENT,
        _validate_reduction("segmented_max"), takes_16_bit=True),
    _op("segmented_min", "seg.min", ("x",), (ROW,), SEGMENT,
        _validate_reduction("segmented_min"), takes_16_bit=True),
]}


# The op library's element types.
LIBRARY_DTYPES = ("f32", "f64")


def library_source() -> str:
    """oplib/segops.mlir: every op's forward kernel function per library
    dtype and row width. The build derives the derivative levels."""
    header = (
        "// The segops op library: the forward kernel function of every public op,\n"
        "// per element type and row width, named <op>_<dtype>_w<row width>. The\n"
        f"// build derives their derivatives to order {MAX_LEVEL} with seg-derive (functions\n"
        f"// <name>{GRAD_SUFFIX}, <name>{GRAD_SUFFIX * 2}, ...) and compiles all of them with\n"
        "// seg-compile: PTX per architecture and host code, one fused kernel per\n"
        "// function.\n"
        "//\n"
        "// Generated from the op table (python/segops/_op_table.py) by\n"
        "// `python scripts/generate_oplib.py`: edit the table, not this file.\n")
    functions = [spec.kernel_source(dtype, width)
                 for dtype in LIBRARY_DTYPES for width in (1, 3)
                 for spec in OPS.values() if width in spec.library_widths]
    return header + "".join("\n" + function for function in functions)


def op_level(name: str) -> tuple[SegmentOp, int] | None:
    """The op and derivative level of a torch op name (segmented_mean_grad ->
    (segmented_mean, 1)); None for names that are not segment ops."""
    base, level = split_level_name(name)
    op = OPS.get(base)
    return (op, level) if op is not None and level <= MAX_LEVEL else None

# The ops that take bfloat16 and float16 rows.
SIXTEEN_BIT_OPS: tuple[str, ...] = tuple(op.name for op in OPS.values() if op.takes_16_bit)
