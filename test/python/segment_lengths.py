"""Segment lengths around every size where a kernel changes strategy, and
the derivative levels compared against a pure-PyTorch reference.

Shared by the library-op, JIT and simulator tests (test_segment_lengths.py).
The thresholds are the runtime's and the lowerings' own:
- host: vectors of 2-8 rows and the masked tail, the 16-row short-segment
  block, parallel calls from 2^14 (2^16 without PyTorch's workers) rows,
  long segments split into tiles of 2^15 rows from 2^17 rows
  (segrt::HostSplitKernel);
- GPU: a warp's 32 rows, long segments once they cover an aligned tile of
  1024 rows (so from 1025 to 2048 rows depending on alignment).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch
from conftest import layout

HOST_THRESHOLDS = (4, 16, 1 << 14, 1 << 15, 1 << 16, 1 << 17)
GPU_THRESHOLDS = (32, 1024, 2048)
ONE_MILLION = 1_000_000


def lengths_around(thresholds: Sequence[int], largest: int | None = ONE_MILLION) -> list[int]:
    """1, and T - 1, T and 2T + 1 for each threshold T (then `largest`)."""
    lengths = {1}
    for threshold in thresholds:
        lengths |= {threshold - 1, threshold, 2 * threshold + 1}
    if largest is not None:
        lengths.add(largest)
    return sorted(lengths)


def long_segment_index(length: int) -> tuple[torch.Tensor, int]:
    """A sorted int32 index with a segment of `length` rows between short
    ones and an empty one, so it starts off any alignment: counts
    [3, length, 0, 2]."""
    counts = [3, length, 0, 2]
    return layout(counts), len(counts)


def derivative_levels(fn: Callable[..., torch.Tensor], inputs: Sequence[torch.Tensor],
                      order: int, seed: int = 0) -> list[list[torch.Tensor]]:
    """fn(*inputs), then each derivative level up to `order`: level k is the
    gradient, with respect to the inputs and every cotangent so far, of the
    sum of level k-1's values times fixed random cotangents (so level 1 is a
    vector-Jacobian product, level 2 its derivative, ...). Same seeds for
    every fn: two fns computing the same function give the same levels."""
    generator = torch.Generator().manual_seed(seed)
    leaves = [t.detach().clone().requires_grad_() for t in inputs]
    values = [fn(*leaves)]
    levels = [values]
    for _ in range(order):
        # Drawn in float64 and rounded: the same values for either dtype.
        cotangents = [torch.randn(v.shape, dtype=torch.float64, generator=generator)
                      .to(v.dtype).requires_grad_() for v in values]
        total = sum((v * c).sum() for v, c in zip(values, cotangents))
        grads = torch.autograd.grad(total, leaves, create_graph=True, allow_unused=True)
        values = [g if g is not None else torch.zeros_like(leaf)
                  for g, leaf in zip(grads, leaves)]
        leaves = leaves + cotangents
        levels.append(values)
    return levels


def assert_levels_close(actual: list[list[torch.Tensor]],
                        expected: list[list[torch.Tensor]], what: str) -> None:
    """Level by level, value by value, within the rounding of sums over the
    rows (relative to the largest magnitude of the reference value)."""
    for level, (got, want) in enumerate(zip(actual, expected)):
        for position, (a, b) in enumerate(zip(got, want)):
            a, b = a.detach(), b.detach().to(a.dtype)
            scale = float(b.abs().max()) if b.numel() else 0.0
            tolerance = 2e-4 if a.dtype == torch.float32 else 1e-9
            torch.testing.assert_close(
                a, b, rtol=tolerance, atol=tolerance * max(scale, 1.0),
                msg=lambda m: f"{what}, level {level}, value {position}: {m}")
