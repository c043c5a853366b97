"""segops.jit: user functions compiled into fused kernels, against the same
functions run eagerly (segops ops plus torch), with derived gradients."""

from __future__ import annotations

import os
import random
import subprocess
import sys
import threading
from pathlib import Path

import pytest
import torch

import segops
from segops import _jit as jit_module

pytest.importorskip("segops._native._segc", reason="segops.jit needs the compiler module")


pytestmark = pytest.mark.compiler

def make_index(counts: list[int], dtype: torch.dtype = torch.int32) -> torch.Tensor:
    return torch.repeat_interleave(torch.arange(len(counts)), torch.tensor(counts)).to(dtype)


COUNTS = [3, 0, 2, 5, 2, 4]  # an empty segment included
S = len(COUNTS)


def layer_norm(x, idx, n):
    c = x - segops.segmented_gather(segops.segmented_mean(x, idx, n), idx)
    r = segops.segmented_rms_norm(c, idx, n)
    return c / segops.segmented_gather(r, idx)[:, None]


def energy(x, q, idx, n):
    d = x - segops.segmented_gather(segops.segmented_mean(x, idx, n), idx)
    return segops.segmented_sum(q * (d * d).sum(-1), idx, n)


def softmax_pool(a, v, idx, n):
    m = segops.segmented_max(a, idx, n)
    e = torch.exp(a - segops.segmented_gather(m, idx))
    w = e / segops.segmented_gather(segops.segmented_sum(e, idx, n), idx)
    return segops.segmented_sum(w[:, None] * v, idx, n)


def kitchen_sink(x, y, q, idx, n):
    """Every supported elementwise construct at least once."""
    r = torch.linalg.vector_norm(x, dim=-1) + 0.5
    t = torch.tanh(q) + torch.sigmoid(q) * torch.log(r) - torch.rsqrt(r)
    t = torch.where(q > 0.1, t, -t).clamp(min=-2.0, max=2.0) + torch.abs(q) ** 3
    t = torch.maximum(t, 0.3 * q) - torch.minimum(t, q) + torch.sqrt(r) / 2.0
    p = segops.segmented_dot(x, x * t[:, None], idx, n) + segops.segmented_min(t, idx, n)
    rows = segops.segmented_mul(x, p, idx, n) + segops.segmented_matvec(x, y, idx, n)
    return segops.segmented_sum(rows, idx, n), rows * 2.0


def _inputs(dtype=torch.float64, counts=COUNTS, seed=0):
    generator = torch.Generator().manual_seed(seed)
    idx = make_index(counts)
    n = idx.numel()
    return dict(
        x=torch.randn(n, 3, dtype=dtype, generator=generator),
        v=torch.randn(n, 3, dtype=dtype, generator=generator),
        q=torch.rand(n, dtype=dtype, generator=generator) + 0.05,
        a=torch.randn(n, dtype=dtype, generator=generator),
        y=torch.randn(len(counts), 3, 3, dtype=dtype, generator=generator),
        idx=idx,
    )


CASES = {
    "layer_norm": (layer_norm, ("x",)),
    "energy": (energy, ("x", "q")),
    "softmax_pool": (softmax_pool, ("a", "v")),
    "kitchen_sink": (kitchen_sink, ("x", "y", "q")),
}


def _differentiable(fn, names, data):
    """fn as a function of its float tensors only (for gradcheck)."""
    def call(*floats):
        values = dict(data, **dict(zip(names, floats)))
        return fn(*[values[name] for name in names], values["idx"], S)
    return call


@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_matches_eager(case, dtype):
    fn, names = CASES[case]
    data = _inputs(dtype)
    compiled = segops.jit(fn)
    args = [data[name] for name in names] + [data["idx"], S]
    expected, actual = fn(*args), compiled(*args)
    expected = expected if isinstance(expected, tuple) else (expected,)
    actual = actual if isinstance(actual, tuple) else (actual,)
    tolerance = dict(rtol=1e-5, atol=1e-5) if dtype == torch.float32 else {}
    for e, a in zip(expected, actual):
        torch.testing.assert_close(a, e, equal_nan=True, **tolerance)


@pytest.mark.parametrize("case", sorted(CASES))
def test_gradcheck_and_gradgradcheck(case):
    fn, names = CASES[case]
    data = _inputs()
    floats = [data[name].clone().requires_grad_() for name in names]
    call = _differentiable(segops.jit(fn), names, data)
    assert torch.autograd.gradcheck(call, floats)
    assert torch.autograd.gradgradcheck(call, floats)


def test_third_order_matches_eager():
    data = _inputs()
    x = data["x"].clone().requires_grad_()
    compiled = segops.jit(energy)

    def third(fn):
        e = fn(x, data["q"], data["idx"], S).sum()
        (g,) = torch.autograd.grad(e, x, create_graph=True)
        (gg,) = torch.autograd.grad((g * g).sum(), x, create_graph=True)
        (ggg,) = torch.autograd.grad(gg.pow(2).sum(), x)
        return g, gg, ggg

    for got, want in zip(third(compiled), third(energy)):
        torch.testing.assert_close(got, want)


def test_max_ties_split_gradient_evenly():
    idx = make_index([3, 2])
    a = torch.tensor([1.0, 5.0, 5.0, -2.0, -2.0], dtype=torch.float64, requires_grad=True)
    out = segops.segmented_max(a, idx, 2)
    out.backward(torch.tensor([1.0, 4.0], dtype=torch.float64))
    assert out.tolist() == [5.0, -2.0]
    assert a.grad.tolist() == [0.0, 0.5, 0.5, 2.0, 2.0]
    b = a.detach().clone().requires_grad_()
    segops.segmented_min(b, idx, 2).backward(torch.tensor([1.0, 4.0], dtype=torch.float64))
    assert b.grad.tolist() == [1.0, 0.0, 0.0, 2.0, 2.0]


@pytest.mark.parametrize("op,reduce", [(segops.segmented_max, "amax"),
                                       (segops.segmented_min, "amin")])
@pytest.mark.parametrize("width", [1, 3])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_max_min_against_scatter_reduce(op, reduce, width, dtype):
    idx = make_index(COUNTS)
    x = torch.randn((idx.numel(),) + ((3,) if width == 3 else ()), dtype=dtype)
    expected = torch.zeros((S,) + x.shape[1:], dtype=dtype).scatter_reduce(
        0, idx.long().view(-1, *([1] * (x.dim() - 1))).expand_as(x), x, reduce,
        include_self=False)
    torch.testing.assert_close(op(x, idx, S), expected)
    assert op(x, idx, S)[1].abs().sum() == 0  # the empty segment is 0
    xg = x.double().clone().requires_grad_()
    assert torch.autograd.gradcheck(lambda t: op(t, idx, S), (xg,))
    torch.library.opcheck(getattr(torch.ops.segops, op.__name__).default, (x, idx, S))


def test_opcheck_jit_call():
    data = _inputs()
    compiled = segops.jit(energy)
    compiled(data["x"], data["q"], data["idx"], S)
    (spec,) = compiled._specializations.values()
    x = data["x"].clone().requires_grad_()
    torch.library.opcheck(torch.ops.segops.jit_call.default,
                          (spec.program, [x, data["q"], data["idx"]], S))


def test_compile_fullgraph_without_recompiling():
    from torch._dynamo.utils import counters

    compiled = segops.jit(energy)

    def model(x, q, idx, n):
        return compiled(x, q, idx, n).sum()

    torch._dynamo.reset()
    counters.clear()
    fast = torch.compile(model, fullgraph=True, dynamic=True)
    for counts in ([2, 3, 1], [4, 0, 2, 5, 1], [1] * 9):
        data = _inputs(torch.float32, counts)
        x = data["x"].clone().requires_grad_()
        out = fast(x, data["q"], data["idx"], len(counts))
        out.backward()
        x2 = data["x"].clone().requires_grad_()
        ref = energy(x2, data["q"], data["idx"], len(counts)).sum()
        ref.backward()
        torch.testing.assert_close(out, ref)
        torch.testing.assert_close(x.grad, x2.grad)
    assert counters["stats"]["unique_graphs"] == 1


def test_warm_calls_do_not_retrace(monkeypatch):
    compiled = segops.jit(energy)
    data = _inputs()
    compiled(data["x"], data["q"], data["idx"], S)
    monkeypatch.setattr(jit_module, "to_mlir", lambda *a: pytest.fail("retraced"))
    for counts in ([1, 2], [5, 5, 5, 0]):
        other = _inputs(counts=counts)
        torch.testing.assert_close(
            compiled(other["x"], other["q"], other["idx"], len(counts)),
            energy(other["x"], other["q"], other["idx"], len(counts)))


def test_int64_and_unsorted_index():
    data = _inputs()
    compiled = segops.jit(energy)
    idx64 = data["idx"].long()
    torch.testing.assert_close(compiled(data["x"], data["q"], idx64, S),
                               energy(data["x"], data["q"], idx64, S))
    order = torch.randperm(idx64.numel())
    torch.testing.assert_close(compiled(data["x"][order], data["q"][order], idx64[order], S),
                               energy(data["x"][order], data["q"][order], idx64[order], S))


def test_idx_out_of_range_is_an_error():
    data = _inputs()
    bad = data["idx"].clone()
    bad[2] = S + 3
    with pytest.raises(ValueError, match="out of range"):
        segops.jit(energy)(data["x"], data["q"], bad, S)


def test_mlir_shows_forward_and_derived_ir():
    data = _inputs()
    compiled = segops.jit(softmax_pool)
    text = compiled.mlir(data["a"], data["v"], data["idx"], S)
    assert "seg.max" in text and "math.exp" in text and "seg.broadcast" in text
    derived = compiled.mlir(data["a"], data["v"], data["idx"], S, order=1)
    assert "_grad(" in derived


# --------------------------------------------------------------------------
# Errors.
# --------------------------------------------------------------------------


def _error_of(fn, *args) -> str:
    with pytest.raises(segops.JitError) as info:
        segops.jit(fn)(*args)
    return str(info.value)


def test_unsupported_op_names_construct_and_line():
    data = _inputs()

    def uses_bessel(x, idx, n):
        return segops.segmented_sum(torch.special.bessel_j0(x), idx, n)  # the line

    message = _error_of(uses_bessel, data["q"], data["idx"], S)
    assert "bessel_j0" in message
    assert "test_jit.py" in message and "torch.special.bessel_j0(x)" in message


def test_data_dependent_control_flow():
    data = _inputs()

    def branches(x, idx, n):
        if x.sum() > 0:
            return segops.segmented_sum(x, idx, n)
        return segops.segmented_mean(x, idx, n)

    message = _error_of(branches, data["q"], data["idx"], S)
    assert "control flow" in message and "if x.sum() > 0" in message


def test_two_index_tensors():
    """Several indices run as a kernel per index (docs/message-passing.md);
    an index computed in the function stays an error."""
    data = _inputs()

    def two(x, i, j, n):
        return segops.segmented_sum(x, i, n) + segops.segmented_sum(x, j, n)

    got = segops.jit(two)(data["q"], data["idx"], data["idx"].clone(), S)
    torch.testing.assert_close(got, two(data["q"], data["idx"], data["idx"], S))

    def derived_index(x, idx, n):
        return segops.segmented_sum(x, idx, n) + segops.segmented_sum(x, idx.flip(0), n)

    assert "idx" in _error_of(derived_index, data["q"], data["idx"], S)


def test_shapes_the_dialect_cannot_hold():
    data = _inputs()
    # Rows of any width F are held; rows of matrices other than 3x3 are not.
    blocks = torch.randn(data["idx"].numel(), 2, 2, dtype=torch.float64)
    assert "shape" in _error_of(lambda x, idx, n: segops.segmented_sum(x, idx, n), blocks,
                                data["idx"], S)

    def outer(x, idx, n):
        return torch.exp(x[:, None] * x)  # (N, 1) * (N,)

    assert "element shapes" in _error_of(outer, data["q"], data["idx"], S)


def test_mixed_dtypes_and_no_num_segments():
    data = _inputs()
    assert "float32 or all" in _error_of(energy, data["x"], data["q"].float(), data["idx"], S)
    assert "num_segments" in _error_of(lambda x, idx: x, data["q"], data["idx"])


def test_without_compiler_says_what_is_missing(monkeypatch):
    from segops import _compiler

    def missing():
        raise RuntimeError("run-time compilation needs segops' compiler module (_segc)")

    monkeypatch.setattr(_compiler, "_segc", missing)
    data = _inputs()

    def never_compiled(x, idx, n):  # a program no other test made
        return segops.segmented_sum(x * 1234.5, idx, n)

    with pytest.raises(RuntimeError, match="compiler module"):
        segops.jit(never_compiled)(data["q"], data["idx"], S)


# --------------------------------------------------------------------------
# Concurrency: threads, processes (the disk cache), fork.
# --------------------------------------------------------------------------


def test_two_threads_compile_one_function(tmp_path, monkeypatch):
    monkeypatch.setenv("SEGOPS_CACHE_DIR", str(tmp_path))
    compiled = segops.jit(energy)
    data = _inputs(torch.float32)
    results, errors = [], []

    def run():
        try:
            results.append(compiled(data["x"], data["q"], data["idx"], S))
        except Exception as error:  # noqa: BLE001
            errors.append(error)

    threads = [threading.Thread(target=run) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    torch.testing.assert_close(results[0], results[1])
    assert len(compiled._specializations) == 1


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_forked_child_compiles_and_runs():
    data = _inputs()
    compiled = segops.jit(energy)
    compiled(data["x"], data["q"], data["idx"], S)  # the parent compiled once
    pid = os.fork()
    if pid == 0:  # the child: a warm call and a new specialization
        try:
            ok = torch.allclose(compiled(data["x"], data["q"], data["idx"], S),
                                energy(data["x"], data["q"], data["idx"], S))
            x32, q32 = data["x"].float(), data["q"].float()
            ok &= torch.allclose(compiled(x32, q32, data["idx"], S),
                                 energy(x32, q32, data["idx"], S), atol=1e-5)
            os._exit(0 if ok else 1)
        except BaseException:  # noqa: BLE001
            os._exit(2)
    _, status = os.waitpid(pid, 0)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0


# --------------------------------------------------------------------------
# Random programs through the Python API, against eager.
# --------------------------------------------------------------------------

_ROW_UNARY = [torch.tanh, torch.sigmoid, lambda t: t * 0.5, torch.neg,
              lambda t: torch.exp(-t * t), lambda t: torch.abs(t) + 0.1]
_ROW_BINARY = [torch.add, torch.sub, torch.mul, lambda a, b: a / (b * b + 1.0),
               torch.maximum, torch.minimum]
_REDUCTIONS = [segops.segmented_sum, segops.segmented_mean, segops.segmented_max,
               segops.segmented_min]


def _random_program(seed: int):
    """A random composition: row values from x and q, reductions gathered
    back to rows, per-row scalars against vec3 rows; one segment and one
    row output."""
    rng = random.Random(seed)
    steps = [(rng.randrange(4), rng.randrange(len(_ROW_UNARY)), rng.randrange(len(_ROW_BINARY)),
              rng.randrange(len(_REDUCTIONS))) for _ in range(rng.randint(2, 5))]

    def program(x, q, idx, n):
        scalars = [q, torch.linalg.vector_norm(x, dim=-1)]
        vectors = [x]
        for kind, u, b, r in steps:
            a = scalars[rng_pick(len(scalars), kind)]
            c = scalars[-1]
            if kind == 0:
                scalars.append(_ROW_UNARY[u](a))
            elif kind == 1:
                scalars.append(_ROW_BINARY[b](a, c))
            elif kind == 2:
                scalars.append(segops.segmented_gather(_REDUCTIONS[r](a, idx, n), idx))
            else:
                vectors.append(scalars[-1][:, None] * vectors[-1] + vectors[0])
        return segops.segmented_sum(scalars[-1], idx, n), (vectors[-1] * vectors[0]).sum(-1)

    return program


def rng_pick(count: int, salt: int) -> int:
    return (salt * 7 + count) % count


@pytest.mark.parametrize("seed", range(12))
def test_random_programs_match_eager(seed):
    program = _random_program(seed)
    data = _inputs(seed=seed)
    compiled = segops.jit(program)
    for want, got in zip(program(data["x"], data["q"], data["idx"], S),
                         compiled(data["x"], data["q"], data["idx"], S)):
        torch.testing.assert_close(got, want)
    if seed % 3 == 0:
        x = data["x"].clone().requires_grad_()
        q = data["q"].clone().requires_grad_()
        assert torch.autograd.gradcheck(
            lambda a, b: compiled(a, b, data["idx"], S), (x, q))


@pytest.mark.skipif(os.environ.get("SEGOPS_SIMULATE_GPU", "") not in ("", "0"),
                    reason="already on the simulator")
@pytest.mark.slow
@pytest.mark.long
@pytest.mark.simulator
def test_jit_suite_on_gpu_kernels() -> None:
    """This file with CPU tensors running the JIT'd programs' GPU kernels
    on the SIMT simulator (SEGOPS_SIMULATE_GPU=1)."""
    env = dict(os.environ, SEGOPS_SIMULATE_GPU="1")
    result = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                             Path(__file__).name], capture_output=True, text=True, timeout=900,
                            cwd=Path(__file__).parent, env=env)
    assert result.returncode == 0 and " passed" in result.stdout, (
        f"exit {result.returncode}\n{result.stdout[-4000:]}\n{result.stderr[-2000:]}")


def test_benchmark_composites_agree():
    """bench.jit times the same computation four ways: check that they are."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    from bench import jit as bench_jit

    data = bench_jit._data(500, 7)
    jitted = bench_jit._jit_versions()
    for name, (composite, names) in bench_jit.COMPOSITES.items():
        floats = [data[k] for k in names]
        fused = jitted[name](*floats, data["idx32"], data["n"])
        unfused = composite(bench_jit.SegopsOps, *floats, data["idx32"], data["n"])
        eager = composite(bench_jit.EagerOps, *floats, data["idx64"], data["n"])
        torch.testing.assert_close(fused, unfused, rtol=1e-4, atol=1e-5, equal_nan=True)
        torch.testing.assert_close(eager, unfused, rtol=1e-4, atol=1e-5, equal_nan=True)


def test_wrong_lengths_name_the_argument():
    data = _inputs()
    compiled = segops.jit(energy)
    compiled(data["x"], data["q"], data["idx"], S)
    with pytest.raises(ValueError, match="tensor argument 1 has 3 rows, but is used per row"):
        compiled(data["x"], data["q"][:3], data["idx"], S)

    def scale(x, w, idx, n):
        return segops.segmented_mul(x, w, idx, n)

    scaled = segops.jit(scale)
    w = torch.rand(S, dtype=torch.float64)
    torch.testing.assert_close(scaled(data["x"], w, data["idx"], S),
                               segops.segmented_mul(data["x"], w, data["idx"], S))
    with pytest.raises(ValueError, match="num_segments"):
        scaled(data["x"], torch.rand(S + 2, dtype=torch.float64), data["idx"], S)


def test_keepdim_sums_squeeze_and_whole_slices():
    """Constructs an autograd backward writes (and the fusion pass meets)."""
    data = _inputs()

    def fn(x, q, idx, n):
        column = (x * x).sum(-1, keepdim=True)          # (N, 1)
        rows = x[:] * column                             # whole slice, column against vec3
        return segops.segmented_sum(rows, idx, n), column.squeeze(-1) * q

    got = segops.jit(fn)(data["x"], data["q"], data["idx"], S)
    for a, b in zip(got, fn(data["x"], data["q"], data["idx"], S)):
        torch.testing.assert_close(a, b)


def test_num_segments_as_a_value_is_an_error():
    data = _inputs()

    def divides(x, idx, n):
        return segops.segmented_sum(x, idx, n) / n

    message = _error_of(divides, data["q"], data["idx"], S)
    assert "num_segments as a value" in message


def test_one_specialization_key_for_every_caller():
    """ops.specialization_key (the operator library's, which jit_call's warm
    path keys by) keys dtype, element shape and length class, never N or
    S; floats by their bits; given classes, shapes of no class."""
    from segops.ops import specialization_key as key

    x, idx = torch.randn(10, 3), torch.zeros(10, dtype=torch.int32)
    assert key([x, idx, 4]) == key([x[:6], idx[:6], 9])
    assert key([x, idx, 4]) != key([x.double(), idx, 4])
    assert key([x, idx, 4]) != key([torch.randn(10, 2), idx, 4])
    assert key([x, idx, 10]) != key([x, idx, 4])  # rows and segments: both
    assert key([x[:5], idx, 4]) != key([x[:6], idx, 4])  # neither: by shape
    assert key([x, idx, 4, 0.0]) != key([x, idx, 4, -0.0])
    assert key([x, idx, 4, 1.0]) == key([x, idx, 4, 1.0])
    assert key([x, idx, 4, True]) != key([x, idx, 4, False])
    assert key([x, idx, 4, "a"]) != key([x, idx, 4, "b"])
    assert key([torch.tensor(2.0), idx, 4]) == key([torch.tensor(3.0), idx[:2], 1])
    # Given classes: a tensor of class 0 by its element shape only, one of
    # none by its whole shape, an int of none by value.
    assert key([x, 4], [0, 1]) == key([x[:2], 7], [0, 1])
    assert key([x, 4], [None, 1]) != key([x[:2], 4], [None, 1])
    assert key([x, 4], [0, None]) != key([x, 5], [0, None])
    with pytest.raises(ValueError, match="one class per argument"):
        key([x, 4], [0])
