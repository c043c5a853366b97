"""Benchmark segops.segmented_sum against what users write today.

    python -m bench [--device cpu|cuda|all] [--quick] [--csv PATH]

For each size and layout it times, in one run: segops.segmented_sum,
PyTorch eager `zeros(...).index_add_(0, idx.long(), x)`, and a copy of the
same input bytes (x.clone()) as a bandwidth yardstick. Ratios are quoted
against the index_add_ baseline measured in the same run.
"""

from __future__ import annotations

import argparse
import csv
import platform
import sys

import torch

import segops
from bench.timing import median_seconds


def make_layout(num_rows: int, mean_length: int, device: str) -> tuple[torch.Tensor, int]:
    num_segments = max(1, num_rows // mean_length)
    generator = torch.Generator().manual_seed(0)
    idx = torch.sort(torch.randint(0, num_segments, (num_rows,), generator=generator)).values
    return idx.to(device=device, dtype=torch.int32), num_segments


def run(device: str, sizes: list[int], lengths: list[int], widths: list[int],
        max_single_segment: int) -> list[dict]:
    rows = []
    for num_rows in sizes:
        for mean_length in lengths or [num_rows]:
            mean_length = mean_length or num_rows  # 0: one segment of all rows
            if mean_length > num_rows or (mean_length == num_rows > max_single_segment):
                continue
            idx, num_segments = make_layout(num_rows, mean_length, device)
            for width in widths:
                shape = (num_rows,) if width == 1 else (num_rows, width)
                x = torch.randn(shape, device=device)

                def segops_sum() -> torch.Tensor:
                    return segops.segmented_sum(x, idx, num_segments)

                def index_add() -> torch.Tensor:
                    out = x.new_zeros((num_segments,) + shape[1:])
                    return out.index_add_(0, idx.long(), x)

                def copy() -> torch.Tensor:
                    return x.clone()

                repeats = 7 if num_rows >= 1_000_000 and device == "cpu" else 15
                t_segops = median_seconds(segops_sum, device, repeats)
                t_index_add = median_seconds(index_add, device, repeats)
                t_copy = median_seconds(copy, device, repeats)
                bytes_moved = x.numel() * 4 + num_rows * 4 + num_segments * width * 4
                rows.append({
                    "device": device, "N": num_rows, "mean_seg_len": mean_length,
                    "width": width, "segops_us": t_segops * 1e6,
                    "index_add_us": t_index_add * 1e6, "copy_us": t_copy * 1e6,
                    "segops_vs_index_add": t_segops / t_index_add,
                    "segops_GBps": bytes_moved / t_segops / 1e9,
                    "copy_GBps": 2 * x.numel() * 4 / t_copy / 1e9,
                })
    return rows


def print_table(rows: list[dict]) -> None:
    header = (f"{'device':6} {'N':>9} {'len':>6} {'w':>2} {'segops us':>11} {'index_add us':>13} "
              f"{'ratio':>7} {'segops GB/s':>12} {'copy GB/s':>10}")
    print(header)
    print("(len: mean segment length; ratio: segops time / index_add_ time, below 1 is faster)")
    print("-" * len(header))
    for r in rows:
        print(f"{r['device']:6} {r['N']:>9} {r['mean_seg_len']:>6} {r['width']:>2} "
              f"{r['segops_us']:>11.1f} {r['index_add_us']:>13.1f} {r['segops_vs_index_add']:>7.2f} "
              f"{r['segops_GBps']:>12.1f} {r['copy_GBps']:>10.1f}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default="all", choices=["cpu", "cuda", "all"])
    parser.add_argument("--quick", action="store_true", help="smaller sizes only")
    parser.add_argument("--csv", help="also write the rows to this CSV file")
    parser.add_argument("--max-single-segment", type=int, default=10**9,
                        help="skip the one-segment layout above this N (slow on GPUs for now)")
    args = parser.parse_args()

    devices = ["cpu", "cuda"] if args.device == "all" else [args.device]
    if "cuda" in devices and not torch.cuda.is_available():
        if args.device == "cuda":
            print("no CUDA device", file=sys.stderr)
            return 1
        devices.remove("cuda")
    print(f"segops {segops.__version__}, torch {torch.__version__}, {platform.processor() or platform.machine()}, "
          f"{torch.get_num_threads()} CPU threads"
          + (f", {torch.cuda.get_device_name()}" if "cuda" in devices else ""))
    rows = []
    for device in devices:
        sizes = [1_000, 100_000, 1_000_000] if args.quick else [1_000, 100_000, 1_000_000, 10_000_000]
        rows += run(device, sizes, [10, 1000, 0], [1, 3], args.max_single_segment)
    print_table(rows)
    if args.csv:
        with open(args.csv, "w", newline="") as handle:
            writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
            writer.writeheader()
            writer.writerows(rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
