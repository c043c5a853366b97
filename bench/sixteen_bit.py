"""bfloat16 and float16 rows: segops.segmented_sum on 16-bit rows (run in
float32, the result rounded to the dtype) against PyTorch's index_add_ in
the same dtype and against segops on float32 rows, sampled in turn. A
section of the suite (`python -m bench --sections sixteen_bit`) and a
command of its own:

    python -m bench.sixteen_bit [--device cpu|cuda] [--sizes 1000000,10000000]
                                [--widths 1,3] [--lengths 10,1000]
                                [--dtypes bf16,f16] [--budget 1.0]

Prints one line per case: the three medians and the ratios of the 16-bit
call to index_add_ and to the float32 call.
"""

from __future__ import annotations

import argparse

import torch

import segops
from bench import references
from bench.timing import interleaved_median_seconds

DTYPES = {"bf16": torch.bfloat16, "f16": torch.float16}
SIZES = (1_000_000, 10_000_000)
WIDTHS = (1, 3)
LENGTHS = (10, 1000)
HEADER = (f"{'dtype':5} {'w':>2} {'N':>9} {'len':>5}  {'segops ms':>9} {'index_add_ ms':>13} "
          f"{'segops f32 ms':>13}  {'/index_add_':>11} {'/f32':>5}")


def run(device: str, sizes: tuple[int, ...] = SIZES, widths: tuple[int, ...] = WIDTHS,
        lengths: tuple[int, ...] = LENGTHS, dtypes: tuple[str, ...] = tuple(DTYPES),
        budget: float = 1.0) -> list[dict]:
    """Times each case and prints its line; returns the rows."""
    print(HEADER)
    rows = []
    for size in sizes:
        for length in lengths:
            for width in widths:
                (x32,), idx, num_segments = references.make_case("sum", width, size, length,
                                                                 device)
                long_idx = idx.long()
                for name in dtypes:
                    x = x32.to(DTYPES[name])
                    out = torch.zeros((num_segments, *x.shape[1:]), dtype=x.dtype, device=device)
                    times = interleaved_median_seconds([
                        lambda: segops.segmented_sum(x, idx, num_segments),
                        lambda: out.zero_().index_add_(0, long_idx, x),
                        lambda: segops.segmented_sum(x32, idx, num_segments),
                    ], device, repeats=50, budget_s=budget)
                    ours, eager, f32 = (t * 1e3 for t in times)
                    print(f"{name:5} {width:>2} {size:>9} {length:>5}  {ours:9.2f} {eager:13.2f} "
                          f"{f32:13.2f}  {ours / eager:11.2f} {ours / f32:5.2f}")
                    rows.append({"dtype": name, "width": width, "N": size, "length": length,
                                 "segops_ms": ours, "index_add_ms": eager, "segops_f32_ms": f32})
    return rows


def summarize(rows: list[dict]) -> list[str]:
    if not rows:
        return []
    worst = max(rows, key=lambda r: r["segops_ms"] / r["index_add_ms"])
    return [f"16-bit sum: worst vs index_add_ in the same dtype = "
            f"{worst['segops_ms'] / worst['index_add_ms']:.2f} ({worst['dtype']} w{worst['width']} "
            f"N={worst['N']} len {worst['length']}); vs float32 segops up to "
            f"{max(r['segops_ms'] / r['segops_f32_ms'] for r in rows):.2f}"]


def _numbers(text: str) -> tuple[int, ...]:
    return tuple(int(float(s)) for s in text.split(","))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    parser.add_argument("--sizes", default=",".join(map(str, SIZES)))
    parser.add_argument("--widths", default=",".join(map(str, WIDTHS)))
    parser.add_argument("--lengths", default=",".join(map(str, LENGTHS)),
                        help="mean rows per segment")
    parser.add_argument("--dtypes", default=",".join(DTYPES))
    parser.add_argument("--budget", type=float, default=1.0, help="seconds per line")
    options = parser.parse_args()
    rows = run(options.device, _numbers(options.sizes), _numbers(options.widths),
               _numbers(options.lengths), tuple(options.dtypes.split(",")), options.budget)
    for line in summarize(rows):
        print(line)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
