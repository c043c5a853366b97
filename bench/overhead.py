"""Host overhead per call at N=100 (S=10, vec3 float32): each segops op
against `index_add_` and against do-nothing operators registered the ways
torch.library offers (`@custom_op`, `Library.define` + `impl`).

    python -m bench.overhead [--device cpu|cuda]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import timeit
from collections.abc import Callable

import torch
from torch import Tensor

from bench import references

NUM_ROWS = 100
NUM_SEGMENTS = 10


@torch.library.custom_op("segops_bench::noop_custom_op", mutates_args=())
def _noop_custom_op(x: Tensor, idx: Tensor, num_segments: int) -> Tensor:
    return x.new_empty((num_segments,) + x.shape[1:])


@_noop_custom_op.register_fake
def _(x: Tensor, idx: Tensor, num_segments: int) -> Tensor:
    return x.new_empty((num_segments,) + x.shape[1:])


_library = torch.library.Library("segops_bench", "FRAGMENT")
_library.define("noop_library(Tensor x, Tensor idx, SymInt num_segments) -> Tensor")


def _noop_library_impl(x: Tensor, idx: Tensor, num_segments: int) -> Tensor:
    return x.new_empty((num_segments,) + x.shape[1:])


for _key in ("CPU", "CUDA"):
    _library.impl("noop_library", _noop_library_impl, _key)


def median_call_us(fn: Callable[[], object], device: str, number: int = 200,
                   repeats: int = 21) -> float:
    """Median per-call host time: `number` back-to-back calls per sample (on
    CUDA, launch cost: nothing waits for the device except between samples)."""
    for _ in range(number):
        fn()
    samples = []
    for _ in range(repeats):
        if device == "cuda":
            torch.cuda.synchronize()
        samples.append(timeit.timeit(fn, number=number) / number)
    return statistics.median(samples) * 1e6


def run(device: str, log: Callable[[str], None] = print, rounds: int = 15) -> list[dict]:
    """Every call is sampled once per round, rounds interleaved, so that a
    noisy moment on a shared machine hits all calls alike; the median over
    rounds is reported."""
    generator = torch.Generator().manual_seed(0)
    idx, _ = references.make_index(NUM_ROWS, NUM_ROWS // NUM_SEGMENTS, device, generator)
    x = torch.randn(NUM_ROWS, 3, generator=generator).to(device)
    seg = idx.long()
    calls: dict[str, Callable[[], object]] = {
        "index_add_": lambda: x.new_zeros(NUM_SEGMENTS, 3).index_add_(0, seg, x),
        "index_add_ with idx.long()":
            lambda: x.new_zeros(NUM_SEGMENTS, 3).index_add_(0, idx.long(), x),
        "no-op @custom_op": lambda: torch.ops.segops_bench.noop_custom_op(x, idx, NUM_SEGMENTS),
        "no-op Library.impl": lambda: torch.ops.segops_bench.noop_library(x, idx, NUM_SEGMENTS),
    }
    for op in references.OPS:
        floats = references.make_inputs(op, 3, NUM_ROWS, NUM_SEGMENTS, device, generator)
        calls[f"segops {op}"] = (lambda fn, args: lambda: fn(*args, idx, NUM_SEGMENTS))(
            references.SEGOPS[op], floats)
    samples: dict[str, list[float]] = {name: [] for name in calls}
    for _ in range(rounds):
        for name, fn in calls.items():
            samples[name].append(median_call_us(fn, device, number=200, repeats=1))
    rows = []
    for name, values in samples.items():
        rows.append({"device": device, "call": name, "us": statistics.median(values)})
    index_add_us = rows[0]["us"]
    for row in rows:
        if row["call"].startswith("segops"):
            row["vs index_add_"] = row["us"] / index_add_us
        note = f"  ({row['vs index_add_']:.2f}x index_add_)" if "vs index_add_" in row else ""
        log(f"{row['call']:32} {row['us']:8.1f} us{note}")
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    args = parser.parse_args()
    run(args.device)
    return 0


if __name__ == "__main__":
    sys.exit(main())
