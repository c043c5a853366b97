"""The segops operators, registered with torch.library.

Each op has one implementation for CPU and CUDA tensors (it launches the op
library's kernel for the tensors' device), a fake kernel for tracing and
torch.compile, and an autograd formula written with other segops ops, so
derivatives of any order stay on segops kernels.

The public functions (``segops.segmented_sum``...) are thin wrappers that
first check the Python types of their arguments, which the dispatcher would
otherwise reject with a generic RuntimeError (or, for ``True`` as a count,
accept), then call ``torch.ops.segops.*``.
"""

from __future__ import annotations

import torch
from torch import Tensor

from segops import _launch
from segops._validation import (
    as_kernel_index,
    check_tensor,
    check_float_rows,
    check_index,
    check_index_content,
    check_num_segments,
    check_same_device,
)

# --------------------------------------------------------------------------
# segmented_sum: out[s] = sum_{i: idx[i] == s} x[i]
# --------------------------------------------------------------------------


def _check_sum(x: Tensor, idx: Tensor, num_segments: int) -> int:
    op = "segmented_sum"
    width = check_float_rows(op, "x", x)
    check_index(op, idx, x.shape[0], "x")
    check_num_segments(op, num_segments)
    check_same_device(op, x=x, idx=idx)
    return width


@torch.library.custom_op("segops::segmented_sum", mutates_args=())
def segmented_sum_op(x: Tensor, idx: Tensor, num_segments: int) -> Tensor:
    width = _check_sum(x, idx, num_segments)
    check_index_content("segmented_sum", idx, num_segments)
    out = x.new_empty((num_segments,) + tuple(x.shape[1:]))
    _launch.run(_launch.kernel_name("segmented_sum", x.dtype, width),
                [x.contiguous(), as_kernel_index(idx)], out, x.shape[0], num_segments)
    return out


@segmented_sum_op.register_fake
def _segmented_sum_fake(x: Tensor, idx: Tensor, num_segments: int) -> Tensor:
    _check_sum(x, idx, num_segments)
    return x.new_empty((num_segments,) + tuple(x.shape[1:]))


def _segmented_sum_setup_context(ctx, inputs, output) -> None:
    _, idx, _ = inputs
    ctx.save_for_backward(idx)


def _segmented_sum_backward(ctx, grad: Tensor):
    (idx,) = ctx.saved_tensors
    return segmented_gather_op(grad, idx), None, None


segmented_sum_op.register_autograd(_segmented_sum_backward,
                                setup_context=_segmented_sum_setup_context)

# --------------------------------------------------------------------------
# segmented_gather: out[i] = y[idx[i]] (the adjoint of segmented_sum)
# --------------------------------------------------------------------------


def _check_gather(y: Tensor, idx: Tensor) -> int:
    op = "segmented_gather"
    width = check_float_rows(op, "y", y, leading="S")
    check_index(op, idx, idx.shape[0] if isinstance(idx, Tensor) else 0, "idx")
    check_same_device(op, y=y, idx=idx)
    return width


@torch.library.custom_op("segops::segmented_gather", mutates_args=())
def segmented_gather_op(y: Tensor, idx: Tensor) -> Tensor:
    width = _check_gather(y, idx)
    check_index_content("segmented_gather", idx, y.shape[0])
    out = y.new_empty((idx.shape[0],) + tuple(y.shape[1:]))
    _launch.run(_launch.kernel_name("segmented_gather", y.dtype, width),
                [y.contiguous(), as_kernel_index(idx)], out, idx.shape[0], y.shape[0])
    return out


@segmented_gather_op.register_fake
def _segmented_gather_fake(y: Tensor, idx: Tensor) -> Tensor:
    _check_gather(y, idx)
    return y.new_empty((idx.shape[0],) + tuple(y.shape[1:]))


def _segmented_gather_setup_context(ctx, inputs, output) -> None:
    y, idx = inputs
    ctx.save_for_backward(idx)
    ctx.num_segments = y.shape[0]


def _segmented_gather_backward(ctx, grad: Tensor):
    (idx,) = ctx.saved_tensors
    return segmented_sum_op(grad, idx, ctx.num_segments), None


segmented_gather_op.register_autograd(_segmented_gather_backward,
                                   setup_context=_segmented_gather_setup_context)

# --------------------------------------------------------------------------
# Public API
# --------------------------------------------------------------------------


def segmented_sum(x: Tensor, idx: Tensor, num_segments: int) -> Tensor:
    """Per-segment sum of rows: ``out[s] = sum(x[i] for i with idx[i] == s)``.

    x: (N,) or (N, 3), float32 or float64. idx: (N,) sorted segment ids in
    [0, num_segments), int32 (or int64 with values that fit int32).
    Returns (num_segments,) or (num_segments, 3); empty segments give 0.
    Differentiable to any order with respect to x.
    """
    check_tensor("segmented_sum", "x", x)
    check_tensor("segmented_sum", "idx", idx)
    check_num_segments("segmented_sum", num_segments)
    return segmented_sum_op(x, idx, num_segments)


def segmented_gather(y: Tensor, idx: Tensor) -> Tensor:
    """Broadcast per-segment rows to their segment's rows: ``out[i] = y[idx[i]]``.

    y: (S,) or (S, 3), float32 or float64. idx: (N,) sorted segment ids in
    [0, S). Returns (N,) or (N, 3). The adjoint of segmented_sum.
    """
    check_tensor("segmented_gather", "y", y)
    check_tensor("segmented_gather", "idx", idx)
    return segmented_gather_op(y, idx)
