"""The C++ CPU kernels allocate nothing per call beyond their outputs:
counted with a malloc shim (LD_PRELOAD) in a fresh interpreter, a segops
call makes no more heap allocations than `x + 1`, which makes one output
tensor and nothing else (with an int64 index, one tensor more: the
index narrowed to int32). Non-contiguous inputs are copied into reused
buffers, as large outputs are."""

from __future__ import annotations

import os
import resource
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import segops
from segops import ops

pytestmark = [
    pytest.mark.skipif(ops.native_kernels() is None, reason="C++ kernels not in use"),
    pytest.mark.skipif(sys.platform != "linux", reason="needs LD_PRELOAD"),
]

_SHIM = r"""
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stddef.h>
static long counted = 0;
static int counting = 0;
void shim_start(void) { counted = 0; counting = 1; }
long shim_stop(void) { counting = 0; return counted; }
void *malloc(size_t size) {
  static void *(*next)(size_t);
  if (!next)
    next = (void *(*)(size_t))dlsym(RTLD_NEXT, "malloc");
  if (counting)
    __atomic_add_fetch(&counted, 1, __ATOMIC_RELAXED);
  return next(size);
}
"""

_SCRIPT = """
import ctypes, os, torch, segops
shim = ctypes.CDLL(os.environ["LD_PRELOAD"])
shim.shim_stop.restype = ctypes.c_long
torch.set_num_threads(2)
N, S = 100, 10
idx = torch.arange(N, dtype=torch.int32) * S // N
idx64 = idx.long()
x = torch.randn(N, 3)
x1 = torch.randn(N)
y = torch.randn(S)
calls = {
    "x + 1": lambda: x + 1,
    "sum": lambda: segops.segmented_sum(x, idx, S),
    "mean": lambda: segops.segmented_mean(x, idx, S),
    "mul": lambda: segops.segmented_mul(x1, y, idx, S),
    "int64 idx": lambda: segops.segmented_sum(x, idx64, S),
}
for name, call in calls.items():
    for _ in range(50):
        call()
    shim.shim_start()
    for _ in range(200):
        call()
    print(name, shim.shim_stop() / 200)
"""


def test_calls_allocate_no_more_than_their_output(tmp_path: Path) -> None:
    compiler = shutil.which("cc") or shutil.which("gcc")
    if compiler is None:
        pytest.skip("no C compiler for the malloc shim")
    shim = tmp_path / "libmallocshim.so"
    source = tmp_path / "shim.c"
    source.write_text(_SHIM)
    subprocess.run([compiler, "-O2", "-shared", "-fPIC", "-o", str(shim), str(source), "-ldl"],
                   check=True)
    result = subprocess.run([sys.executable, "-c", _SCRIPT], capture_output=True, text=True,
                            timeout=120, env={**os.environ, "LD_PRELOAD": str(shim)})
    assert result.returncode == 0, result.stderr
    counts = {}
    for line in result.stdout.splitlines():
        name, count = line.rsplit(" ", 1)
        counts[name] = float(count)
    baseline = counts.pop("x + 1")
    # An int64 index is narrowed into an int32 tensor first: one tensor more.
    assert counts.pop("int64 idx") <= 2 * baseline, counts
    for name, count in counts.items():
        assert count <= baseline, (name, counts, baseline)


def _minor_faults_per_call(call, calls: int = 5) -> float:
    for _ in range(2):
        call()
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    for _ in range(calls):
        call()
    return (resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before) / calls


def test_non_contiguous_inputs_are_copied_into_reused_buffers() -> None:
    """The expanded gradient `out.sum().backward()` passes is copied into a
    reused buffer, as outputs are, not into fresh pages: a 12 MiB copy in
    fresh 4 KiB pages would fault ~3000 times per call."""
    num_rows, num_segments = 1 << 20, 1000
    idx = torch.arange(num_rows, dtype=torch.int32) * num_segments // num_rows
    y = torch.randn(num_segments)
    expanded = torch.ones(1, 3).expand(num_rows, 3)
    contiguous = expanded.contiguous()
    copy_pages = expanded.numel() * expanded.element_size() // 4096
    with_copy = _minor_faults_per_call(lambda: segops.segmented_mul(expanded, y, idx, num_segments))
    without = _minor_faults_per_call(lambda: segops.segmented_mul(contiguous, y, idx, num_segments))
    assert torch.equal(segops.segmented_mul(expanded, y, idx, num_segments),
                       segops.segmented_mul(contiguous, y, idx, num_segments))
    assert with_copy <= without + copy_pages / 20, (with_copy, without, copy_pages)
