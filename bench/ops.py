"""The op sweep: each op, forward and forward+backward, over sizes and
segment-length layouts, against eager PyTorch, torch.compile of the same
reference and a memory copy of the same bytes, all measured in one run.

    python -m bench.ops [--device cpu|cuda] [--sizes 1000,100000] [--lengths 10,1000,0]

(Usually run through `python -m bench`, which also writes CSV and plots.)
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Iterable

import torch
from torch import Tensor

from bench import references
from bench.timing import graph_replay_seconds, interleaved_median_seconds, median_seconds

SIZES = [1_000, 100_000, 1_000_000, 10_000_000]
# Mean segment lengths; 0 means one segment of all rows.
LENGTHS = [10, 1000, 0]


def layouts(sizes: Iterable[int], lengths: Iterable[int],
            max_single_segment: int | None = None) -> list[tuple[int, int]]:
    """(N, mean segment length) pairs, without duplicates (at N=1000 a mean
    length of 1000 is the single segment); single segments only up to
    max_single_segment rows, if given."""
    pairs = []
    for num_rows in sizes:
        for length in lengths:
            length = min(length or num_rows, num_rows)
            if max_single_segment is not None and length == num_rows > max_single_segment:
                continue
            if (num_rows, length) not in pairs:
                pairs.append((num_rows, length))
    return pairs


def _forward(fn: Callable[..., Tensor], floats: list[Tensor], idx: Tensor,
             num_segments: int) -> Callable[[], object]:
    return lambda: fn(*floats, idx, num_segments)


def _forward_backward(fn: Callable[..., Tensor], floats: list[Tensor], idx: Tensor,
                      num_segments: int) -> Callable[[], object]:
    leaves = [f.detach().clone().requires_grad_() for f in floats]
    return lambda: torch.autograd.grad(fn(*leaves, idx, num_segments).sum(), leaves)


def _bytes(floats: list[Tensor], idx: Tensor, output: Tensor) -> int:
    """The bytes the forward op must move at least: every input once and the
    output once."""
    return sum(t.nbytes for t in floats) + idx.nbytes + output.nbytes


def copy_baselines(moved: int, device: str) -> tuple[Callable[[], object],
                                                     Callable[[], object]]:
    """The bandwidth yardsticks for an op moving `moved` bytes: a copy of
    as many bytes (read and written together) between two tensors, and the
    same copy into fresh memory (as the ops write theirs: on the host its
    first touch costs page faults and zeroing)."""
    # Both written first: reading never-touched host memory maps the
    # kernel's shared zero page, which stays in cache and made the copy ~1.3x
    # faster than any real read.
    source = torch.ones(max(1, moved // 8), dtype=torch.float32, device=device)
    target = torch.zeros_like(source)
    return (lambda: target.copy_(source)), source.clone


def _allow_recompiles() -> None:
    """Each reference is compiled for several shapes (widths, one segment):
    raise dynamo's recompile limit so none silently falls back to eager."""
    import torch._dynamo.config as dynamo_config

    for name in ("recompile_limit", "cache_size_limit"):
        if hasattr(dynamo_config, name):
            setattr(dynamo_config, name, 64)


def run(device: str, sizes: Iterable[int], lengths: Iterable[int], ops: Iterable[str],
        budget_s: float, compiled: bool, log: Callable[[str], None] = print,
        max_single_segment: int | None = None,
        index_dtype: torch.dtype = torch.int32) -> list[dict]:
    """One row per op, width and layout. `index_dtype`: of the index every
    implementation gets (the eager references' `idx.long()` is free for
    int64, the index type of most PyTorch code)."""
    compiled_refs = references.compiled_references() if compiled else {}
    if compiled:
        _allow_recompiles()
    rows = []
    for num_rows, length in layouts(sizes, lengths, max_single_segment):
        generator = torch.Generator().manual_seed(num_rows + length)
        idx, num_segments = references.make_index(num_rows, length, device, generator)
        idx = idx.to(index_dtype)
        for op in ops:
            for width in references.widths(op):
                floats = references.make_inputs(op, width, num_rows, num_segments, device,
                                                generator)
                impls = {"segops": references.SEGOPS[op], "eager": references.EAGER[op]}
                if op in compiled_refs:
                    dynamic, static = compiled_refs[op]
                    impls["compiled"] = static if num_segments == 1 else dynamic
                row = {"device": device, "op": op, "width": width, "N": num_rows,
                       "mean_seg_len": length, "S": num_segments,
                       "idx": str(index_dtype).removeprefix("torch.")}
                moved = _bytes(floats, idx, references.SEGOPS[op](*floats, idx, num_segments))
                copy, clone = copy_baselines(moved, device)
                for mode, builder in (("fwd", _forward), ("fwd+bwd", _forward_backward)):
                    for name, fn in impls.items():
                        call = builder(fn, floats, idx, num_segments)
                        if mode == "fwd" and name == "segops":
                            # The op and its bandwidth yardsticks sampled in
                            # turn, so that "% copy bw" compares the same
                            # phases of a noisy machine.
                            seconds, copy_s, clone_s = interleaved_median_seconds(
                                [call, copy, clone], device, budget_s=3 * budget_s,
                                min_repeats=5)
                            row["fwd copy us"] = copy_s * 1e6
                            row["fwd clone us"] = clone_s * 1e6
                        else:
                            try:
                                seconds = median_seconds(call, device, budget_s=budget_s,
                                                         min_repeats=5)
                            except Exception as error:  # noqa: BLE001 - a compiler bug
                                if name != "compiled":
                                    raise
                                # torch.compile itself failed: report it, measure on.
                                log(f"  torch.compile failed on {op} w{width} N={num_rows} "
                                    f"len {length} {mode}: {type(error).__name__}")
                                seconds = float("nan")
                        row[f"{mode} {name} us"] = seconds * 1e6
                        if device == "cuda" and mode == "fwd" and name == "segops":
                            row["fwd segops graph us"] = _graph_or_nan(call)
                row["fwd bytes"] = moved
                _add_ratios(row)
                rows.append(row)
                log(format_row(row))
    return rows


def _graph_or_nan(call: Callable[[], object]) -> float:
    try:
        return graph_replay_seconds(call) * 1e6
    except RuntimeError as error:  # capture unsupported: report, keep going
        print(f"  (CUDA graph capture failed: {error})", file=sys.stderr)
        return float("nan")


def _add_ratios(row: dict) -> None:
    for mode in ("fwd", "fwd+bwd"):
        ours = row[f"{mode} segops us"]
        row[f"{mode} vs eager"] = ours / row[f"{mode} eager us"]
        if (
            f"{mode} compiled us" in row
            and row[f"{mode} compiled us"] == row[f"{mode} compiled us"]
        ):
            row[f"{mode} vs compiled"] = ours / row[f"{mode} compiled us"]
    row["fwd segops GB/s"] = row["fwd bytes"] / row["fwd segops us"] / 1e3
    row["fwd copy GB/s"] = row["fwd bytes"] / row["fwd copy us"] / 1e3
    row["fwd bandwidth vs copy"] = row["fwd copy us"] / row["fwd segops us"]
    row["fwd bandwidth vs clone"] = row["fwd clone us"] / row["fwd segops us"]


HEADER = (f"{'op':9}{'w':>2}{'N':>10}{'len':>9} | {'fwd us':>9}{'/eager':>7}{'/comp':>7}"
          f"{'%copy':>6}{'%clone':>7} | {'fwd+bwd us':>11}{'/eager':>7}{'/comp':>7}")


def format_row(row: dict) -> str:
    def ratio(key: str) -> str:
        return f"{row[key]:>7.2f}" if key in row else f"{'-':>7}"

    return (f"{row['op']:9}{row['width']:>2}{row['N']:>10}{row['mean_seg_len']:>9} | "
            f"{row['fwd segops us']:>9.1f}{ratio('fwd vs eager')}{ratio('fwd vs compiled')}"
            f"{100 * row['fwd bandwidth vs copy']:>6.0f}"
            f"{100 * row['fwd bandwidth vs clone']:>7.0f} | {row['fwd+bwd segops us']:>11.1f}"
            f"{ratio('fwd+bwd vs eager')}{ratio('fwd+bwd vs compiled')}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    parser.add_argument("--sizes", default="100000,1000000")
    parser.add_argument("--lengths", default="10,1000,0")
    parser.add_argument("--ops", default=",".join(references.OPS))
    parser.add_argument("--no-compile", action="store_true")
    parser.add_argument("--budget", type=float, default=0.5,
                        help="seconds of sampling per measurement (at least 3 samples)")
    args = parser.parse_args()
    print(HEADER)
    run(args.device, [int(s) for s in args.sizes.split(",")],
        [int(s) for s in args.lengths.split(",")], args.ops.split(","), args.budget,
        not args.no_compile)
    return 0


if __name__ == "__main__":
    sys.exit(main())
