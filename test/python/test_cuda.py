"""CUDA-only behaviour: streams, graphs, determinism, memory safety for any
idx, and the debug switch. Skipped where no GPU is present (run by
scripts/device-check.sh on a GPU machine)."""

from __future__ import annotations

import pytest
import torch
from conftest import layout, reference_sum

import segops

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")


def test_bitwise_deterministic_on_skewed_layout() -> None:
    counts = [1_000_000, 1, 0, 3, 250_000] + [1] * 10_000
    idx = layout(counts, "cuda")
    x = torch.randn(idx.shape[0], 3, device="cuda")
    first = segops.segmented_sum(x, idx, len(counts))
    for _ in range(5):
        assert torch.equal(segops.segmented_sum(x, idx, len(counts)), first)
    expected = reference_sum(x.double(), idx, len(counts))
    torch.testing.assert_close(first.double(), expected, rtol=1e-4, atol=1e-2)


def test_garbage_index_never_writes_out_of_bounds() -> None:
    import harness

    generator = torch.Generator(device="cuda").manual_seed(0)
    n = 100_000
    idx = torch.randint(-2**31, 2**31 - 1, (n,), device="cuda", generator=generator,
                        dtype=torch.int64).to(torch.int32)
    idx[::7] = torch.randint(0, 50, (len(range(0, n, 7)),), device="cuda", dtype=torch.int32)
    x = torch.randn(n, 3, device="cuda")
    guard = torch.full((51, 3), 7.0, device="cuda")
    harness.run("segmented_sum_f32_w3", [x, idx], guard[:50], n, 50)
    y = torch.randn(50, 3, device="cuda")
    gathered = torch.full((n + 1, 3), 7.0, device="cuda")
    harness.run("segmented_gather_f32_w3", [y, idx], gathered[:n], n, 50)
    torch.cuda.synchronize()
    assert torch.equal(guard[50], torch.full((3,), 7.0, device="cuda"))
    assert torch.equal(gathered[n], torch.full((3,), 7.0, device="cuda"))
    # Every row is written: with its segment's row, or 0 where idx is invalid.
    valid = (idx >= 0) & (idx < 50)
    assert torch.equal(gathered[:n][~valid], torch.zeros_like(gathered[:n][~valid]))
    assert torch.equal(gathered[:n][valid], y[idx[valid].long()])


def test_sorted_index_with_values_outside_the_segments() -> None:
    import harness

    idx = torch.tensor([-3, -1, 0, 0, 1, 2, 2], dtype=torch.int32, device="cuda")
    x = torch.arange(1.0, 8.0, dtype=torch.float64, device="cuda")
    out = torch.full((2,), -1.0, dtype=torch.float64, device="cuda")
    harness.run("segmented_sum_f64_w1", [x, idx], out, 7, 2)
    assert out.tolist() == [7.0, 5.0]


def test_int64_index_out_of_int32_is_ignored_not_wrapped() -> None:
    idx = torch.tensor([0, 1, 2**32 + 1], dtype=torch.int64, device="cuda")
    x = torch.tensor([1.0, 2.0, 100.0], device="cuda")
    out = segops.segmented_sum(x, idx, 2)
    assert out.tolist() == [1.0, 2.0]


def test_debug_switch_checks_index_on_cuda() -> None:
    idx = torch.tensor([1, 0], dtype=torch.int32, device="cuda")
    x = torch.ones(2, device="cuda")
    segops.segmented_sum(x, idx, 2)  # unchecked: no host sync, no error
    segops.set_debug_checks(True)
    try:
        with pytest.raises(ValueError, match="idx must be sorted"):
            segops.segmented_sum(x, idx, 2)
    finally:
        segops.set_debug_checks(False)


def test_runs_on_the_current_stream() -> None:
    idx = layout([50_000, 3, 70_000], "cuda")
    x = torch.randn(idx.shape[0], device="cuda", dtype=torch.float64)
    stream = torch.cuda.Stream()
    with torch.cuda.stream(stream):
        out = segops.segmented_sum(x, idx, 3)
        grad = segops.segmented_gather(out, idx)
    stream.synchronize()
    torch.testing.assert_close(out, reference_sum(x, idx, 3))
    torch.testing.assert_close(grad, out[idx.long()])


def test_cuda_graph_capture_and_replay() -> None:
    idx = layout([3, 0, 5, 2], "cuda")
    x = torch.randn(10, 3, device="cuda")
    segops.segmented_sum(x, idx, 4)  # load the module outside capture
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = segops.segmented_sum(x, idx, 4)
    x.copy_(torch.randn(10, 3, device="cuda"))
    graph.replay()
    torch.cuda.synchronize()
    torch.testing.assert_close(out, reference_sum(x, idx, 4))


def test_gradcheck_on_cuda() -> None:
    idx = layout([2, 0, 3], "cuda")
    x = torch.randn(5, 3, dtype=torch.float64, device="cuda", requires_grad=True)
    assert torch.autograd.gradcheck(lambda t: segops.segmented_sum(t, idx, 3), (x,))
    assert torch.autograd.gradgradcheck(lambda t: segops.segmented_sum(t, idx, 3), (x,))
