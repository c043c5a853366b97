"""Unsorted indices and the seed package's error contract (nvalchemiops).

Row maps (mul, matvec, gather) take any in-range idx. On CPU, reductions
and every gradient level take one too: the rows of an unsorted index run in
a stable sort of it, so results are deterministic, bitwise those of the
sorted rows. Errors keep nvalchemiops' types and words. The same checks run
the GPU kernels on the simulator (SEGOPS_SIMULATE_GPU=1), through the C++
CUDA launcher.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import segops

N, S = 40, 6


def _unsorted_index(n: int = N, s: int = S, seed: int = 0,
                    dtype: torch.dtype = torch.int32) -> torch.Tensor:
    """Every segment non-empty (mean and rms_norm stay smooth), order shuffled."""
    generator = torch.Generator().manual_seed(seed)
    values = torch.cat([torch.arange(s), torch.randint(0, s, (n - s,), generator=generator)])
    idx = values[torch.randperm(n, generator=generator)].to(dtype)
    assert bool((idx[1:] < idx[:-1]).any())
    return idx


def _leaf(*shape: int, seed: int, dtype: torch.dtype = torch.float64) -> torch.Tensor:
    generator = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=generator, dtype=dtype).requires_grad_(True)


def _scatter(values: torch.Tensor, idx: torch.Tensor, s: int) -> torch.Tensor:
    return torch.zeros((s,) + values.shape[1:], dtype=values.dtype).index_add(
        0, idx.long(), values)


def _counts(idx: torch.Tensor, s: int, dtype: torch.dtype) -> torch.Tensor:
    return torch.bincount(idx.long(), minlength=s).to(dtype)


# op name -> (segops call, pure-PyTorch reference, float inputs); the same
# shapes as the seed's tests (vec3 rows, scalar and matrix per segment).
CASES = {
    "sum": (lambda x, idx: segops.segmented_sum(x, idx, S),
            lambda x, idx: _scatter(x, idx, S), [(N, 3)]),
    "sum_w1": (lambda x, idx: segops.segmented_sum(x, idx, S),
               lambda x, idx: _scatter(x, idx, S), [(N,)]),
    "mean": (lambda x, idx: segops.segmented_mean(x, idx, S),
             lambda x, idx: _scatter(x, idx, S) / _counts(idx, S, x.dtype)[:, None], [(N, 3)]),
    "rms_norm": (lambda x, idx: segops.segmented_rms_norm(x + 2.0, idx, S),
                 lambda x, idx: (_scatter(((x + 2.0) ** 2).sum(1), idx, S)
                                 / _counts(idx, S, x.dtype)).sqrt(), [(N, 3)]),
    "dot": (lambda x, y, idx: segops.segmented_dot(x, y, idx, S),
            lambda x, y, idx: _scatter((x * y).sum(1), idx, S), [(N, 3), (N, 3)]),
    "mul": (lambda x, y, idx: segops.segmented_mul(x, y, idx, S),
            lambda x, y, idx: x * y[idx.long(), None], [(N, 3), (S,)]),
    "matvec": (lambda v, m, idx: segops.segmented_matvec(v, m, idx, S),
               lambda v, m, idx: torch.einsum("nji,nj->ni", m[idx.long()], v),
               [(N, 3), (S, 3, 3)]),
    "gather": (lambda y, idx: segops.segmented_gather(y, idx),
               lambda y, idx: y[idx.long()], [(S, 3)]),
}


def _inputs(name: str, dtype: torch.dtype = torch.float64) -> list[torch.Tensor]:
    return [_leaf(*shape, seed=k + 1, dtype=dtype) for k, shape in enumerate(CASES[name][2])]


@pytest.mark.parametrize("index_dtype", [torch.int32, torch.int64])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("name", sorted(CASES))
def test_forward_and_backward_match_the_reference(name: str, dtype: torch.dtype,
                                                   index_dtype: torch.dtype) -> None:
    op, reference, _ = CASES[name]
    idx = _unsorted_index(dtype=index_dtype)
    inputs = _inputs(name, dtype)
    expected_inputs = [t.detach().clone().requires_grad_(True) for t in inputs]
    out, expected = op(*inputs, idx), reference(*expected_inputs, idx)
    tolerance = {"rtol": 1e-5, "atol": 1e-5} if dtype == torch.float32 else {}
    torch.testing.assert_close(out, expected, **tolerance)
    cotangent = torch.randn_like(out)
    grads = torch.autograd.grad(out, inputs, cotangent)
    expected_grads = torch.autograd.grad(expected, expected_inputs, cotangent)
    for got, want in zip(grads, expected_grads):
        torch.testing.assert_close(got, want, **tolerance)


@pytest.mark.parametrize("name", sorted(CASES))
def test_gradcheck_and_gradgradcheck(name: str) -> None:
    op = CASES[name][0]
    idx = _unsorted_index(seed=3)
    inputs = _inputs(name)
    assert torch.autograd.gradcheck(lambda *t: op(*t, idx), inputs)
    assert torch.autograd.gradgradcheck(lambda *t: op(*t, idx), inputs)


@pytest.mark.parametrize("name", ["sum", "mean", "mul", "matvec"])
def test_third_order_matches_the_reference(name: str) -> None:
    """Every level of the chain sorts rows on its own (the backward of a row
    map is a reduction)."""
    op, reference, _ = CASES[name]
    idx = _unsorted_index(seed=4, dtype=torch.int64)

    def third(function, inputs):
        out = function(*inputs, idx)
        (g1,) = torch.autograd.grad((out ** 3).sum(), inputs[:1], create_graph=True)
        (g2,) = torch.autograd.grad((g1 ** 2).sum(), inputs[:1], create_graph=True)
        return torch.autograd.grad((g2 * g2.detach()).sum(), inputs)

    inputs = _inputs(name)
    expected_inputs = [t.detach().clone().requires_grad_(True) for t in inputs]
    for got, want in zip(third(op, inputs), third(reference, expected_inputs)):
        torch.testing.assert_close(got, want)


@pytest.mark.parametrize("name", ["sum", "mean", "rms_norm", "dot"])
def test_results_are_those_of_the_stably_sorted_rows(name: str) -> None:
    """Bitwise deterministic: the results of the rows in a stable sort of
    idx, whatever the thread count, at a size that runs threaded and cuts
    long segments into tiles. (A plain sum adds the rows by chunks instead,
    test_sums_by_chunks.py: the same on any thread count, equal to rounding.)"""
    op = CASES[name][0]
    n, s = (1 << 18) + 77, 3
    generator = torch.Generator().manual_seed(5)
    idx = torch.randint(0, s, (n,), generator=generator, dtype=torch.int32)
    inputs = [torch.randn(n, 3, generator=generator) for _ in CASES[name][2]]
    order = torch.sort(idx, stable=True).indices
    expected = op(*[t[order] for t in inputs], idx[order]) if name != "rms_norm" else None
    previous = torch.get_num_threads()
    try:
        results = []
        for threads in (1, 2):
            torch.set_num_threads(threads)
            results.append(op(*inputs, idx))
    finally:
        torch.set_num_threads(previous)
    assert torch.equal(results[0], results[1])
    if name == "sum":
        torch.testing.assert_close(results[0], expected, rtol=1e-5, atol=1e-3)
    elif expected is not None:
        assert torch.equal(results[0], expected)


@pytest.mark.parametrize("name", ["sum", "mul", "matvec"])
def test_opcheck(name: str) -> None:
    op_name = {"sum": "segmented_sum", "mul": "segmented_mul", "matvec": "segmented_matvec"}[name]
    inputs = _inputs(name)
    torch.library.opcheck(getattr(torch.ops.segops, op_name).default,
                          (*inputs, _unsorted_index(seed=6), S))


def test_the_seed_row_map_example() -> None:
    out = segops.segmented_mul(torch.tensor([1., 2., 3.]), torch.tensor([10., 20.]),
                               torch.tensor([1, 0, 1], dtype=torch.int32), 2)
    assert out.tolist() == [20., 20., 60.]


# -- the seed's errors: types and words ------------------------------------------


@pytest.mark.parametrize("make_call", [
    lambda: segops.segmented_sum(torch.ones(2), torch.tensor([0., 1.]), 2),
    lambda: segops.segmented_dot(torch.ones(2).half(), torch.ones(2).half(),
                                 torch.tensor([0, 1]), 2),
    lambda: segops.segmented_dot(torch.ones(2), torch.ones(2).double(), torch.tensor([0, 1]), 2),
    lambda: segops.segmented_mul(torch.ones(2), torch.ones(2), torch.tensor([0, 1]).short(), 2),
])
def test_dtype_errors_are_both_type_and_value_errors(make_call) -> None:
    for error in (TypeError, ValueError, segops.DTypeError):
        with pytest.raises(error):
            make_call()


def test_wrong_index_dtype_words() -> None:
    with pytest.raises(ValueError, match="idx.*int32 or int64"):
        segops.segmented_sum(torch.ones(2), torch.tensor([0., 1.]), 2)


@pytest.mark.parametrize("values, dtype, pattern", [
    ([0, 2], torch.int32, r"idx.*out of range.*idx value 2 .*num_segments = 2|"
                          r"idx value 2 at row 1 is out of range for num_segments = 2"),
    ([0, -1], torch.int32, "idx.*negative"),
    ([0, 2**31], torch.int64, "idx.*not representable as int32"),
    ([-5, 2**40], torch.int64, "idx value 1099511627776 at row 1 is not representable as int32"),
])
def test_index_content_errors(values: list[int], dtype: torch.dtype, pattern: str) -> None:
    for op, args in [(segops.segmented_sum, (torch.ones(2),)),
                     (segops.segmented_mean, (torch.ones(2, 3),)),
                     (segops.segmented_dot, (torch.ones(2, 3), torch.ones(2, 3))),
                     (segops.segmented_mul, (torch.ones(2, 3), torch.ones(2))),
                     (segops.segmented_rms_norm, (torch.ones(2, 3) + 1,)),
                     (segops.segmented_matvec, (torch.ones(2, 3), torch.ones(2, 3, 3)))]:
        with pytest.raises(ValueError, match=pattern):
            op(*args, torch.tensor(values, dtype=dtype), 2)
        leaves = [a.clone().requires_grad_(True) for a in args]
        with pytest.raises(ValueError, match=pattern):
            op(*leaves, torch.tensor(values, dtype=dtype), 2)


def test_out_of_range_value_after_a_descent_is_still_reported() -> None:
    """Disorder first, a bad value later: the bad value is the error."""
    idx = torch.tensor([3, 1, 0, 2, 7, 1], dtype=torch.int32)
    with pytest.raises(ValueError, match="idx value 7 at row 4 is out of range"):
        segops.segmented_sum(torch.ones(6), idx, 4)
    with pytest.raises(ValueError, match="idx value 7 at row 4 is out of range"):
        segops.segmented_sum(torch.ones(6), idx.long(), 4)


def test_num_segments_mismatch_before_idx_content() -> None:
    """The seed's check of y's length comes first (its idx is unsorted)."""
    idx = torch.tensor([0, 1, 0], dtype=torch.int32)
    with pytest.raises(ValueError, match="num_segments"):
        segops.segmented_mul(torch.randn(3), torch.randn(2), idx, 3)
    with pytest.raises(ValueError, match="num_segments"):
        segops.segmented_matvec(torch.randn(3, 3), torch.randn(2, 3, 3), idx, 3)


def test_an_index_shorter_than_x_is_rejected() -> None:
    """Kept from segops: the seed silently accepts a short idx."""
    with pytest.raises(ValueError, match="idx must have one entry per row of x"):
        segops.segmented_sum(torch.ones(3), torch.tensor([0, 1], dtype=torch.int32), 2)


@pytest.mark.slow
@pytest.mark.long
@pytest.mark.simulator
@pytest.mark.parametrize("environment", [{"SEGOPS_SIMULATE_GPU": "1"}])
def test_gpu_kernels_on_the_simulator(environment: dict[str, str]) -> None:
    """This file again with the GPU kernels run on the CPU simulator through
    the C++ CUDA launcher (rows sorted first on CPU tensors as well)."""
    if any(os.environ.get(key) == value for key, value in environment.items()):
        pytest.skip("already running so")
    env = dict(os.environ, **environment)
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", Path(__file__).name,
         "-k", "not results_are_those and not gpu_kernels_on_the_simulator"],
        capture_output=True, text=True, timeout=900, cwd=Path(__file__).parent, env=env)
    assert result.returncode == 0 and " passed" in result.stdout, (
        f"exit {result.returncode}\n{result.stdout[-4000:]}\n{result.stderr[-2000:]}")
