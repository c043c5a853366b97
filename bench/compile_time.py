"""Compile speed: one op's forward, backward and double-backward kernels to
PTX (in-process compiler) cold, from the in-process cache and from the disk
cache; the same cold on one thread, and on one thread with LLVM's O2 pipeline
(the run-time default before the quick pipeline); what ptxas makes of the PTX
of each pipeline (SASS instructions, registers); and the ahead-of-time op
library build (seg-opt + seg-compile); compile time against program depth
(chains of matvecs derived to second order, to a host object).

    python -m bench.compile_time [--no-library] [--depths 25,50,100]
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import statistics
import struct
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from segops import _compiler, _library

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
    segc = _compiler._segc()
    with tempfile.TemporaryDirectory() as cache:
        os.environ["SEGOPS_CACHE_DIR"] = cache
        # The first compilation in a process also loads dialects and targets.
        first = _ms(lambda: _compiler.compile_ptx(op_source("segmented_sum", "f32_w1"), 0))
        rows.append({"what": "first compile in a process (sum f32 w1, forward only)",
                     "ms": first})
        log(f"{rows[-1]['what']:58} {first:8.1f} ms")
        for op in OPS:
            source = op_source(op)
            cold: list[float] = []
            one_thread: list[float] = []
            o2_one_thread: list[float] = []
            for attempt in range(3):
                # A cache miss: a different comment makes a different key.
                variant = f"// attempt {attempt}\n" + source
                _compiler.clear_memory_cache()
                cold.append(_ms(lambda: _compiler.compile_ptx(variant, order=2)))
                # The native compiler has no cache; interleaved with the above.
                one_thread.append(_ms(lambda: segc.compile_ptx(variant, 2, groups=1)))
                o2_one_thread.append(_ms(lambda: segc.compile_ptx(
                    variant, 2, opt_level=2, quick=False, groups=1)))
            memory = statistics.median(_ms(lambda: _compiler.compile_ptx(variant, order=2))
                                       for _ in range(21))
            disk = []
            for _ in range(5):
                _compiler.clear_memory_cache()
                disk.append(_ms(lambda: _compiler.compile_ptx(variant, order=2)))
            row = {"what": f"{op} f32 w3: forward+backward+double backward",
                   "cold ms": statistics.median(cold), "memory hit ms": memory,
                   "disk hit ms": statistics.median(disk),
                   "cold 1 thread ms": statistics.median(one_thread),
                   "cold 1 thread O2 ms": statistics.median(o2_one_thread)}
            row.update(sass_comparison(source))
            rows.append(row)
            log(f"{row['what']:58} cold {row['cold ms']:7.1f} ms (1 thread "
                f"{row['cold 1 thread ms']:.1f}, 1 thread O2 {row['cold 1 thread O2 ms']:.1f}), "
                f"memory hit {memory:6.3f} ms, disk hit {row['disk hit ms']:6.3f} ms")
            if "quick sass" in row:
                log(" " * 58 + " SASS instructions, most registers (program kernels / all): " +
                    ", ".join(f"{p} {row[p + ' sass main']}/{row[p + ' sass']} "
                              f"r{row[p + ' registers main']}/{row[p + ' registers']}"
                              for p in PIPELINES))
        del os.environ["SEGOPS_CACHE_DIR"]
    if library:
        rows += library_build(log)
    return rows


# LLVM pipelines compared by what ptxas makes of their PTX: (opt_level, quick).
PIPELINES = {"quick": (0, True), "O2": (2, False), "O3": (3, False)}


def sass_comparison(source: str, chip: str = "sm_90") -> dict[str, int]:
    """SASS instructions (all kernels, and the programs' own kernels without
    the long-segment ones) and the most registers a kernel uses, after
    `ptxas -O3`, for the PTX of each pipeline: a static view of what the
    quick pipeline costs in code. Empty without ptxas."""
    ptxas = shutil.which("ptxas") or "/usr/local/cuda/bin/ptxas"
    if not Path(ptxas).exists():
        return {}
    segc = _compiler._segc()
    result: dict[str, int] = {}
    with tempfile.TemporaryDirectory() as out:
        for name, (opt_level, quick) in PIPELINES.items():
            ptx_path, cubin_path = Path(out) / f"{name}.ptx", Path(out) / f"{name}.cubin"
            ptx_path.write_text(segc.compile_ptx(source, 2, chip, opt_level=opt_level,
                                                 quick=quick))
            log = subprocess.run([ptxas, f"-arch={chip}", "-O3", "-v", str(ptx_path),
                                  "-o", str(cubin_path)],
                                 check=True, capture_output=True, text=True).stderr
            sizes = _text_section_sizes(cubin_path.read_bytes())
            result[f"{name} sass"] = sum(sizes.values()) // 16
            result[f"{name} sass main"] = sum(size for kernel, size in sizes.items()
                                              if "__" not in kernel) // 16
            registers = dict(re.findall(
                r"Compiling entry function '(\w+)'.*?Used (\d+) registers", log, re.S))
            result[f"{name} registers"] = max(int(n) for n in registers.values())
            result[f"{name} registers main"] = max(int(n) for kernel, n in registers.items()
                                                   if "__" not in kernel)
    return result


def _text_section_sizes(elf: bytes) -> dict[str, int]:
    """Bytes of each kernel's code (`.text.<kernel>` sections) in a cubin
    (ELF64; a SASS instruction is 16 bytes from sm_70 on)."""
    section_offset, = struct.unpack_from("<Q", elf, 0x28)
    entry_size, count, names_index = struct.unpack_from("<HHH", elf, 0x3A)
    headers = [struct.unpack_from("<IIQQQQ", elf, section_offset + i * entry_size)
               for i in range(count)]
    names_offset = headers[names_index][4]
    sizes = {}
    for name_offset, _, _, _, _, size in headers:
        end = elf.index(b"\0", names_offset + name_offset)
        name = elf[names_offset + name_offset:end].decode()
        if name.startswith(".text."):
            sizes[name[len(".text."):]] = size
    return sizes


def library_build(log: Callable[[str], None] = print) -> list[dict]:
    """The op library build as `make build` runs it (derive to third order,
    then PTX for sm_80 and sm_90 and the host objects of the built library's
    host builds), timed step by step."""
    rows = []
    builds = _library.manifest().host_builds
    host_targets = ",".join(f"{build.cpu}:{build.vector_bits}" for build in builds)
    with tempfile.TemporaryDirectory() as out:
        derived = Path(out) / "derived.mlir"
        steps = [
            ("op library: seg-opt --seg-derive=order=3",
             [str(_compiler.tool("seg-opt")), str(LIBRARY_SOURCE), "--seg-derive=order=3",
              "-o", str(derived)]),
            (f"op library: seg-compile (104 programs: PTX x2, host x{len(builds)})",
             [str(_compiler.tool("seg-compile")), str(derived), "-o", out,
              "--chips=sm_80,sm_90", f"--host-targets={host_targets}"]),
        ]
        for what, command in steps:
            seconds = _ms(lambda: subprocess.run(command, check=True)) / 1e3
            rows.append({"what": what, "s": seconds})
            log(f"{what:58} {seconds:8.2f} s")
    return rows


def matvec_chain(depth: int) -> str:
    """A kernel function of `depth` chained matvecs (v <- m[idx]^T v)."""
    lines = ["func.func @chain(%v: tensor<?x3xf32>, %m: tensor<?x3x3xf32>, "
             "%idx: tensor<?xi32>) -> tensor<?x3xf32> {"]
    previous = "%v"
    for k in range(depth):
        lines.append(f"  %{k} = seg.matvec {previous}, %m, %idx : tensor<?x3xf32>, "
                     "tensor<?x3x3xf32>, tensor<?xi32> -> tensor<?x3xf32>")
        previous = f"%{k}"
    lines += [f"  return {previous} : tensor<?x3xf32>", "}"]
    return "\n".join(lines) + "\n"


def program_depth(depths: list[int], log: Callable[[str], None] = print) -> list[dict]:
    """Compile time against program depth: chains of matvecs derived to
    second order (seg-opt), then compiled to one host object (seg-compile,
    x86-64-v2): the time should grow linearly with the depth."""
    rows = []
    with tempfile.TemporaryDirectory() as out:
        for depth in depths:
            source, derived = Path(out) / f"chain{depth}.mlir", Path(out) / f"derived{depth}.mlir"
            source.write_text(matvec_chain(depth))
            derive = _ms(lambda: subprocess.run(
                [str(_compiler.tool("seg-opt")), str(source), "--seg-derive=order=2",
                 "-o", str(derived)], check=True)) / 1e3
            compile_host = _ms(lambda: subprocess.run(
                [str(_compiler.tool("seg-compile")), str(derived), "-o", out,
                 "--host-targets=x86-64-v2:128"], check=True)) / 1e3
            rows.append({"what": f"matvec chain of depth {depth}, derived to second order, "
                                 "host object", "derive s": derive, "host s": compile_host})
            log(f"matvec chain depth {depth:4}: derive {derive:6.2f} s, host object "
                f"{compile_host:6.2f} s")
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--no-library", action="store_true",
                        help="skip the op library build")
    parser.add_argument("--depths", default="",
                        help="only the program-depth rows, for these depths (e.g. 25,50,100)")
    args = parser.parse_args()
    if args.depths:
        program_depth([int(d) for d in args.depths.split(",")])
        return 0
    run(not args.no_library)
    program_depth([25, 50, 100])
    return 0


if __name__ == "__main__":
    sys.exit(main())
