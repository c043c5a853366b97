"""Timing helpers: medians over repeats (adaptive to a time budget), CUDA
events on GPUs, CUDA-graph replay."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Sequence

import torch


def median_seconds(fn: Callable[[], object], device: str, repeats: int = 15,
                   inner: int | None = None, budget_s: float | None = None,
                   min_repeats: int = 3) -> float:
    """Median wall time of one call of fn, after one warm-up call.

    With `budget_s`, sampling stops once that much time has been spent and at
    least `min_repeats` samples exist (slow configurations get fewer
    samples, never fewer than min_repeats). On CUDA each sample is `inner`
    back-to-back calls timed with events, so host launch overhead overlaps
    device work as in real use."""
    return interleaved_median_seconds([fn], device, repeats, inner, budget_s,
                                      min_repeats)[0]


def interleaved_median_seconds(fns: Sequence[Callable[[], object]], device: str,
                               repeats: int = 15, inner: int | None = None,
                               budget_s: float | None = None,
                               min_repeats: int = 3) -> list[float]:
    """Each fn's median as median_seconds measures it, sampled in turn (a
    sample of each per round; the budget covers all of them): every fn sees
    the same phases of a noisy machine, so the ratios of these medians are
    steadier than those of medians taken one after the other."""
    inners = []
    for fn in fns:
        warm_up = time.perf_counter()
        fn()
        if device == "cuda":
            torch.cuda.synchronize()
        warm_up = time.perf_counter() - warm_up
        if inner is not None:
            inners.append(inner)
        elif device == "cuda":
            # Enough back-to-back calls to keep a GPU busy, few when each is slow.
            inners.append(max(1, min(20, int(2e-3 / max(warm_up, 1e-9)))))
        else:
            inners.append(1)
    samples: list[list[float]] = [[] for _ in fns]
    started = time.perf_counter()
    for _ in range(repeats):
        for fn, calls, taken in zip(fns, inners, samples):
            taken.append(_sample(fn, device, calls))
        if (budget_s is not None and len(samples[0]) >= min_repeats
                and time.perf_counter() - started > budget_s):
            break
    return [statistics.median(taken) for taken in samples]


def _sample(fn: Callable[[], object], device: str, inner: int) -> float:
    if device == "cuda":
        start = torch.cuda.Event(enable_timing=True)
        stop = torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(inner):
            fn()
        stop.record()
        stop.synchronize()
        return start.elapsed_time(stop) / 1e3 / inner
    begin = time.perf_counter()
    for _ in range(inner):
        fn()
    return (time.perf_counter() - begin) / inner


def graph_replay_seconds(fn: Callable[[], object], repeats: int = 15) -> float:
    """Median time of one replay of a CUDA graph capturing one call of fn
    (device time without host launch overhead)."""
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for _ in range(2):  # warm-up outside the capture
            fn()
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        fn()
    return median_seconds(graph.replay, "cuda", repeats=repeats)
