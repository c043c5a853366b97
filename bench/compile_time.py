"""Compile speed: one op's forward, backward and double-backward kernels to
PTX (in-process compiler) cold, from the in-process cache and from the disk
cache; and the ahead-of-time op library build (seg-opt + seg-compile).

    python -m bench.compile_time [--no-library]
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable

from segops import _compiler

REPO = Path(__file__).resolve().parents[1]
LIBRARY_SOURCE = REPO / "oplib" / "segops.mlir"
OPS = ["segmented_sum", "segmented_mean", "segmented_rms_norm", "segmented_dot",
       "segmented_mul", "segmented_matvec"]


def op_source(op: str, suffix: str = "f32_w3") -> str:
    """The op library's forward function `op_suffix`, alone in a module."""
    text = LIBRARY_SOURCE.read_text()
    match = re.search(rf"^func\.func @{op}_{suffix}\(.*?^}}$", text, re.S | re.M)
    if match is None:
        raise KeyError(f"{op}_{suffix} is not in {LIBRARY_SOURCE}")
    return match.group(0) + "\n"


def _ms(fn: Callable[[], object]) -> float:
    start = time.perf_counter()
    fn()
    return (time.perf_counter() - start) * 1e3


def run(library: bool, log: Callable[[str], None] = print) -> list[dict]:
    rows = []
    with tempfile.TemporaryDirectory() as cache:
        os.environ["SEGOPS_CACHE_DIR"] = cache
        # The first compilation in a process also loads dialects and targets.
        first = _ms(lambda: _compiler.compile_ptx(op_source("segmented_sum", "f32_w1"), 0))
        rows.append({"what": "first compile in a process (sum f32 w1, forward only)",
                     "ms": first})
        log(f"{rows[-1]['what']:58} {first:8.1f} ms")
        for op in OPS:
            source = op_source(op)
            cold = []
            for attempt in range(3):
                # A cache miss: a different comment makes a different key.
                variant = f"// attempt {attempt}\n" + source
                _compiler.clear_memory_cache()
                cold.append(_ms(lambda: _compiler.compile_ptx(variant, order=2)))
            memory = statistics.median(_ms(lambda: _compiler.compile_ptx(variant, order=2))
                                       for _ in range(21))
            disk = []
            for _ in range(5):
                _compiler.clear_memory_cache()
                disk.append(_ms(lambda: _compiler.compile_ptx(variant, order=2)))
            rows.append({"what": f"{op} f32 w3: forward+backward+double backward",
                         "cold ms": statistics.median(cold), "memory hit ms": memory,
                         "disk hit ms": statistics.median(disk)})
            log(f"{rows[-1]['what']:58} cold {rows[-1]['cold ms']:7.1f} ms, "
                f"memory hit {memory:6.3f} ms, disk hit {rows[-1]['disk hit ms']:6.3f} ms")
        del os.environ["SEGOPS_CACHE_DIR"]
    if library:
        rows += library_build(log)
    return rows


def library_build(log: Callable[[str], None] = print) -> list[dict]:
    """The op library build as `make build` runs it (derive to third order,
    then PTX for sm_80 and sm_90 and the host object), timed step by step."""
    rows = []
    with tempfile.TemporaryDirectory() as out:
        derived = Path(out) / "derived.mlir"
        steps = [
            ("op library: seg-opt --seg-derive=order=3",
             [str(_compiler.tool("seg-opt")), str(LIBRARY_SOURCE), "--seg-derive=order=3",
              "-o", str(derived)]),
            ("op library: seg-compile (104 kernels: PTX x2, host object)",
             [str(_compiler.tool("seg-compile")), str(derived), "-o", out,
              "--chips=sm_80,sm_90"]),
        ]
        for what, command in steps:
            seconds = _ms(lambda: subprocess.run(command, check=True)) / 1e3
            rows.append({"what": what, "s": seconds})
            log(f"{what:58} {seconds:8.2f} s")
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--no-library", action="store_true",
                        help="skip the op library build")
    args = parser.parse_args()
    run(not args.no_library)
    return 0


if __name__ == "__main__":
    sys.exit(main())
