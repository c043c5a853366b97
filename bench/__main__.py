"""The segops benchmark suite: one command, one run, every baseline.

    python -m bench [--device cpu|cuda] [--quick] [--out docs/benchmarks]
                    [--sections ops,index64,overhead,compile,jit,fusion,wide,message_passing,
                                sixteen_bit]
                    [--budget 0.5]

Sections:
  ops       each op forward and forward+backward, N in {1e3, 1e5, 1e6, 1e7}
            (--quick: up to 1e6), mean segment length 10, 1000 and N, scalar
            and vec3 float32, against eager PyTorch (index_add_, gather,
            einsum), torch.compile of the same reference, and a memory copy
            of the same bytes;
  index64   the same at the largest N with ~1000-row segments and an int64
            index (PyTorch's usual index type), against eager PyTorch;
  overhead  host time per call at N=100 against index_add_ and no-op
            torch.library operators;
  compile   run-time compilation of one op's kernels (cold, warm caches) and
            the op library build;
  jit       segops.jit composites (bench/jit.py) against the same code
            unfused, eager and torch.compile'd; cold compile; warm overhead
            (CPU only);
  fusion    segops.fusion (bench/fusion.py): three model-like workloads,
            eager, torch.compile without and with the pass, N in {1e5, 1e6}
            (--quick: 1e5), forward and training step, kernels and time;
  wide      sum, mean, max and gather over (N, F) rows (bench/wide.py), F in
            {16, 64, 256}, N in {1e5, 1e6} (--quick: 1e5), segments of 10 and
            100 rows, forward and forward+backward, against index_add_ /
            index_reduce_ / index_select (and torch_scatter where installed);
  message_passing  Lennard-Jones (LAMMPS in.lj, 4,000 and 32,000 atoms;
            --quick: 4,000) energy+forces and a force-matching training
            step, and a SchNet-style F = 32 filter convolution, against
            eager PyTorch and torch.compile, with forward peak memory
            (bench/message_passing.py; CPU only);
  sixteen_bit  segmented_sum on bfloat16 and float16 rows (bench/
            sixteen_bit.py) against index_add_ in the same dtype and segops
            on float32 rows, N in {1e6, 1e7} (--quick: 1e6), w 1 and 3,
            segments of 10 and 1,000 rows.
Prints tables, a summary against the performance targets, and writes CSV
files and PNG plots into --out. Ratios are segops / baseline from this run.
"""

from __future__ import annotations

import argparse
import platform
import sys
import time
from pathlib import Path

import torch

import segops
from bench import (
    compile_time,
    fusion,
    jit,
    message_passing,
    ops,
    overhead,
    report,
    sixteen_bit,
    wide,
)


def machine(device: str) -> str:
    text = (f"segops {segops.__version__}, torch {torch.__version__}, "
            f"{platform.machine()}, {torch.get_num_threads()} CPU threads")
    if device == "cuda":
        text += f", {torch.cuda.get_device_name()}"
    return text


def summarize(rows: list[dict], overhead_rows: list[dict],
              compile_rows: list[dict] | None = None,
              index_rows: list[dict] | None = None) -> list[str]:
    """Where the measurements stand against issue 5's targets."""
    lines = []
    for key in ("fwd vs eager", "fwd+bwd vs eager"):
        values = [(r[key], r) for r in index_rows or [] if key in r]
        if values:
            worst, row = max(values, key=lambda pair: pair[0])
            lines.append(f"N={row['N']}, int64 idx: worst {key} = {worst:.2f} ({row['op']} "
                         f"w{row['width']} len {row['mean_seg_len']}); target <= 0.5")
    largest = max((r["N"] for r in rows), default=0)
    at_largest = [r for r in rows if r["N"] == largest]
    for key, limit in (("fwd vs eager", 0.5), ("fwd+bwd vs eager", 0.5),
                       ("fwd vs compiled", 1.0), ("fwd+bwd vs compiled", 1.0)):
        values = [(r[key], r) for r in at_largest if key in r]
        if values:
            worst, row = max(values, key=lambda pair: pair[0])
            lines.append(f"N={largest}: worst {key} = {worst:.2f} ({row['op']} w{row['width']} "
                         f"len {row['mean_seg_len']}); target <= {limit}")
    fractions = [(r["fwd bandwidth vs copy"], r) for r in at_largest]
    if fractions:
        worst, row = min(fractions, key=lambda pair: pair[0])
        lines.append(f"N={largest}: lowest forward bandwidth = {100 * worst:.0f}% of the copy's "
                     f"({row['op']} w{row['width']} len {row['mean_seg_len']}); target >= 60%")
    fresh = [(r["fwd bandwidth vs clone"], r) for r in at_largest if "fwd bandwidth vs clone" in r]
    if fresh:
        worst, row = min(fresh, key=lambda pair: pair[0])
        lines.append(f"N={largest}: lowest forward bandwidth = {100 * worst:.0f}% of a copy into "
                     f"fresh memory ({row['op']} w{row['width']} len {row['mean_seg_len']})")
    ratios = [r["vs index_add_"] for r in overhead_rows if "vs index_add_" in r]
    if ratios:
        lines.append(f"N=100: host overhead {min(ratios):.2f}-{max(ratios):.2f}x index_add_'s; "
                     "target <= 1.5x")
    compiles = [r for r in compile_rows or [] if "cold ms" in r]
    if compiles:
        cold = max(compiles, key=lambda r: r["cold ms"])
        hit = max(r["memory hit ms"] for r in compiles)
        lines.append(f"compile: slowest cold fwd+bwd+dbwd = {cold['cold ms']:.0f} ms "
                     f"({cold['what'].split()[0]}); target < 200 ms; slowest cache hit "
                     f"{hit:.3f} ms; target < 1 ms")
    return lines


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    parser.add_argument("--quick", action="store_true", help="N up to 1e6 only")
    parser.add_argument("--sizes", help="comma-separated N (overrides --quick)")
    parser.add_argument("--out", default="docs/benchmarks", help="CSV and PNG directory")
    parser.add_argument("--sections", default="ops,index64,overhead,compile,jit,fusion,wide,"
                        "message_passing,sixteen_bit")
    parser.add_argument("--budget", type=float, default=0.5,
                        help="seconds of sampling per measurement (at least 3 samples)")
    parser.add_argument("--max-single-segment", type=int,
                        help="skip the one-segment layout above this N")
    parser.add_argument("--no-compiled-baseline", action="store_true",
                        help="skip the torch.compile references")
    args = parser.parse_args()
    if args.device == "cuda" and not torch.cuda.is_available():
        print("no CUDA device", file=sys.stderr)
        return 1
    sections = args.sections.split(",")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    print(machine(args.device))

    op_rows: list[dict] = []
    if "ops" in sections:
        sizes = ([int(s) for s in args.sizes.split(",")] if args.sizes else
                 ops.SIZES[:-1] if args.quick else ops.SIZES)
        print("\n## ops: time / baseline (below 1: segops faster); %copy, %clone: forward "
              "bandwidth as a share of a copy's into written / fresh memory")
        print(ops.HEADER)
        op_rows = ops.run(args.device, sizes, ops.LENGTHS, ops_list(), args.budget,
                          not args.no_compiled_baseline,
                          max_single_segment=args.max_single_segment)
        report.write_csv(out / f"ops_{args.device}.csv", op_rows)
        title = machine(args.device)
        report.plot(report.plot_ratios, out / f"ops_{args.device}.png", op_rows, title)
        report.plot(report.plot_bandwidth, out / f"bandwidth_{args.device}.png", op_rows, title)

    index_rows: list[dict] = []
    if "index64" in sections:
        sizes = ([int(s) for s in args.sizes.split(",")] if args.sizes else
                 ops.SIZES[:-1] if args.quick else ops.SIZES)
        print("\n## ops with an int64 index, ~1000-row segments (no torch.compile baseline)")
        print(ops.HEADER)
        index_rows = ops.run(args.device, sizes[-1:], [1000], ops_list(), args.budget,
                             compiled=False, index_dtype=torch.int64)
        report.write_csv(out / f"ops_index64_{args.device}.csv", index_rows)

    overhead_rows: list[dict] = []
    if "overhead" in sections:
        print(f"\n## host overhead per call, N={overhead.NUM_ROWS}, vec3 float32")
        overhead_rows = overhead.run(args.device)
        report.write_csv(out / f"overhead_{args.device}.csv", overhead_rows)
        report.plot(report.plot_overhead, out / f"overhead_{args.device}.png", overhead_rows,
                    f"host time per call, N={overhead.NUM_ROWS}, {args.device}")

    compile_rows: list[dict] = []
    if "compile" in sections:
        print("\n## compile time")
        try:
            compile_rows = compile_time.run(library=True)
            report.write_csv(out / "compile.csv", compile_rows)
        except (RuntimeError, FileNotFoundError) as error:  # runtime-only builds
            print(f"skipped: {error}")

    if "jit" in sections:
        print("\n## segops.jit composites")
        if args.device != "cpu":
            print("skipped: bench.jit measures CPU tensors")
        else:
            sizes = ([int(s) for s in args.sizes.split(",")] if args.sizes else
                     jit.SIZES[:-1] if args.quick else jit.SIZES)
            jit.time_cold_compile()
            jit.time_overhead(args.budget)
            jit.time_composites(sizes, jit.LENGTHS, args.budget,
                                not args.no_compiled_baseline)

    fusion_rows: list[dict] = []
    if "fusion" in sections:
        print("\n## segops.fusion: model-like workloads under torch.compile")
        try:
            import segops._native._segc  # noqa: F401 - the pass needs the compiler
        except ImportError:
            print("skipped: segops.fusion needs the compiler module")
        else:
            sizes = ([int(s) for s in args.sizes.split(",")] if args.sizes else
                     fusion.SIZES[:1] if args.quick else fusion.SIZES)
            fusion_rows = fusion.run(sizes, fusion.WORKLOADS, 4 * args.budget, dynamic=True,
                                     device=args.device)
            report.write_csv(out / f"fusion_{args.device}.csv", fusion.flat_rows(fusion_rows))

    wide_rows: list[dict] = []
    if "wide" in sections:
        print("\n## wide rows: (N, F) float32, segops / best baseline")
        sizes = ([int(s) for s in args.sizes.split(",")] if args.sizes else
                 wide.SIZES[:1] if args.quick else wide.SIZES)
        wide_rows = wide.run(args.device, wide.WIDTHS, sizes, wide.LENGTHS, args.budget)
        report.write_csv(out / f"wide_{args.device}.csv", wide_rows)
        report.plot(wide.plot_bandwidth, out / f"wide_bandwidth_{args.device}.png", wide_rows,
                    machine(args.device))

    message_rows: list[dict] = []
    if "message_passing" in sections:
        if args.device != "cpu":
            print("\n## message passing: CPU only (skipped)")
        else:
            print("\n## message passing: Lennard-Jones and SchNet over a neighbour list")
            atoms = message_passing.ATOMS[:1] if args.quick else message_passing.ATOMS
            message_rows = message_passing.run(list(atoms), 4 * args.budget)
            report.write_csv(out / "message_passing_cpu.csv", message_rows)

    sixteen_bit_rows: list[dict] = []
    if "sixteen_bit" in sections:
        print("\n## bfloat16 and float16 rows: segmented_sum against index_add_ in the dtype")
        sizes = (tuple(int(s) for s in args.sizes.split(",")) if args.sizes else
                 sixteen_bit.SIZES[:1] if args.quick else sixteen_bit.SIZES)
        sixteen_bit_rows = sixteen_bit.run(args.device, sizes, budget=args.budget)
        report.write_csv(out / f"sixteen_bit_{args.device}.csv", sixteen_bit_rows)

    print("\n## summary")
    for line in summarize(op_rows, overhead_rows, compile_rows, index_rows):
        print(line)
    for line in fusion.summarize(fusion_rows):
        print(line)
    for line in wide.summarize(wide_rows):
        print(line)
    for line in message_passing.summarize(message_rows):
        print(line)
    for line in sixteen_bit.summarize(sixteen_bit_rows):
        print(line)
    print(f"(suite took {time.perf_counter() - started:.0f} s; CSV and PNG in {out}/)")
    return 0


def ops_list() -> list[str]:
    from bench.references import OPS

    return OPS


if __name__ == "__main__":
    sys.exit(main())
