"""Wide rows: every op over (N, F) and (N, *f) feature rows against PyTorch.

The op library ships rows of 1 and 3 features; other widths run the same
op's kernel function compiled at run time (segops._wide). Each width is a
static, unrolled kernel: F in WIDTHS covers the unrolled row code on both
sides of the host's row-vector threshold (9 components) and F = 130 past
any register file.
"""

from __future__ import annotations

import math
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from conftest import layout
from segment_lengths import assert_levels_close, derivative_levels

import segops
from segops import _gpusim

# 9 and 10: both sides of the host's row-vector threshold (rows of at most 9
# components run as vectors of rows; wider ones one row at a time).
pytestmark = pytest.mark.compiler  # widths other than 1 and 3 compile at run time

WIDTHS = [1, 2, 3, 5, 9, 10, 16, 64, 130]
TRAILING = [(4, 4), (2, 3, 5)]
# Empty segments in front, inside and at the end; long and short ones.
COUNTS = [0, 3, 1, 0, 17, 2, 0, 40, 5, 0]
TOL = {torch.float32: dict(rtol=2e-5, atol=2e-5), torch.float64: dict(rtol=1e-12, atol=1e-12)}


def _counts(idx: torch.Tensor, num_segments: int, like: torch.Tensor) -> torch.Tensor:
    return torch.bincount(idx.long(), minlength=num_segments).to(like.dtype)


def _flat(x: torch.Tensor) -> torch.Tensor:
    return x.reshape(x.shape[0], -1)


def ref_sum(x, idx, s):
    return x.new_zeros((s, *x.shape[1:])).index_add_(0, idx.long(), x)


def ref_mean(x, idx, s):
    c = _counts(idx, s, x).clamp(min=1).reshape(s, *([1] * (x.dim() - 1)))
    return ref_sum(x, idx, s) / c


def _ref_extreme(reduce: str):
    def ref(x, idx, s):
        out = x.new_zeros((s, *x.shape[1:]))
        index = idx.long().reshape(-1, *([1] * (x.dim() - 1))).expand_as(x)
        return out.scatter_reduce(0, index, x, reduce, include_self=False)
    return ref


def ref_gather(y, idx):
    return y[idx.long()]


def ref_mul(x, y, idx, s):
    return x * y[idx.long()].reshape(-1, *([1] * (x.dim() - 1)))


def ref_dot(x, y, idx, s):
    return x.new_zeros(s).index_add_(0, idx.long(), (_flat(x) * _flat(y)).sum(1))


def ref_rms_norm(x, idx, s):
    squares = x.new_zeros(s).index_add_(0, idx.long(), (_flat(x) ** 2).sum(1))
    return torch.sqrt(squares / _counts(idx, s, x).clamp(min=1))


REDUCTIONS = {
    "sum": (segops.segmented_sum, ref_sum),
    "mean": (segops.segmented_mean, ref_mean),
    "max": (segops.segmented_max, _ref_extreme("amax")),
    "min": (segops.segmented_min, _ref_extreme("amin")),
}


def _rows(shape: tuple[int, ...], dtype: torch.dtype, seed: int = 0) -> torch.Tensor:
    generator = torch.Generator().manual_seed(seed)
    return torch.randn(shape, generator=generator, dtype=dtype)


def _shapes() -> list[tuple[int, ...]]:
    return [(w,) for w in WIDTHS] + TRAILING


def _shape_id(shape: tuple[int, ...]) -> str:
    return "x".join(map(str, shape))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=["f32", "f64"])
@pytest.mark.parametrize("features", _shapes(), ids=_shape_id)
@pytest.mark.parametrize("op", sorted(REDUCTIONS))
def test_reductions_match_pytorch(op: str, features: tuple[int, ...], dtype: torch.dtype) -> None:
    idx = layout(COUNTS)
    s = len(COUNTS)
    x = _rows((idx.shape[0], *features), dtype)
    fn, ref = REDUCTIONS[op]
    out = fn(x, idx, s)
    assert out.shape == (s, *features) and out.dtype == dtype
    torch.testing.assert_close(out, ref(x, idx, s), **TOL[dtype])


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=["f32", "f64"])
@pytest.mark.parametrize("features", _shapes(), ids=_shape_id)
def test_row_ops_and_contractions_match_pytorch(features: tuple[int, ...],
                                                dtype: torch.dtype) -> None:
    idx = layout(COUNTS)
    s, n = len(COUNTS), idx.shape[0]
    x, y = _rows((n, *features), dtype, 1), _rows((n, *features), dtype, 2)
    scale, per_segment = _rows((s,), dtype, 3), _rows((s, *features), dtype, 4)
    tol = TOL[dtype]
    torch.testing.assert_close(segops.segmented_gather(per_segment, idx),
                               ref_gather(per_segment, idx), **tol)
    torch.testing.assert_close(segops.segmented_mul(x, scale, idx, s),
                               ref_mul(x, scale, idx, s), **tol)
    torch.testing.assert_close(segops.segmented_dot(x, y, idx, s), ref_dot(x, y, idx, s), **tol)
    torch.testing.assert_close(segops.segmented_rms_norm(x, idx, s),
                               ref_rms_norm(x, idx, s), **tol)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=["f32", "f64"])
@pytest.mark.parametrize("features", [64, 128])
def test_rows_at_an_odd_offset(features: int, dtype: torch.dtype) -> None:
    """Inputs starting one element into their storage, off the kernels'
    16-byte buffer alignment (segrt::abi::kBufferAlignment): the GPU
    kernels load and store a lane's features of these rows 2 or 4 at a
    time, so the runtime copies such inputs. Values and gradients as for
    aligned copies."""
    idx = layout(COUNTS)
    s, n = len(COUNTS), idx.shape[0]

    def odd(shape: tuple[int, ...], seed: int) -> torch.Tensor:
        flat = _rows((math.prod(shape) + 1,), dtype, seed)
        view = flat[1:].view(shape)
        assert view.data_ptr() % 16 != 0
        return view

    x, y, per_segment = odd((n, features), 1), odd((n, features), 2), odd((s, features), 3)
    tol = TOL[dtype]
    for name, (fn, ref) in REDUCTIONS.items():
        torch.testing.assert_close(fn(x, idx, s), ref(x.clone(), idx, s), **tol, msg=name)
    torch.testing.assert_close(segops.segmented_gather(per_segment, idx),
                               ref_gather(per_segment.clone(), idx), **tol)
    torch.testing.assert_close(segops.segmented_dot(x, y, idx, s),
                               ref_dot(x.clone(), y.clone(), idx, s), **tol)
    leaf = x.clone().requires_grad_(True)
    grad_out = odd((s, features), 4)
    segops.segmented_max(leaf, idx, s).backward(grad_out)
    expected = x.clone().requires_grad_(True)
    _ref_extreme("amax")(expected, idx, s).backward(grad_out.clone())
    torch.testing.assert_close(leaf.grad, expected.grad, **tol)


@pytest.mark.parametrize("index_dtype", [torch.int32, torch.int64])
def test_index_dtypes_and_unsorted_rows(index_dtype: torch.dtype) -> None:
    idx = layout(COUNTS).to(index_dtype)
    s = len(COUNTS)
    x = _rows((idx.shape[0], 16), torch.float64)
    for fn, ref in REDUCTIONS.values():
        torch.testing.assert_close(fn(x, idx, s), ref(x, idx, s))
    order = torch.randperm(idx.shape[0], generator=torch.Generator().manual_seed(5))
    for fn, ref in REDUCTIONS.values():
        torch.testing.assert_close(fn(x[order], idx[order], s), ref(x[order], idx[order], s))
    torch.testing.assert_close(segops.segmented_dot(x[order], x[order], idx[order], s),
                               ref_dot(x, x, idx, s))


def _check_every_op_to_second_order(features: tuple[int, ...],
                                    zero_first_row: bool = False) -> None:
    """gradcheck and gradgradcheck of all eight ops (matvec aside) on float64
    rows of `features`, with an empty segment (and, optionally, an all-zero
    first row: rms_norm at a zero)."""
    idx = layout([2, 0, 3, 1])
    s, n = 4, idx.shape[0]

    def leaf(shape, seed):
        return _rows(shape, torch.float64, seed).requires_grad_()

    x, y = leaf((n, *features), 1), leaf((n, *features), 2)
    scale, per_segment = leaf((s,), 3), leaf((s, *features), 4)
    if zero_first_row:
        x[0].detach().zero_()
    cases = [
        (lambda a: segops.segmented_sum(a, idx, s), (x,)),
        (lambda a: segops.segmented_mean(a, idx, s), (x,)),
        (lambda a: segops.segmented_max(a, idx, s), (x,)),
        (lambda a: segops.segmented_min(a, idx, s), (x,)),
        (lambda a: segops.segmented_gather(a, idx), (per_segment,)),
        (lambda a, b: segops.segmented_mul(a, b, idx, s), (x, scale)),
        (lambda a, b: segops.segmented_dot(a, b, idx, s), (x, y)),
        (lambda a: segops.segmented_rms_norm(a, idx, s), (x,)),
    ]
    for fn, inputs in cases:
        assert torch.autograd.gradcheck(fn, inputs)
        assert torch.autograd.gradgradcheck(fn, inputs)


# 5 and (2, 3): rows as vectors of rows; 10 and 16: one row at a time.
@pytest.mark.parametrize("features", [(2,), (5,), (2, 3), (10,), (16,)], ids=_shape_id)
def test_gradients_to_second_order(features: tuple[int, ...]) -> None:
    _check_every_op_to_second_order(features)


@pytest.mark.parametrize("features", [5, 16], ids=["vector-rows", "single-rows"])
def test_float32_derivative_levels_match_float64(features: int) -> None:
    """First, second and third derivative kernels of every op in float32,
    against the same derivatives in float64 (the reference levels, checked
    above by gradcheck), on both sides of the row-vector threshold."""
    idx = layout(COUNTS)
    s, n = len(COUNTS), idx.shape[0]
    # Rows of scale 0.2: segment results of order 1, so that sin's
    # derivatives do not amplify float32 rounding of large arguments.
    inputs64 = {"x": 0.2 * _rows((n, features), torch.float64, 1),
                "y": 0.2 * _rows((n, features), torch.float64, 2),
                "scale": _rows((s,), torch.float64, 3),
                "per_segment": _rows((s, features), torch.float64, 4)}
    cases = {
        "sum": (lambda t: segops.segmented_sum(t["x"], idx, s), ["x"]),
        "mean": (lambda t: segops.segmented_mean(t["x"], idx, s), ["x"]),
        "max": (lambda t: segops.segmented_max(t["x"], idx, s), ["x"]),
        "min": (lambda t: segops.segmented_min(t["x"], idx, s), ["x"]),
        # gather's gradient sums a segment's rows (up to ~40 here): scaled
        # by 1/8 (exactly, in both dtypes), so that the second and third
        # levels' sin does not take arguments of order 1e3, where float32
        # rounding of the argument alone is 1e-4 of the result's scale.
        "gather": (lambda t: 0.125 * segops.segmented_gather(t["per_segment"], idx),
                   ["per_segment"]),
        "mul": (lambda t: segops.segmented_mul(t["x"], t["scale"], idx, s), ["x", "scale"]),
        "dot": (lambda t: segops.segmented_dot(t["x"], t["y"], idx, s), ["x", "y"]),
        "rms_norm": (lambda t: segops.segmented_rms_norm(t["x"], idx, s), ["x"]),
    }

    def third_order(fn, names, dtype):
        leaves = {k: v.to(dtype).clone().requires_grad_(k in names)
                  for k, v in inputs64.items()}
        wrt = [leaves[k] for k in names]
        first = torch.autograd.grad(fn(leaves).sin().sum(), wrt, create_graph=True)
        second = torch.autograd.grad(sum(g.square().sum() for g in first), wrt,
                                     create_graph=True)
        third = torch.autograd.grad(sum(g.sin().sum() for g in second), wrt)
        return [t.double() for t in (*first, *second, *third)]

    for name, (fn, names) in cases.items():
        expected = third_order(fn, names, torch.float64)
        for actual, wanted in zip(third_order(fn, names, torch.float32), expected):
            # float32 rounding, relative to each derivative's magnitude.
            scale = float(wanted.abs().max().clamp(min=1.0))
            torch.testing.assert_close(actual, wanted, rtol=1e-3, atol=1e-4 * scale,
                                       msg=lambda m, name=name: f"{name}: {m}")


def test_third_order_of_a_wide_rms_norm() -> None:
    idx = layout([3, 2])
    x = _rows((5, 6), torch.float64).requires_grad_()
    ref_x = x.detach().clone().requires_grad_()

    def third(fn, a):
        (g,) = torch.autograd.grad(fn(a).pow(3).sum(), a, create_graph=True)
        (gg,) = torch.autograd.grad(g.pow(2).sum(), a, create_graph=True)
        (ggg,) = torch.autograd.grad(gg.sin().sum(), a)
        return ggg

    torch.testing.assert_close(third(lambda a: segops.segmented_rms_norm(a, idx, 2), x),
                               third(lambda a: ref_rms_norm(a, idx, 2), ref_x))


@pytest.mark.parametrize("op", ["segmented_sum", "segmented_mean", "segmented_max",
                                "segmented_min", "segmented_rms_norm", "segmented_gather",
                                "segmented_mul", "segmented_dot"])
def test_opcheck_wide(op: str) -> None:
    idx = layout([2, 0, 3])
    x = _rows((5, 7), torch.float64).requires_grad_()
    args = {
        "segmented_gather": (_rows((3, 7), torch.float64).requires_grad_(), idx, 3),
        "segmented_mul": (x, _rows((3,), torch.float64).requires_grad_(), idx, 3),
        "segmented_dot": (x, _rows((5, 7), torch.float64).requires_grad_(), idx, 3),
    }.get(op, (x, idx, 3))
    torch.library.opcheck(getattr(torch.ops.segops, op).default, args)


@pytest.mark.slow
@pytest.mark.parametrize("features,dtype", [(8, torch.float64), (16, torch.float64),
                                            (16, torch.float32)])
def test_one_segment_of_a_million_wide_rows(features: int, dtype: torch.dtype) -> None:
    """One segment of 1e6 rows: 8 and 16 f64 features hold one a lane (over
    8 and 16 lanes), 16 f32 features a pair a lane (over 8 lanes; the GPU
    kernels' vector loads, simulated in the cut below). References in f64;
    f32's tolerances are its rounding over 1e6 terms."""
    n = 1_000_000
    idx = torch.zeros(n, dtype=torch.int32)
    x = _rows((n, features), dtype)
    wide = x.double()

    def check(got: torch.Tensor, want: torch.Tensor, scale: float = 1.0) -> None:
        """f32 within its rounding over 1e6 terms of size ~`scale`."""
        assert got.dtype == dtype
        if dtype == torch.float64:
            torch.testing.assert_close(got, want)
        else:
            torch.testing.assert_close(got.double(), want, rtol=1e-4, atol=1e-2 * scale)

    check(segops.segmented_sum(x, idx, 1), wide.sum(0, keepdim=True))
    check(segops.segmented_max(x, idx, 1), wide.amax(0, keepdim=True))
    check(segops.segmented_mean(x, idx, 1), wide.mean(0, keepdim=True), 1 / n)
    # The backward levels over the long segment (split into tiles where a
    # level only adds).
    leaf = x.requires_grad_()
    for op in (segops.segmented_mean, segops.segmented_max, segops.segmented_rms_norm):
        (grad,) = torch.autograd.grad(op(leaf, idx, 1).sum(), leaf)
        reference = wide.clone().requires_grad_()
        expected_op = {segops.segmented_mean: lambda t: t.mean(0),
                       segops.segmented_max: lambda t: t.amax(0),
                       segops.segmented_rms_norm: lambda t: t.square().sum().div(n).sqrt()}[op]
        (expected,) = torch.autograd.grad(expected_op(reference).sum(), reference)
        check(grad, expected, 1 / n)


def test_readout_with_linear_compiles_fullgraph() -> None:
    torch.manual_seed(0)
    idx = layout([4, 0, 7, 3])
    h = torch.randn(14, 32)
    linear = torch.nn.Linear(32, 16)

    def readout(h: torch.Tensor) -> torch.Tensor:
        return segops.segmented_mean(torch.relu(linear(h)), idx, 4)

    compiled = torch.compile(readout, fullgraph=True)
    h1 = h.clone().requires_grad_()
    h2 = h.clone().requires_grad_()
    out = compiled(h1)
    expected = ref_mean(torch.relu(linear(h2)), idx, 4)
    torch.testing.assert_close(out, expected)
    out.square().sum().backward()
    expected.square().sum().backward()
    torch.testing.assert_close(h1.grad, h2.grad)


@pytest.mark.parametrize("shape, match", [
    ((5, 0), "F >= 1 features"),
    ((), "must have shape"),
])
def test_rows_without_features_are_rejected(shape: tuple[int, ...], match: str) -> None:
    idx = layout([5]) if shape else layout([])
    with pytest.raises(ValueError, match=match):
        segops.segmented_sum(torch.zeros(shape), idx, 1)


def test_dot_rejects_mismatched_trailing_shapes() -> None:
    idx = layout([2])
    with pytest.raises(ValueError, match="x and y must have the same shape"):
        segops.segmented_dot(torch.zeros(2, 2, 3), torch.zeros(2, 3, 2), idx, 1)


def test_matvec_stays_three_by_three() -> None:
    idx = layout([2])
    with pytest.raises(ValueError, match=r"v must have shape \(N, 3\)"):
        segops.segmented_matvec(torch.zeros(2, 4), torch.zeros(1, 3, 3), idx, 1)


def test_widths_compile_once_per_op_dtype_and_width() -> None:
    from segops import _wide

    idx = layout([2, 1])
    x = _rows((3, 11), torch.float32)
    segops.segmented_sum(x, idx, 2)
    first = _wide.program("segmented_sum", "f32", 11)
    segops.segmented_sum(x * 2, idx, 2)
    assert _wide.program("segmented_sum", "f32", 11) is first
    assert math.prod(x.shape[1:]) == 11


# --------------------------------------------------------------------------
# Rows too wide to unroll: blocks of at most WIDEST_UNROLLED features.
# --------------------------------------------------------------------------


def _blocks_cases(idx: torch.Tensor, s: int) -> dict:
    """Each op and its reference, as functions of the inputs' dict."""
    return {
        "sum": (lambda t: segops.segmented_sum(t["x"], idx, s),
                lambda t: ref_sum(t["x"], idx, s), ["x"]),
        "mean": (lambda t: segops.segmented_mean(t["x"], idx, s),
                 lambda t: ref_mean(t["x"], idx, s), ["x"]),
        "max": (lambda t: segops.segmented_max(t["x"], idx, s),
                lambda t: _ref_extreme("amax")(t["x"], idx, s), ["x"]),
        "min": (lambda t: segops.segmented_min(t["x"], idx, s),
                lambda t: _ref_extreme("amin")(t["x"], idx, s), ["x"]),
        "gather": (lambda t: segops.segmented_gather(t["per_segment"], idx),
                   lambda t: ref_gather(t["per_segment"], idx), ["per_segment"]),
        "mul": (lambda t: segops.segmented_mul(t["x"], t["scale"], idx, s),
                lambda t: ref_mul(t["x"], t["scale"], idx, s), ["x", "scale"]),
        "dot": (lambda t: segops.segmented_dot(t["x"], t["y"], idx, s),
                lambda t: ref_dot(t["x"], t["y"], idx, s), ["x", "y"]),
        "rms_norm": (lambda t: segops.segmented_rms_norm(t["x"], idx, s),
                     lambda t: ref_rms_norm(t["x"], idx, s), ["x"]),
    }


@pytest.fixture
def unroll_limit_of_8(monkeypatch: pytest.MonkeyPatch) -> None:
    """WIDEST_UNROLLED lowered to 8: the blocks' paths at widths that
    compile in a moment (the real limit's kernels take a minute per op)."""
    from segops import _columns

    monkeypatch.setattr(_columns, "WIDEST_UNROLLED", 8)


def test_block_widths_at_the_real_limit() -> None:
    from segops import _columns

    assert _columns.WIDEST_UNROLLED == 256
    widths = {f: _columns.block_width(torch.empty(2, f)) for f in (3, 37, 256, 257, 1000,
                                                                   1024, 4096)}
    assert widths == {3: None, 37: None, 256: None, 257: 129, 1000: 250, 1024: 256,
                      4096: 256}
    assert _columns.block_width(torch.empty(2)) is None


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=["f32", "f64"])
@pytest.mark.parametrize("features", [8, 9, 32])
def test_rows_on_both_sides_of_the_unrolling_limit(features: int, dtype: torch.dtype,
                                                   unroll_limit_of_8: None) -> None:
    """Every op and three derivative levels against PyTorch at the limit
    (8: unrolled), just past it (9: two blocks of 5, one padded column) and
    at four blocks (32: four of 8)."""
    idx = layout([3, 0, 5, 1])
    s, n = 4, idx.shape[0]
    # Rows scaled so that dot and rms_norm are of order 1 at any width.
    spread = features ** -0.5
    inputs = {"x": spread * _rows((n, features), dtype, 1),
              "y": spread * _rows((n, features), dtype, 2),
              "scale": _rows((s,), dtype, 3), "per_segment": _rows((s, features), dtype, 4)}

    def three_levels(fn, names, as_dtype=dtype):
        leaves = {k: v.to(as_dtype).requires_grad_(k in names) for k, v in inputs.items()}
        wrt = [leaves[k] for k in names]
        out = fn(leaves)
        first = torch.autograd.grad(out.sin().sum(), wrt, create_graph=True)
        second = torch.autograd.grad(sum(g.square().sum() for g in first), wrt,
                                     create_graph=True)
        third = torch.autograd.grad(sum(g.sin().sum() for g in second), wrt)
        return [out, *first, *second, *third]

    for name, (fn, ref, names) in _blocks_cases(idx, s).items():
        # The reference in float64, on the same (rounded) inputs.
        results = zip(three_levels(fn, names), three_levels(ref, names, torch.float64))
        for k, (got, want) in enumerate(results):
            got = got.double()
            # float32: rounding relative to each derivative's magnitude,
            # grown by each level past the first (k <= len(names)).
            scale = float(want.abs().max().clamp(min=1.0))
            first = k <= len(names)
            if dtype == torch.float64:
                rtol = 1e-12 if first else 1e-9
            else:
                rtol = 1e-4 if first else 1e-3
            torch.testing.assert_close(got, want, rtol=rtol, atol=rtol * scale / 10,
                                       msg=lambda m, name=name: f"{name}: {m}")


def test_blocks_gradcheck_past_the_unrolling_limit(unroll_limit_of_8: None) -> None:
    idx = layout([2, 0, 1])
    s, n = 3, idx.shape[0]
    inputs = {"x": _rows((n, 9), torch.float64, 1), "y": _rows((n, 9), torch.float64, 2),
              "scale": _rows((s,), torch.float64, 3),
              "per_segment": _rows((s, 9), torch.float64, 4)}
    for name, (fn, _, names) in _blocks_cases(idx, s).items():
        leaves = [inputs[k].clone().requires_grad_() for k in names]

        def call(*values, fn=fn, names=names):
            return fn({**inputs, **dict(zip(names, values))})

        assert torch.autograd.gradcheck(call, leaves), name
        assert torch.autograd.gradgradcheck(call, leaves), name


def test_very_wide_rows_compile_only_their_block_width() -> None:
    """4,096 features run as 16 blocks of 256: no kernel of 4,096 unrolled
    features is compiled (it took minutes), at any derivative level."""
    from segops import _wide

    # Other tests of this process may have compiled wide programs of their
    # own (test_feature_lanes' column blocks): only this test's count.
    compiled_before = set(_wide._PROGRAMS)
    idx = layout([2, 3])
    x = _rows((5, 4096), torch.float32, 1).requires_grad_()
    out = segops.segmented_max(x, idx, 2)
    torch.testing.assert_close(out, _ref_extreme("amax")(x, idx, 2))
    (g,) = torch.autograd.grad(out.square().sum(), x, create_graph=True)
    torch.autograd.grad(g.square().sum(), x)
    compiled = set(_wide._PROGRAMS) - compiled_before
    assert max((key[2] for key in compiled), default=0) <= 256, sorted(compiled)


def test_jit_traces_wide_rows_whole() -> None:
    """Inside segops.jit a reduction of 300 features is one kernel's (no
    blocks' copies in the traced function)."""
    idx = layout([2, 3])
    x = _rows((5, 300), torch.float64, 1)

    def pooled(x, idx, n):
        return segops.segmented_max(x * 2.0, idx, n)

    torch.testing.assert_close(segops.jit(pooled)(x, idx, 2), pooled(x, idx, 2))


# --------------------------------------------------------------------------
# segops.jit over wide rows.
# --------------------------------------------------------------------------


def softmax_aggregate(h, attention, idx, num_segments):
    """Attention-weighted aggregation of (N, F) features: per-row scores
    from a learnable (F,) vector, a segment softmax, weights times rows."""
    score = (h * attention).sum(-1)
    m = segops.segmented_max(score, idx, num_segments)
    e = torch.exp(score - segops.segmented_gather(m, idx))
    z = segops.segmented_gather(segops.segmented_sum(e, idx, num_segments), idx)
    return segops.segmented_sum(h * (e / z)[:, None], idx, num_segments)


def _softmax_reference(h, attention, idx, num_segments):
    score = (h * attention).sum(-1)
    m = _ref_extreme("amax")(score, idx, num_segments)
    e = torch.exp(score - m[idx.long()])
    z = ref_sum(e, idx, num_segments)[idx.long()]
    return ref_sum(h * (e / z)[:, None], idx, num_segments)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=["f32", "f64"])
def test_jit_softmax_aggregation_of_width_32_features(dtype: torch.dtype) -> None:
    idx = layout([5, 0, 9, 1, 3])
    h = _rows((18, 32), dtype, 1).requires_grad_()
    attention = (0.3 * _rows((32,), dtype, 2)).requires_grad_()
    ref_h = h.detach().clone().requires_grad_()
    ref_attention = attention.detach().clone().requires_grad_()
    out = segops.jit(softmax_aggregate)(h, attention, idx, 5)
    expected = _softmax_reference(ref_h, ref_attention, idx, 5)
    torch.testing.assert_close(out, expected, **TOL[dtype])
    weights = _rows((5, 32), dtype, 3)
    (out * weights).sum().backward()
    (expected * weights).sum().backward()
    torch.testing.assert_close(h.grad, ref_h.grad, **TOL[dtype])
    torch.testing.assert_close(attention.grad, ref_attention.grad, **TOL[dtype])


def _feature_energy(x, w, idx, num_segments):
    """A sum over each row's features (seg.component_sum) of a
    transcendental per feature, then by segments."""
    return segops.segmented_sum((torch.exp(-x * x) * w).sum(-1), idx, num_segments)


# 7 | 8: component sums as one vector reduction from 8 features; 9 | 10:
# rows as vectors of rows up to 9 components, one at a time above.
@pytest.mark.parametrize("features", [7, 8, 9, 10])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=["f32", "f64"])
def test_jit_feature_sums_on_both_sides_of_their_thresholds(features: int,
                                                           dtype: torch.dtype) -> None:
    """Values and three derivative levels against eager PyTorch."""
    idx = layout(COUNTS)
    s, n = len(COUNTS), idx.shape[0]
    inputs = [_rows((n, features), torch.float64, 1), _rows((n, features), torch.float64, 2)]
    fused = segops.jit(_feature_energy)
    expected = derivative_levels(
        lambda x, w: ref_sum((torch.exp(-x * x) * w).sum(-1), idx, s), inputs, 3)
    actual = derivative_levels(lambda x, w: fused(x, w, idx, s),
                               [t.to(dtype) for t in inputs], 3)
    assert_levels_close(actual, expected, f"feature sums of {features} in {dtype}")


def test_jit_wide_rows_second_order() -> None:
    idx = layout([3, 0, 2])
    h = _rows((5, 6), torch.float64, 1).requires_grad_()
    attention = _rows((6,), torch.float64, 2).requires_grad_()
    fn = segops.jit(softmax_aggregate)
    assert torch.autograd.gradcheck(lambda a, b: fn(a, b, idx, 3), (h, attention))
    assert torch.autograd.gradgradcheck(lambda a, b: fn(a, b, idx, 3), (h, attention))


def test_jit_broadcasts_columns_and_row_scalars_against_features() -> None:
    idx = layout([2, 3])

    @segops.jit
    def scaled_mean(h, w, idx, num_segments):
        return segops.segmented_mean(h * w.unsqueeze(-1) + h * 0.5, idx, num_segments)

    h, w = _rows((5, 20), torch.float64, 1), _rows((5,), torch.float64, 2)
    torch.testing.assert_close(scaled_mean(h, w, idx, 2),
                               ref_mean(h * w[:, None] + h * 0.5, idx, 2))


@pytest.mark.slow
@pytest.mark.long
@pytest.mark.simulator
@pytest.mark.skipif(not _gpusim.LIBRARY_PATH.exists(), reason="no simulator library (no compiler)")
def test_wide_rows_on_the_simulated_gpu_kernels() -> None:
    """A cut of this file with CPU tensors running the GPU kernels of the
    run-time compiled widths on the SIMT simulator (SEGOPS_SIMULATE_GPU=1):
    the warp and long-segment kernels over wide rows, forward, gradients to
    second order and segops.jit."""
    selection = ("reductions_match_pytorch and (5- or 16-f32 or 130-f64 or 2x3x5) or "
                 "row_ops and (16-f64 or 130-f32) or gradients or float32_derivative or "
                 "jit_softmax or million or odd_offset")
    env = dict(os.environ, SEGOPS_SIMULATE_GPU="1")
    result = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                             "test_wide.py", "-k", selection, "-m", "not simulator"],
                            capture_output=True, text=True, timeout=1200,
                            cwd=Path(__file__).parent, env=env)
    assert result.returncode == 0 and " passed" in result.stdout, (
        f"exit {result.returncode}\n{result.stdout[-4000:]}\n{result.stderr[-2000:]}")


def test_fusion_fuses_a_per_row_feature_maximum(fresh_fusion_compilation) -> None:
    import segops.fusion as fusion

    idx = layout([3, 0, 4])

    def spread(h, idx, num_segments):
        return segops.segmented_sum(h.amax(-1) - h.amin(-1), idx, num_segments)

    h = _rows((7, 12), torch.float64, 1).requires_grad_()
    compiled = torch.compile(spread, options=fusion.options(strict=True))
    out = compiled(h, idx, 3)
    expected = ref_sum(h.amax(-1) - h.amin(-1), idx, 3)
    torch.testing.assert_close(out, expected)
    torch.testing.assert_close(torch.autograd.grad(out.sum(), h),
                               torch.autograd.grad(expected.sum(), h))
    fused = [op for report in fusion.reports() for op in report.ops]
    assert any("amax" in op for op in fused) and any("amin" in op for op in fused), fused


def test_fusion_fuses_a_softmax_aggregation_of_wide_rows(fresh_fusion_compilation) -> None:
    import segops.fusion as fusion

    idx = layout([4, 0, 6, 2])
    h = _rows((12, 24), torch.float64, 1).requires_grad_()
    attention = _rows((24,), torch.float64, 2).requires_grad_()
    compiled = torch.compile(softmax_aggregate, options=fusion.options(strict=True))
    out = compiled(h, attention, idx, 4)
    ref_h = h.detach().clone().requires_grad_()
    ref_attention = attention.detach().clone().requires_grad_()
    expected = _softmax_reference(ref_h, ref_attention, idx, 4)
    torch.testing.assert_close(out, expected)
    torch.testing.assert_close(torch.autograd.grad(out.square().sum(), [h, attention]),
                               torch.autograd.grad(expected.square().sum(),
                                                   [ref_h, ref_attention]))
    fused = [op for report in fusion.reports() for op in report.ops]
    assert any("segmented_max" in op for op in fused), fusion.reports()


def test_jit_per_row_feature_max_and_min() -> None:
    idx = layout([3, 0, 4])

    def spread_softmax(h, idx, num_segments):
        spread = h.amax(-1) - h.amin(-1)
        e = torch.exp(h - h.amax(-1, keepdim=True))
        return segops.segmented_sum(e * spread[:, None], idx, num_segments)

    def reference(h):
        spread = h.amax(-1) - h.amin(-1)
        return ref_sum(torch.exp(h - h.amax(-1, keepdim=True)) * spread[:, None], idx, 3)

    fn = segops.jit(spread_softmax)
    h = _rows((7, 9), torch.float64).requires_grad_()
    torch.testing.assert_close(fn(h, idx, 3), reference(h))
    assert torch.autograd.gradcheck(lambda a: fn(a, idx, 3), (h,))
    assert torch.autograd.gradgradcheck(lambda a: fn(a, idx, 3), (h,))
    ties = torch.tensor([[1.0, 3.0, 3.0], [2.0, 2.0, 2.0]], dtype=torch.float64,
                        requires_grad=True)
    ref_ties = ties.detach().clone().requires_grad_()
    def row_max_sum(h, idx, num_segments):
        return segops.segmented_sum(h.amax(-1), idx, num_segments)

    (g,) = torch.autograd.grad(segops.jit(row_max_sum)(ties, layout([2]), 1).sum(), ties)
    (expected,) = torch.autograd.grad(ref_ties.amax(-1).sum(), ref_ties)
    torch.testing.assert_close(g, expected)


def test_widths_without_a_compiler_say_what_they_need(monkeypatch: pytest.MonkeyPatch) -> None:
    """The runtime wheel has no compiler: widths the op library does not ship
    raise an error saying so; the shipped ones still run."""
    from segops import _extensions

    def no_compiler() -> None:
        raise RuntimeError("run-time compilation needs segops' compiler module (_segc)")

    monkeypatch.setattr(_extensions, "segc", no_compiler)
    idx = layout([2, 1])
    with pytest.raises(RuntimeError, match="rows of 37 features need a kernel compiled at run "
                                           "time.*compiler module"):
        segops.segmented_sum(torch.zeros(3, 37), idx, 2)
    torch.testing.assert_close(segops.segmented_sum(torch.ones(3, 3), idx, 2),
                               torch.tensor([[2.0] * 3, [1.0] * 3]))


# --------------------------------------------------------------------------
# Without the compiler (the runtime wheel): rows by columns (segops._columns).
# --------------------------------------------------------------------------


@pytest.fixture
def no_compiler(monkeypatch: pytest.MonkeyPatch):
    """Widths run as the runtime wheel runs them: no run-time compilation."""
    from segops import _columns, _wide

    monkeypatch.setattr(_columns, "compiler_available", lambda: False)
    before = len(_wide.programs())
    yield
    assert len(_wide.programs()) == before, "a width was compiled"


@pytest.mark.parametrize("features", [(2,), (5,), (64,), (2, 3)], ids=_shape_id)
def test_columns_match_pytorch_without_a_compiler(features: tuple[int, ...],
                                                  no_compiler: None) -> None:
    idx = layout(COUNTS)
    s, n = len(COUNTS), idx.shape[0]
    x, y = _rows((n, *features), torch.float64, 1), _rows((n, *features), torch.float64, 2)
    scale, per_segment = _rows((s,), torch.float64, 3), _rows((s, *features), torch.float64, 4)
    for fn, ref in REDUCTIONS.values():
        torch.testing.assert_close(fn(x, idx, s), ref(x, idx, s))
    torch.testing.assert_close(segops.segmented_gather(per_segment, idx),
                               ref_gather(per_segment, idx))
    torch.testing.assert_close(segops.segmented_mul(x, scale, idx, s), ref_mul(x, scale, idx, s))
    torch.testing.assert_close(segops.segmented_dot(x, y, idx, s), ref_dot(x, y, idx, s))
    torch.testing.assert_close(segops.segmented_rms_norm(x, idx, s), ref_rms_norm(x, idx, s))
    order = torch.randperm(n, generator=torch.Generator().manual_seed(6))
    torch.testing.assert_close(segops.segmented_sum(x[order], idx[order], s), ref_sum(x, idx, s))


def test_columns_to_second_order_without_a_compiler(no_compiler: None) -> None:
    _check_every_op_to_second_order((2, 3), zero_first_row=True)
    idx = layout([2, 0, 3, 1])
    s, n = 4, idx.shape[0]
    zeros = torch.zeros(n, 4, dtype=torch.float64, requires_grad=True)
    (grad,) = torch.autograd.grad(segops.segmented_rms_norm(zeros, idx, s).sum(), zeros)
    assert torch.equal(grad, torch.zeros_like(grad))


def test_columns_check_the_index_without_a_compiler(no_compiler: None) -> None:
    idx = torch.tensor([0, 1, 2], dtype=torch.int32)  # 2 is not in [0, 2)
    with pytest.raises(ValueError, match="idx values must lie"):
        segops.segmented_sum(torch.zeros(3, 4), idx, 2)
    with pytest.raises(ValueError, match="x must have shape"):
        segops.segmented_sum(torch.zeros(3, 0), idx, 3)


def test_columns_compile_fullgraph_without_a_compiler(no_compiler: None) -> None:
    idx = layout([4, 0, 7, 3])
    h = _rows((14, 12), torch.float64, 1).requires_grad_()
    compiled = torch.compile(lambda h: segops.segmented_max(torch.tanh(h), idx, 4),
                             fullgraph=True)
    out = compiled(h)
    expected = _ref_extreme("amax")(torch.tanh(h), idx, 4)
    torch.testing.assert_close(out, expected)
    torch.testing.assert_close(torch.autograd.grad(out.sum(), h),
                               torch.autograd.grad(expected.sum(), h))
