"""Wide rows: sum, mean, max and gather over (N, F) feature rows, forward and
forward+backward, against PyTorch's index_add_ / index_reduce_ /
index_select (and torch_scatter's segment_csr where it is installed), and a
copy of the same bytes, all measured in one run.

    python -m bench.wide [--device cpu|cuda] [--widths 16,64,256]
                         [--sizes 100000,1000000] [--lengths 10,100] [--budget 0.3]
                         [--by-columns] [--unroll-limit 256]

(Also the `wide` section of `python -m bench`.) Ratios are segops / the best
baseline of the row; "%copy" is the forward's bytes per second (inputs and
output once each) as a share of a copy's between two written tensors.
With --by-columns, segops runs as the runtime wheel does without a compiler
(segops._columns: the shipped one-feature kernels over the transposed rows).
--unroll-limit sets the widest rows compiled unrolled (wider ones run as
blocks of at most that many features; segops._columns.WIDEST_UNROLLED).
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import torch
from torch import Tensor

import segops
from bench import report
from bench.ops import copy_baselines
from bench.timing import interleaved_median_seconds

WIDTHS = [16, 64, 256]
SIZES = [100_000, 1_000_000]
LENGTHS = [10, 100]
OPS = ["sum", "mean", "max", "gather"]
HEADER = (f"{'op':<7}{'F':>5}{'N':>9}{'len':>5} {'segops ms':>10} {'best base':>16} "
          f"{'fwd ratio':>9} {'f+b ratio':>9} {'%copy':>6}")


def _segment_csr() -> Callable | None:
    try:
        from torch_scatter import segment_csr  # type: ignore[import-not-found]
    except ImportError:
        return None
    return segment_csr


def _baselines(op: str, idx: Tensor, ptr: Tensor, num_segments: int
               ) -> dict[str, Callable[[Tensor], Tensor]]:
    """PyTorch (and torch_scatter) versions of `op` on (N, F) rows (gather:
    on (S, F) per-segment rows)."""
    index = idx.long()
    counts = torch.bincount(index, minlength=num_segments).clamp(min=1)

    def zeros(x: Tensor) -> Tensor:
        return x.new_zeros(num_segments, x.shape[1])

    found: dict[str, Callable[[Tensor], Tensor]] = {
        "sum": {"index_add_": lambda x: zeros(x).index_add(0, index, x)},
        "mean": {"index_add_": lambda x: zeros(x).index_add(0, index, x)
                 / counts[:, None].to(x.dtype)},
        "max": {"index_reduce_": lambda x: zeros(x).index_reduce(0, index, x, "amax",
                                                                 include_self=False)},
        "gather": {"index_select": lambda y: y.index_select(0, index)},
    }[op]
    segment_csr = _segment_csr()
    if segment_csr is not None:
        if op == "gather":
            from torch_scatter import gather_csr  # type: ignore[import-not-found]

            found["gather_csr"] = lambda y: gather_csr(y, ptr)
        else:
            found["segment_csr"] = lambda x: segment_csr(x, ptr, reduce=op)
    return found


def _segops(op: str, idx: Tensor, num_segments: int) -> Callable[[Tensor], Tensor]:
    if op == "gather":
        return lambda y: segops.segmented_gather(y, idx)
    fn = {"sum": segops.segmented_sum, "mean": segops.segmented_mean,
          "max": segops.segmented_max}[op]
    return lambda x: fn(x, idx, num_segments)


@contextlib.contextmanager
def by_columns() -> Iterator[None]:
    """The public ops as the runtime wheel runs them: no compiler, so widths
    the op library lacks go by columns (segops._columns)."""
    from segops import _columns

    available = _columns.compiler_available
    _columns.compiler_available = lambda: False
    try:
        yield
    finally:
        _columns.compiler_available = available


def _with_backward(fn: Callable[[Tensor], Tensor], x: Tensor) -> Callable[[], object]:
    leaf = x.detach().clone().requires_grad_()
    return lambda: torch.autograd.grad(fn(leaf).sum(), leaf)


def run(device: str, widths: list[int], sizes: list[int], lengths: list[int],
        budget: float) -> list[dict]:
    rows = []
    print(HEADER)
    for width in widths:
        for num_rows in sizes:
            for length in lengths:
                num_segments = num_rows // length
                idx = torch.arange(num_segments, dtype=torch.int32,
                                   device=device).repeat_interleave(length)
                ptr = torch.arange(0, num_rows + 1, length, device=device)
                generator = torch.Generator(device=device).manual_seed(0)
                for op in OPS:
                    shape = (num_segments if op == "gather" else num_rows, width)
                    x = torch.randn(shape, generator=generator, device=device)
                    rows.append(_measure(op, x, idx, ptr, num_segments, device, budget))
                    print(_line(rows[-1]), flush=True)
    return rows


def _measure(op: str, x: Tensor, idx: Tensor, ptr: Tensor, num_segments: int,
             device: str, budget: float) -> dict:
    mine = _segops(op, idx, num_segments)
    bases = _baselines(op, idx, ptr, num_segments)
    expected = next(iter(bases.values()))(x)
    torch.testing.assert_close(mine(x), expected, rtol=1e-4, atol=1e-4)
    moved = x.nbytes + idx.nbytes + expected.nbytes
    copy, _ = copy_baselines(moved, device)
    forward = [lambda: mine(x)] + [lambda f=f: f(x) for f in bases.values()] + [copy]
    times = interleaved_median_seconds(forward, device, budget_s=budget)
    backward = [_with_backward(mine, x)] + [_with_backward(f, x) for f in bases.values()]
    backward_times = interleaved_median_seconds(backward, device, budget_s=budget)
    names = list(bases)
    best = min(range(len(names)), key=lambda k: times[k + 1])
    best_backward = min(range(len(names)), key=lambda k: backward_times[k + 1])
    row = {
        "op": op, "F": x.shape[1], "N": idx.shape[0], "mean_seg_len": idx.shape[0] // num_segments,
        "segops fwd ms": 1e3 * times[0], "segops fwd+bwd ms": 1e3 * backward_times[0],
        "best fwd baseline": names[best], "best fwd+bwd baseline": names[best_backward],
        "fwd vs best": times[0] / times[best + 1],
        "fwd+bwd vs best": backward_times[0] / backward_times[best_backward + 1],
        "fwd GB/s": moved / times[0] / 1e9,
        "fwd bandwidth vs copy": times[-1] / times[0],
    }
    for name, seconds, total in zip(names, times[1:], backward_times[1:]):
        row[f"{name} fwd ms"], row[f"{name} fwd+bwd ms"] = 1e3 * seconds, 1e3 * total
    return row


def _line(row: dict) -> str:
    return (f"{row['op']:<7}{row['F']:>5}{row['N']:>9}{row['mean_seg_len']:>5} "
            f"{row['segops fwd ms']:>10.3f} {row['best fwd baseline']:>16} "
            f"{row['fwd vs best']:>9.2f} {row['fwd+bwd vs best']:>9.2f} "
            f"{100 * row['fwd bandwidth vs copy']:>5.0f}%")


def summarize(rows: list[dict]) -> list[str]:
    """Where the wide rows stand against the targets (<= 0.5x the best
    baseline; >= 60% of a copy's bandwidth at N*F >= 1e7)."""
    lines = []
    for key in ("fwd vs best", "fwd+bwd vs best"):
        if rows:
            worst = max(rows, key=lambda r: r[key])
            lines.append(f"wide: worst {key} = {worst[key]:.2f} ({worst['op']} F={worst['F']} "
                         f"N={worst['N']} len {worst['mean_seg_len']}); target <= 0.5")
    large = [r for r in rows if r["N"] * r["F"] >= 10_000_000]
    if large:
        worst = min(large, key=lambda r: r["fwd bandwidth vs copy"])
        lines.append(f"wide: lowest forward bandwidth at N*F >= 1e7 = "
                     f"{100 * worst['fwd bandwidth vs copy']:.0f}% of a copy's ({worst['op']} "
                     f"F={worst['F']} N={worst['N']}); target >= 60%")
    if _segment_csr() is None:
        lines.append("wide: torch_scatter is not installed (not a baseline in this run)")
    return lines


def plot_bandwidth(path: Path, rows: list[dict], title: str) -> None:
    """Forward GB/s against F, per op and layout."""
    plt = report._pyplot()
    layouts = sorted({(r["N"], r["mean_seg_len"]) for r in rows})
    figure, axes = plt.subplots(1, len(layouts), figsize=(4 * len(layouts), 3.6), sharey=True,
                                squeeze=False)
    for axis, (num_rows, length) in zip(axes[0], layouts):
        for op in dict.fromkeys(r["op"] for r in rows):
            selected = sorted((r for r in rows if r["op"] == op and r["N"] == num_rows
                               and r["mean_seg_len"] == length), key=lambda r: r["F"])
            axis.plot([r["F"] for r in selected], [r["fwd GB/s"] for r in selected],
                      marker="o", markersize=3, label=op)
        # The copy of each op's bytes, the median over the ops per F.
        widths = sorted({r["F"] for r in rows})
        copies = [statistics.median(r["fwd GB/s"] / r["fwd bandwidth vs copy"] for r in rows
                                    if r["N"] == num_rows and r["mean_seg_len"] == length
                                    and r["F"] == width) for width in widths]
        axis.plot(widths, copies, color="grey", linestyle=":", label="copy")
        axis.set_xscale("log", base=2)
        axis.set_title(f"N={num_rows}, segments of {length}", fontsize=9)
        axis.set_xlabel("F features")
    axes[0][0].set_ylabel("forward GB/s")
    axes[0][0].legend(fontsize=7)
    figure.suptitle(title + " (float32)", fontsize=10)
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    parser.add_argument("--widths", default=",".join(map(str, WIDTHS)))
    parser.add_argument("--sizes", default=",".join(map(str, SIZES)))
    parser.add_argument("--lengths", default=",".join(map(str, LENGTHS)))
    parser.add_argument("--budget", type=float, default=0.3)
    parser.add_argument("--out", default="docs/benchmarks")
    parser.add_argument("--by-columns", action="store_true",
                        help="segops as the runtime wheel runs it (no compiler)")
    parser.add_argument("--unroll-limit", type=int,
                        help="the widest rows compiled unrolled (default: segops')")
    args = parser.parse_args()
    if args.unroll_limit is not None:
        from segops import _columns

        _columns.WIDEST_UNROLLED = args.unroll_limit
    if args.device == "cuda" and not torch.cuda.is_available():
        print("no CUDA device", file=sys.stderr)
        return 1
    with by_columns() if args.by_columns else contextlib.nullcontext():
        rows = run(args.device, [int(w) for w in args.widths.split(",")],
                   [int(n) for n in args.sizes.split(",")],
                   [int(n) for n in args.lengths.split(",")], args.budget)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    name = "wide_columns" if args.by_columns else "wide"
    report.write_csv(out / f"{name}_{args.device}.csv", rows)
    if args.by_columns:
        for line in summarize(rows):
            print(line)
        return 0
    report.plot(plot_bandwidth, out / f"wide_bandwidth_{args.device}.png", rows,
                f"segops wide rows, {torch.get_num_threads()} CPU threads")
    for line in summarize(rows):
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
