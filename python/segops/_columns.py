"""Wide rows where no compiler is (the runtime wheel): each feature column
as its own scalar rows, through the op library's kernels of one feature.

The op library ships kernels for rows of 1 and 3 features; other widths are
compiled at run time (segops._wide), which needs the compiler. Without it,
(N, F) rows run as F·N scalar rows: the rows transposed to (F, N) (a copy),
and a combined index ``f·S + idx`` that is sorted wherever idx is, over F·S
segments. Every op of the table but matvec is feature-separable or a sum of
per-feature terms (dot, rms_norm), so its result is the scalar kernels' per
column, transposed back (and summed over features for dot and rms_norm).
Gradients, to third order, are the scalar kernels' and the copies'.

It is slow: the transposes and the F·N-entry combined index cost more than
the kernels (1.1-30x PyTorch's own ops at N = 1e6: docs/benchmarks.md,
"Wide rows"); a source install compiles each width instead.
"""

from __future__ import annotations

import torch
from torch import Tensor

from segops import _extensions
from segops._validation import check_index_content

# Widths the op library ships kernels for.
SHIPPED_WIDTHS = (1, 3)


_COMPILER_AVAILABLE: bool | None = None


@torch.compiler.assume_constant_result
def compiler_available() -> bool:
    """Whether widths can be compiled at run time (the compiler module, or a
    compiler bundle in its place); asked once. A constant to torch.compile,
    which does not trace the compiler's import."""
    global _COMPILER_AVAILABLE
    if _COMPILER_AVAILABLE is None:
        try:
            _extensions.segc()
            _COMPILER_AVAILABLE = True
        except RuntimeError:
            _COMPILER_AVAILABLE = False
    return _COMPILER_AVAILABLE


def needed(rows: Tensor) -> bool:
    """Whether `rows` (as the kernels take them: (L,) or (L, F)) must run
    by columns: a width the op library lacks, and no compiler."""
    return rows.dim() == 2 and rows.shape[1] not in SHIPPED_WIDTHS and not compiler_available()


def _column_index(idx: Tensor, features: int, num_segments: int) -> Tensor:
    """f·S + idx[i] for each column f and row i, (F·N,) int32; rows whose
    segment is outside [0, S) get a negative value in every column, outside
    every column's segments, as the kernels leave such rows out."""
    total = features * num_segments
    if total >= 2**31:
        raise ValueError(f"rows of {features} features in {num_segments} segments need "
                         "more than 2^31 - 1 column segments without the compiler")
    valid = (idx >= 0) & (idx < num_segments)
    rows = torch.where(valid, idx, -total - 1).to(torch.int32)
    columns = torch.arange(features, dtype=torch.int32, device=idx.device) * num_segments
    return (columns[:, None] + rows[None, :]).reshape(-1)


@torch.library.custom_op("segops::column_index", mutates_args=())
def checked_column_index(idx: Tensor, features: int, num_segments: int, op: str) -> Tensor:
    """_column_index, after checking idx's values as `op` would (on CPU;
    on CUDA in debug mode): errors name the user's values and rows, not the
    combined index's. An op, so that the check runs inside torch.compile's
    graphs too, where Python reads no data."""
    check_index_content(op, idx, num_segments)
    return _column_index(idx, features, num_segments)


@checked_column_index.register_fake
def _(idx: Tensor, features: int, num_segments: int, op: str) -> Tensor:
    return idx.new_empty((features * idx.shape[0],), dtype=torch.int32)


def _columns(rows: Tensor) -> Tensor:
    """(L, F) rows as F·L scalar rows, column by column."""
    return rows.t().contiguous().reshape(-1)


def reduce(op: str, rows: Tensor, idx: Tensor, num_segments: int) -> Tensor:
    """sum, mean, max or min of (N, F) rows: (S, F)."""
    features = rows.shape[1]
    out = getattr(torch.ops.segops, op)(
        _columns(rows), checked_column_index(idx, features, num_segments, op),
        features * num_segments)
    return out.reshape(features, num_segments).t()


def gather(per_segment: Tensor, idx: Tensor) -> Tensor:
    """(S, F) per-segment rows at each row's segment: (N, F)."""
    num_segments, features = per_segment.shape
    out = torch.ops.segops.segmented_gather(
        _columns(per_segment),
        checked_column_index(idx, features, num_segments, "segmented_gather"),
        features * num_segments)
    return out.reshape(features, idx.shape[0]).t()


def mul(rows: Tensor, scale: Tensor, idx: Tensor, num_segments: int) -> Tensor:
    """(N, F) rows times their segment's scalar: (N, F)."""
    features = rows.shape[1]
    out = torch.ops.segops.segmented_mul(
        _columns(rows), scale.repeat(features),
        checked_column_index(idx, features, num_segments, "segmented_mul"),
        features * num_segments)
    return out.reshape(features, rows.shape[0]).t()


def dot(x: Tensor, y: Tensor, idx: Tensor, num_segments: int) -> Tensor:
    """Σ over a segment's rows and features of x·y: (S,)."""
    features = x.shape[1]
    per_column = torch.ops.segops.segmented_dot(
        _columns(x), _columns(y),
        checked_column_index(idx, features, num_segments, "segmented_dot"),
        features * num_segments)
    return per_column.reshape(features, num_segments).sum(0)


def rms_norm(rows: Tensor, idx: Tensor, num_segments: int) -> Tensor:
    """sqrt of a segment's mean of |x[i]|² over all features: (S,); 0 for an
    empty or all-zero segment, whose gradient is 0 (to any order: the square
    root is taken of 1 there, and its result replaced); NaN for a segment
    holding NaN."""
    features = rows.shape[1]
    squares = torch.ops.segops.segmented_mean(
        _columns(rows * rows),
        checked_column_index(idx, features, num_segments, "segmented_rms_norm"),
        features * num_segments).reshape(features, num_segments).sum(0)
    # Only an exact 0 is masked: a NaN segment stays NaN, as the kernels give.
    zero = squares == 0
    root = torch.sqrt(torch.where(zero, torch.ones_like(squares), squares))
    return torch.where(zero, torch.zeros_like(root), root)
