"""Segment lengths against the host row loop's tail: two segops.jit
programs (exp and a vec3 sum; a sum, a gather, exp and a vec3 sum) and the
library's vec3 segmented_sum over N rows in segments of equal length.

    python -m bench.row_tails [--rows 1000000] [--lengths 10,30,100,1000]

Lengths that are not a multiple of the vector width leave a tail per
segment (docs/benchmarks.md, segops.fusion).
"""

from __future__ import annotations

import argparse

import torch

import segops
from bench.timing import interleaved_median_seconds


@segops.jit
def exp_sum(a, v, idx, n):
    return segops.segmented_sum(torch.exp(a)[:, None] * v, idx, n)


@segops.jit
def two_reductions(a, v, idx, n):
    m = segops.segmented_sum(a, idx, n)
    e = torch.exp(a - segops.segmented_gather(m, idx))
    return segops.segmented_sum(e[:, None] * v, idx, n)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--lengths", default="10,30,100,1000")
    parser.add_argument("--budget", type=float, default=1.0)
    args = parser.parse_args()
    a, v = torch.randn(args.rows), torch.randn(args.rows, 3)
    print(f"{'length':>7} {'exp_sum ms':>11} {'two_reductions ms':>18} {'segmented_sum ms':>17}")
    for length in (int(x) for x in args.lengths.split(",")):
        idx = torch.arange(args.rows, dtype=torch.int32) // length
        n = int(idx[-1]) + 1
        times = interleaved_median_seconds(
            [lambda: exp_sum(a, v, idx, n), lambda: two_reductions(a, v, idx, n),
             lambda: segops.segmented_sum(v, idx, n)], "cpu", repeats=30, budget_s=args.budget)
        print(f"{length:>7} " + " ".join(f"{1e3 * t:>{w}.3f}" for t, w in zip(times, (11, 18, 17))))


if __name__ == "__main__":
    main()
