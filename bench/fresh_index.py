"""An unsorted index made anew on every call with the same content (PyG's
GCNConv and GATConv append self-loops to edge_index each call): its sort
found by content against a sort per call, in one run.

    python -m bench.fresh_index [--nodes 20000] [--edges 200000] [--features 64]
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

import segops


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, default=20_000)
    parser.add_argument("--edges", type=int, default=200_000)
    parser.add_argument("--features", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=15)
    args = parser.parse_args()
    generator = torch.Generator().manual_seed(0)
    receivers = torch.randint(0, args.nodes, (args.edges,), generator=generator)
    loops = torch.arange(args.nodes)
    x = torch.randn(args.edges + args.nodes, args.features, generator=generator)

    def call(forget: bool) -> None:
        if forget:  # as before: a sort per call
            segops.clear_index_cache()
        segops.segmented_mean(x, torch.cat([receivers, loops]), args.nodes)

    times: dict[bool, list[float]] = {True: [], False: []}
    for forget in (True, False):
        call(forget)
    for _ in range(args.repeats):  # interleaved
        for forget in (True, False):
            start = time.perf_counter()
            call(forget)
            times[forget].append(time.perf_counter() - start)
    sort_ms = statistics.median(times[True]) * 1e3
    cached_ms = statistics.median(times[False]) * 1e3
    print(f"segmented_mean, {args.edges + args.nodes} rows x {args.features}, a new index "
          f"per call: sort per call {sort_ms:.2f} ms, found by content {cached_ms:.2f} ms "
          f"({cached_ms / sort_ms:.2f}x)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
