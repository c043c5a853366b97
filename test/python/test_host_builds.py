"""The op library's host kernels come in one build per x86-64 level (AVX2
and SSE4.2 by default, docs/architecture.md); a process runs the best one its
CPU supports, or the one SEGOPS_HOST_CPU names. The op tests run the chosen
build against PyTorch references; here every other build this CPU runs is
checked kernel by kernel against it, on layouts that take each path of the
generated code (short-segment blocks, vector and scalar loops, long
segments cut into tiles, empty segments)."""

from __future__ import annotations

import os
import subprocess
import sys
from typing import Any

import harness
import pytest
import torch

from segops import _library
from segops._dtypes import MANIFEST_DTYPES

_BUILDS = _library.manifest().host_builds
_NATIVE = _library.native_module()


def test_the_best_supported_build_is_chosen() -> None:
    supported = [build.cpu for build in _BUILDS if _NATIVE.cpu_supports(build.cpu)]
    assert supported, "this CPU runs none of the host builds"
    if "SEGOPS_HOST_CPU" not in os.environ:
        assert _library.host_build().cpu == supported[0]
    assert _NATIVE.cpu_supports("x86-64")
    assert not _NATIVE.cpu_supports("pentium-ii")


def _choose(value: str) -> subprocess.CompletedProcess:
    code = "from segops import _library; print(_library.host_build().cpu)"
    env = dict(os.environ, SEGOPS_HOST_CPU=value)
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                          text=True, timeout=120)


def test_segops_host_cpu_picks_a_build() -> None:
    baseline = _BUILDS[-1].cpu
    result = _choose(baseline)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == baseline


@pytest.mark.skipif(not os.path.exists("/proc/self/maps"), reason="needs /proc")
def test_ops_run_on_the_build_segops_host_cpu_names() -> None:
    """The C++ CPU kernels load the named build (and no other) and compute
    with it."""
    baseline = _BUILDS[-1]
    code = """
import torch, segops
x = torch.randn(3000, 3, dtype=torch.float64)
idx = torch.sort(torch.randint(0, 300, (3000,), dtype=torch.int32)).values
got = segops.segmented_sum(x, idx, 300)
want = torch.zeros(300, 3, dtype=torch.float64).index_add_(0, idx.long(), x)
torch.testing.assert_close(got, want)
maps = open("/proc/self/maps").read()
print(sorted({line.rsplit("/", 1)[-1] for line in maps.splitlines()
              if "libsegops_host" in line}))
"""
    env = dict(os.environ, SEGOPS_HOST_CPU=baseline.cpu)
    result = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                            text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == str([baseline.library])


def test_segops_host_cpu_rejects_a_build_the_library_lacks() -> None:
    result = _choose("x86-64-v1000")
    assert result.returncode != 0
    assert "SEGOPS_HOST_CPU='x86-64-v1000': the op library's host builds are" in result.stderr


# (rows, segments, a sorted index): ~10-row segments with empty ones between;
# ~300-row segments; one segment long enough to be cut into tiles (2^17 rows
# or more) between short ones, and empty segments after the last row.
def _layouts() -> list[tuple[int, int, torch.Tensor]]:
    generator = torch.Generator().manual_seed(7)
    short = torch.sort(torch.randint(0, 400, (3001,), generator=generator,
                                     dtype=torch.int32)).values
    medium = torch.sort(torch.randint(0, 20, (6007,), generator=generator,
                                      dtype=torch.int32)).values
    long = torch.cat([torch.zeros(5, dtype=torch.int32),
                      torch.full((140_000,), 1, dtype=torch.int32),
                      torch.arange(2, 40, dtype=torch.int32).repeat_interleave(3)])
    return [(len(short), 401, short), (len(medium), 20, medium), (len(long), 45, long)]


def _run(library: Any, kernel: Any, inputs: list[torch.Tensor],
         num_rows: int, num_segments: int) -> list[torch.Tensor]:
    """The kernel's outputs (NaN before it runs) from `library`'s build."""
    outputs = [torch.full(buffer.extents(num_rows, num_segments),
                          float("nan"), dtype=MANIFEST_DTYPES[buffer.dtype])
               for buffer in _library.kernel(kernel.name).buffers
               if buffer.is_output]
    pointers = [tensor.data_ptr() for tensor in [*inputs, *outputs]]
    harness.launch_host(kernel, pointers, num_rows, num_segments, library)
    return outputs


def _inputs(kernel: Any, idx: torch.Tensor, num_rows: int,
            num_segments: int) -> list[torch.Tensor]:
    entry = _library.kernel(kernel.name)
    dtype = MANIFEST_DTYPES[kernel.dtype]
    generator = torch.Generator().manual_seed(11)
    inputs = []
    for buffer in entry.buffers:
        if buffer.is_output:
            continue
        if buffer.dtype == "i32":
            inputs.append(idx)
            continue
        shape = buffer.extents(num_rows, num_segments)
        inputs.append(torch.randn(shape, generator=generator, dtype=dtype))
    return harness.with_saved_results(entry, inputs, num_rows, num_segments)


_OTHER_BUILDS = [build for build in _BUILDS
                 if build.cpu != _library.host_build().cpu
                 and _NATIVE.cpu_supports(build.cpu)]


@pytest.mark.skipif(not _OTHER_BUILDS, reason="this CPU runs one host build only")
@pytest.mark.parametrize("build", _OTHER_BUILDS, ids=lambda build: build.cpu)
def test_every_kernel_agrees_across_builds(build: dict[str, Any]) -> None:
    chosen = harness.host_library()
    other = _NATIVE.HostLibrary(str(_library.NATIVE_DIR / build.library))
    compared = 0
    for num_rows, num_segments, idx in _layouts():
        for kernel in _library.kernels().values():
            inputs = _inputs(kernel, idx, num_rows, num_segments)
            ours = _run(chosen, kernel, inputs, num_rows, num_segments)
            theirs = _run(other, kernel, inputs, num_rows, num_segments)
            tolerance = 1e-4 if kernel.dtype == "f32" else 1e-10
            for got, want in zip(theirs, ours):
                torch.testing.assert_close(got, want, rtol=tolerance, atol=tolerance,
                                           msg=lambda m: f"{kernel.name}, {num_rows} rows: {m}")
            compared += 1
    assert compared == 3 * len(_library.kernels())
