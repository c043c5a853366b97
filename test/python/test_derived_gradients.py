"""Derived gradients (seg-differentiate) executed through the CPU backend
agree with central finite differences in float64, first and second order,
for every op of the dialect, with empty segments and an all-zero rms_norm
segment. The programs are compiled at test time with seg-opt and
seg-compile (fused: one kernel per gradient function)."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

import harness
import pytest
import torch

from segops import _compiler

# Three segments with one empty in the middle and one at the end (S = 5).
pytestmark = pytest.mark.compiler

COUNTS = [2, 0, 3, 2, 0]
IDX = torch.repeat_interleave(torch.arange(len(COUNTS)), torch.tensor(COUNTS)).to(torch.int32)
N, S = int(IDX.shape[0]), len(COUNTS)

ROW1, ROW3, SEG1, SEG3, MAT = (
    "tensor<?xf64>",
    "tensor<?x3xf64>",
    "tensor<?xf64>",
    "tensor<?x3xf64>",
    "tensor<?x3x3xf64>",
)


@dataclass(frozen=True)
class Case:
    name: str
    args: tuple[str, ...]  # "row1", "row3", "seg1", "seg3", "mat"; then idx (and n)
    body: str
    result: str
    has_count: bool = True


CASES = [
    Case(
        "sum3",
        ("row3",),
        "seg.sum %a0, %idx, %n : tensor<?x3xf64>, tensor<?xi32> -> tensor<?x3xf64>",
        SEG3,
    ),
    Case(
        "sum1",
        ("row1",),
        "seg.sum %a0, %idx, %n : tensor<?xf64>, tensor<?xi32> -> tensor<?xf64>",
        SEG1,
    ),
    Case(
        "mean3",
        ("row3",),
        "seg.mean %a0, %idx, %n : tensor<?x3xf64>, tensor<?xi32> -> tensor<?x3xf64>",
        SEG3,
    ),
    Case(
        "rms3",
        ("row3",),
        "seg.rms_norm %a0, %idx, %n : tensor<?x3xf64>, tensor<?xi32> -> tensor<?xf64>",
        SEG1,
    ),
    Case(
        "dot3",
        ("row3", "row3"),
        "seg.dot %a0, %a1, %idx, %n : tensor<?x3xf64>, tensor<?x3xf64>, tensor<?xi32> -> tensor<?xf64>",
        SEG1,
    ),
    Case(
        "mul3",
        ("row3", "seg1"),
        "seg.mul %a0, %a1, %idx : tensor<?x3xf64>, tensor<?xf64>, tensor<?xi32> -> tensor<?x3xf64>",
        ROW3,
        False,
    ),
    Case(
        "matvec",
        ("row3", "mat"),
        "seg.matvec %a0, %a1, %idx : tensor<?x3xf64>, tensor<?x3x3xf64>, tensor<?xi32> -> tensor<?x3xf64>",
        ROW3,
        False,
    ),
    Case(
        "matvec_plain",
        ("row3", "mat"),
        "seg.matvec %a0, %a1, %idx {transpose = false} : tensor<?x3xf64>, tensor<?x3x3xf64>, tensor<?xi32> -> tensor<?x3xf64>",
        ROW3,
        False,
    ),
    Case(
        "gather3",
        ("seg3",),
        "seg.gather %a0, %idx : tensor<?x3xf64>, tensor<?xi32> -> tensor<?x3xf64>",
        ROW3,
        False,
    ),
    Case(
        "outer",
        ("row3", "row3"),
        "seg.outer_sum %a0, %a1, %idx, %n : tensor<?x3xf64>, tensor<?x3xf64>, tensor<?xi32> -> tensor<?x3x3xf64>",
        MAT,
    ),
]

TYPES = {"row1": ROW1, "row3": ROW3, "seg1": SEG1, "seg3": SEG3, "mat": MAT}
SHAPES = {"row1": (N,), "row3": (N, 3), "seg1": (S,), "seg3": (S, 3), "mat": (S, 3, 3)}


def source(case: Case) -> str:
    params = [f"%a{i}: {TYPES[kind]}" for i, kind in enumerate(case.args)]
    params.append("%idx: tensor<?xi32>")
    if case.has_count:
        params.append("%n: index")
    return (f"func.func @{case.name}({', '.join(params)}) -> {case.result} {{\n"
            f"  %r = {case.body}\n  return %r : {case.result}\n}}\n")


@cache
def compiled(case: Case) -> harness.CompiledModule:
    first = _compiler.seg_opt(source(case), "--seg-differentiate", "--canonicalize", "--cse")
    second = _compiler.seg_opt(first, f"--seg-differentiate=function={case.name}_grad",
                               "--canonicalize", "--cse")
    return harness.CompiledModule(second)


def call(case: Case, suffix: str, tensors: list[torch.Tensor]) -> list[torch.Tensor]:
    floats = tensors[:len(case.args)]
    cotangents = tensors[len(case.args):]
    return compiled(case).run(case.name + suffix, [*floats, IDX, *cotangents], N, S)


def random_inputs(case: Case, seed: int, zero_segment: int | None = None) -> list[torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    tensors = [torch.randn(SHAPES[kind], dtype=torch.float64, generator=generator)
               for kind in case.args]
    if zero_segment is not None:
        rows = IDX == zero_segment
        tensors[0][rows] = 0.0
    return tensors


def finite_difference(fn, tensors: list[torch.Tensor], weight: torch.Tensor,
                      eps: float = 1e-6) -> list[torch.Tensor]:
    """Gradient of <fn(tensors), weight> by central differences."""
    grads = []
    for _k, tensor in enumerate(tensors):
        grad = torch.zeros_like(tensor)
        flat = tensor.view(-1)
        for j in range(flat.numel()):
            saved = flat[j].item()
            flat[j] = saved + eps
            plus = (fn(tensors) * weight).sum()
            flat[j] = saved - eps
            minus = (fn(tensors) * weight).sum()
            flat[j] = saved
            grad.view(-1)[j] = (plus - minus) / (2 * eps)
        grads.append(grad)
    return grads


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_first_order_matches_finite_differences(case: Case) -> None:
    inputs = random_inputs(case, seed=1)
    (forward,) = call(case, "", inputs)
    cotangent = torch.randn(forward.shape, dtype=torch.float64,
                            generator=torch.Generator().manual_seed(2))
    derived = call(case, "_grad", [*inputs, cotangent])
    expected = finite_difference(lambda ts: call(case, "", ts)[0], inputs, cotangent)
    for got, want in zip(derived, expected):
        torch.testing.assert_close(got, want, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_second_order_matches_finite_differences(case: Case) -> None:
    inputs = random_inputs(case, seed=3)
    (forward,) = call(case, "", inputs)
    cotangent = torch.randn(forward.shape, dtype=torch.float64,
                            generator=torch.Generator().manual_seed(4))
    first = call(case, "_grad", [*inputs, cotangent])
    weights = [
        torch.randn(g.shape, dtype=torch.float64, generator=torch.Generator().manual_seed(5 + k))
        for k, g in enumerate(first)
    ]
    derived = call(case, "_grad_grad", [*inputs, cotangent, *weights])

    def pairing(ts: list[torch.Tensor]) -> torch.Tensor:
        grads = call(case, "_grad", ts)
        return sum((g * w).sum() for g, w in zip(grads, weights))

    expected = finite_difference(lambda ts: pairing(ts), [*inputs, cotangent], torch.ones(()))
    for got, want in zip(derived, expected):
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)


# seg-derive's saved-results: each level takes the results of the level
# below that its rules read (what an autograd node keeps) instead of
# recomputing them; the others are not arguments. With max and min, whose
# backward reads the extremum.
SAVED_CASES = [*CASES,
               Case("max3", ("row3",),
                    "seg.max %a0, %idx, %n : tensor<?x3xf64>, tensor<?xi32> -> tensor<?x3xf64>",
                    SEG3),
               Case("min1", ("row1",),
                    "seg.min %a0, %idx, %n : tensor<?xf64>, tensor<?xi32> -> tensor<?xf64>",
                    SEG1)]
# The cases whose first level reads the forward's result.
READS_RESULT = {"rms3", "max3", "min1"}


def saved_results_taken(derived: str, function: str) -> int:
    """How many saved results derived function `function` takes."""
    line = next(line for line in derived.splitlines() if f"func.func @{function}(" in line)
    return line.count("seg.saved_result =")


@cache
def saved_and_recomputed(case: Case) -> tuple[str, harness.CompiledModule,
                                              harness.CompiledModule]:
    derived = _compiler.seg_opt(source(case), "--seg-derive=order=2 saved-results=1")
    recomputed = _compiler.seg_opt(source(case), "--seg-derive=order=2")
    return derived, harness.CompiledModule(derived), harness.CompiledModule(recomputed)


@pytest.mark.parametrize("case", SAVED_CASES, ids=lambda c: c.name)
def test_levels_on_saved_results_match_recomputing_levels(case: Case) -> None:
    """The first level on the saved result (where it reads it) is the
    recomputing one's; the second gives the gradients of x, the saved
    result and the cotangent, and x's total (its own plus the saved
    result's, pulled back through the first level) is the recomputing
    second level's."""
    derived, saved, recomputed = saved_and_recomputed(case)
    reads_result = saved_results_taken(derived, case.name + "_grad") == 1
    assert reads_result == (case.name in READS_RESULT)
    # No rule of a second level reads the first level's result.
    assert saved_results_taken(derived, case.name + "_grad_grad") == 0
    x = random_inputs(case, seed=7)
    (result,) = recomputed.run(case.name, [*x, IDX], N, S)
    kept = [result] if reads_result else []
    generator = torch.Generator().manual_seed(8)
    g = torch.randn(result.shape, dtype=torch.float64, generator=generator)
    first = recomputed.run(case.name + "_grad", [*x, IDX, g], N, S)
    first_saved = saved.run(case.name + "_grad", [*x, IDX, *kept, g], N, S)
    for got, want in zip(first_saved, first, strict=True):
        torch.testing.assert_close(got, want, rtol=1e-12, atol=1e-12)

    weights = [torch.randn(t.shape, dtype=torch.float64, generator=generator) for t in first]
    second = recomputed.run(case.name + "_grad_grad", [*x, IDX, g, *weights], N, S)
    *second_x, second_g = saved.run(case.name + "_grad_grad", [*x, IDX, *kept, g, *weights],
                                    N, S)
    if reads_result:
        *second_x, second_result = second_x
        through_result = saved.run(case.name + "_grad", [*x, IDX, result, second_result], N, S)
        second_x = [own + pulled for own, pulled in zip(second_x, through_result, strict=True)]
    for got, want in zip([*second_x, second_g], second, strict=True):
        torch.testing.assert_close(got, want, rtol=1e-10, atol=1e-10)


def test_empty_segments_give_zero_and_never_nan() -> None:
    for case in CASES:
        inputs = random_inputs(case, seed=6)
        (forward,) = call(case, "", inputs)
        assert not torch.isnan(forward).any(), case.name
        if forward.shape[0] == S:  # a per-segment result
            empty = torch.tensor([c == 0 for c in COUNTS])
            assert torch.equal(forward[empty], torch.zeros_like(forward[empty])), case.name


def test_rms_norm_all_zero_segment_has_zero_gradient() -> None:
    case = next(c for c in CASES if c.name == "rms3")
    inputs = random_inputs(case, seed=7, zero_segment=2)
    (forward,) = call(case, "", inputs)
    assert forward[2].item() == 0.0
    cotangent = torch.ones(S, dtype=torch.float64)
    (grad,) = call(case, "_grad", [*inputs, cotangent])
    rows = IDX == 2
    assert torch.equal(grad[rows], torch.zeros_like(grad[rows]))
    assert not torch.isnan(grad).any()
    # First-order finite differences are 0 there too (central differences of
    # |x| at 0), and match elsewhere.
    expected = finite_difference(lambda ts: call(case, "", ts)[0], inputs, cotangent)
    torch.testing.assert_close(grad, expected[0], rtol=1e-6, atol=1e-6)
    second = call(case, "_grad_grad", [*inputs, cotangent, torch.ones(N, 3, dtype=torch.float64)])
    assert all(not torch.isnan(t).any() for t in second)


COMPOSITE = """
func.func @energy(%x: tensor<?x3xf64>, %m: tensor<?x3x3xf64>, %idx: tensor<?xi32>, %n: index) -> tensor<?x3xf64> {
  %rot = seg.matvec %x, %m, %idx : tensor<?x3xf64>, tensor<?x3x3xf64>, tensor<?xi32> -> tensor<?x3xf64>
  %rms = seg.rms_norm %rot, %idx, %n : tensor<?x3xf64>, tensor<?xi32> -> tensor<?xf64>
  %dot = seg.dot %x, %rot, %idx, %n : tensor<?x3xf64>, tensor<?x3xf64>, tensor<?xi32> -> tensor<?xf64>
  %w = arith.addf %rms, %dot : tensor<?xf64>
  %scaled = seg.mul %rot, %w, %idx : tensor<?x3xf64>, tensor<?xf64>, tensor<?xi32> -> tensor<?x3xf64>
  %total = seg.sum %scaled, %idx, %n : tensor<?x3xf64>, tensor<?xi32> -> tensor<?x3xf64>
  %mean = seg.mean %x, %idx, %n : tensor<?x3xf64>, tensor<?xi32> -> tensor<?x3xf64>
  %out = arith.subf %total, %mean : tensor<?x3xf64>
  return %out : tensor<?x3xf64>
}
"""


def test_fused_composite_and_its_gradients_match_pytorch() -> None:
    """Several ops in one function: one fused kernel per function (2, 3 and 4
    passes over each segment's rows), matching autograd of the same formula."""
    module = harness.CompiledModule(
        _compiler.seg_opt(COMPOSITE, "--seg-derive=order=2"))
    assert [k.passes for k in module.kernels.values()] == [2, 3, 4]
    generator = torch.Generator().manual_seed(11)
    x = torch.randn(N, 3, dtype=torch.float64, generator=generator, requires_grad=True)
    m = torch.randn(S, 3, 3, dtype=torch.float64, generator=generator, requires_grad=True)
    counts = torch.tensor(COUNTS, dtype=torch.float64)

    def reference(x: torch.Tensor, m: torch.Tensor) -> torch.Tensor:
        seg = IDX.long()
        rot = torch.einsum("nij,ni->nj", m[seg], x)
        def sums(t):
            return torch.zeros((S,) + t.shape[1:], dtype=t.dtype).index_add(0, seg, t)
        rms = torch.sqrt(sums((rot * rot).sum(-1)) / counts.clamp(min=1))
        w = rms + sums((x * rot).sum(-1))
        total = sums(rot * w[seg][:, None])
        return total - sums(x) / counts.clamp(min=1)[:, None]

    expected = reference(x, m)
    (out,) = module.run("energy", [x.detach(), m.detach(), IDX], N, S)
    torch.testing.assert_close(out, expected.detach())
    g = torch.randn(S, 3, dtype=torch.float64, generator=generator)
    grads = module.run("energy_grad", [x.detach(), m.detach(), IDX, g], N, S)
    want = torch.autograd.grad(expected, (x, m), g, create_graph=True)
    for got, ref in zip(grads, want):
        torch.testing.assert_close(got, ref.detach())
    hx = torch.randn(N, 3, dtype=torch.float64, generator=generator)
    hm = torch.randn(S, 3, 3, dtype=torch.float64, generator=generator)
    g_leaf = g.clone().requires_grad_()
    first = torch.autograd.grad(reference(x, m), (x, m), g_leaf, create_graph=True)
    pairing = (first[0] * hx).sum() + (first[1] * hm).sum()
    want2 = torch.autograd.grad(pairing, (x, m, g_leaf))
    got2 = module.run("energy_grad_grad", [x.detach(), m.detach(), IDX, g, hx, hm], N, S)
    for got, ref in zip(got2, want2):
        torch.testing.assert_close(got, ref)
