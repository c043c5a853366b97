"""Rows run as blocks of their features: wide rows where no compiler is
(the runtime wheel), and rows too wide to unroll.

A kernel holds a row's F features as F values, unrolled. The op library
ships kernels for rows of 1 and 3 features; other widths are compiled at
run time (segops._wide). Two cases run (N, F) rows as B·N rows of a block
width W instead (B = ceil(F / W), the features padded to B·W with zeros):

* no compiler (the runtime wheel): W = 1, the op library's scalar kernels;
* F > WIDEST_UNROLLED: W = ceil(F / B) <= WIDEST_UNROLLED, compiled once.
  Unrolled rows compile in time that grows faster than F (LLVM's passes
  over one huge block: max's backward at F = 1,024 took about a minute),
  so past this width blocks cost less than the kernel would.

The rows are copied to (B, N, W) blocks and the index combined to
``b·S + idx``, sorted wherever idx is, over B·S segments: one kernel call.
Every op of the table but matvec is feature-separable or a sum of
per-feature terms (dot, rms_norm), so its result is the block kernels',
put back in place (and summed over blocks for dot and rms_norm); the
padding's zeros are dropped or add nothing. Gradients, to third order, are
the block kernels' and the copies'.

The copies cost memory traffic: by columns this is 1.1-30x PyTorch's own
ops at N = 1e6 (docs/benchmarks.md, "Wide rows").
"""

from __future__ import annotations

import contextlib
import contextvars
import os
from collections.abc import Iterator

import torch
from torch import Tensor

from segops import _extensions, _library
from segops._validation import check_index_content

# Widths the op library ships kernels for.
SHIPPED_WIDTHS = (1, 3)
# The widest rows compiled unrolled; wider ones run as blocks. Past 256
# features a third derivative level takes tens of seconds to compile (a
# one-time cost, kept in the disk cache); SEGOPS_WIDEST_UNROLLED raises it
# for those who would rather pay that once than the blocks' copy per call.
WIDEST_UNROLLED = int(os.environ.get("SEGOPS_WIDEST_UNROLLED", "256"))
_HUGE_PAGES_FROM = 1 << 21


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


_TRACING_A_KERNEL = contextvars.ContextVar("segops_tracing_a_kernel", default=False)


@contextlib.contextmanager
def rows_as_written() -> Iterator[None]:
    """While segops.jit traces a function: the ops' rows as they are (the
    kernel holds them whole; a compiler is needed, and asked for, anyway)."""
    token = _TRACING_A_KERNEL.set(True)
    try:
        yield
    finally:
        _TRACING_A_KERNEL.reset(token)


def block_width(rows: Tensor) -> int | None:
    """The block width W that `rows` (as the kernels take them: (L,) or
    (L, F)) run in, or None: they run as they are."""
    # (Dynamo cannot read a ContextVar, and never runs inside a JIT trace.)
    if rows.dim() != 2 or (not torch.compiler.is_compiling() and _TRACING_A_KERNEL.get()):
        return None
    features = int(rows.shape[1])
    if features in SHIPPED_WIDTHS or features <= WIDEST_UNROLLED and compiler_available():
        return None
    if not compiler_available():
        return 1
    return _block_count(features, _block_count(features, WIDEST_UNROLLED))


def _column_index(idx: Tensor, blocks: int, num_segments: int) -> Tensor:
    """b·S + idx[i] for each block b and row i, (B·N,) int32; rows whose
    segment is outside [0, S) get a negative value in every block, outside
    every block's segments, as the kernels leave such rows out."""
    total = blocks * num_segments
    if total >= 2**31:
        raise ValueError(f"rows in {blocks} blocks of features in {num_segments} segments "
                         "need more than 2^31 - 1 block segments")
    valid = (idx >= 0) & (idx < num_segments)
    rows = torch.where(valid, idx, -total - 1).to(torch.int32)
    starts = torch.arange(blocks, dtype=torch.int32, device=idx.device) * num_segments
    return (starts[:, None] + rows[None, :]).reshape(-1)


@torch.library.custom_op("segops::column_index", mutates_args=())
def checked_column_index(idx: Tensor, blocks: int, num_segments: int, op: str) -> Tensor:
    """_column_index, after checking idx's values as `op` would (on CPU;
    on CUDA in debug mode): errors name the user's values and rows, not the
    combined index's. An op, so that the check runs inside torch.compile's
    graphs too, where Python reads no data."""
    check_index_content(op, idx, num_segments)
    return _column_index(idx, blocks, num_segments)


@checked_column_index.register_fake
def _(idx: Tensor, blocks: int, num_segments: int, op: str) -> Tensor:
    return idx.new_empty((blocks * idx.shape[0],), dtype=torch.int32)


def _block_count(features: int, width: int) -> int:
    """B: how many blocks of `width` hold `features` (the last one padded)."""
    return -(-features // width)


def _blocks(rows: Tensor, width: int) -> Tensor:
    """(L, F) rows as B·L rows of `width` features (the last block padded
    with zeros), block by block: (B·L, W), or (B·L,) for W = 1."""
    length, features = rows.shape
    blocks = _block_count(features, width)
    if blocks * width != features:
        rows = torch.nn.functional.pad(rows, (0, blocks * width - features))
    out = rows.new_empty((blocks, length, width))
    if out.nbytes >= _HUGE_PAGES_FROM and out.device.type == "cpu" \
            and not torch.compiler.is_compiling() and type(out) is Tensor:
        # A fresh copy's first touch of each 4 KiB page costs more than the
        # copy itself (about 3x at 400 MB).
        _library.advise_huge_pages(out)
    out.copy_(rows.reshape(length, blocks, width).transpose(0, 1))
    return out.reshape(-1) if width == 1 else out.reshape(blocks * length, width)


def _unblocks(out: Tensor, length: int, features: int, width: int) -> Tensor:
    """B·L rows of `width` features back to (L, F)."""
    blocks = _block_count(features, width)
    rows = out.reshape(blocks, length, width).transpose(0, 1).reshape(length, blocks * width)
    return rows if blocks * width == features else rows[:, :features]


def _index(idx: Tensor, features: int, width: int, num_segments: int, op: str) -> Tensor:
    return checked_column_index(idx, _block_count(features, width), num_segments, op)


def reduce(op: str, rows: Tensor, idx: Tensor, num_segments: int, width: int) -> Tensor:
    """sum, mean, max or min of (N, F) rows: (S, F)."""
    features = rows.shape[1]
    index = _index(idx, features, width, num_segments, op)
    out = getattr(torch.ops.segops, op)(_blocks(rows, width), index,
                                        _block_count(features, width) * num_segments)
    return _unblocks(out, num_segments, features, width)


def gather(per_segment: Tensor, idx: Tensor, width: int) -> Tensor:
    """(S, F) per-segment rows at each row's segment: (N, F)."""
    num_segments, features = per_segment.shape
    blocks = _block_count(features, width)
    out = torch.ops.segops.segmented_gather(
        _blocks(per_segment, width),
        _index(idx, features, width, num_segments, "segmented_gather"), blocks * num_segments)
    return _unblocks(out, idx.shape[0], features, width)


def mul(rows: Tensor, scale: Tensor, idx: Tensor, num_segments: int, width: int) -> Tensor:
    """(N, F) rows times their segment's scalar: (N, F)."""
    features = rows.shape[1]
    blocks = _block_count(features, width)
    out = torch.ops.segops.segmented_mul(
        _blocks(rows, width), scale.repeat(blocks),
        _index(idx, features, width, num_segments, "segmented_mul"), blocks * num_segments)
    return _unblocks(out, rows.shape[0], features, width)


def dot(x: Tensor, y: Tensor, idx: Tensor, num_segments: int, width: int) -> Tensor:
    """Σ over a segment's rows and features of x·y: (S,)."""
    features = x.shape[1]
    blocks = _block_count(features, width)
    per_block = torch.ops.segops.segmented_dot(
        _blocks(x, width), _blocks(y, width),
        _index(idx, features, width, num_segments, "segmented_dot"), blocks * num_segments)
    return per_block.reshape(blocks, num_segments).sum(0)


def rms_norm(rows: Tensor, idx: Tensor, num_segments: int, width: int) -> Tensor:
    """sqrt of a segment's mean of |x[i]|² over all features: (S,); 0 for an
    empty or all-zero segment, whose gradient is 0 (to any order: the square
    root is taken of 1 there, and its result replaced); NaN for a segment
    holding NaN."""
    features = rows.shape[1]
    blocks = _block_count(features, width)
    means = torch.ops.segops.segmented_mean(
        _blocks(rows * rows, width),
        _index(idx, features, width, num_segments, "segmented_rms_norm"),
        blocks * num_segments)
    squares = means.reshape(blocks, num_segments, width).sum((0, 2))
    # Only an exact 0 is masked: a NaN segment stays NaN, as the kernels give.
    zero = squares == 0
    root = torch.sqrt(torch.where(zero, torch.ones_like(squares), squares))
    return torch.where(zero, torch.zeros_like(root), root)
