"""Unsorted indices on CPU: each op on a sorted index, on the same index
shuffled (the kernels then run the rows in a stable sort of it), and the
eager PyTorch reference on the shuffled index, sampled in turn.

    python -m bench.unsorted [--sizes 1000000,10000000] [--length 10]
                             [--ops sum,mean,...] [--budget 1.0]

Prints one line per op and size: the three medians and the ratios of the
unsorted call to the sorted one and to eager.
"""

from __future__ import annotations

import argparse

import torch

from bench import references
from bench.timing import interleaved_median_seconds

OPS = references.OPS


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="1000000,10000000")
    parser.add_argument("--length", type=int, default=10, help="mean rows per segment")
    parser.add_argument("--ops", default=",".join(OPS))
    parser.add_argument("--budget", type=float, default=1.0, help="seconds per line")
    options = parser.parse_args()
    print(f"{'op':10} {'N':>10}  {'sorted ms':>10} {'unsorted ms':>12} {'eager ms':>9}  "
          f"{'unsorted/sorted':>15} {'unsorted/eager':>14}")
    for size in (int(float(s)) for s in options.sizes.split(",")):
        for op in options.ops.split(","):
            segops_fn, eager_fn = references.SEGOPS[op], references.EAGER[op]
            floats, idx, num_segments = references.make_case(op, 3, size, options.length)
            order = torch.randperm(size, generator=torch.Generator().manual_seed(0))
            shuffled_floats = [f[order] if f.shape[0] == size else f for f in floats]
            shuffled = idx[order].contiguous()
            sorted_s, unsorted_s, eager_s = interleaved_median_seconds(
                [lambda: segops_fn(*floats, idx, num_segments),
                 lambda: segops_fn(*shuffled_floats, shuffled, num_segments),
                 lambda: eager_fn(*shuffled_floats, shuffled, num_segments)],
                "cpu", budget_s=options.budget)
            print(f"{op:10} {size:>10}  {sorted_s * 1e3:10.2f} {unsorted_s * 1e3:12.2f} "
                  f"{eager_s * 1e3:9.2f}  {unsorted_s / sorted_s:15.2f} "
                  f"{unsorted_s / eager_s:14.2f}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
