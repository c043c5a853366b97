"""segops.jit with the inputs real models pass: learnable 0-d and
per-feature parameters, tensor constants, sizes that coincide, counts as
tensors, keyword arguments and defaults; numerically safe sigmoid and
powers; floats keyed by their bits."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import torch
from conftest import layout

import segops
from segops import JitError

pytestmark = pytest.mark.compiler

def _index(rows: int, segments: int, seed: int = 0) -> torch.Tensor:
    if rows == 0:
        return torch.zeros(0, dtype=torch.int32)
    generator = torch.Generator().manual_seed(seed)
    return torch.sort(torch.randint(0, segments, (rows,), generator=generator,
                                    dtype=torch.int32)).values


def _assert_same(got, want) -> None:
    got = got if isinstance(got, tuple) else (got,)
    want = want if isinstance(want, tuple) else (want,)
    assert len(got) == len(want)
    for a, b in zip(got, want):
        torch.testing.assert_close(a, b, equal_nan=True)


# --------------------------------------------------------------------------
# Uniform values: learnable 0-d and per-feature parameters, constants.
# --------------------------------------------------------------------------


def scaled_energy(x, eps, w, idx, n):
    """A 0-d eps, a per-feature w (3,), a constant built in the body."""
    c = torch.tensor([1.0, 2.0, 3.0], dtype=x.dtype)
    return segops.segmented_sum(((x * w * c).sum(-1) + eps) ** 2, idx, n)


def _parameters(dtype=torch.float64, rows=9, segments=3):
    generator = torch.Generator().manual_seed(1)
    x = torch.randn(rows, 3, dtype=dtype, generator=generator, requires_grad=True)
    eps = torch.tensor(0.3, dtype=dtype, requires_grad=True)
    w = torch.randn(3, dtype=dtype, generator=generator, requires_grad=True)
    return x, eps, w, _index(rows, segments), segments


@pytest.mark.parametrize("segments", [2, 3, 9])  # 3: as long as w; 9: as long as x
def test_parameters_match_eager_with_gradients(segments: int) -> None:
    x, eps, w, idx, n = _parameters(segments=segments)
    jitted = segops.jit(scaled_energy)
    _assert_same(jitted(x, eps, w, idx, n), scaled_energy(x, eps, w, idx, n))
    got = torch.autograd.grad(jitted(x, eps, w, idx, n).sum(), (x, eps, w))
    want = torch.autograd.grad(scaled_energy(x, eps, w, idx, n).sum(), (x, eps, w))
    _assert_same(tuple(got), tuple(want))


def test_parameters_gradcheck_and_gradgradcheck() -> None:
    x, eps, w, idx, n = _parameters()
    jitted = segops.jit(scaled_energy)

    def call(*tensors):
        return jitted(*tensors, idx, n)

    assert torch.autograd.gradcheck(call, (x, eps, w))
    assert torch.autograd.gradgradcheck(call, (x, eps, w))


def test_parameters_third_order() -> None:
    """A parameter's gradient is a reduction over segments: it
    differentiates to any order like the rest."""
    x, eps, w, idx, n = _parameters()
    jitted = segops.jit(scaled_energy)

    def third(fn):
        energy = fn(x, eps, w, idx, n).sum()
        g, = torch.autograd.grad(energy, eps, create_graph=True)
        gg, = torch.autograd.grad(g, eps, create_graph=True)
        ggg, = torch.autograd.grad(gg * gg, w)
        return g, gg, ggg

    _assert_same(third(jitted), third(scaled_energy))


def test_parameter_gradients_are_deterministic() -> None:
    x, eps, w, idx, n = _parameters(rows=5000, segments=40)
    jitted = segops.jit(scaled_energy)
    first = torch.autograd.grad(jitted(x, eps, w, idx, n).sum(), (eps, w))
    for _ in range(3):
        again = torch.autograd.grad(jitted(x, eps, w, idx, n).sum(), (eps, w))
        assert all(torch.equal(a, b) for a, b in zip(first, again))


SCALE = torch.tensor(2.5, dtype=torch.float64)


def test_captured_tensors_are_constants() -> None:
    def captured(x, idx, n):
        return segops.segmented_sum(x * SCALE, idx, n)

    x = torch.randn(6, 3, dtype=torch.float64)
    idx = layout([2, 4])
    jitted = segops.jit(captured)
    _assert_same(jitted(x, idx, 2), captured(x, idx, 2))
    SCALE.fill_(-1.0)  # the constant is the tensor: updates are seen
    try:
        _assert_same(jitted(x, idx, 2), captured(x, idx, 2))
    finally:
        SCALE.fill_(2.5)


def test_captured_tensor_requiring_grad_is_an_error() -> None:
    weight = torch.tensor(2.0, dtype=torch.float64, requires_grad=True)

    def captured(x, idx, n):
        return segops.segmented_sum(x * weight, idx, n)

    with pytest.raises(JitError, match="pass it as an argument"):
        segops.jit(captured)(torch.randn(4, dtype=torch.float64), layout([4]), 1)


def test_large_constants_are_an_error() -> None:
    def table(x, idx, n):
        return segops.segmented_sum(x * torch.tensor([[1.0, 2.0], [3.0, 4.0]], dtype=x.dtype)[0, 0],
                                    idx, n)

    with pytest.raises(JitError, match="constants must be 0-d or \\(F,\\)"):
        segops.jit(table)(torch.randn(4, dtype=torch.float64), layout([4]), 1)


def test_uniform_values_inside_torch_compile() -> None:
    x, eps, w, idx, n = _parameters(dtype=torch.float32)
    jitted = segops.jit(scaled_energy)

    @torch.compile(fullgraph=True, backend="aot_eager")
    def loss(x, eps, w):
        return jitted(x, eps, w, idx, n).sum()

    got = torch.autograd.grad(loss(x, eps, w), (x, eps, w))
    want = torch.autograd.grad(scaled_energy(x, eps, w, idx, n).sum(), (x, eps, w))
    _assert_same(tuple(got), tuple(want))


def test_uniform_only_result_is_an_error() -> None:
    def constant_output(x, eps, idx, n):
        return segops.segmented_sum(x, idx, n), eps * 2

    with pytest.raises(JitError, match="uniform values only"):
        segops.jit(constant_output)(torch.randn(4), torch.tensor(1.0), layout([4]), 1)


# --------------------------------------------------------------------------
# No specialization on coincidences of sizes.
# --------------------------------------------------------------------------


def rows_and_segments(x, q, y, idx, n):
    """Row, per-segment and mixed values: every argument's space matters."""
    weighted = segops.segmented_sum(x * q[:, None], idx, n)
    return weighted, segops.segmented_mul(x, y, idx, n), segops.segmented_mean(q, idx, n)


@pytest.mark.parametrize("rows,segments", list(itertools.product(range(5), range(5))))
def test_every_small_row_and_segment_count(rows: int, segments: int) -> None:
    generator = torch.Generator().manual_seed(rows * 5 + segments)
    x = torch.randn(rows, 3, generator=generator)
    q = torch.randn(rows, generator=generator)
    y = torch.randn(segments, generator=generator)
    jitted = segops.jit(rows_and_segments)
    if rows and not segments:  # every row's segment is out of range
        with pytest.raises(ValueError, match="out of range"):
            jitted(x, q, y, torch.zeros(rows, dtype=torch.int32), segments)
    else:
        idx = _index(rows, segments)
        _assert_same(jitted(x, q, y, idx, segments), rows_and_segments(x, q, y, idx, segments))
    # Then other sizes through the same function object.
    idx = _index(7, 3)
    x, q, y = torch.randn(7, 3), torch.randn(7), torch.randn(3)
    _assert_same(jitted(x, q, y, idx, 3), rows_and_segments(x, q, y, idx, 3))


@pytest.mark.parametrize("rows,segments", [(3, 3), (4, 3), (1, 1), (2, 1)])
def test_first_call_with_coinciding_sizes(rows: int, segments: int) -> None:
    """N == S and N == S + 1 at the first call: once a false 'num_segments
    as a value' error."""
    def pooled(x, idx, n):
        mean = segops.segmented_mean(x, idx, n)
        return segops.segmented_sum(x - segops.segmented_gather(mean, idx), idx, n) + mean

    x = torch.randn(rows, 3, dtype=torch.float64)
    idx = _index(rows, segments)
    jitted = segops.jit(pooled)
    _assert_same(jitted(x, idx, segments), pooled(x, idx, segments))
    x = torch.randn(10, 3, dtype=torch.float64)
    _assert_same(jitted(x, _index(10, 4), 4), pooled(x, _index(10, 4), 4))


def test_row_count_as_a_value_is_an_error() -> None:
    def per_row(x, idx, n):
        return segops.segmented_sum(x, idx, n) / x.shape[0]

    with pytest.raises(JitError, match="number of rows"):
        segops.jit(per_row)(torch.randn(4), layout([2, 2]), 2)


def test_wrong_lengths_still_name_the_argument() -> None:
    def energy(x, q, idx, n):
        return segops.segmented_sum(q * (x * x).sum(-1), idx, n)

    x, idx = torch.randn(6, 3), layout([3, 3])
    jitted = segops.jit(energy)
    jitted(x, torch.randn(6), idx, 2)
    with pytest.raises(ValueError, match="tensor argument 1 has 3 rows, but is used per row"):
        jitted(x, torch.randn(3), idx, 2)
    # A length that is neither N nor S reads as a uniform (F,) value first;
    # used per row, the error still names the argument and its rows.
    with pytest.raises(ValueError, match="tensor argument 1 has 5 rows, but is used per row"):
        jitted(x, torch.randn(5), idx, 2)
    with pytest.raises(ValueError, match="neither the rows of idx"):
        jitted(x, torch.randn(5, 2), idx, 2)


# --------------------------------------------------------------------------
# Counts the way PyG passes them; keyword arguments and defaults.
# --------------------------------------------------------------------------


@pytest.mark.parametrize("count", [lambda idx: idx.max() + 1, lambda idx: np.int64(3),
                                   lambda idx: np.int32(3), lambda idx: torch.tensor(3)])
def test_counts_as_tensors_and_numpy_integers(count) -> None:
    idx = layout([2, 0, 3])
    x = torch.randn(5, 3, dtype=torch.float64)
    expected = segops.segmented_sum(x, idx, 3)
    torch.testing.assert_close(segops.segmented_sum(x, idx, count(idx)), expected)
    torch.testing.assert_close(segops.segmented_mean(x, idx, count(idx)),
                               segops.segmented_mean(x, idx, 3))

    def total(x, idx, n):
        return segops.segmented_sum(x, idx, n)

    torch.testing.assert_close(segops.jit(total)(x, idx, count(idx)), expected)


@pytest.mark.parametrize("bad", [2.0, torch.tensor(2.0), torch.tensor([2]), "2"])
def test_non_integer_counts_say_they_must_be_ints(bad) -> None:
    idx = layout([2, 2])
    with pytest.raises(TypeError, match="num_segments must be an int"):
        segops.segmented_sum(torch.randn(4), idx, bad)

    def total(x, idx, n):
        return segops.segmented_sum(x, idx, n)

    with pytest.raises((JitError, TypeError), match="must be an int"):
        segops.jit(total)(torch.randn(4), idx, bad)


def test_keyword_arguments_and_defaults() -> None:
    def scaled(x, idx, n, scale=2.0):
        return segops.segmented_sum(x * scale, idx, n)

    x, idx = torch.randn(4, 3), layout([1, 3])
    jitted = segops.jit(scaled)
    _assert_same(jitted(x, idx, 2), scaled(x, idx, 2))
    _assert_same(jitted(x, idx=idx, n=2), scaled(x, idx, 2))
    _assert_same(jitted(x, idx, 2, scale=-1.0), scaled(x, idx, 2, -1.0))
    with pytest.raises(TypeError, match="segops.jit\\(scaled\\)"):
        jitted(x, idx, 2, bogus=1)


def test_lambdas_and_non_ascii_names_compile() -> None:
    x, idx = torch.randn(4), layout([2, 2])
    jitted = segops.jit(lambda x, idx, n: segops.segmented_sum(x * x, idx, n))
    _assert_same(jitted(x, idx, 2), segops.segmented_sum(x * x, idx, 2))

    def énergie(x, idx, n):
        return segops.segmented_sum(x, idx, n)

    _assert_same(segops.jit(énergie)(x, idx, 2), segops.segmented_sum(x, idx, 2))


# --------------------------------------------------------------------------
# Numerically safe forms; float constants keyed by their bits.
# --------------------------------------------------------------------------

EDGE_VALUES = [-200.0, -100.0, -89.5, -20.0, -1.0, -0.0, 0.0, 1e-30, 0.5, 1.0, 20.0, 100.0]


def sigmoid_sum(x, idx, n):
    return segops.segmented_sum(torch.sigmoid(x), idx, n)


def odd_powers(x, idx, n):
    return segops.segmented_sum(x ** 9 + x ** 3 - x ** -3 + x ** 12, idx, n)


def clamped_power(x, idx, n):
    return segops.segmented_sum(torch.clamp(x, 0, 5) ** 2.5 + torch.clamp(x, 0.1) ** -1.5, idx, n)


def reciprocal(x, idx, n):
    return segops.segmented_sum(1.0 / x + 2.0 / (x * x + 1.0), idx, n)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("fn", [sigmoid_sum, odd_powers, clamped_power, reciprocal])
def test_safe_forms_match_eager_with_gradients(fn, dtype: torch.dtype) -> None:
    idx = torch.arange(len(EDGE_VALUES), dtype=torch.int32)
    n = len(EDGE_VALUES)
    x = torch.tensor(EDGE_VALUES, dtype=dtype, requires_grad=True)
    jitted = segops.jit(fn)
    got, want = jitted(x, idx, n), fn(x, idx, n)
    torch.testing.assert_close(got, want, equal_nan=True, rtol=1e-5, atol=0)
    grad, = torch.autograd.grad(got.sum(), x)
    expected, = torch.autograd.grad(want.sum(), x)
    assert torch.equal(torch.isnan(grad), torch.isnan(expected))
    # atol: eager's f32 sigmoid'(20) is 0 (s (1 - s) with s rounded to 1);
    # the kernel's e / (1 + e)^2 keeps the 2e-9.
    torch.testing.assert_close(grad, expected, equal_nan=True, rtol=1e-5, atol=1e-8)


def test_signed_zero_and_nan_constants() -> None:
    def divide(x, idx, n, c):
        return segops.segmented_sum(x / c, idx, n)

    x, idx = torch.ones(2), layout([2])
    jitted = segops.jit(divide)
    assert jitted(x, idx, 1, 0.0).item() == float("inf")
    assert jitted(x, idx, 1, -0.0).item() == float("-inf")
    jitted(x, idx, 1, float("nan"))
    before = len(jitted._specializations)
    assert torch.isnan(jitted(x, idx, 1, float("nan"))).all()
    assert len(jitted._specializations) == before


# --------------------------------------------------------------------------
# The disk cache: entries that fail their checksum are compiled again.
# --------------------------------------------------------------------------

_CACHE_SCRIPT = """
import sys, torch, segops
def energy(x, q, idx, n):
    return segops.segmented_sum(q * (x * x).sum(-1), idx, n)
x, q = torch.randn(7, 3, dtype=torch.float64), torch.randn(7, dtype=torch.float64)
idx = torch.tensor([0, 0, 1, 1, 1, 2, 2], dtype=torch.int32)
torch.testing.assert_close(segops.jit(energy)(x, q, idx, 3), energy(x, q, idx, 3))
print("ok")
"""


@pytest.mark.parametrize("damage", ["flip", "truncate", "empty-json", "garbage"])
def test_damaged_cache_entries_are_compiled_again(tmp_path, damage: str) -> None:
    import os
    import subprocess
    import sys
    from pathlib import Path

    env = dict(os.environ, SEGOPS_CACHE_DIR=str(tmp_path))
    package_root = str(Path(segops.__file__).resolve().parents[1])
    env["PYTHONPATH"] = os.pathsep.join([package_root, env.get("PYTHONPATH", "")])

    def run() -> None:
        result = subprocess.run([sys.executable, "-c", _CACHE_SCRIPT], capture_output=True,
                                text=True, timeout=300, env=env)
        assert result.returncode == 0 and result.stdout.split()[-1] == "ok", \
            result.stderr[-3000:]

    run()
    objects, manifests = sorted(tmp_path.glob("*.o")), sorted(tmp_path.glob("*.json"))
    assert objects and manifests
    for path in objects + manifests + sorted((tmp_path / "programs").glob("*.json")):
        data = bytearray(path.read_bytes())
        if damage == "flip":
            for i in range(len(data) // 2, len(data), 97):
                data[i] ^= 0xFF
        elif damage == "truncate":
            data = data[: len(data) // 3]
        elif damage == "empty-json":
            data = bytearray(b"{}")
        else:
            data = bytearray(os.urandom(len(data)))
        path.write_bytes(bytes(data))
    run()  # recompiles what fails its check
    run()  # and the new entries serve


# --------------------------------------------------------------------------
# Kernels with many pointers (they were capped at 16).
# --------------------------------------------------------------------------


def test_fourth_order_and_nine_outputs() -> None:
    """The fourth derivative of a 2-input energy and a forward with nine
    outputs: levels whose kernels take more than 16 tensors."""
    idx = layout([2, 3])

    def energy(x, q, idx, n):
        d = x - segops.segmented_gather(segops.segmented_mean(x, idx, n), idx)
        return segops.segmented_sum(q * (d * d).sum(-1), idx, n)

    def reference(x, q, idx, n):
        count = torch.zeros(n, dtype=x.dtype).index_add(0, idx.long(), torch.ones_like(q))
        mean = torch.zeros(n, 3, dtype=x.dtype).index_add(0, idx.long(), x) / count[:, None]
        d = x - mean[idx.long()]
        return torch.zeros(n, dtype=x.dtype).index_add(0, idx.long(), q * (d * d).sum(-1))

    generator = torch.Generator().manual_seed(4)
    x = torch.randn(5, 3, dtype=torch.float64, generator=generator, requires_grad=True)
    q = torch.randn(5, dtype=torch.float64, generator=generator, requires_grad=True)

    def fourth(fn):
        out = fn(x, q, idx, 2).sum()
        for _ in range(4):
            grads = torch.autograd.grad(out, (x, q), create_graph=True)
            out = sum((g * g).sum() for g in grads)
        return out

    torch.testing.assert_close(fourth(segops.jit(energy)), fourth(reference))

    def nine(x, idx, n):
        return tuple(segops.segmented_sum(x * (i + 1), idx, n) for i in range(9))

    for i, out in enumerate(segops.jit(nine)(x, idx, 2)):
        torch.testing.assert_close(out, (i + 1) * reference_sum_rows(x, idx, 2))


def reference_sum_rows(x: torch.Tensor, idx: torch.Tensor, n: int) -> torch.Tensor:
    return torch.zeros((n,) + x.shape[1:], dtype=x.dtype).index_add(0, idx.long(), x)


def test_too_many_tensors_is_an_error_at_the_first_call() -> None:
    def many(x, idx, n):
        return tuple(segops.segmented_sum(x * (i + 1), idx, n) for i in range(70))

    with pytest.raises(JitError, match="at most 64"):
        segops.jit(many)(torch.randn(4), layout([4]), 1)


def test_a_float_times_a_comparison_to_third_order() -> None:
    """Eager promotes a comparison to the float's dtype in arithmetic:
    `m * (m > t)` and `(x < 0) + x`, values and derivatives to third order."""
    def masked(m, t, idx, n):
        return segops.segmented_sum(m * (m > t) + (m < 0) * 0.5, idx, n)

    idx = layout([2, 0, 3])
    m = torch.randn(5, 4, dtype=torch.float64, requires_grad=True)
    t = torch.tensor(0.1, dtype=torch.float64)
    jitted = segops.jit(masked)
    torch.testing.assert_close(jitted(m, t, idx, 3), masked(m, t, idx, 3))
    assert torch.autograd.gradcheck(lambda a: jitted(a, t, idx, 3), (m,))
    assert torch.autograd.gradgradcheck(lambda a: jitted(a, t, idx, 3), (m,))
    (g,) = torch.autograd.grad(jitted(m, t, idx, 3).pow(3).sum(), m, create_graph=True)
    (gg,) = torch.autograd.grad(g.square().sum(), m, create_graph=True)
    (ggg,) = torch.autograd.grad(gg.sum(), m)
    (r,) = torch.autograd.grad(masked(m, t, idx, 3).pow(3).sum(), m, create_graph=True)
    (rr,) = torch.autograd.grad(r.square().sum(), m, create_graph=True)
    (rrr,) = torch.autograd.grad(rr.sum(), m)
    torch.testing.assert_close(ggg, rrr)


def test_a_per_row_condition_selects_rows_of_features():
    """where((r > t)[:, None], a, b) with (N, F) values (SchNet's cutoff
    mask): the bool column is broadcast over the features; values and first
    and second derivatives as eager's."""
    generator = torch.Generator().manual_seed(5)
    idx = torch.tensor([0, 0, 1, 1, 2, 2, 2])
    x = torch.randn(7, 4, dtype=torch.float64, generator=generator, requires_grad=True)
    r = torch.rand(7, dtype=torch.float64, generator=generator, requires_grad=True)

    def masked(x, r, idx, n: int):
        return segops.segmented_sum(torch.where((r > 0.5)[:, None], x * r[:, None], -x), idx, n)

    torch.autograd.gradcheck(lambda a, b: segops.jit(masked)(a, b, idx, 3), (x, r))
    torch.autograd.gradgradcheck(lambda a, b: segops.jit(masked)(a, b, idx, 3), (x, r))
    torch.testing.assert_close(segops.jit(masked)(x, r, idx, 3), masked(x, r, idx, 3))


# --------------------------------------------------------------------------
# Integer and bool arguments used as numbers: promoted as eager promotes.
# --------------------------------------------------------------------------


def _third_derivative(fn, x: torch.Tensor) -> torch.Tensor:
    (g,) = torch.autograd.grad(fn(x).pow(3).sum(), x, create_graph=True)
    (gg,) = torch.autograd.grad(g.square().sum(), x, create_graph=True)
    (ggg,) = torch.autograd.grad(gg.sum(), x)
    return ggg


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("int_dtype", [torch.int64, torch.int32, torch.int16, torch.uint8])
def test_integer_arguments_used_as_numbers(dtype: torch.dtype, int_dtype: torch.dtype) -> None:
    """Atomic numbers scaling features (`h * z[:, None]`), integer
    arithmetic and a comparison on them: values as eager's, and the
    derivatives to third order; the segment index stays an index."""
    def scaled(h, z, idx, n: int):
        heavy = (z > 1).unsqueeze(1)
        return segops.segmented_sum(h * z[:, None] + torch.where(heavy, h, -h) * (z - 1)[:, None],
                                    idx, n)

    generator = torch.Generator().manual_seed(3)
    idx = layout([3, 0, 4, 2])
    h = torch.randn(9, 5, dtype=dtype, generator=generator, requires_grad=True)
    z = torch.randint(1, 9, (9,), generator=generator).to(int_dtype)
    jitted = segops.jit(scaled)
    torch.testing.assert_close(jitted(h, z, idx, 4), scaled(h, z, idx, 4))
    torch.testing.assert_close(_third_derivative(lambda a: jitted(a, z, idx, 4), h),
                               _third_derivative(lambda a: scaled(a, z, idx, 4), h))
    if dtype == torch.float64:
        assert torch.autograd.gradcheck(lambda a: jitted(a, z, idx, 4), (h,))
        assert torch.autograd.gradgradcheck(lambda a: jitted(a, z, idx, 4), (h,))


def test_integer_numbers_gathered_by_a_second_index() -> None:
    """Message passing with the receivers' atomic numbers, `z[receivers]`:
    z is read at rows and computed with, receivers and senders stay
    indices; a table indexed by z (an embedding) keeps z an index."""
    generator = torch.Generator().manual_seed(4)
    nodes, edges = 7, 23
    receivers = torch.randint(0, nodes, (edges,), generator=generator).sort().values
    senders = torch.randint(0, nodes, (edges,), generator=generator)
    z = torch.randint(1, 9, (nodes,), generator=generator)
    h = torch.randn(nodes, 3, dtype=torch.float64, generator=generator, requires_grad=True)
    table = torch.randn(10, 3, dtype=torch.float64, generator=generator)

    def messages(h, z, receivers, senders, n: int):
        return segops.segmented_sum(h[senders] * z[receivers][:, None], receivers, n)

    def embedded(h, table, z, idx, n: int):
        return segops.segmented_sum(h * table[z], idx, n)

    jitted = segops.jit(messages)
    torch.testing.assert_close(jitted(h, z, receivers, senders, nodes),
                               messages(h, z, receivers, senders, nodes))
    assert torch.autograd.gradgradcheck(lambda a: jitted(a, z, receivers, senders, nodes), (h,))
    idx = layout([3, 4])
    torch.testing.assert_close(segops.jit(embedded)(h, table, z, idx, 2),
                               embedded(h, table, z, idx, 2))


def test_bool_arguments_in_arithmetic_and_inside_torch_compile() -> None:
    """A bool mask multiplied in (eager: the float's dtype) and an integer
    argument inside torch.compile, whose graph converts it."""
    def masked(x, mask, z, idx, n: int):
        return segops.segmented_sum(x * mask * z, idx, n)

    generator = torch.Generator().manual_seed(6)
    idx = layout([2, 3])
    x = torch.randn(5, dtype=torch.float64, generator=generator, requires_grad=True)
    mask = torch.tensor([True, False, True, True, False])
    z = torch.tensor([1, 6, 8, 1, 7])
    jitted = segops.jit(masked)
    torch.testing.assert_close(jitted(x, mask, z, idx, 2), masked(x, mask, z, idx, 2))
    compiled = torch.compile(lambda a: jitted(a, mask, z, idx, 2).sum(), fullgraph=True)
    (got,) = torch.autograd.grad(compiled(x), x)
    (want,) = torch.autograd.grad(masked(x, mask, z, idx, 2).sum(), x)
    torch.testing.assert_close(got, want)


def test_an_integer_used_as_number_and_index_is_an_error() -> None:
    def both(h, z, idx, n: int):
        return segops.segmented_sum(h[z] * z[:, None], idx, n)

    idx = layout([2, 3])
    with pytest.raises(JitError, match=r"argument 1 \(torch.int64\) is used both as a number "
                                       "and as an index"):
        segops.jit(both)(torch.randn(5, 2), torch.tensor([0, 1, 2, 3, 4]), idx, 2)


def test_a_bool_argument_as_a_condition_says_how_to_pass_it() -> None:
    def selected(x, mask, idx, n: int):
        return segops.segmented_sum(torch.where(mask, x, 0.0), idx, n)

    mask = torch.tensor([True, False, True, True, False])
    with pytest.raises(JitError, match=r"argument 1 is a bool tensor used as a condition.*"
                                       r"mask > 0"):
        segops.jit(selected)(torch.randn(5), mask, layout([2, 3]), 2)
