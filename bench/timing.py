"""Timing helpers: medians over repeats, CUDA events on GPUs."""

from __future__ import annotations

import statistics
import time
from typing import Callable

import torch


def median_seconds(fn: Callable[[], object], device: str, repeats: int = 15,
                   inner: int | None = None) -> float:
    """Median wall time of one call of fn, after warm-up. On CUDA, kernels are
    timed with events over `inner` back-to-back calls (so host launch overhead
    overlaps with device work, as in real use)."""
    fn()
    if device == "cuda":
        torch.cuda.synchronize()
        inner = inner or 20
        samples = []
        for _ in range(repeats):
            start = torch.cuda.Event(enable_timing=True)
            stop = torch.cuda.Event(enable_timing=True)
            start.record()
            for _ in range(inner):
                fn()
            stop.record()
            stop.synchronize()
            samples.append(start.elapsed_time(stop) / 1e3 / inner)
        return statistics.median(samples)
    inner = inner or 1
    samples = []
    for _ in range(repeats):
        begin = time.perf_counter()
        for _ in range(inner):
            fn()
        samples.append((time.perf_counter() - begin) / inner)
    return statistics.median(samples)
