"""segops.segmented_sum (and its adjoint segmented_gather) against index_add."""

from __future__ import annotations

import pytest
import torch
from conftest import layout, reference_sum

import segops

LAYOUTS = {
    "empty_head_middle_tail": [0, 0, 3, 0, 5, 1, 0, 0],
    "one_segment": [257],
    "one_row_per_segment": [1] * 300,
    "thousand_tiny": [1, 2, 0, 3] * 250,
    "skewed": [1, 5000, 2, 0, 1, 900, 1],
    "all_empty": [0, 0, 0, 0],
    "single_row": [1],
}


def _random_counts(seed: int) -> list[int]:
    generator = torch.Generator().manual_seed(seed)
    num_segments = int(torch.randint(1, 400, (1,), generator=generator))
    counts = torch.randint(0, 40, (num_segments,), generator=generator)
    counts[torch.rand(num_segments, generator=generator) < 0.2] = 0
    return counts.tolist()


def _tolerance(dtype: torch.dtype) -> dict[str, float]:
    # Summation order differs from index_add_'s (lane-strided partial sums on
    # GPUs), so float32 results agree to a few ulps of the segment total.
    return (
        {"rtol": 1e-4, "atol": 1e-4} if dtype == torch.float32 else {"rtol": 1e-12, "atol": 1e-12}
    )


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("width", [1, 3])
@pytest.mark.parametrize("name", sorted(LAYOUTS))
def test_matches_index_add(device: str, dtype: torch.dtype, width: int, name: str) -> None:
    idx = layout(LAYOUTS[name], device)
    shape = (idx.shape[0],) if width == 1 else (idx.shape[0], 3)
    x = torch.randn(shape, dtype=dtype, device=device)
    num_segments = len(LAYOUTS[name])
    out = segops.segmented_sum(x, idx, num_segments)
    assert out.shape == (num_segments,) + shape[1:]
    assert out.dtype == dtype and out.device == x.device
    torch.testing.assert_close(out, reference_sum(x, idx, num_segments), **_tolerance(dtype))


@pytest.mark.parametrize("seed", range(6))
def test_random_layouts(device: str, seed: int) -> None:
    counts = _random_counts(seed)
    idx = layout(counts, device)
    x = torch.randn(idx.shape[0], 3, dtype=torch.float64, device=device)
    # Extra trailing segments that no row uses.
    num_segments = len(counts) + 3
    out = segops.segmented_sum(x, idx, num_segments)
    torch.testing.assert_close(out, reference_sum(x, idx, num_segments), rtol=1e-12, atol=1e-12)


def test_large_segment_float32_accuracy(device: str) -> None:
    idx = layout([200_000, 3, 100_000], device)
    x = torch.rand(idx.shape[0], 3, device=device)
    out = segops.segmented_sum(x, idx, 3)
    expected = reference_sum(x.double(), idx, 3)
    # Sequential float32 accumulation over 2e5 rows: relative error ~ n * eps
    # in the worst case, ~1e-5 observed; index_add_ does no better.
    torch.testing.assert_close(out.double(), expected, rtol=1e-4, atol=1e-3)


def test_zero_rows_and_zero_segments(device: str) -> None:
    idx = torch.zeros(0, dtype=torch.int32, device=device)
    x = torch.zeros(0, 3, device=device)
    assert segops.segmented_sum(x, idx, 0).shape == (0, 3)
    out = segops.segmented_sum(x, idx, 4)
    assert torch.equal(out, torch.zeros(4, 3, device=device))


def test_int64_index_and_non_contiguous_input(device: str) -> None:
    idx = layout([2, 0, 4, 1], device).long()
    wide = torch.randn(idx.shape[0], 6, dtype=torch.float64, device=device)
    x = wide[:, ::2]  # (N, 3), not contiguous
    assert not x.is_contiguous()
    out = segops.segmented_sum(x, idx, 4)
    torch.testing.assert_close(out, reference_sum(x, idx, 4))


def test_deterministic(device: str) -> None:
    idx = layout(_random_counts(7) * 20, device)
    x = torch.randn(idx.shape[0], 3, device=device)
    first = segops.segmented_sum(x, idx, int(idx.max()) + 1)
    for _ in range(3):
        assert torch.equal(segops.segmented_sum(x, idx, int(idx.max()) + 1), first)


def test_torch_ops_namespace_is_the_same_op() -> None:
    x = torch.randn(5)
    idx = layout([2, 3])
    assert torch.equal(torch.ops.segops.segmented_sum(x, idx, 2), segops.segmented_sum(x, idx, 2))


@pytest.mark.parametrize("width", [1, 3])
def test_gather_matches_indexing(device: str, width: int) -> None:
    idx = layout([2, 0, 3, 1], device)
    y = torch.randn((4,) if width == 1 else (4, 3), dtype=torch.float64, device=device)
    torch.testing.assert_close(segops.segmented_gather(y, idx), y[idx.long()])


# -- gradients ----------------------------------------------------------------


@pytest.mark.parametrize("width", [1, 3])
def test_gradcheck_and_gradgradcheck(width: int) -> None:
    idx = layout([2, 0, 3, 1, 0])
    shape = (idx.shape[0],) if width == 1 else (idx.shape[0], 3)
    x = torch.randn(shape, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda t: segops.segmented_sum(t, idx, 5), (x,))
    assert torch.autograd.gradgradcheck(lambda t: segops.segmented_sum(t, idx, 5), (x,))
    y = torch.randn((5,) + shape[1:], dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda t: segops.segmented_gather(t, idx), (y,))
    assert torch.autograd.gradgradcheck(lambda t: segops.segmented_gather(t, idx), (y,))


def test_backward_matches_reference() -> None:
    idx = layout([3, 0, 2])
    x = torch.randn(5, 3, dtype=torch.float64, requires_grad=True)
    grad_out = torch.randn(3, 3, dtype=torch.float64)
    (grad,) = torch.autograd.grad(segops.segmented_sum(x, idx, 3), x, grad_out)
    torch.testing.assert_close(grad, grad_out[idx.long()])


# -- torch.library and torch.compile -----------------------------------------


@pytest.mark.parametrize("width", [1, 3])
def test_opcheck(width: int) -> None:
    idx = layout([2, 0, 3])
    shape = (5,) if width == 1 else (5, 3)
    x = torch.randn(shape, dtype=torch.float64, requires_grad=True)
    torch.library.opcheck(torch.ops.segops.segmented_sum.default, (x, idx, 3))
    y = torch.randn((3,) + shape[1:], dtype=torch.float64, requires_grad=True)
    torch.library.opcheck(torch.ops.segops.segmented_gather.default, (y, idx, 3))


def test_compile_fullgraph_matches_eager() -> None:
    torch._dynamo.reset()
    idx = layout([4, 0, 2, 3])
    x = torch.randn(9, 3, requires_grad=True)

    def loss(t: torch.Tensor) -> torch.Tensor:
        return (segops.segmented_sum(t * 2.0, idx, 4) ** 2).sum()

    compiled = torch.compile(loss, fullgraph=True, backend="aot_eager")
    eager_value = loss(x)
    (eager_grad,) = torch.autograd.grad(eager_value, x)
    compiled_value = compiled(x)
    (compiled_grad,) = torch.autograd.grad(compiled_value, x)
    torch.testing.assert_close(compiled_value, eager_value)
    torch.testing.assert_close(compiled_grad, eager_grad)


# -- bad input ----------------------------------------------------------------


@pytest.mark.parametrize(
    "make_args, error, message",
    [
        (
            lambda: (torch.randn(4, dtype=torch.complex64), layout([4]), 1),
            TypeError,
            "x must be float32 or float64",
        ),
        (lambda: (torch.arange(4), layout([4]), 1), TypeError, "x must be float32 or float64"),
        (lambda: ([1.0, 2.0], layout([2]), 1), TypeError, "x must be a torch.Tensor"),
        (
            lambda: (torch.tensor(1.0), layout([1]), 1),
            ValueError,
            r"x must have shape \(N,\) or \(N, 3\)",
        ),
        (lambda: (torch.randn(4, 0), layout([4]), 1), ValueError, r"got \(4, 0\)"),
        (
            lambda: (torch.randn(4), layout([3]), 1),
            ValueError,
            "idx must have one entry per row of x",
        ),
        (lambda: (torch.randn(4), layout([4]).reshape(2, 2), 1), ValueError, "idx must be 1-D"),
        (lambda: (torch.randn(4), layout([4]).float(), 1), TypeError, "idx must be int32 or int64"),
        (
            lambda: (torch.randn(4), layout([4]), -1),
            ValueError,
            "num_segments must be non-negative",
        ),
        (lambda: (torch.randn(4), layout([4]), 2.0), TypeError, "num_segments must be an int"),
        (lambda: (torch.randn(4), layout([4]), True), TypeError, "num_segments must be an int"),
        (lambda: (torch.randn(4), layout([4]), 2**31), ValueError, "num_segments must fit int32"),
        (
            lambda: (torch.randn(4), layout([1, 3]), 1),
            ValueError,
            r"idx values must lie in \[0, num_segments\)",
        ),
        (
            lambda: (torch.randn(3), torch.tensor([0, -1, 0], dtype=torch.int32), 2),
            ValueError,
            "idx values must lie",
        ),
        (
            lambda: (torch.randn(3), torch.tensor([0, -1, 0], dtype=torch.int32), 2),
            ValueError,
            "idx value -1 at row 1 is negative",
        ),
        (
            lambda: (torch.randn(4), layout([1, 3]), 1),
            ValueError,
            "idx value 1 at row 1 is out of range for num_segments = 1",
        ),
        (
            lambda: (torch.randn(2), torch.tensor([0, 2**32], dtype=torch.int64), 2),
            ValueError,
            "idx value 4294967296 at row 1 is not representable as int32",
        ),
        (
            lambda: (torch.randn(2), torch.tensor([5, 2**31], dtype=torch.int64), 2),
            ValueError,
            "idx value 2147483648 at row 1 is not representable as int32",
        ),
        (
            lambda: (torch.randn(4), layout([4], "meta"), 1),
            ValueError,
            "all tensors must be on one device",
        ),
    ],
)
def test_bad_input(make_args, error: type, message: str) -> None:
    with pytest.raises(error, match=message):
        segops.segmented_sum(*make_args())


def test_bad_gather_input() -> None:
    with pytest.raises(ValueError, match=r"y must have shape \(S,\) or \(S, 3\)"):
        segops.segmented_gather(torch.randn(2, 0), layout([1, 1]))
    with pytest.raises(ValueError, match="idx values must lie"):
        segops.segmented_gather(torch.randn(2), layout([1, 1, 1]))


def test_kernels_stay_in_bounds_for_any_index() -> None:
    """The kernels themselves (validation bypassed) never read or write out of
    bounds, whatever idx holds; unsorted content gives unspecified values."""
    import harness

    x = torch.arange(1.0, 9.0, dtype=torch.float64)
    idx = torch.tensor([-5, 0, 0, 7, 2**31 - 1, 1, 1, -1], dtype=torch.int32)
    guard = torch.full((3,), 123.0, dtype=torch.float64)
    harness.run("segmented_sum_f64_w1", [x, idx], guard[:2], 8, 2)
    assert guard[2].item() == 123.0
    gathered = torch.full((9,), -7.0, dtype=torch.float64)
    harness.run("segmented_gather_f64_w1", [torch.tensor([10.0, 20.0], dtype=torch.float64), idx],
                gathered[:8], 8, 2)
    assert gathered[8].item() == -7.0


def test_rows_outside_the_segments_are_ignored_or_zero() -> None:
    """Sorted idx with values outside [0, S) at both ends: those rows add
    nothing to reductions and get 0 from row maps."""
    import harness

    idx = torch.tensor([-3, -1, 0, 0, 1, 2, 2], dtype=torch.int32)
    x = torch.arange(1.0, 8.0, dtype=torch.float64)
    out = torch.full((2,), -1.0, dtype=torch.float64)
    harness.run("segmented_sum_f64_w1", [x, idx], out, 7, 2)
    assert out.tolist() == [7.0, 5.0]
    gathered = torch.full((7,), -1.0, dtype=torch.float64)
    harness.run("segmented_gather_f64_w1", [torch.tensor([10.0, 20.0], dtype=torch.float64), idx],
                gathered, 7, 2)
    assert gathered.tolist() == [0.0, 0.0, 10.0, 10.0, 20.0, 0.0, 0.0]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_row_map_vectors_zero_invalid_lanes(dtype: torch.dtype) -> None:
    """Row maps run whole vectors of rows (4 f32 / 2 f64): vectors all in
    one segment, all outside [0, S), mixed, and the single rows after; lanes
    outside [0, S) store 0, the others their own segment's values. With
    S = 0 every row is 0 (y, empty, is never read)."""
    import harness

    idx = torch.tensor([-2, -2, -2, -2, 0, 0, 1, 5, 1, 1, 1, 1, 9, 9, 9, 9, 1, 1, 1],
                       dtype=torch.int32)
    n, num_segments = idx.numel(), 2
    generator = torch.Generator().manual_seed(5)
    v = torch.randn(n, 3, generator=generator, dtype=dtype)
    m = torch.randn(num_segments, 3, 3, generator=generator, dtype=dtype)
    valid = (idx >= 0) & (idx < num_segments)
    safe = torch.where(valid, idx, 0).long()
    name = "f32" if dtype == torch.float32 else "f64"
    out = torch.full((n, 3), -1.0, dtype=dtype)
    harness.run(f"segmented_matvec_{name}_w3", [v, m, idx], out, n, num_segments)
    expected = torch.einsum("nji,nj->ni", m[safe], v) * valid[:, None]  # m^T v
    torch.testing.assert_close(out, expected)
    gathered = torch.full((n, 3), -1.0, dtype=dtype)
    y = torch.randn(num_segments, 3, generator=generator, dtype=dtype)
    harness.run(f"segmented_gather_{name}_w3", [y, idx], gathered, n, num_segments)
    assert torch.equal(gathered, y[safe] * valid[:, None])
    nothing = torch.full((n, 3), -1.0, dtype=dtype)
    harness.run(f"segmented_gather_{name}_w3", [torch.empty(0, 3, dtype=dtype), idx.clamp(min=0)],
                nothing, n, 0)
    assert torch.equal(nothing, torch.zeros(n, 3, dtype=dtype))


def test_library_info() -> None:
    info = segops.library_info()
    for dtype in ("f32", "f64"):
        for width in (1, 3):
            assert f"segmented_sum_{dtype}_w{width}" in info["kernels"]
    assert set(info["ptx"]) == {"sm_80", "sm_90"}


def test_cuda_unavailable_is_a_clear_error() -> None:
    from segops._native import _segrt

    if _segrt.cuda_available():
        pytest.skip("a CUDA driver is present")
    assert "libcuda.so.1" in _segrt.cuda_unavailable_reason() or _segrt.cuda_unavailable_reason()
    with pytest.raises(RuntimeError, match="CUDA is unavailable"):
        _segrt.CudaModule(0, "")


@pytest.mark.parametrize("mean_length", [3, 200_000])
def test_row_maps_split_rows_evenly_across_threads(mean_length: int) -> None:
    """mul, matvec and gather only map rows: their host calls take row
    ranges, so one huge segment still spreads over every thread. Results
    equal the single-threaded run and the reference, rows outside every
    segment included."""
    n = 200_000
    generator = torch.Generator().manual_seed(mean_length)
    num_segments = max(1, n // mean_length)
    idx = torch.sort(torch.randint(0, num_segments, (n,), generator=generator)).values.int()
    x = torch.randn(n, 3, generator=generator)
    y = torch.randn(num_segments, generator=generator)
    m = torch.randn(num_segments, 3, 3, generator=generator)
    calls = {
        "mul": lambda: segops.segmented_mul(x, y, idx, num_segments),
        "matvec": lambda: segops.segmented_matvec(x, m, idx, num_segments),
        "gather": lambda: segops.segmented_gather(y, idx),
    }
    expected = {
        "mul": x * y[idx.long()][:, None],
        "matvec": torch.einsum("nij,ni->nj", m[idx.long()], x),
        "gather": y[idx.long()],
    }
    previous = torch.get_num_threads()
    try:
        for name, call in calls.items():
            torch.set_num_threads(1)
            single = call()
            torch.set_num_threads(3)
            threaded = call()
            assert torch.equal(single, threaded), name
            torch.testing.assert_close(threaded, expected[name], rtol=1e-5, atol=1e-5)
    finally:
        torch.set_num_threads(previous)


@pytest.mark.parametrize("mean_length", [3, 500, 200_000])
def test_threaded_cpu_results_do_not_depend_on_the_thread_count(mean_length: int) -> None:
    """Large inputs run across threads, each segment on one thread: results
    are bitwise identical to the single-threaded run."""
    n = 200_000
    generator = torch.Generator().manual_seed(mean_length)
    num_segments = max(1, n // mean_length)
    idx = torch.sort(torch.randint(0, num_segments, (n,), generator=generator)).values.int()
    x = torch.randn(n, 3, generator=generator)
    previous = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        single = segops.segmented_sum(x, idx, num_segments)
        torch.set_num_threads(3)
        threaded = segops.segmented_sum(x, idx, num_segments)
    finally:
        torch.set_num_threads(previous)
    assert torch.equal(single, threaded)
    torch.testing.assert_close(threaded, reference_sum(x, idx, num_segments), rtol=1e-4, atol=1e-3)


@pytest.mark.parametrize("mean_length", [1, 6, 14, 40])
def test_short_segments_storing_rows_across_threads(mean_length: int) -> None:
    """Passes storing rows run short segments as one 16-row block that reads
    and rewrites the rows after the segment (masked off): only rows of the
    call's own segments, so thread boundaries and the index-check blocks
    (2^17 rows) never see another thread's rows overwritten. The backward of
    rms_norm (two passes, the second storing rows) and of mean (one pass
    storing rows) on scalar float32 rows (the blocks are used where they
    store at most 4 vectors) against the reference, bitwise equal for 1, 2
    and 3 threads."""
    n = (1 << 18) + 77  # two check blocks per thread at two threads
    generator = torch.Generator().manual_seed(mean_length)
    num_segments = max(1, n // mean_length)
    idx = torch.sort(torch.randint(0, num_segments, (n,), generator=generator)).values.int()
    x = torch.randn(n, generator=generator, requires_grad=True)
    grad = torch.randn(num_segments, generator=generator)
    previous = torch.get_num_threads()
    results = []
    try:
        for threads in (1, 2, 3):
            torch.set_num_threads(threads)
            out = segops.segmented_rms_norm(x, idx, num_segments)
            (dx,) = torch.autograd.grad(out, x, grad)
            (dx_mean,) = torch.autograd.grad(segops.segmented_mean(x, idx, num_segments), x,
                                             grad)
            results.append((out.detach(), dx, dx_mean))
    finally:
        torch.set_num_threads(previous)
    for result in results[1:]:
        assert all(torch.equal(a, b) for a, b in zip(result, results[0]))
    x_ref = x.detach().clone().requires_grad_(True)
    squares = torch.zeros(num_segments).index_add_(0, idx.long(), x_ref * x_ref)
    counts = torch.bincount(idx.long(), minlength=num_segments).clamp(min=1)
    expected = (squares / counts).sqrt()
    (dx_ref,) = torch.autograd.grad(expected, x_ref, grad)
    torch.testing.assert_close(results[0][0], expected.detach())
    torch.testing.assert_close(results[0][1], dx_ref)
    torch.testing.assert_close(results[0][2], (grad / counts)[idx.long()])


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_long_segments_split_into_tiles(dtype: torch.dtype) -> None:
    """Segments of 2^17 rows or more are reduced in tiles spread over the
    threads (forward reductions): same values as the reference, bitwise the
    same for any thread count, next to short and empty segments."""
    counts = [10, 300_000, 5, 0, 200_000, 3, 131_072, 131_071]
    idx = layout(counts)
    n, num_segments = idx.shape[0], len(counts)
    generator = torch.Generator().manual_seed(11)
    x = torch.randn(n, 3, generator=generator, dtype=dtype)
    y = torch.randn(n, 3, generator=generator, dtype=dtype)
    count = torch.tensor(counts, dtype=dtype).clamp(min=1)
    sums = reference_sum(x, idx, num_segments)
    cases = {
        "sum": (lambda: segops.segmented_sum(x, idx, num_segments), sums),
        "mean": (lambda: segops.segmented_mean(x, idx, num_segments), sums / count[:, None]),
        "rms_norm": (lambda: segops.segmented_rms_norm(x, idx, num_segments),
                     torch.sqrt(reference_sum((x * x).sum(-1), idx, num_segments) / count)),
        "dot": (lambda: segops.segmented_dot(x, y, idx, num_segments),
                reference_sum((x * y).sum(-1), idx, num_segments)),
    }
    tolerance = {"rtol": 1e-4, "atol": 1e-2} if dtype == torch.float32 else {}
    previous = torch.get_num_threads()
    try:
        for name, (call, expected) in cases.items():
            results = []
            for threads in (1, 2, 3):
                torch.set_num_threads(threads)
                results.append(call())
            assert all(torch.equal(results[0], r) for r in results[1:]), name
            torch.testing.assert_close(results[0], expected, **tolerance)
    finally:
        torch.set_num_threads(previous)


def test_bad_index_in_a_long_segment_is_reported() -> None:
    idx = layout([5, 300_000, 7])
    idx[150_000] = 3  # out of range in the middle of the long segment
    x = torch.randn(idx.shape[0], 3)
    with pytest.raises(ValueError, match="at row 150000"):
        segops.segmented_sum(x, idx, 3)
