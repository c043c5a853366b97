"""segops.jit and segops.fusion on every device, against eager PyTorch.

These tests also run on the GPU machine, which has no compiler: there the
programs come from a compiler bundle (segops._bundle) recorded here by
running this file (`make device-bundle`), and `scripts/device-check.sh
correctness` runs it with SEGOPS_COMPILER_BUNDLE set. Keep what they trace
independent of the device, so that the programs are the same there.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import harness
import pytest
import torch

import segops
import segops.fusion as fusion
from segops import _extensions


def _has_compiler() -> bool:
    try:
        _extensions.segc()
    except RuntimeError:
        return False
    return True


pytestmark = [pytest.mark.compiler,
              pytest.mark.skipif(not _has_compiler(),
                                 reason="needs the compiler module or a compiler bundle")]

COUNTS = [3, 0, 2, 5, 2, 4, 1, 9]  # an empty segment included


def make_index(device: str, dtype: torch.dtype = torch.int32) -> torch.Tensor:
    return torch.repeat_interleave(torch.arange(len(COUNTS)), torch.tensor(COUNTS)).to(
        device=device, dtype=dtype)


def rows(device: str, *tail: int, seed: int = 0,
         dtype: torch.dtype = torch.float64) -> torch.Tensor:
    generator = torch.Generator().manual_seed(seed)
    x = torch.randn(sum(COUNTS), *tail, dtype=dtype, generator=generator)
    return x.to(device).requires_grad_(True)


def centered_energy(x, q, idx, num_segments: int):
    d = x - segops.segmented_gather(segops.segmented_mean(x, idx, num_segments), idx)
    return segops.segmented_sum(q * (d * d).sum(-1), idx, num_segments)


def softmax_pool(score, v, temperature, idx, num_segments: int):
    """Attention pooling: a per-segment softmax of score / temperature (a
    learnable 0-d parameter) weighting the rows of v."""
    scaled = score / temperature
    peak = segops.segmented_gather(segops.segmented_max(scaled, idx, num_segments), idx)
    weight = torch.exp(scaled - peak)
    total = segops.segmented_gather(segops.segmented_sum(weight, idx, num_segments), idx)
    return segops.segmented_sum((weight / total)[:, None] * v, idx, num_segments)


def assert_close(actual, expected, tolerance: float = 1e-10) -> None:
    for a, e in zip(actual, expected):
        torch.testing.assert_close(a, e, rtol=tolerance, atol=tolerance)


@pytest.mark.parametrize("index_dtype", [torch.int32, torch.int64])
def test_jit_composite_to_second_order(device: str, index_dtype: torch.dtype) -> None:
    idx, s = make_index(device, index_dtype), len(COUNTS)
    x, q = rows(device, 3), rows(device, seed=1)
    compiled = segops.jit(centered_energy)

    def derivatives(fn):
        energy = fn(x, q, idx, s)
        gx, gq = torch.autograd.grad(energy.square().sum(), [x, q], create_graph=True)
        (ggx,) = torch.autograd.grad(gx.square().sum() + gq.sum(), [x])
        return energy, gx, gq, ggx

    assert_close(derivatives(compiled), derivatives(centered_energy))


def test_jit_softmax_pool_with_a_learnable_temperature(device: str) -> None:
    """float32: GPU kernels have exp in f32 only (no libdevice)."""
    idx, s = make_index(device), len(COUNTS)
    score, v = rows(device, seed=2, dtype=torch.float32), rows(device, 3, seed=3,
                                                               dtype=torch.float32)
    temperature = torch.tensor(0.7, device=device, requires_grad=True)
    compiled = segops.jit(softmax_pool)

    def value_and_grads(fn):
        pooled = fn(score, v, temperature, idx, s)
        return (pooled, *torch.autograd.grad(pooled.square().sum(), [score, v, temperature]))

    assert_close(value_and_grads(compiled), value_and_grads(softmax_pool), tolerance=1e-5)


def test_wide_rows_library_ops_and_jit(device: str) -> None:
    """Rows of 16 features: the library ops' run-time compiled widths
    (segops._wide) and a segops.jit softmax over them with a learnable
    attention vector, to first order. float32 (GPU exp)."""
    idx, s = make_index(device), len(COUNTS)
    h = rows(device, 16, seed=4, dtype=torch.float32)
    attention = (0.2 * rows(device, seed=5, dtype=torch.float32)[:16]).detach()
    attention.requires_grad_(True)

    def readout(h, attention, idx, num_segments):
        score = (h * attention).sum(-1)
        peak = segops.segmented_gather(segops.segmented_max(score, idx, num_segments), idx)
        weight = torch.exp(score - peak)
        total = segops.segmented_gather(segops.segmented_sum(weight, idx, num_segments), idx)
        pooled = segops.segmented_sum(h * (weight / total)[:, None], idx, num_segments)
        return pooled + segops.segmented_mean(h, idx, num_segments)

    def reference(h, attention, idx, num_segments):
        score = (h * attention).sum(-1)
        index = idx.long()
        peak = score.new_zeros(num_segments).scatter_reduce(0, index, score, "amax",
                                                            include_self=False)[index]
        weight = torch.exp(score - peak)
        total = weight.new_zeros(num_segments).index_add(0, index, weight)[index]
        counts = torch.bincount(index, minlength=num_segments).clamp(min=1)[:, None]
        means = h.new_zeros(num_segments, 16).index_add(0, index, h) / counts
        return h.new_zeros(num_segments, 16).index_add(
            0, index, h * (weight / total)[:, None]) + means

    def value_and_grads(fn):
        out = fn(h, attention, idx, s)
        return (out, *torch.autograd.grad(out.square().sum(), [h, attention]))

    expected = value_and_grads(reference)
    assert_close(value_and_grads(segops.jit(readout)), expected, tolerance=1e-4)
    assert_close(value_and_grads(readout), expected, tolerance=1e-4)


def test_fusion_forward_and_backward(device: str, fresh_fusion_compilation: None) -> None:
    idx, s = make_index(device), len(COUNTS)
    x, q = rows(device, 3), rows(device, seed=1)
    compiled = torch.compile(centered_energy, options=fusion.options(strict=True))
    energy = compiled(x, q, idx, s)
    expected = centered_energy(x, q, idx, s)
    assert_close([energy, *torch.autograd.grad(energy.square().sum(), [x, q])],
                 [expected, *torch.autograd.grad(expected.square().sum(), [x, q])])
    assert [r.backward for r in fusion.reports()] == [False, True]


@pytest.mark.slow
@pytest.mark.simulator
@pytest.mark.skipif(bool(os.environ.get("SEGOPS_SIMULATE_GPU") or
                         os.environ.get("SEGOPS_COMPILER_BUNDLE")),
                    reason="already running so, or from a bundle (no simulator code in it)")
def test_again_with_the_gpu_kernels_on_the_simulator() -> None:
    """This file again with every program's GPU kernels (fused clusters
    included) run through the C++ CUDA launcher over the simulated driver."""
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", Path(__file__).name,
         "-k", "not on_the_simulator"],
        capture_output=True, text=True, timeout=600, cwd=Path(__file__).parent,
        env=dict(os.environ, SEGOPS_SIMULATE_GPU="1"))
    assert result.returncode == 0 and " passed" in result.stdout, (
        f"exit {result.returncode}\n{result.stdout[-4000:]}\n{result.stderr[-2000:]}")


@pytest.mark.skipif(not os.environ.get("SEGOPS_COMPILER_BUNDLE"),
                    reason="checks a compiler bundle (SEGOPS_COMPILER_BUNDLE)")
def test_the_bundle_has_gpu_code_for_every_program_run() -> None:
    """Run last: every level of every program the tests above ran has its
    PTX in the bundle (on the GPU machine the CUDA runs above need it; on
    the development machine this is what a dry run can check)."""
    assert harness.record_gpu_code(["sm_90"]) > 0
