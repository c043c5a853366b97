"""Writing the suite's results: CSV files and PNG plots (matplotlib)."""

from __future__ import annotations

import csv
from pathlib import Path

from bench.ops import LENGTHS


def write_csv(path: Path, rows: list[dict]) -> None:
    if not rows:
        return
    fields: list[str] = []
    for row in rows:
        fields += [key for key in row if key not in fields]
    with path.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=fields)
        writer.writeheader()
        writer.writerows(rows)


def _layout_rows(rows: list[dict], op: str, length: int) -> list[dict]:
    """The vec3 rows of `op` with mean segment length `length` (0: one
    segment), in N order."""
    return [r for r in rows if r["op"] == op and r["width"] == 3 and
            (r["mean_seg_len"] == r["N"] if not length else
             r["mean_seg_len"] == length and length < r["N"])]


def plot(plotter, path: Path, rows: list[dict], title: str) -> None:
    """Runs one plotter; without matplotlib (e.g. on a GPU machine with no
    network) the CSV files are the result and the plots are skipped."""
    try:
        plotter(path, rows, title)
    except ImportError as error:
        print(f"no plot {path.name}: {error}")


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")  # no display needed
    import matplotlib.pyplot as plt

    return plt


def plot_ratios(path: Path, rows: list[dict], title: str) -> None:
    """segops time / baseline time against N, per op (vec3): one row of plots
    per mode, eager solid and torch.compile dashed, a colour per layout."""
    plt = _pyplot()
    ops = list(dict.fromkeys(r["op"] for r in rows))
    modes = ["fwd", "fwd+bwd"]
    figure, axes = plt.subplots(len(modes), len(ops), figsize=(3.2 * len(ops), 6.2),
                                sharex=True, sharey=True, squeeze=False)
    colours = {"10": "tab:blue", "1000": "tab:orange", "N": "tab:green"}
    for column, op in enumerate(ops):
        for line, mode in enumerate(modes):
            axis = axes[line][column]
            for length in LENGTHS:
                label = str(length) if length else "N"
                selected = _layout_rows(rows, op, length)
                if not selected:
                    continue
                sizes = [r["N"] for r in selected]
                for baseline, style in (("eager", "-"), ("compiled", "--")):
                    key = f"{mode} vs {baseline}"
                    if all(key in r for r in selected):
                        axis.plot(sizes, [r[key] for r in selected], style, marker="o",
                                  markersize=3, color=colours[label],
                                  label=f"len {label} / {baseline}")
            axis.axhline(1.0, color="black", linewidth=0.8)
            axis.axhline(0.5, color="grey", linewidth=0.6, linestyle=":")
            axis.set_xscale("log")
            axis.set_yscale("log")
            axis.set_title(f"{op} {mode}", fontsize=9)
            if column == 0:
                axis.set_ylabel("segops time / baseline time")
            if line == len(modes) - 1:
                axis.set_xlabel("N rows")
    axes[0][0].legend(fontsize=6)
    figure.suptitle(title + " (vec3 float32; below 1: segops faster)", fontsize=10)
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)


def plot_bandwidth(path: Path, rows: list[dict], title: str) -> None:
    """Forward bandwidth as a fraction of a same-size copy's, against N."""
    plt = _pyplot()
    figure, axes = plt.subplots(1, 3, figsize=(13, 3.8), sharey=True)
    for axis, length in zip(axes, LENGTHS):
        for op in dict.fromkeys(r["op"] for r in rows):
            selected = _layout_rows(rows, op, length)
            if selected:
                axis.plot([r["N"] for r in selected],
                          [r["fwd bandwidth vs copy"] for r in selected], marker="o",
                          markersize=3, label=op)
        axis.axhline(0.6, color="grey", linewidth=0.6, linestyle=":")
        axis.set_xscale("log")
        axis.set_title(f"mean segment length {length or 'N (one segment)'}", fontsize=9)
        axis.set_xlabel("N rows")
    axes[0].set_ylabel("segops bandwidth / copy bandwidth")
    axes[0].legend(fontsize=7)
    figure.suptitle(title + " (forward, vec3 float32)", fontsize=10)
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)


def plot_overhead(path: Path, rows: list[dict], title: str) -> None:
    plt = _pyplot()
    figure, axis = plt.subplots(figsize=(7, 0.35 * len(rows) + 1.2))
    names = [r["call"] for r in rows][::-1]
    values = [r["us"] for r in rows][::-1]
    colours = ["tab:blue" if n.startswith("segops") else "tab:grey" for n in names]
    axis.barh(names, values, color=colours)
    axis.set_xlabel("µs per call (median)")
    axis.set_title(title, fontsize=10)
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)


def read_csv(path: Path) -> list[dict]:
    with path.open() as handle:
        return list(csv.DictReader(handle))


def _number(value: str, digits: int = 2) -> str:
    if value in ("", None):
        return "-"
    number = float(value)
    return "n/a" if number != number else f"{number:.{digits}f}"


def _percent(value: str | None) -> str:
    """A ratio as a whole percentage ("n/a" where the CSV predates it)."""
    return "n/a" if not value else f"{100 * float(value):.0f}"


def markdown(directory: Path, device: str = "cpu") -> str:
    """The suite's CSV files in `directory` as markdown tables (for
    docs/benchmarks.md): one row per op, width and layout."""
    lines = []
    for name in (f"ops_{device}.csv", f"ops_index64_{device}.csv"):
        ops_path = directory / name
        if not ops_path.exists():
            continue
        if lines:
            lines.append("")
        lines += ["| op | w | N | mean seg len | fwd µs | / eager | / compiled | % copy bw "
                  "| % clone bw | fwd+bwd µs | / eager | / compiled |",
                  "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
        for row in read_csv(ops_path):
            lines.append(
                f"| {row['op']} | {row['width']} | {int(row['N']):,} | "
                f"{int(row['mean_seg_len']):,} | {_number(row['fwd segops us'], 1)} | "
                f"{_number(row.get('fwd vs eager'))} | {_number(row.get('fwd vs compiled'))} | "
                f"{100 * float(row['fwd bandwidth vs copy']):.0f} | "
                f"{_percent(row.get('fwd bandwidth vs clone'))} | "
                f"{_number(row['fwd+bwd segops us'], 1)} | "
                f"{_number(row.get('fwd+bwd vs eager'))} | "
                f"{_number(row.get('fwd+bwd vs compiled'))} |"
            )
    overhead_path = directory / f"overhead_{device}.csv"
    if overhead_path.exists():
        lines += ["", "| call (N=100) | µs | / index_add_ |", "|---|---:|---:|"]
        for row in read_csv(overhead_path):
            lines.append(f"| {row['call']} | {_number(row['us'], 1)} | "
                         f"{_number(row.get('vs index_add_'))} |")
    compile_path = directory / "compile.csv"
    if compile_path.exists():
        lines += ["", "| compilation | cold | memory hit | disk hit | cold, 1 thread "
                  "| cold, 1 thread, O2 |", "|---|---:|---:|---:|---:|---:|"]
        compile_rows = read_csv(compile_path)
        for row in compile_rows:
            if row.get("cold ms"):
                lines.append(f"| {row['what']} | {_number(row['cold ms'], 1)} ms | "
                             f"{_number(row['memory hit ms'], 3)} ms | "
                             f"{_number(row['disk hit ms'], 3)} ms | "
                             f"{_number(row.get('cold 1 thread ms'), 1)} ms | "
                             f"{_number(row.get('cold 1 thread O2 ms'), 1)} ms |")
            elif row.get("ms"):
                lines.append(f"| {row['what']} | {_number(row['ms'], 1)} ms | | | | |")
            else:
                lines.append(f"| {row['what']} | {_number(row['s'], 2)} s | | | | |")
        sass_rows = [row for row in compile_rows if row.get("quick sass")]
        if sass_rows:
            lines += ["", "SASS instructions and most registers per kernel after `ptxas -O3`, "
                      "program kernels / all kernels (with the long-segment ones):", "",
                      "| op (fwd+bwd+dbwd) | quick | O2 | O3 |", "|---|---:|---:|---:|"]
            for row in sass_rows:
                cells = [f"{row[p + ' sass main']} / {row[p + ' sass']}, "
                         f"r{row[p + ' registers main']} / r{row[p + ' registers']}"
                         for p in ("quick", "O2", "O3")]
                lines.append(f"| {row['what'].split()[0]} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


if __name__ == "__main__":
    import sys

    print(markdown(Path(sys.argv[1] if len(sys.argv) > 1 else "docs/benchmarks"),
                  sys.argv[2] if len(sys.argv) > 2 else "cpu"))
