"""bfloat16 and float16 rows on CPU: segops.segmented_sum on 16-bit rows
(run in float32, the result rounded to the dtype) against PyTorch's
index_add_ in the same dtype and against segops on float32 rows, sampled in
turn.

    python -m bench.sixteen_bit [--sizes 1000000,10000000] [--widths 1,3]
                                [--lengths 10,1000] [--dtypes bf16,f16]
                                [--budget 1.0]

Prints one line per case: the three medians and the ratios of the 16-bit
call to index_add_ and to the float32 call.
"""

from __future__ import annotations

import argparse

import torch

import segops
from bench.timing import interleaved_median_seconds

DTYPES = {"bf16": torch.bfloat16, "f16": torch.float16}


def sorted_index(rows: int, length: int) -> tuple[torch.Tensor, int]:
    """A sorted int32 index of segments of about `length` rows."""
    num_segments = max(1, rows // length)
    idx = torch.randint(0, num_segments, (rows,), generator=torch.Generator().manual_seed(0))
    return idx.sort().values.to(torch.int32), num_segments


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="1000000,10000000")
    parser.add_argument("--widths", default="1,3")
    parser.add_argument("--lengths", default="10,1000", help="mean rows per segment")
    parser.add_argument("--dtypes", default="bf16,f16")
    parser.add_argument("--budget", type=float, default=1.0, help="seconds per line")
    options = parser.parse_args()
    print(f"{'dtype':5} {'w':>2} {'N':>9} {'len':>5}  {'segops ms':>9} {'index_add_ ms':>13} "
          f"{'segops f32 ms':>13}  {'/index_add_':>11} {'/f32':>5}")
    for size in (int(float(s)) for s in options.sizes.split(",")):
        for length in (int(s) for s in options.lengths.split(",")):
            idx, num_segments = sorted_index(size, length)
            long_idx = idx.long()
            for width in (int(s) for s in options.widths.split(",")):
                shape = (size,) if width == 1 else (size, width)
                x32 = torch.randn(shape, generator=torch.Generator().manual_seed(1))
                for name in options.dtypes.split(","):
                    x = x32.to(DTYPES[name])
                    out = torch.zeros((num_segments, *shape[1:]), dtype=x.dtype)
                    times = interleaved_median_seconds([
                        lambda: segops.segmented_sum(x, idx, num_segments),
                        lambda: out.zero_().index_add_(0, long_idx, x),
                        lambda: segops.segmented_sum(x32, idx, num_segments),
                    ], "cpu", repeats=50, budget_s=options.budget)
                    ours, eager, f32 = (t * 1e3 for t in times)
                    print(f"{name:5} {width:>2} {size:>9} {length:>5}  {ours:9.2f} {eager:13.2f} "
                          f"{f32:13.2f}  {ours / eager:11.2f} {ours / f32:5.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
