"""What users write today, in PyTorch: the eager references of the six ops
(index_add_, gather, einsum, as in the API text's module), the same
functions under torch.compile, and segops' ops with the same signature.

Every function takes (*float tensors, idx, num_segments) with the int32 idx
of the API; the references convert it with .long() as their users must.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import Tensor

import segops

Op = Callable[..., Tensor]


def _sums(values: Tensor, seg: Tensor, num_segments: int) -> Tensor:
    return values.new_zeros((num_segments,) + values.shape[1:]).index_add_(0, seg, values)


def _counts(x: Tensor, seg: Tensor, num_segments: int) -> Tensor:
    ones = x.new_ones(seg.shape[0])
    return _sums(ones, seg, num_segments).clamp(min=1)


def _per_row(value: Tensor, like: Tensor) -> Tensor:
    """A per-row scalar, broadcastable against `like` ((N,) or (N, 3))."""
    return value if like.dim() == 1 else value[:, None]


def _norm2(x: Tensor) -> Tensor:
    return x * x if x.dim() == 1 else (x * x).sum(-1)


def eager_sum(x: Tensor, idx: Tensor, num_segments: int) -> Tensor:
    return _sums(x, idx.long(), num_segments)


def eager_mean(x: Tensor, idx: Tensor, num_segments: int) -> Tensor:
    seg = idx.long()
    return _sums(x, seg, num_segments) / _per_row(_counts(x, seg, num_segments), x)


def eager_rms_norm(x: Tensor, idx: Tensor, num_segments: int) -> Tensor:
    seg = idx.long()
    return torch.sqrt(_sums(_norm2(x), seg, num_segments) / _counts(x, seg, num_segments))


def eager_dot(x: Tensor, y: Tensor, idx: Tensor, num_segments: int) -> Tensor:
    product = x * y if x.dim() == 1 else (x * y).sum(-1)
    return _sums(product, idx.long(), num_segments)


def eager_mul(x: Tensor, y: Tensor, idx: Tensor, num_segments: int) -> Tensor:
    return x * _per_row(y[idx.long()], x)


def eager_matvec(v: Tensor, m: Tensor, idx: Tensor, num_segments: int) -> Tensor:
    return torch.einsum("nij,ni->nj", m[idx.long()], v)


EAGER: dict[str, Op] = {
    "sum": eager_sum,
    "mean": eager_mean,
    "rms_norm": eager_rms_norm,
    "dot": eager_dot,
    "mul": eager_mul,
    "matvec": eager_matvec,
}

SEGOPS: dict[str, Op] = {
    "sum": segops.segmented_sum,
    "mean": segops.segmented_mean,
    "rms_norm": segops.segmented_rms_norm,
    "dot": segops.segmented_dot,
    "mul": segops.segmented_mul,
    "matvec": segops.segmented_matvec,
}

OPS = list(EAGER)


def widths(op: str) -> list[int]:
    return [3] if op == "matvec" else [1, 3]


def compiled_references() -> dict[str, tuple[Op, Op]]:
    """torch.compile of the eager references: (dynamic shapes, so that one
    compilation serves every size; static shapes, for one segment, where
    inductor 2.13 fails on a dynamic-size scatter into one row)."""
    return {op: (torch.compile(fn, dynamic=True), torch.compile(fn, dynamic=False))
            for op, fn in EAGER.items()}


def make_case(op: str, width: int, num_rows: int, mean_length: int,
              device: str = "cpu") -> tuple[list[Tensor], Tensor, int]:
    """The float inputs, index and segment count of one layout, seeded by
    the layout as the suite seeds it (mean_length 0: one segment)."""
    mean_length = mean_length or num_rows
    generator = torch.Generator().manual_seed(num_rows + mean_length)
    idx, num_segments = make_index(num_rows, mean_length, device, generator)
    floats = make_inputs(op, width, num_rows, num_segments, device, generator)
    return floats, idx, num_segments


def make_inputs(op: str, width: int, num_rows: int, num_segments: int, device: str,
                generator: torch.Generator) -> list[Tensor]:
    def rows(count: int, *shape: int) -> Tensor:
        return torch.randn((count, *shape), generator=generator).to(device)

    row_shape = () if width == 1 else (width,)
    x = rows(num_rows, *row_shape)
    extra = {
        "dot": [rows(num_rows, *row_shape)],
        "mul": [rows(num_segments)],
        "matvec": [rows(num_segments, 3, 3)],
    }
    return [x] + extra.get(op, [])


def make_index(num_rows: int, mean_length: int, device: str,
               generator: torch.Generator) -> tuple[Tensor, int]:
    """A sorted int32 index with random segment sizes of the given mean
    (mean_length >= num_rows: one segment)."""
    num_segments = max(1, num_rows // mean_length)
    idx = torch.sort(torch.randint(0, num_segments, (num_rows,), generator=generator)).values
    return idx.to(device=device, dtype=torch.int32), num_segments
