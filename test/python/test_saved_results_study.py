"""bench/saved_results.py's program (max's and min's first backward on the
saved extremum and tie count) computes the library's first backward (which
takes the saved extremum), so that the study prices the right kernel. On
the CPU's host kernels; the study runs it on the simulator."""

from __future__ import annotations

import pytest
import torch

from bench import gpu_traffic, saved_results

pytestmark = pytest.mark.compiler  # run-time programs


@pytest.mark.parametrize("width", [1, 16])
@pytest.mark.parametrize("op", ["segmented_max", "segmented_min"])
def test_study_program_computes_the_library_gradient(op: str, width: int) -> None:
    idx, num_segments = gpu_traffic.segment_index(3000, 10)
    level = getattr(torch.ops.segops, op + "_grad")
    tensors = saved_results._arguments(op, "f64", width, idx, num_segments)
    x, extremum, cotangent = tensors[0], tensors[-3], tensors[-1]
    # Some segments' extrema are tied (rows repeated), so that the count
    # is not always 1.
    x[1::7] = x[0::7][: x[1::7].shape[0]]
    tensors[-3] = extremum = getattr(torch.ops.segops, op)(x, idx, num_segments)
    hits = (x == extremum[idx.long()]).to(extremum.dtype)
    tensors[-2] = hits.new_zeros(extremum.shape).index_add_(0, idx.long(), hits)
    assert (tensors[-2] > 1).any()
    (got,) = torch.ops.segops.jit_call(saved_results.ties_program(op, "f64", width), tensors,
                                       num_segments)
    want = level(x, extremum, cotangent, idx, num_segments)
    torch.testing.assert_close(got, want, rtol=1e-12, atol=1e-12)
