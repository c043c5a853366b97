"""One op's forward bandwidth against a copy of the same bytes, alternated.

    python -m bench.bandwidth [--configs mean:3:10,rms_norm:1:10]
                              [--rows 10000000] [--rounds 2] [--budget 0.5]

Each config is op:width:mean segment length (0: one segment). Per round the
op and the copy (as in the suite: a copy of as many bytes as the forward
moves, between two tensors written before) are sampled in turn, so both
see the same phases of a noisy machine, as in the suite; prints each
round's medians and the op's bandwidth as a percentage of the copy's.
This is how a configuration near the target is measured again, for
longer or more often than the suite does.
"""

from __future__ import annotations

import argparse

import torch

from bench import references
from bench.ops import _bytes, copy_baselines
from bench.timing import interleaved_median_seconds


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--configs", default="sum:1:10,mean:1:10,mean:3:10,rms_norm:1:10,"
                        "rms_norm:3:10")
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--budget", type=float, default=0.5)
    args = parser.parse_args()
    num_rows = args.rows
    print(f"{torch.get_num_threads()} threads, N = {num_rows}")
    for config in args.configs.split(","):
        op, width, length = config.split(":")
        floats, idx, num_segments = references.make_case(op, int(width), num_rows,
                                                         int(length))
        fn = references.SEGOPS[op]
        copy, _ = copy_baselines(_bytes(floats, idx, fn(*floats, idx, num_segments)), "cpu")
        for _ in range(args.rounds):
            ours, copied = interleaved_median_seconds(
                [lambda: fn(*floats, idx, num_segments), copy], "cpu",
                budget_s=2 * args.budget, min_repeats=5)
            print(f"{op:9} w{width} len {length:>8}: op {ours * 1e3:7.2f} ms, copy "
                  f"{copied * 1e3:6.2f} ms -> {100 * copied / ours:4.0f}% of the copy's bandwidth",
                  flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
