"""The six public ops through torch.ops.segops: parity with a pure-PyTorch
reference, gradients to third order, opcheck, torch.compile, bad input."""

from __future__ import annotations

import pytest
import torch

import segops
from conftest import layout

COUNTS = [2, 0, 3, 1, 0, 4]
S = len(COUNTS)


def _sum(x: torch.Tensor, idx: torch.Tensor) -> torch.Tensor:
    return torch.zeros((S,) + x.shape[1:], dtype=x.dtype).index_add(0, idx.long(), x)


def _count(idx: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    return torch.zeros(S, dtype=dtype).index_add_(0, idx.long(), torch.ones(idx.shape[0], dtype=dtype))


def ref_rms_norm(x: torch.Tensor, idx: torch.Tensor) -> torch.Tensor:
    mean_square = _sum((x * x).sum(-1), idx) / _count(idx, x.dtype).clamp(min=1)
    positive = mean_square > 0
    return torch.where(positive, torch.sqrt(torch.where(positive, mean_square, 1.0)), 0.0)


def ref_matvec(v: torch.Tensor, m: torch.Tensor, idx: torch.Tensor) -> torch.Tensor:
    return torch.einsum("nij,ni->nj", m[idx.long()], v)


def make(seed: int = 0) -> dict[str, torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    idx = layout(COUNTS)
    n = idx.shape[0]
    return {
        "idx": idx,
        "x": torch.randn(n, 3, dtype=torch.float64, generator=generator),
        "x1": torch.randn(n, dtype=torch.float64, generator=generator),
        "y": torch.randn(n, 3, dtype=torch.float64, generator=generator),
        "w": torch.randn(S, dtype=torch.float64, generator=generator),
        "m": torch.randn(S, 3, 3, dtype=torch.float64, generator=generator),
    }


CALLS = {
    "sum": (lambda d: (d["x"],), lambda x, idx: segops.segmented_sum(x, idx, S), lambda x, idx: _sum(x, idx)),
    "mean": (lambda d: (d["x1"],), lambda x, idx: segops.segmented_mean(x, idx, S),
             lambda x, idx: _sum(x, idx) / _count(idx, x.dtype).clamp(min=1)),
    "rms_norm": (lambda d: (d["x"],), lambda x, idx: segops.segmented_rms_norm(x, idx, S), ref_rms_norm),
    "dot": (lambda d: (d["x"], d["y"]), lambda x, y, idx: segops.segmented_dot(x, y, idx, S),
            lambda x, y, idx: _sum((x * y).sum(-1), idx)),
    "mul": (lambda d: (d["x"], d["w"]), lambda x, w, idx: segops.segmented_mul(x, w, idx, S),
            lambda x, w, idx: x * w[idx.long()][:, None]),
    "matvec": (lambda d: (d["x"], d["m"]), lambda v, m, idx: segops.segmented_matvec(v, m, idx, S), ref_matvec),
}


@pytest.mark.parametrize("op", sorted(CALLS))
def test_forward_matches_reference(op: str) -> None:
    data = make()
    args, call, reference = CALLS[op]
    torch.testing.assert_close(call(*args(data), data["idx"]), reference(*args(data), data["idx"]))


@pytest.mark.parametrize("op", sorted(CALLS))
def test_gradcheck_and_gradgradcheck(op: str) -> None:
    data = make(1)
    args, call, _ = CALLS[op]
    inputs = tuple(t.clone().requires_grad_() for t in args(data))
    assert torch.autograd.gradcheck(lambda *ts: call(*ts, data["idx"]), inputs)
    assert torch.autograd.gradgradcheck(lambda *ts: call(*ts, data["idx"]), inputs)


@pytest.mark.parametrize("op", ["rms_norm", "matvec"])
def test_third_order_matches_reference(op: str) -> None:
    data = make(2)
    args, call, reference = CALLS[op]

    def third(fn) -> list[torch.Tensor]:
        inputs = [t.clone().requires_grad_() for t in args(data)]
        out = fn(*inputs, data["idx"])
        weights = torch.Generator().manual_seed(3)
        g = torch.randn(out.shape, dtype=out.dtype, generator=weights)
        first = torch.autograd.grad(out, inputs, g, create_graph=True)
        h = [torch.randn(t.shape, dtype=t.dtype, generator=weights) for t in first]
        second = torch.autograd.grad(first, inputs, h, create_graph=True)
        k = [torch.randn(t.shape, dtype=t.dtype, generator=weights) for t in second]
        # A bilinear op's second derivatives are constants: nothing to differentiate.
        live = [(t, w) for t, w in zip(second, k) if t.requires_grad]
        if not live:
            return [None] * len(inputs)
        return list(torch.autograd.grad([t for t, _ in live], inputs, [w for _, w in live],
                                        allow_unused=True))

    for got, want in zip(third(call), third(reference)):
        if want is None:
            assert got is None or torch.count_nonzero(got) == 0
        else:
            torch.testing.assert_close(got, want)


def test_rms_norm_all_zero_segment() -> None:
    data = make(4)
    x = data["x"].clone()
    x[data["idx"] == 2] = 0.0
    x.requires_grad_()
    out = segops.segmented_rms_norm(x, data["idx"], S)
    assert out[2].item() == 0.0 and out[1].item() == 0.0
    (grad,) = torch.autograd.grad(out.sum(), x)
    assert torch.equal(grad[data["idx"] == 2], torch.zeros_like(grad[data["idx"] == 2]))
    assert not torch.isnan(grad).any()


@pytest.mark.parametrize("op", sorted(CALLS))
def test_opcheck(op: str) -> None:
    data = make(5)
    args, _, _ = CALLS[op]
    inputs = tuple(t.clone().requires_grad_() for t in args(data))
    torch.library.opcheck(getattr(torch.ops.segops, f"segmented_{op}").default,
                          (*inputs, data["idx"], S))


def test_compile_fullgraph_all_ops() -> None:
    torch._dynamo.reset()
    data = make(6)

    def energy(x: torch.Tensor, m: torch.Tensor) -> torch.Tensor:
        idx = data["idx"]
        rotated = segops.segmented_matvec(x, m, idx, S)
        per_segment = segops.segmented_rms_norm(rotated, idx, S) + segops.segmented_dot(x, rotated, idx, S)
        scaled = segops.segmented_mul(rotated, per_segment, idx, S)
        return (segops.segmented_sum(scaled, idx, S) ** 2).sum() + segops.segmented_mean(x, idx, S).sum()

    x = data["x"].clone().requires_grad_()
    m = data["m"].clone().requires_grad_()
    compiled = torch.compile(energy, fullgraph=True, backend="aot_eager")
    eager_grads = torch.autograd.grad(energy(x, m), (x, m))
    compiled_grads = torch.autograd.grad(compiled(x, m), (x, m))
    for got, want in zip(compiled_grads, eager_grads):
        torch.testing.assert_close(got, want)


@pytest.mark.parametrize(
    "call, error, message",
    [
        (lambda d: segops.segmented_mul(d["x"], d["w"], d["idx"], S + 1), ValueError,
         r"num_segments \(7\) must equal y.shape\[0\] \(6\)"),
        (lambda d: segops.segmented_matvec(d["x"], d["m"], d["idx"], S - 1), ValueError,
         r"num_segments \(5\) must equal m.shape\[0\] \(6\)"),
        (lambda d: segops.segmented_matvec(d["x1"], d["m"], d["idx"], S), ValueError,
         r"v must have shape \(N, 3\)"),
        (lambda d: segops.segmented_matvec(d["x"], d["m"][:, :2], d["idx"], S), ValueError,
         r"m must have shape \(num_segments, 3, 3\)"),
        (lambda d: segops.segmented_dot(d["x"], d["x1"], d["idx"], S), ValueError,
         "x and y must have the same shape"),
        (lambda d: segops.segmented_dot(d["x"], d["y"].float(), d["idx"], S), TypeError,
         "all float tensors must have one dtype"),
        (lambda d: segops.segmented_mul(d["x"], d["w"][:, None], d["idx"], S), ValueError,
         r"y must have shape \(num_segments,\)"),
        (lambda d: segops.segmented_mean(d["x"].half(), d["idx"], S), TypeError,
         "x must be float32 or float64"),
        (lambda d: segops.segmented_rms_norm(d["x"], d["idx"][:-1], S), ValueError,
         "idx must have one entry per row of x"),
    ],
)
def test_bad_input(call, error: type, message: str) -> None:
    with pytest.raises(error, match=message):
        call(make())
