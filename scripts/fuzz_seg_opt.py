#!/usr/bin/env python3
"""Mutation fuzzer for seg-opt.

Seeds are the functions of the op library (oplib/) and of the lit tests
(test/, split at `// -----`). Each round mutates one seed (swaps, drops or
duplicates a line, renames an op to a sibling, changes an element type or a
shape, rewires an SSA use, drops a result) and runs seg-opt on it through one
of the pipelines users run. A diagnostic is a fine answer to bad IR; a crash
is not. A run fails on:

- a signal (SIGSEGV, SIGABRT from an assertion, ...);
- "LLVM ERROR", "Assertion", "PLEASE submit a bug report" or a stack dump
  in its output;
- a pipeline that, from input that parses and verifies, makes IR that fails
  to verify (a verifier error about types, operands or dominance), to
  legalize or to translate to LLVM IR (a tenth of the inputs go through
  seg-compile's whole host build, to an object);
- a timeout.

Each failure is written to `--out` as `crash-<n>.mlir` with the command in a
comment, and the fuzzer exits 1. Runs are reproducible from `--seed`.

    python3 scripts/fuzz_seg_opt.py --seg-opt build/bin/seg-opt --seconds 60
"""

from __future__ import annotations

import argparse
import os
import random
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

PIPELINES = [
    ["--seg-derive=order=2"],
    ["--seg-to-host"],
    ["--seg-derive=order=1", "--seg-to-host"],
    ["--seg-derive=order=2", "--seg-to-host=vector-bits=256"],
    ["--seg-derive=order=2 saved-results=1"],
    ["--seg-derive=order=1 saved-results=1", "--seg-to-host"],
    ["--seg-to-nvvm"],
    ["--seg-derive=order=1", "--seg-to-nvvm"],
    ["--seg-to-gpu-simulator"],
    ["--canonicalize", "--cse"],
    # Every pass alone, on whatever IR it is given (seg-opt verifies the IR
    # after each pass).
    ["--seg-differentiate"],
    ["--convert-seg-to-host"],
    ["--convert-seg-to-gpu"],
    ["--convert-gpu-to-simulator"],
    ["--seg-approximate-math"],
    ["--seg-approximate-math=expand-floor=true"],
    ["--seg-expand-extrema"],
]

# Ops that take the same operands, so that renaming one to another often
# still parses (and exercises the verifiers and lowerings where it does).
SIBLINGS = [
    ["seg.sum", "seg.mean", "seg.rms_norm", "seg.max", "seg.min"],
    ["seg.broadcast", "seg.component_sum"],
    ["seg.mul", "seg.matvec", "seg.dot", "seg.outer_sum"],
    ["arith.addf", "arith.subf", "arith.mulf", "arith.divf", "arith.maximumf",
     "arith.minimumf"],
    ["math.sqrt", "math.rsqrt", "math.exp", "math.log", "math.tanh", "math.absf",
     "arith.negf"],
]
TYPE_SWAPS = [
    ("f32", "f64"), ("f64", "f32"), ("i32", "i64"),
    ("tensor<?xf32>", "tensor<?x3xf32>"), ("tensor<?x3xf32>", "tensor<?xf32>"),
    ("tensor<?x3xf64>", "tensor<?x3x3xf64>"), ("tensor<?xf64>", "tensor<?x3xf64>"),
    ("tensor<?x3x3xf32>", "tensor<?x3xf32>"), ("index", "i64"),
]
CRASH_MARKERS = ("LLVM ERROR", "Assertion", "PLEASE submit a bug report",
                 "Stack dump", "UNREACHABLE", "AddressSanitizer",
                 "runtime error:")
# A verifier's words about types, operands and dominance, or a failed
# legalization: the pipeline made IR it cannot handle. (Passes' own
# diagnostics on an op, such as a symbol clash, are answers, not defects.)
BROKEN_OUTPUT = re.compile(
    r"failed to legalize|does not dominate|op requires the same type|"
    r"op (operand|result) #\d+ must be|op requires .*types? to match|"
    r"op expects different type|op result type|translation to LLVM IR failed")
# Every so often the whole host build: seg-compile, through LLVM to an object.
SEG_COMPILE = "seg-compile"
SSA = re.compile(r"%[A-Za-z0-9_]+")


def seeds() -> list[str]:
    texts = []
    for path in sorted(ROOT.glob("oplib/*.mlir")) + sorted(ROOT.glob("test/**/*.mlir")):
        for chunk in path.read_text().split("// -----"):
            # Drop RUN/CHECK lines and expected-* annotations: plain IR.
            lines = [line for line in chunk.splitlines()
                     if not line.lstrip().startswith("//")]
            text = "\n".join(line.split("//")[0].rstrip() for line in lines).strip()
            if "func.func" in text:
                texts.append(text + "\n")
    return texts


def mutate(text: str, rng: random.Random) -> str:
    lines = text.splitlines()
    body = [i for i, line in enumerate(lines)
            if "=" in line or line.strip().startswith(("return", "seg.", "%"))]
    kind = rng.randrange(8)
    if kind == 0 and len(body) >= 2:  # swap two lines
        i, j = rng.sample(body, 2)
        lines[i], lines[j] = lines[j], lines[i]
    elif kind == 1 and body:  # drop a line
        del lines[rng.choice(body)]
    elif kind == 2 and body:  # duplicate a line
        i = rng.choice(body)
        lines.insert(i + 1, lines[i])
    elif kind == 3:  # rename an op to a sibling
        for group in rng.sample(SIBLINGS, len(SIBLINGS)):
            present = [op for op in group if op + " " in text]
            if present:
                old = rng.choice(present)
                new = rng.choice([op for op in group if op != old])
                i = rng.choice([k for k, line in enumerate(lines) if old + " " in line])
                lines[i] = lines[i].replace(old + " ", new + " ", 1)
                break
    elif kind == 4:  # change a type, on one line or everywhere
        old, new = rng.choice(TYPE_SWAPS)
        if rng.random() < 0.5:
            return text.replace(old, new)
        candidates = [k for k, line in enumerate(lines) if old in line]
        if candidates:
            i = rng.choice(candidates)
            lines[i] = lines[i].replace(old, new, 1)
    elif kind == 5 and body:  # rewire an SSA use
        i = rng.choice(body)
        names = sorted(set(SSA.findall(text)))
        uses = list(SSA.finditer(lines[i].split("=", 1)[-1]))
        if uses and names:
            use = rng.choice(uses)
            offset = len(lines[i]) - len(lines[i].split("=", 1)[-1])
            start, end = offset + use.start(), offset + use.end()
            lines[i] = lines[i][:start] + rng.choice(names) + lines[i][end:]
    elif kind == 6:  # change a constant
        candidates = [k for k, line in enumerate(lines) if "arith.constant" in line]
        if candidates:
            i = rng.choice(candidates)
            value = rng.choice(["0.0", "-1.0", "1.0e+300", "0x7FC00000", "3"])
            lines[i] = re.sub(r"constant [^:]+:", f"constant {value} :", lines[i], count=1)
    else:  # splice a line from elsewhere in the text
        if body:
            lines.insert(rng.choice(body), lines[rng.choice(body)])
    return "\n".join(lines) + "\n"


def run(seg_opt: str, path: str, args: list[str], timeout: float) -> tuple[int | None, str]:
    if args and args[0] == SEG_COMPILE:
        command = [args[1], path, "-o", os.path.dirname(path) + "/out", *args[2:]]
    else:
        command = [seg_opt, path, *args, "-o", os.devnull]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return None, "timeout"
    return done.returncode, done.stdout + done.stderr


def failure(seg_opt: str, path: str, args: list[str], timeout: float) -> str | None:
    """Why this run is a compiler defect, or None."""
    code, output = run(seg_opt, path, args, timeout)
    if code is None:
        return f"timeout after {timeout} s"
    if code < 0:
        return f"signal {-code}"
    for marker in CRASH_MARKERS:
        if marker in output:
            return f"'{marker}' in the output"
    if code != 0 and BROKEN_OUTPUT.search(output):
        # Only a defect if the input itself was valid IR.
        parse_code, _ = run(seg_opt, path, [], timeout)
        if parse_code == 0:
            return "the pipeline made IR that does not verify or legalize"
    return None


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seg-opt", default=str(ROOT / "build/bin/seg-opt"))
    parser.add_argument("--seg-compile", default="",
                        help="also run a tenth of the inputs through it (default: beside seg-opt)")
    parser.add_argument("--seconds", type=float, default=60.0, help="time budget")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--timeout", type=float, default=20.0, help="per seg-opt run")
    parser.add_argument("--mutations", type=int, default=3, help="at most, per input")
    parser.add_argument("--out", default=str(ROOT / "build/fuzz"))
    options = parser.parse_args()

    rng = random.Random(options.seed)
    seg_compile = options.seg_compile or str(Path(options.seg_opt).with_name("seg-compile"))
    if not Path(seg_compile).exists():
        seg_compile = ""
    corpus = seeds()
    out = Path(options.out)
    out.mkdir(parents=True, exist_ok=True)
    deadline = time.monotonic() + options.seconds
    runs = crashes = 0
    with tempfile.TemporaryDirectory() as scratch:
        path = os.path.join(scratch, "input.mlir")
        while time.monotonic() < deadline:
            text = rng.choice(corpus)
            for _ in range(rng.randint(1, options.mutations)):
                text = mutate(text, rng)
            args = rng.choice(PIPELINES)
            if seg_compile and rng.random() < 0.1:
                args = [SEG_COMPILE, seg_compile, "--host-targets=x86-64-v2:128"]
            Path(path).write_text(text)
            runs += 1
            why = failure(options.seg_opt, path, args, options.timeout)
            if why is None:
                continue
            crashes += 1
            crash = out / f"crash-{crashes}.mlir"
            tool = "seg-opt %s" if args[0] != SEG_COMPILE else "seg-compile %s -o DIR"
            flags = " ".join(args if args[0] != SEG_COMPILE else args[2:])
            crash.write_text(f"// {tool} {flags}\n// {why}\n{text}")
            print(f"fuzz: {why}: {tool.replace('%s', str(crash))} {flags}", flush=True)
    print(f"fuzz: {runs} runs from {len(corpus)} seeds in {options.seconds:.0f} s, "
          f"{crashes} failures (seed {options.seed})")
    return 1 if crashes else 0


if __name__ == "__main__":
    sys.exit(main())
