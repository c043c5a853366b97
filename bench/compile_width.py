"""Compile time of a library op on wide rows, per derivative level.

    python -m bench.compile_width [--widths 256,1024] [--op segmented_max]
                                  [--levels 3] [--dtype float32]

Each level is compiled on its first use: one forward and `levels` nested
torch.autograd.grad calls on (5, F) rows, each timed. Point SEGOPS_CACHE_DIR
at a fresh directory for cold compiles (the disk cache keeps them);
SEGOPS_WIDEST_UNROLLED sets the widest rows compiled unrolled (wider ones
run as blocks: docs/ops.md, "Blocks").
"""

from __future__ import annotations

import argparse
import time

import torch

import segops
from segops import _columns


def level_seconds(op: str, width: int, levels: int, dtype: torch.dtype) -> list[float]:
    idx = torch.tensor([0, 0, 1, 1, 1], dtype=torch.int32)
    x = torch.randn(5, width, dtype=dtype, requires_grad=True)
    start = time.perf_counter()
    value = getattr(segops, op)(x, idx, 2)
    seconds = [time.perf_counter() - start]
    for level in range(1, levels + 1):
        start = time.perf_counter()
        (value,) = torch.autograd.grad(value.square().sum(), x, create_graph=level < levels)
        seconds.append(time.perf_counter() - start)
    return seconds


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--widths", default="256,1024")
    parser.add_argument("--op", default="segmented_max")
    parser.add_argument("--levels", type=int, default=3)
    parser.add_argument("--dtype", default="float32", choices=["float32", "float64"])
    args = parser.parse_args()
    print(f"widest unrolled: {_columns.WIDEST_UNROLLED}")
    for width in (int(w) for w in args.widths.split(",")):
        seconds = level_seconds(args.op, width, args.levels, getattr(torch, args.dtype))
        print(f"{args.op} F={width} {args.dtype}: levels 0-{args.levels} "
              + " / ".join(f"{s:.1f}" for s in seconds) + " s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
