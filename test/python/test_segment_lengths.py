"""Every library op, dtype and derivative level at segment lengths on both
sides of every threshold where the host kernels change strategy, up to one
segment of 1e6 rows, against pure PyTorch (computed in float64). This is
where max/min once combined long segments' tiles by addition and f64 JIT
programs wrote f32-sized tile totals."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch
from segment_lengths import (
    GPU_THRESHOLDS,
    HOST_THRESHOLDS,
    assert_levels_close,
    derivative_levels,
    lengths_around,
    long_segment_index,
)

import segops

LENGTHS = lengths_around(HOST_THRESHOLDS)
# Third order at the sides of the tile split and the largest length.
THIRD_ORDER_LENGTHS = [1, (1 << 17) - 1, (1 << 18) + 1, 1_000_000]


def _sum(x: torch.Tensor, idx: torch.Tensor, s: int) -> torch.Tensor:
    return x.new_zeros((s,) + x.shape[1:]).index_add(0, idx.long(), x)


def _extreme(reduce: str) -> Callable[[torch.Tensor, torch.Tensor, int], torch.Tensor]:
    def reference(x: torch.Tensor, idx: torch.Tensor, s: int) -> torch.Tensor:
        index = idx.long().view(-1, *([1] * (x.dim() - 1))).expand_as(x)
        return x.new_zeros((s,) + x.shape[1:]).scatter_reduce(0, index, x, reduce,
                                                              include_self=False)
    return reference


def _mean(x: torch.Tensor, idx: torch.Tensor, s: int) -> torch.Tensor:
    count = _sum(torch.ones(x.shape[0], dtype=x.dtype), idx, s).clamp(min=1)
    return _sum(x, idx, s) / (count[:, None] if x.dim() == 2 else count)


def _rms_norm(x: torch.Tensor, idx: torch.Tensor, s: int) -> torch.Tensor:
    mean_square = _mean((x * x).sum(-1), idx, s)
    positive = mean_square > 0  # empty segments: 0, and a zero gradient
    return torch.where(positive, torch.sqrt(torch.where(positive, mean_square, 1.0)), 0.0)


# name -> (input shapes given N and S, segops call, reference).
OPS: dict[str, tuple[Callable[[int, int], list[tuple[int, ...]]], Callable, Callable]] = {
    "sum": (lambda n, s: [(n, 3)], lambda x, idx, s: segops.segmented_sum(x, idx, s), _sum),
    "mean": (lambda n, s: [(n,)], lambda x, idx, s: segops.segmented_mean(x, idx, s), _mean),
    "max": (lambda n, s: [(n, 3)], lambda x, idx, s: segops.segmented_max(x, idx, s),
            _extreme("amax")),
    "min": (lambda n, s: [(n,)], lambda x, idx, s: segops.segmented_min(x, idx, s),
            _extreme("amin")),
    "rms_norm": (lambda n, s: [(n, 3)], lambda x, idx, s: segops.segmented_rms_norm(x, idx, s),
                 _rms_norm),
    "dot": (lambda n, s: [(n, 3), (n, 3)],
            lambda x, y, idx, s: segops.segmented_dot(x, y, idx, s),
            lambda x, y, idx, s: _sum((x * y).sum(-1), idx, s)),
    "mul": (lambda n, s: [(n, 3), (s,)],
            lambda x, y, idx, s: segops.segmented_mul(x, y, idx, s),
            lambda x, y, idx, s: x * y[idx.long()][:, None]),
    "matvec": (lambda n, s: [(n, 3), (s, 3, 3)],
               lambda v, m, idx, s: segops.segmented_matvec(v, m, idx, s),
               lambda v, m, idx, s: torch.einsum("nij,ni->nj", m[idx.long()], v)),
    "gather": (lambda n, s: [(s, 3)], lambda y, idx, s: segops.segmented_gather(y, idx),
               lambda y, idx, s: y[idx.long()]),
}


def _check(op: str, dtype: torch.dtype, length: int, order: int) -> None:
    shapes, call, reference = OPS[op]
    idx, s = long_segment_index(length)
    n = idx.shape[0]
    generator = torch.Generator().manual_seed(length)
    inputs = [torch.randn(shape, dtype=torch.float64, generator=generator)
              for shape in shapes(n, s)]
    expected = derivative_levels(lambda *t: reference(*t, idx, s), inputs, order)
    actual = derivative_levels(lambda *t: call(*t, idx, s), [t.to(dtype) for t in inputs],
                               order)
    assert_levels_close(actual, expected, f"{op} {dtype} over a {length}-row segment")


@pytest.mark.parametrize("length", LENGTHS)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("op", sorted(OPS))
def test_ops_to_second_order_at_every_threshold(op: str, dtype: torch.dtype,
                                                length: int) -> None:
    _check(op, dtype, length, order=2)


@pytest.mark.parametrize("length", THIRD_ORDER_LENGTHS)
@pytest.mark.parametrize("op", ["max", "min", "rms_norm", "mean"])
def test_third_order_across_the_tile_split(op: str, length: int) -> None:
    _check(op, torch.float64, length, order=3)


@pytest.mark.parametrize("threads", [1, 2, 3])
@pytest.mark.parametrize("op", ["max", "min"])
def test_long_extremes_do_not_depend_on_threads(op: str, threads: int) -> None:
    """A 1e6-row segment's max/min and gradient: the same bits whatever
    the thread count (tiles combine in tile order)."""
    idx, s = long_segment_index(1_000_000)
    x = torch.randn(idx.shape[0], 3, generator=torch.Generator().manual_seed(5),
                    requires_grad=True)
    call = OPS[op][1]
    previous = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        value = call(x, idx, s)
        grad, = torch.autograd.grad(value.sum(), x)
        torch.set_num_threads(threads)
        again = call(x, idx, s)
        grad_again, = torch.autograd.grad(again.sum(), x)
    finally:
        torch.set_num_threads(previous)
    assert torch.equal(value, again) and torch.equal(grad, grad_again)


@pytest.mark.parametrize("op", ["max", "min"])
def test_long_extremes_propagate_nan_and_signed_zeros(op: str) -> None:
    """NaN in one tile of a long segment wins over the other tiles, as in a
    short one; an all-zero segment of mixed signs gives the kernels' zero."""
    idx, s = long_segment_index(1 << 18)
    x = torch.randn(idx.shape[0], dtype=torch.float64)
    x[200_000] = float("nan")
    call = OPS[op][1]
    assert torch.isnan(call(x, idx, s)[1])
    zeros = torch.zeros(idx.shape[0], dtype=torch.float64)
    zeros[3:3 + (1 << 17)] = -0.0
    short = torch.zeros(8, dtype=torch.float64)
    short[:4] = -0.0
    expected = call(short, torch.zeros(8, dtype=torch.int32), 1)[0]
    assert torch.equal(call(zeros, idx, s)[1].signbit(), expected.signbit())


# --------------------------------------------------------------------------
# segops.jit: one composite per kind of program the compiler builds.
# --------------------------------------------------------------------------


def _softmax_pool(x: torch.Tensor, q: torch.Tensor, idx: torch.Tensor, s: int) -> torch.Tensor:
    """Two passes (max, then sum of exp), a row value from both."""
    top = segops.segmented_max(q, idx, s)
    e = torch.exp(q - segops.segmented_gather(top, idx))
    w = e / segops.segmented_gather(segops.segmented_sum(e, idx, s), idx)
    return segops.segmented_sum(w[:, None] * x, idx, s)


def _centered_energy(x: torch.Tensor, q: torch.Tensor, idx: torch.Tensor, s: int) -> torch.Tensor:
    """A mean in pass one, a sum of squares of the centred rows in pass two."""
    d = x - segops.segmented_gather(segops.segmented_mean(x, idx, s), idx)
    return segops.segmented_sum(q * (d * d).sum(-1), idx, s)


def _squares(x: torch.Tensor, q: torch.Tensor, idx: torch.Tensor, s: int) -> torch.Tensor:
    """One pass, one sum (a one-pass program)."""
    return segops.segmented_sum(q * q, idx, s)


def _normalized_rows(x: torch.Tensor, q: torch.Tensor, idx: torch.Tensor,
                     s: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Row outputs from a segment's rms norm and min, and a segment dot."""
    r = segops.segmented_rms_norm(x, idx, s)
    low = segops.segmented_min(q, idx, s)
    rows = segops.segmented_mul(x, r, idx, s) + segops.segmented_gather(low, idx)[:, None]
    return rows, segops.segmented_dot(x, rows, idx, s)


JIT_COMPOSITES = {f.__name__.lstrip("_"): f for f in
                  (_softmax_pool, _centered_energy, _squares, _normalized_rows)}
JIT_LENGTHS = lengths_around(HOST_THRESHOLDS[2:])  # the host's thread and tile thresholds


@pytest.mark.parametrize("length", JIT_LENGTHS)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("composite", sorted(JIT_COMPOSITES))
def test_jit_to_second_order_at_every_threshold(composite: str, dtype: torch.dtype,
                                                length: int) -> None:
    fn = JIT_COMPOSITES[composite]
    jitted = segops.jit(fn)
    idx, s = long_segment_index(length)
    n = idx.shape[0]
    generator = torch.Generator().manual_seed(length)
    inputs = [torch.randn(n, 3, dtype=torch.float64, generator=generator),
              torch.randn(n, dtype=torch.float64, generator=generator)]

    def flat(result: torch.Tensor | tuple) -> torch.Tensor:
        # derivative_levels takes one value: the results concatenated.
        parts = result if isinstance(result, tuple) else (result,)
        return torch.cat([p.reshape(-1) for p in parts])

    # The reference: the composite in eager PyTorch over the library ops,
    # which the tests above check against pure PyTorch.
    expected = derivative_levels(lambda *t: flat(fn(*t, idx, s)), inputs, 2)
    actual = derivative_levels(lambda *t: flat(jitted(*t, idx, s)),
                               [t.to(dtype) for t in inputs], 2)
    assert_levels_close(actual, expected, f"jit {composite} {dtype} over {length} rows")


# --------------------------------------------------------------------------
# The GPU kernels on the simulator, against the host kernels.
# --------------------------------------------------------------------------

import harness  # noqa: E402

from segops import _gpusim, _library  # noqa: E402
from segops._dtypes import MANIFEST_DTYPES  # noqa: E402

SEGMENT_KERNELS = [k for k, info in _library.kernels().items()
                   if not info.host_rows and not k.endswith("_grad_grad_grad")]
SIMULATOR_LENGTHS = lengths_around(GPU_THRESHOLDS, largest=None)


def _kernel_buffers(name: str, length: int, seed: int) -> tuple[list[torch.Tensor],
                                                                  list[torch.Tensor], int, int]:
    entry = _library.kernel(name)
    dtype = MANIFEST_DTYPES[entry.dtype]
    idx, s = long_segment_index(length)
    n = idx.shape[0]
    generator = torch.Generator().manual_seed(seed)
    inputs, outputs = [], []
    for buffer in entry.buffers:
        shape = buffer.extents(n, s)
        if buffer.dtype == "i32":
            inputs.append(idx)
        elif buffer.is_output:
            outputs.append(torch.full(shape, float("nan"), dtype=dtype))
        else:
            inputs.append(torch.randn(shape, dtype=dtype, generator=generator))
    return harness.with_saved_results(entry, inputs, n, s), outputs, n, s


def _simulated_against_host(name: str, length: int) -> None:
    inputs, simulated, n, s = _kernel_buffers(name, length, length)
    host = [torch.empty_like(t) for t in simulated]
    harness.simulator().run(name, inputs, simulated, n, s)
    harness.run(name, inputs, host, n, s)
    f64 = simulated[0].dtype == torch.float64
    for index, (got, want) in enumerate(zip(simulated, host)):
        scale = max(float(want.abs().max()) if want.numel() else 0.0, 1.0)
        torch.testing.assert_close(got, want, rtol=1e-9 if f64 else 2e-4,
                                   atol=(1e-9 if f64 else 2e-4) * scale,
                                   msg=lambda m: f"{name}, {length} rows, output {index}: {m}")


# Long segments (up to 1e6 rows) at every threshold: minutes in all.
pytestmark = pytest.mark.slow

needs_simulator = pytest.mark.skipif(not _gpusim.LIBRARY_PATH.exists(),
                                     reason="libsegops_gpusim.so not built (no compiler)")


@needs_simulator
@pytest.mark.parametrize("name", SEGMENT_KERNELS)
def test_gpu_kernels_at_every_gpu_threshold(name: str) -> None:
    for length in SIMULATOR_LENGTHS:
        _simulated_against_host(name, length)


@needs_simulator
@pytest.mark.parametrize("name", [k for k in SEGMENT_KERNELS if "_w1" in k])
def test_gpu_kernels_over_a_million_row_segment(name: str) -> None:
    _simulated_against_host(name, 1_000_000)
