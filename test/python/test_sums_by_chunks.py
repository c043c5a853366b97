"""Sums by an unsorted index (a scatter by senders, the adjoint of a gather
by them) run by chunks where the segments' table fits in cache: the rows in
a fixed number of chunks, each added in row order into a table of its own,
the tables added in chunk order. Both sides of every threshold (the table's
size, one chunk or several, the chunk cap), each dtype and width, against
index_add_ in float64; bitwise the same on any number of threads; no sort
(the transposed order is for the other reductions)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import pytest
import torch
from torch import Tensor

import segops
from segops import ops

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")

# python/src/scatter_sum.cpp's thresholds.
MAX_TABLE_BYTES = 1 << 23
MIN_CHUNK_ROWS = 16384
MAX_CHUNKS = 16


@contextmanager
def threads(count: int) -> Iterator[None]:
    previous = torch.get_num_threads()
    torch.set_num_threads(count)
    try:
        yield
    finally:
        torch.set_num_threads(previous)


def reference(x: Tensor, idx: Tensor, num_segments: int) -> Tensor:
    out = torch.zeros((num_segments, *x.shape[1:]), dtype=torch.float64)
    return out.index_add_(0, idx.long(), x.double())


def case(rows: int, segments: int, width: int, dtype: torch.dtype, seed: int = 0,
         index_dtype: torch.dtype = torch.int32) -> tuple[Tensor, Tensor]:
    generator = torch.Generator().manual_seed(seed)
    shape = (rows,) if width == 1 else (rows, width)
    x = torch.randn(shape, generator=generator, dtype=dtype)
    idx = torch.randint(0, segments, (rows,), generator=generator).to(index_dtype)
    idx[:2] = torch.tensor([segments - 1, 0])  # unsorted whatever the draw
    return x, idx


def sums_and_sorts(x: Tensor, idx: Tensor, num_segments: int) -> tuple[list[Tensor], int]:
    """The sum on 1, 2 and 3 threads, and how many sorts it took."""
    segops.clear_index_cache()
    native = ops.native_kernels()
    sorts = native.index_sorts()
    results = []
    for count in (1, 2, 3):
        with threads(count):
            results.append(segops.segmented_sum(x, idx, num_segments))
    return results, native.index_sorts() - sorts


def check(x: Tensor, idx: Tensor, num_segments: int, by_chunks: bool) -> None:
    results, sorts = sums_and_sorts(x, idx, num_segments)
    assert sorts == (0 if by_chunks else 1)
    for result in results[1:]:
        assert torch.equal(result, results[0])
    tolerance = 1e-4 if x.dtype == torch.float32 else 1e-10
    torch.testing.assert_close(results[0].double(), reference(x, idx, num_segments),
                               rtol=tolerance, atol=tolerance * (idx.numel() / num_segments) ** 0.5)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("width", [1, 3, 5])
@pytest.mark.parametrize("rows,segments", [
    (1000, 10),                              # one chunk
    (2 * MIN_CHUNK_ROWS - 1, 10),            # one chunk, just
    (2 * MIN_CHUNK_ROWS, 10),                # two chunks
    (8 * 4 * 5000, 5000),                    # chunks of 4 S rows
    ((MAX_CHUNKS + 3) * MIN_CHUNK_ROWS, 7),  # the cap
])
def test_sums_by_chunks(rows: int, segments: int, width: int, dtype: torch.dtype) -> None:
    x, idx = case(rows, segments, width, dtype)
    check(x, idx, segments, by_chunks=True)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("width", [1, 3])
def test_the_table_size_threshold(width: int, dtype: torch.dtype) -> None:
    """A table of 1 MiB runs by chunks; one more segment, on the sorted rows."""
    item = torch.finfo(dtype).bits // 8
    fits = MAX_TABLE_BYTES // (width * item)
    for segments, by_chunks in ((fits, True), (fits + 1, False)):
        x, idx = case(3 * fits, segments, width, dtype, seed=segments)
        check(x, idx, segments, by_chunks)


@pytest.mark.slow
def test_a_million_rows_in_a_few_segments() -> None:
    x, idx = case(1_000_000, 3, 3, torch.float32, seed=1)
    check(x, idx, 3, by_chunks=True)


def test_an_int64_index() -> None:
    x, idx = case(100_000, 300, 3, torch.float64, index_dtype=torch.int64)
    check(x, idx, 300, by_chunks=True)


def test_the_adjoint_of_a_gather_by_senders_runs_by_chunks() -> None:
    """segmented_gather's backward is a sum by its unsorted index."""
    generator = torch.Generator().manual_seed(3)
    j = torch.randint(0, 40, (50_000,), generator=generator, dtype=torch.int32)
    y = torch.randn(40, 3, dtype=torch.float64, generator=generator, requires_grad=True)
    g = torch.randn(50_000, 3, dtype=torch.float64, generator=generator)
    segops.clear_index_cache()
    sorts = ops.native_kernels().index_sorts()
    grads = []
    for count in (1, 2):
        with threads(count):
            grads.append(torch.autograd.grad(segops.segmented_gather(y, j), y, g)[0])
    assert ops.native_kernels().index_sorts() == sorts
    assert torch.equal(grads[0], grads[1])
    torch.testing.assert_close(grads[0], reference(g, j, 40))
    small = torch.randint(0, 6, (30,), generator=generator, dtype=torch.int32)
    y_small = y[:6].detach().clone().requires_grad_()
    assert torch.autograd.gradcheck(lambda t: segops.segmented_gather(t, small), (y_small,))
    assert torch.autograd.gradgradcheck(lambda t: segops.segmented_gather(t, small),
                                        (y_small,))


def test_gradients_of_a_sum_by_an_unsorted_index() -> None:
    generator = torch.Generator().manual_seed(4)
    idx = torch.randint(0, 5, (40,), generator=generator, dtype=torch.int32)
    x = torch.randn(40, 3, dtype=torch.float64, generator=generator, requires_grad=True)
    assert torch.autograd.gradcheck(lambda t: segops.segmented_sum(t, idx, 5), (x,))
    assert torch.autograd.gradgradcheck(lambda t: segops.segmented_sum(t, idx, 5), (x,))


@pytest.mark.parametrize("index_dtype", [torch.int32, torch.int64])
def test_an_index_changed_in_place_is_checked_again(index_dtype: torch.dtype) -> None:
    """The index is remembered as unsorted and in range for its content: a
    value written out of range afterwards is an error, not a write outside
    the table."""
    x, idx = case(40_000, 100, 3, torch.float32, index_dtype=index_dtype)
    check(x, idx, 100, by_chunks=True)
    idx[123] = 100
    with pytest.raises((ValueError, IndexError, RuntimeError), match="range"):
        segops.segmented_sum(x, idx, 100)
    idx[123] = 99
    check(x, idx, 100, by_chunks=True)


def test_a_known_transposed_order_still_sums_by_chunks() -> None:
    """An index whose transposed order is cached (a segops.Graph made it)."""
    x, j = case(60_000, 500, 3, torch.float32, seed=7)
    i = torch.sort(torch.randint(0, 500, (60_000,), dtype=torch.int32)).values
    segops.clear_index_cache()
    segops.Graph(receivers=i, senders=j, num_nodes=500)
    sorts = ops.native_kernels().index_sorts()
    first = segops.segmented_sum(x, j, 500)
    with threads(1):
        assert torch.equal(segops.segmented_sum(x, j, 500), first)
    assert ops.native_kernels().index_sorts() == sorts
    # The same sums as by an index never seen (its sort would add the rows
    # of a segment in another grouping).
    assert torch.equal(segops.segmented_sum(x, j.clone(), 500), first)
    assert not torch.equal(segops.segmented_sum(x[torch.sort(j, stable=True).indices],
                                                torch.sort(j).values, 500), first)
    torch.testing.assert_close(first.double(), reference(x, j, 500), rtol=1e-4, atol=1e-4)
