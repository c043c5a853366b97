"""bench/saved_results.py's programs (the first backward on the forward's
saved result, and max's and min's on the saved extremum and tie count)
compute the library's first backward, so that the study prices the right
kernels. On the CPU's host kernels; the study runs them on the simulator."""

from __future__ import annotations

import pytest
import torch

from bench import gpu_traffic, saved_results

pytestmark = pytest.mark.compiler  # run-time programs


@pytest.mark.parametrize("width", [1, 16])
@pytest.mark.parametrize("op", ["segmented_rms_norm", "segmented_max", "segmented_min"])
def test_study_programs_compute_the_library_gradient(op: str, width: int) -> None:
    idx, num_segments = gpu_traffic.segment_index(3000, 10)
    level = getattr(torch.ops.segops, op + "_grad")
    tensors = saved_results._arguments(op, "f64", width, idx, num_segments, ties=False)
    floats, (result, cotangent) = tensors[:-3], tensors[-2:]
    want = level(*floats, cotangent, idx, num_segments)
    program = saved_results.saved_results_program(op, "f64", width)
    (got,) = torch.ops.segops.jit_call(program, tensors, num_segments)
    torch.testing.assert_close(got, want, rtol=1e-12, atol=1e-12)
    if op == "segmented_rms_norm":
        return
    with_ties = saved_results._arguments(op, "f64", width, idx, num_segments, ties=True)
    with_ties[-1] = cotangent
    assert torch.equal(with_ties[-3], result)
    # Some segments' extrema are tied (rows repeated), so that the count
    # is not always 1.
    with_ties[0][1::7] = with_ties[0][0::7][: with_ties[0][1::7].shape[0]]
    with_ties[-3] = getattr(torch.ops.segops, op)(with_ties[0], idx, num_segments)
    hits = (with_ties[0] == with_ties[-3][idx.long()]).to(result.dtype)
    with_ties[-2] = hits.new_zeros(result.shape).index_add_(0, idx.long(), hits)
    assert (with_ties[-2] > 1).any()
    (got,) = torch.ops.segops.jit_call(saved_results.ties_program(op, "f64", width), with_ties,
                                       num_segments)
    torch.testing.assert_close(got, level(with_ties[0], cotangent, idx, num_segments),
                               rtol=1e-12, atol=1e-12)
