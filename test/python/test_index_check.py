"""The native index check: first offending row, whatever the block and
thread split (blocks of 2048 rows, threads above 2^18 rows)."""

from __future__ import annotations

import harness
import pytest
import torch

import segops
from segops import _library

NUM_ROWS = (1 << 18) + 12345  # large enough for the threaded path


def _check(idx: torch.Tensor, num_segments: int, threads: int) -> tuple[str, int]:
    return _library.native_module().check_index(
        idx.data_ptr(), idx.dtype == torch.int64, idx.numel(), num_segments, threads)


def _sorted_index(num_rows: int, num_segments: int, dtype: torch.dtype) -> torch.Tensor:
    generator = torch.Generator().manual_seed(1)
    values = torch.randint(0, num_segments, (num_rows,), generator=generator)
    return torch.sort(values).values.to(dtype)


# Rows at block edges (2048k, 2048k - 1), at the two-thread split and the ends.
ROWS = [0, 1, 2047, 2048, 4095, NUM_ROWS // 2 - 1, NUM_ROWS // 2, NUM_ROWS // 2 + 1,
        NUM_ROWS - 1]


@pytest.mark.parametrize("dtype", [torch.int32, torch.int64])
@pytest.mark.parametrize("threads", [1, 2, 3])
def test_valid_index_passes(dtype: torch.dtype, threads: int) -> None:
    idx = _sorted_index(NUM_ROWS, 1000, dtype)
    assert _check(idx, 1000, threads) == ("", -1)


@pytest.mark.parametrize("dtype", [torch.int32, torch.int64])
@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("row", ROWS)
def test_out_of_range_row_is_found(dtype: torch.dtype, threads: int, row: int) -> None:
    idx = _sorted_index(NUM_ROWS, 1000, dtype)
    bad = idx.clone()
    bad[row] = -1
    assert _check(bad, 1000, threads) == ("range", row)
    bad = idx.clone()
    bad[row:] = 1000  # past the end (and still sorted)
    assert _check(bad, 1000, threads) == ("range", row)


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("row", [r for r in ROWS if r > 0])
def test_descent_is_found(threads: int, row: int) -> None:
    idx = _sorted_index(NUM_ROWS, 1000, torch.int32)
    idx = idx.clamp(min=1)  # so that every row can step down to a valid value
    idx[row] = idx[row - 1] - 1
    assert idx[row] < idx[row - 1]
    assert _check(idx, 1000, threads) == ("order", row)


def test_first_problem_wins_across_threads() -> None:
    idx = _sorted_index(NUM_ROWS, 1000, torch.int32)
    idx[NUM_ROWS - 10] = 5000  # out of range late, on the second thread
    idx[100] = idx[99] - 1 if idx[99] > 0 else idx[100]  # maybe a descent early
    idx[50] = -3  # out of range early, on the first thread
    assert _check(idx, 1000, 2) == ("range", 50)


def test_int64_beyond_int32_is_out_of_range() -> None:
    idx = _sorted_index(NUM_ROWS, 1000, torch.int64)
    idx[-1] = 2**32 + 5  # would wrap to 5 if truncated to int32
    assert _check(idx, 1000, 2) == ("range", NUM_ROWS - 1)


@pytest.mark.parametrize("dtype", [torch.int32, torch.int64])
def test_num_segments_beyond_the_index_width(dtype: torch.dtype) -> None:
    """S beyond int32 (or int64 max): every non-negative value is in range,
    negative ones are not (the check compares unsigned against a limit that
    must not wrap)."""
    idx = _sorted_index(NUM_ROWS, 1000, dtype)
    huge = 2**32 + 5 if dtype == torch.int32 else 2**63 - 1
    assert _check(idx, huge, 2) == ("", -1)
    idx[:7] = -2
    assert _check(idx, huge, 2) == ("range", 0)


@pytest.mark.parametrize("dtype", [torch.int32, torch.int64])
@pytest.mark.parametrize("rows", [[0], [(1 << 17) - 1], [1 << 17], [NUM_ROWS - 1],
                                  [NUM_ROWS - 5, 1 << 17], [NUM_ROWS // 2 + 3, 7]])
@pytest.mark.parametrize("problem", ["range", "order"])
def test_ops_report_the_first_bad_row(rows: list[int], problem: str, dtype: torch.dtype) -> None:
    """The C++ kernels check an int32 idx block by block (2^17 rows) while
    running, an int64 one as they narrow it (blocks of 2048 rows): the first
    value out of range in row order is reported, whatever block or thread
    sees it first. Descents are no error: the rows run in sorted order."""
    idx = _sorted_index(NUM_ROWS, 1000, dtype).clamp(min=1)
    for row in rows:
        if problem == "range":
            idx[row] = -1
        else:
            idx[row] = idx[row - 1] - 1 if row > 0 else idx[row]
    x = torch.randn(NUM_ROWS, 3)
    y = torch.randn(1000)
    order = torch.sort(idx, stable=True).indices
    previous = torch.get_num_threads()
    try:
        for threads in (1, 3):
            torch.set_num_threads(threads)
            if problem == "order":
                # A sum adds an unsorted index's rows by chunks
                # (test_sums_by_chunks.py): another grouping, rounded alike.
                torch.testing.assert_close(segops.segmented_sum(x, idx, 1000),
                                           segops.segmented_sum(x[order], idx[order], 1000),
                                           rtol=1e-5, atol=1e-4)
                assert torch.equal(segops.segmented_mean(x, idx, 1000),
                                   segops.segmented_mean(x[order], idx[order], 1000))
                assert torch.equal(segops.segmented_mul(x, y, idx, 1000),
                                   x * y[idx.long(), None])
                continue
            for op in (lambda: segops.segmented_sum(x, idx, 1000),
                       lambda: segops.segmented_mul(x, y, idx, 1000)):
                with pytest.raises(ValueError, match=f"at row {min(rows)} is negative"):
                    op()
    finally:
        torch.set_num_threads(previous)


def test_public_op_reports_the_row() -> None:
    idx = _sorted_index(NUM_ROWS, 1000, torch.int32)
    idx[NUM_ROWS // 2 + 7] = 1000
    idx[NUM_ROWS // 2 + 8:] = 1000
    x = torch.randn(NUM_ROWS, 3)
    with pytest.raises(ValueError, match=f"idx value 1000 at row {NUM_ROWS // 2 + 7} is out of "
                       "range for num_segments = 1000"):
        segops.segmented_sum(x, idx, 1000)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_row_maps_check_every_row_they_compute(dtype: torch.dtype) -> None:
    """mul, matvec and gather check idx inside their kernels (no separate
    pass): a value out of range, at any lane of a vector, in the single rows
    after, or across a thread boundary, raises; an intact index does not,
    and neither does one that descends (row maps take any order)."""
    n, num_segments = (1 << 16) + 13, 700  # threaded; a tail of single rows
    clean = _sorted_index(n, num_segments, torch.int32).clamp(1, num_segments - 2)
    generator = torch.Generator().manual_seed(3)
    x = torch.randn(n, 3, generator=generator, dtype=dtype)
    y = torch.randn(num_segments, generator=generator, dtype=dtype)
    m = torch.randn(num_segments, 3, 3, generator=generator, dtype=dtype)
    ops = {
        "mul": lambda idx: segops.segmented_mul(x, y, idx, num_segments),
        "matvec": lambda idx: segops.segmented_matvec(x, m, idx, num_segments),
        "gather": lambda idx: segops.segmented_gather(y, idx),
    }
    references = {
        "mul": lambda idx: x * y[idx.long(), None],
        "matvec": lambda idx: torch.einsum("nji,nj->ni", m[idx.long()], x),
        "gather": lambda idx: y[idx.long()],
    }
    rows = [1, 2, 3, 4, 5, 6, 7, 8, n // 2 - 1, n // 2, n // 2 + 1, n - 13, n - 2, n - 1]
    rows += torch.randint(1, n, (10,), generator=generator).tolist()
    previous = torch.get_num_threads()
    try:
        for threads in (1, 2):
            torch.set_num_threads(threads)
            for name, op in ops.items():
                op(clean)  # no error
                for i, row in enumerate(rows):
                    idx = clean.clone()
                    kind = ("low", "high", "descent")[i % 3]
                    if kind == "low":
                        idx[row] = -1
                    elif kind == "high":
                        idx[row] = num_segments
                    else:
                        idx[row:] = idx[row:].clamp(max=idx[row - 1].item())
                        idx[row] = idx[row - 1] - 1
                        torch.testing.assert_close(op(idx), references[name](idx))
                        continue
                    with pytest.raises(ValueError, match=rf"row {row}\b"):
                        op(idx)
    finally:
        torch.set_num_threads(previous)


@pytest.mark.parametrize("mean_length", [3, 40, 5000, 1 << 18])
def test_segment_kernels_check_every_row(mean_length: int) -> None:
    """Reductions check idx inside their kernels too (each segment's rows
    scanned 16 at a time, tiles of long segments checked whole), and the
    runtime checks that consecutive calls' rows meet: a value out of range
    anywhere (inside segments, at their edges, at thread and tile
    boundaries, in the last rows) raises with its row; an intact index does
    not; one below the row before it runs on its rows in stable sorted
    order (bitwise the results of the sorted rows)."""
    n = (1 << 19) + 29  # threaded; one-segment layouts are split into tiles
    num_segments = max(1, n // mean_length)
    generator = torch.Generator().manual_seed(mean_length)
    clean = torch.sort(torch.randint(0, num_segments, (n,), generator=generator)).values.int()
    x = torch.randn(n, 3, generator=generator)
    y = torch.randn(n, 3, generator=generator)
    # (op, its row inputs, whether unsorted rows run in sorted order): a sum
    # adds them by chunks where its table fits (test_sums_by_chunks.py).
    ops = [(lambda idx, x: segops.segmented_sum(x, idx, num_segments), [x], False),
           (lambda idx, x: segops.segmented_rms_norm(x, idx, num_segments), [x], True),
           (lambda idx, x, y: segops.segmented_dot(x, y, idx, num_segments), [x, y], True)]
    rows = [0, 1, 15, 16, 17, n // 2 - 1, n // 2, n // 2 + 1, 1 << 17, (1 << 17) + 1,
            (1 << 15) * 5, n - 17, n - 16, n - 2, n - 1]
    rows += torch.randint(1, n, (12,), generator=generator).tolist()
    previous = torch.get_num_threads()
    try:
        for threads in (1, 2, 3):
            torch.set_num_threads(threads)
            for op, inputs, sorts in ops:
                op(clean, *inputs)  # no error
                for i, row in enumerate(rows):
                    idx = clean.clone()
                    kind = ("low", "high", "descent")[i % 3] if row > 0 else "low"
                    if kind == "low":
                        idx[row] = -1
                    elif kind == "high":
                        idx[row] = num_segments
                    else:
                        value = int(idx[row - 1])
                        if value == 0:
                            idx[:row] += 1  # room below the row before
                            idx.clamp_(max=num_segments - 1)
                            value = int(idx[row - 1])
                        idx[row:] = idx[row:].clamp(max=value)
                        idx[row] = value - 1
                        order = torch.sort(idx, stable=True).indices
                        # Bitwise those of the sorted rows (y too, for dot).
                        expected = op(idx[order], *(t[order] for t in inputs))
                        if sorts:
                            assert torch.equal(op(idx, *inputs), expected)
                        else:
                            # float32 sums of up to n rows, in other groupings
                            torch.testing.assert_close(op(idx, *inputs), expected,
                                                       rtol=1e-4, atol=2e-5 * n**0.5)
                        continue
                    with pytest.raises(ValueError, match=rf"row {row}\b"):
                        op(idx, *inputs)
    finally:
        torch.set_num_threads(previous)


@pytest.mark.parametrize("mean_length", [1, 3, 40, 5000, 1 << 17, 1 << 20])
def test_valid_indices_are_never_checked_twice(mean_length: int) -> None:
    """The kernels' own checks and the runtime's (calls' rows meet, tiles
    hold their segment) accept every valid index, so the full check that
    finds the first bad row never runs for one, whatever the layout and the
    thread count (it would cost a second pass over idx)."""
    n = (1 << 20) + 3
    num_segments = max(1, n // mean_length)
    generator = torch.Generator().manual_seed(mean_length)
    idx = torch.sort(torch.randint(0, num_segments, (n,), generator=generator)).values.int()
    x = torch.randn(n, generator=generator)
    from segops._native import _torchops  # type: ignore[attr-defined]

    native = _torchops
    before = native.index_rechecks()
    previous = torch.get_num_threads()
    try:
        for threads in (1, 2, 3):
            torch.set_num_threads(threads)
            segops.segmented_sum(x, idx, num_segments)
            segops.segmented_mean(x.view(-1, 1).expand(n, 3).contiguous(), idx, num_segments)
            segops.segmented_mul(x, torch.randn(num_segments, generator=generator), idx,
                                 num_segments)
            segops.segmented_sum(x, idx, num_segments + 5)  # empty segments at the end
    finally:
        torch.set_num_threads(previous)
    assert native.index_rechecks() == before
    bad = idx.clone()
    bad[n // 3] = -1
    with pytest.raises(ValueError):
        segops.segmented_sum(x, bad, num_segments)
    assert native.index_rechecks() == before + 1


@pytest.mark.parametrize("threads", [1, 2])
def test_int64_index_gives_the_int32_results(threads: int) -> None:
    """An int64 idx is narrowed to int32 (and checked) in one threaded pass
    before the kernels run: the same results, forward and backward."""
    idx = _sorted_index(NUM_ROWS, 1000, torch.int64)
    x = torch.randn(NUM_ROWS, 3, requires_grad=True)
    w = torch.randn(1000, requires_grad=True)
    previous = torch.get_num_threads()
    try:
        torch.set_num_threads(threads)
        results = []
        for index in (idx.to(torch.int32), idx):
            out = segops.segmented_mul(x, w, index, 1000).sum() + segops.segmented_rms_norm(
                x, index, 1000).sum()
            results.append([out.detach(), *torch.autograd.grad(out, (x, w))])
    finally:
        torch.set_num_threads(previous)
    for int32_result, int64_result in zip(*results):
        assert torch.equal(int32_result, int64_result)


def test_int64_values_beyond_int32_never_wrap() -> None:
    """Derivative ops check idx's range too: an int64 value beyond int32
    (2^32 + 1 would wrap to 1) is named, never taken for another segment."""
    idx = torch.tensor([0, 0, 1, 2**32 + 1, 2**33], dtype=torch.int64)
    x = torch.randn(5, 3)
    grad = torch.ones(2, 3)
    with pytest.raises(ValueError, match="idx value 4294967297 at row 3 is not representable "
                       "as int32"):
        torch.ops.segops.segmented_sum_grad(x, grad, idx, 2)


@pytest.mark.parametrize("num_segments", [2**31 - 1, 2**40])
def test_segment_kernels_at_the_top_of_the_int32_range(num_segments: int) -> None:
    """Segment kernels compare idx blocks in i32 against the segment and the
    next one, which must fit: the last segments below INT32_MAX still get
    their rows (S beyond INT32_MAX is clamped: no row can hold such a
    segment, and none is walked). The output pointer is offset so that
    segment 2^31 - 4 lands on a small buffer's first element."""
    first = 2**31 - 4
    idx = torch.tensor([first, first + 1, first + 1, first + 2, first + 2, first + 2],
                       dtype=torch.int32)
    x = torch.arange(1.0, 7.0, dtype=torch.float32)
    out = torch.full((5,), float("nan"), dtype=torch.float32)
    name = "segmented_sum_f32_w1"
    assert [b.name for b in _library.kernel(name).buffers] == ["arg0", "idx", "result0"]
    library = harness.host_library()
    pointers = [x.data_ptr(), idx.data_ptr(), out.data_ptr() - first * out.element_size()]
    library.call(name, pointers, 6, num_segments, first, first + 5)
    assert out[:3].tolist() == [1.0, 5.0, 15.0]
    assert out[3:].isnan().all(), "segments from INT32_MAX on must not be walked"
