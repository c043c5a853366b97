"""The six public ops through torch.ops.segops: parity with a pure-PyTorch
reference, gradients to third order, opcheck, torch.compile, bad input."""

from __future__ import annotations

import pytest
import torch
from conftest import layout

import segops

COUNTS = [2, 0, 3, 1, 0, 4]
S = len(COUNTS)


def _sum(x: torch.Tensor, idx: torch.Tensor) -> torch.Tensor:
    return torch.zeros((S,) + x.shape[1:], dtype=x.dtype).index_add(0, idx.long(), x)


def _count(idx: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    return torch.zeros(S, dtype=dtype).index_add_(
        0, idx.long(), torch.ones(idx.shape[0], dtype=dtype)
    )


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
    "sum": (
        lambda d: (d["x"],),
        lambda x, idx: segops.segmented_sum(x, idx, S),
        lambda x, idx: _sum(x, idx),
    ),
    "mean": (
        lambda d: (d["x1"],),
        lambda x, idx: segops.segmented_mean(x, idx, S),
        lambda x, idx: _sum(x, idx) / _count(idx, x.dtype).clamp(min=1),
    ),
    "rms_norm": (
        lambda d: (d["x"],),
        lambda x, idx: segops.segmented_rms_norm(x, idx, S),
        ref_rms_norm,
    ),
    "dot": (
        lambda d: (d["x"], d["y"]),
        lambda x, y, idx: segops.segmented_dot(x, y, idx, S),
        lambda x, y, idx: _sum((x * y).sum(-1), idx),
    ),
    "mul": (
        lambda d: (d["x"], d["w"]),
        lambda x, w, idx: segops.segmented_mul(x, w, idx, S),
        lambda x, w, idx: x * w[idx.long()][:, None],
    ),
    "matvec": (
        lambda d: (d["x"], d["m"]),
        lambda v, m, idx: segops.segmented_matvec(v, m, idx, S),
        ref_matvec,
    ),
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
        per_segment = segops.segmented_rms_norm(rotated, idx, S) + segops.segmented_dot(
            x, rotated, idx, S
        )
        scaled = segops.segmented_mul(rotated, per_segment, idx, S)
        return (segops.segmented_sum(scaled, idx, S) ** 2).sum() + segops.segmented_mean(
            x, idx, S
        ).sum()

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
        (lambda d: segops.segmented_rms_norm(d["x"].half(), d["idx"], S), TypeError,
         "x must be float32 or float64"),
        (lambda d: segops.segmented_rms_norm(d["x"], d["idx"][:-1], S), ValueError,
         "idx must have one entry per row of x"),
    ],
)
def test_bad_input(call, error: type, message: str) -> None:
    with pytest.raises(error, match=message):
        call(make())


LAYOUTS = {
    "empty_head_middle_tail": [0, 0, 3, 0, 5, 1, 0, 0],
    "one_segment": [97],
    "one_row_per_segment": [1] * 50,
    "skewed": [1, 700, 2, 0, 1, 90],
    "random": torch.randint(0, 12, (200,), generator=torch.Generator().manual_seed(9)).tolist(),
}


def _reference(op: str, floats: list[torch.Tensor], idx: torch.Tensor, s: int) -> torch.Tensor:
    seg = idx.long()
    counts = torch.zeros(s, dtype=floats[0].dtype).index_add_(
        0, seg, torch.ones(idx.shape[0], dtype=floats[0].dtype)).clamp(min=1)
    def sums(t):
        return torch.zeros((s,) + t.shape[1:], dtype=t.dtype).index_add(0, seg, t)
    x = floats[0]
    def per_row(t):
        return t if t.dim() == 1 else t.sum(-1)
    if op == "sum":
        return sums(x)
    if op == "mean":
        return sums(x) / (counts if x.dim() == 1 else counts[:, None])
    if op == "rms_norm":
        return torch.sqrt(sums(per_row(x * x)) / counts)
    if op == "dot":
        return sums(per_row(x * floats[1]))
    if op == "mul":
        scale = floats[1][seg]
        return x * (scale if x.dim() == 1 else scale[:, None])
    return torch.einsum("nij,ni->nj", floats[1][seg], x)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("width", [1, 3])
@pytest.mark.parametrize("name", sorted(LAYOUTS))
@pytest.mark.parametrize("op", ["sum", "mean", "rms_norm", "dot", "mul", "matvec"])
def test_layouts(device: str, op: str, name: str, width: int, dtype: torch.dtype) -> None:
    if op == "matvec" and width == 1:
        pytest.skip("matvec takes (N, 3) rows")
    counts = LAYOUTS[name]
    s = len(counts)
    idx = layout(counts)
    generator = torch.Generator().manual_seed(len(counts))
    rows = (idx.shape[0],) if width == 1 else (idx.shape[0], 3)
    floats = [torch.randn(rows, dtype=dtype, generator=generator)]
    if op == "dot":
        floats.append(torch.randn(rows, dtype=dtype, generator=generator))
    if op == "mul":
        floats.append(torch.randn(s, dtype=dtype, generator=generator))
    if op == "matvec":
        floats.append(torch.randn(s, 3, 3, dtype=dtype, generator=generator))
    expected = _reference(op, floats, idx, s)
    function = getattr(segops, f"segmented_{op}")
    got = function(*[t.to(device) for t in floats], idx.to(device), s)
    tolerance = {"rtol": 1e-4, "atol": 1e-4} if dtype == torch.float32 else {}
    torch.testing.assert_close(got.cpu(), expected, **tolerance)


@pytest.mark.parametrize("op", sorted(CALLS))
@pytest.mark.parametrize("level", [1, 2])
def test_opcheck_derivative_levels(op: str, level: int) -> None:
    """The derivative ops pass opcheck too (schema, fake kernel, autograd)."""
    data = make(7)
    args, _, _ = CALLS[op]
    # Build the inputs of level `level` directly: floats, then cotangents of
    # each level's outputs, as the autograd chain does.
    floats = [t.clone() for t in args(data)]
    op_name = f"segmented_{op}"
    result = getattr(torch.ops.segops, op_name)(*floats, data["idx"], S)
    current = [result] if isinstance(result, torch.Tensor) else list(result)
    for _ in range(level):
        floats = floats + [torch.randn_like(t) for t in current]
        op_name += "_grad"
        result = getattr(torch.ops.segops, op_name)(*floats, data["idx"], S)
        current = [result] if isinstance(result, torch.Tensor) else list(result)
    inputs = tuple(t.clone().requires_grad_() for t in floats)
    torch.library.opcheck(getattr(torch.ops.segops, op_name).default, (*inputs, data["idx"], S))


def test_backward_saves_only_what_it_reads() -> None:
    """The backward of sum reads only the cotangent: x is not kept alive."""
    idx = layout([2, 3])
    x = torch.randn(5, 3, dtype=torch.float64, requires_grad=True)
    scaled = x * 2.0
    saved = []

    def pack(tensor: torch.Tensor) -> torch.Tensor:
        saved.append(tuple(tensor.shape))
        return tensor

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda tensor: tensor):
        out = segops.segmented_sum(scaled, idx, 2)
    assert sorted(saved) == [(0, 3), (5,)]  # idx, and an empty stand-in for x
    (grad,) = torch.autograd.grad(out.sum(), x)
    torch.testing.assert_close(grad, torch.full_like(x, 2.0))


def test_compile_with_inductor_matches_eager() -> None:
    """The default backend (inductor) around segops ops: one graph, same
    values and first-order gradients as eager (~25 s of compilation)."""
    torch._dynamo.reset()
    idx = layout([2, 0, 3, 1])

    def energy(x: torch.Tensor, m: torch.Tensor) -> torch.Tensor:
        rotated = segops.segmented_matvec(x, m, idx, 4)
        scale = segops.segmented_rms_norm(rotated, idx, 4)
        return (
            segops.segmented_sum(segops.segmented_mul(rotated, scale, idx, 4), idx, 4) ** 2
        ).sum()

    generator = torch.Generator().manual_seed(8)
    x = torch.randn(6, 3, generator=generator, requires_grad=True)
    m = torch.randn(4, 3, 3, generator=generator, requires_grad=True)
    compiled = torch.compile(energy, fullgraph=True)
    got = torch.autograd.grad(compiled(x, m), (x, m))
    want = torch.autograd.grad(energy(x, m), (x, m))
    for a, b in zip(got, want):
        torch.testing.assert_close(a, b)


@pytest.mark.parametrize("op", ["sum", "mean", "rms_norm", "dot", "mul", "matvec"])
def test_long_segments_in_tiles_to_second_order(op: str) -> None:
    """Segments of 2^17 rows or more run in tiles over the threads, pass by
    pass, in every kernel (backward kernels store rows and take several
    passes): gradients to second order equal the reference's, bitwise the
    same for 1, 2 and 3 threads."""
    counts = [10, 300_000, 5, 0, 140_000, 3]
    s = len(counts)
    idx = layout(counts)
    generator = torch.Generator().manual_seed(5)
    rows = (idx.shape[0], 3)
    floats = [torch.randn(rows, dtype=torch.float64, generator=generator)]
    if op == "dot":
        floats.append(torch.randn(rows, dtype=torch.float64, generator=generator))
    if op == "mul":
        floats.append(torch.randn(s, dtype=torch.float64, generator=generator))
    if op == "matvec":
        floats.append(torch.randn(s, 3, 3, dtype=torch.float64, generator=generator))
    function = getattr(segops, f"segmented_{op}")

    def derivatives(call) -> list[torch.Tensor]:
        inputs = [t.clone().requires_grad_() for t in floats]
        out = call(inputs)
        weights = torch.randn(
            out.shape, dtype=out.dtype, generator=torch.Generator().manual_seed(1)
        )
        grads = torch.autograd.grad((out * weights).sum(), inputs, create_graph=True)
        objective = sum(g.square().sum() for g in grads)
        second = (torch.autograd.grad(objective, inputs, allow_unused=True,
                                      materialize_grads=True)
                  if objective.requires_grad else [torch.zeros_like(t) for t in inputs])
        return [out.detach(), *[g.detach() for g in grads], *second]

    expected = derivatives(lambda inputs: _reference(op, inputs, idx, s))
    previous = torch.get_num_threads()
    try:
        results = []
        for threads in (1, 2, 3):
            torch.set_num_threads(threads)
            results.append(derivatives(lambda inputs: function(*inputs, idx, s)))
    finally:
        torch.set_num_threads(previous)
    for got in results[1:]:
        assert all(torch.equal(a, b) for a, b in zip(results[0], got)), op
    for got, want in zip(results[0], expected):
        torch.testing.assert_close(got, want, rtol=1e-9, atol=1e-9)
