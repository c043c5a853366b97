"""GPU kernels judged without a GPU (issue 40), first part: what ptxas says
of every kernel the op library ships, and the occupancy that allows.

    python -m bench.gpu_model [--chip sm_90] [--csv docs/benchmarks/gpu_ptxas_sm_90.csv]

ptxas (`-v`) compiles the op library's PTX for the chip and reports, per
kernel, its registers, spill stores and loads, stack frame and static
shared memory. With the block size the manifest launches each kernel
with, those give the theoretical occupancy: the warps resident per SM over
the SM's maximum, limited by registers, shared memory, threads and blocks
(the CUDA Occupancy Calculator's rule). The limits are compute capability
9.0's (H100 and H200), from the CUDA C++ Programming Guide's table of
technical specifications per compute capability:

- 65,536 32-bit registers per SM, allocated per warp in units of 256, at
  most 255 per thread;
- 2,048 threads (64 warps) and 32 blocks per SM;
- 228 KiB of shared memory per SM, of which 1 KiB is reserved per block.

The memory-traffic half of the model (sectors per warp-level access from
the SIMT simulator, the critical path of long segments, an estimated time
against HBM bandwidth) is not written yet.
"""

from __future__ import annotations

import argparse
import math
import re
import shutil
import subprocess
import tempfile
from collections import Counter
from dataclasses import asdict, dataclass
from pathlib import Path

from bench import report
from segops import _library

DOCS = Path(__file__).resolve().parents[1] / "docs" / "benchmarks"


@dataclass(frozen=True)
class SMLimits:
    """Per-SM resources of a compute capability."""

    registers: int = 65536
    register_unit: int = 256  # registers are allocated per warp in these units
    max_warps: int = 64
    max_blocks: int = 32
    shared_bytes: int = 228 * 1024
    reserved_shared_per_block: int = 1024
    warp_size: int = 32


SM90 = SMLimits()


@dataclass(frozen=True)
class KernelResources:
    """What ptxas reports of one kernel."""

    name: str
    registers: int
    stack_bytes: int
    spill_store_bytes: int
    spill_load_bytes: int
    shared_bytes: int


_ENTRY = re.compile(r"Compiling entry function '([^']+)'")
_FRAME = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")
_USED = re.compile(r"Used (\d+) registers(?:.*?(\d+) bytes smem)?")


def parse_ptxas(text: str) -> dict[str, KernelResources]:
    """The kernels of a `ptxas -v` log, by name."""
    kernels: dict[str, KernelResources] = {}
    name, frame = None, (0, 0, 0)
    for line in text.splitlines():
        if (entry := _ENTRY.search(line)) is not None:
            name, frame = entry.group(1), (0, 0, 0)
        elif name is not None and (found := _FRAME.search(line)) is not None:
            frame = tuple(int(group) for group in found.groups())
        elif name is not None and (used := _USED.search(line)) is not None:
            kernels[name] = KernelResources(name, int(used.group(1)), *frame,
                                            int(used.group(2) or 0))
            name = None
    return kernels


def occupancy(kernel: KernelResources, block: int, limits: SMLimits = SM90) -> float:
    """The fraction of an SM's warps a kernel of `block` threads keeps
    resident (0 if one block does not fit)."""
    warps_per_block = math.ceil(block / limits.warp_size)
    registers_per_warp = math.ceil(kernel.registers * limits.warp_size
                                   / limits.register_unit) * limits.register_unit
    by_registers = (limits.registers // (registers_per_warp * warps_per_block)
                    if registers_per_warp else limits.max_blocks)
    shared = kernel.shared_bytes + limits.reserved_shared_per_block
    by_shared = limits.shared_bytes // shared
    by_warps = limits.max_warps // warps_per_block
    blocks = min(by_registers, by_shared, by_warps, limits.max_blocks)
    return blocks * warps_per_block / limits.max_warps


def run_ptxas(ptx: Path, chip: str) -> str:
    ptxas = shutil.which("ptxas")
    if ptxas is None:
        raise SystemExit("bench.gpu_model needs ptxas (the CUDA toolkit) on PATH")
    with tempfile.TemporaryDirectory() as scratch:
        result = subprocess.run([ptxas, f"-arch={chip}", "-v", str(ptx), "-o",
                                 str(Path(scratch) / "library.cubin")],
                                capture_output=True, text=True)
    if result.returncode != 0:
        raise SystemExit(f"ptxas failed:\n{result.stderr[-2000:]}")
    return result.stdout + result.stderr


_KERNEL_NAME = re.compile(r"(?P<op>.+)_(?P<dtype>f32|f64)_w(?P<width>\d+)(?P<grads>(?:_grad)*)")


def library_rows(chip: str) -> list[dict]:
    """One row per kernel of the op library's PTX for `chip`."""
    manifest = _library.manifest()
    if chip not in manifest.ptx:
        raise SystemExit(f"the op library has no PTX for {chip}; it has {sorted(manifest.ptx)}")
    resources = parse_ptxas(run_ptxas(_library.NATIVE_DIR / manifest.ptx[chip], chip))
    # Each GPU symbol's launch record: the kernel's and its long-segment
    # kernels'.
    blocks = {}
    for record in manifest.kernels.values():
        for symbol in record.gpu_symbols:
            blocks[symbol] = (record.name, record.gpu_block)
    rows = []
    for name, kernel in sorted(resources.items()):
        # A kernel no launch record names (block 0): in the PTX, never run.
        record_name, block = blocks.get(name, (name.split("__")[0], 0))
        parts = _KERNEL_NAME.fullmatch(record_name)
        rows.append({
            **asdict(kernel),
            "op": parts["op"] if parts else "",
            "dtype": parts["dtype"] if parts else "",
            "width": int(parts["width"]) if parts else 0,
            "level": len(parts["grads"]) // len("_grad") if parts else 0,
            "launched": block > 0,
            "block": block,
            "occupancy": round(occupancy(kernel, block), 4) if block else "",
        })
    return rows


def summarize(rows: list[dict], chip: str) -> None:
    spilled = [r for r in rows if r["spill_store_bytes"] or r["spill_load_bytes"]]
    print(f"{len(rows)} kernels for {chip}; {len(spilled)} spill registers")
    for row in spilled:
        print(f"  {row['name']}: {row['registers']} registers, "
              f"{row['spill_store_bytes']} B spill stores, {row['spill_load_bytes']} B loads")
    occupancies = Counter(row["occupancy"] for row in rows if row["occupancy"] != "")
    print("theoretical occupancy (kernels):",
          ", ".join(f"{value:.0%}: {count}" for value, count in sorted(occupancies.items())))
    registers = [row["registers"] for row in rows]
    print(f"registers per thread: {min(registers)} to {max(registers)}")
    unlaunched = [row["name"] for row in rows if not row["launched"]]
    if unlaunched:
        print(f"{len(unlaunched)} kernels no launch record names (never run): "
              + ", ".join(unlaunched))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--chip", default="sm_90")
    parser.add_argument("--csv", type=Path, default=None)
    options = parser.parse_args()
    rows = library_rows(options.chip)
    summarize(rows, options.chip)
    path = options.csv or DOCS / f"gpu_ptxas_{options.chip}.csv"
    report.write_csv(path, rows)
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
