"""bfloat16 and float16 rows (issue 40): sum, mean, max, min and gather run
them in float32 and return their results, and gradients, in the input
dtype. References: the same ops in float32 on the same (16-bit) values,
rounded to the dtype once; the tolerances are torch.testing's for the dtype
(about one rounding)."""

from __future__ import annotations

import pytest
import torch
from conftest import layout, run_simulated

import segops
from segops._validation import DTypeError

SIXTEEN_BIT = [torch.bfloat16, torch.float16]
REDUCTIONS = {
    "segmented_sum": lambda x, idx, s: torch.zeros(s, *x.shape[1:], dtype=x.dtype).index_add(
        0, idx.long(), x),
    "segmented_mean": lambda x, idx, s: torch.zeros(s, *x.shape[1:], dtype=x.dtype).index_add(
        0, idx.long(), x) / torch.bincount(idx.long(), minlength=s).clamp(min=1).to(
            x.dtype).reshape(-1, *[1] * (x.dim() - 1)),
    "segmented_max": lambda x, idx, s: torch.zeros(s, *x.shape[1:], dtype=x.dtype).index_reduce(
        0, idx.long(), x, "amax", include_self=False),
    "segmented_min": lambda x, idx, s: torch.zeros(s, *x.shape[1:], dtype=x.dtype).index_reduce(
        0, idx.long(), x, "amin", include_self=False),
}
# Empty segments, one row, several; a segment past a 32-row chunk.
COUNTS = [3, 0, 1, 40, 2, 0, 5]


def _rows(shape: tuple[int, ...], dtype: torch.dtype, device: str) -> torch.Tensor:
    # Distinct values, so max and min have one winner per segment.
    values = torch.randperm(int(torch.tensor(shape).prod()), dtype=torch.float32) / 64 - 4
    return values.reshape(shape).to(device=device, dtype=dtype)


@pytest.mark.parametrize("dtype", SIXTEEN_BIT)
@pytest.mark.parametrize("op", list(REDUCTIONS))
@pytest.mark.parametrize("shape", [(), (3,), (2, 2)], ids=["w1", "w3", "w2x2"])
def test_reductions_match_float32(device: str, op: str, dtype: torch.dtype,
                                  shape: tuple[int, ...]) -> None:
    idx = layout(COUNTS, device)
    x = _rows((idx.shape[0], *shape), dtype, device).requires_grad_()
    out = getattr(segops, op)(x, idx, len(COUNTS))
    x32 = x.detach().float().requires_grad_()
    ref = REDUCTIONS[op](x32.cpu(), idx.cpu(), len(COUNTS)).to(device)
    assert out.dtype == dtype and out.shape == ref.shape
    torch.testing.assert_close(out, ref.to(dtype))
    cotangent = _rows(tuple(out.shape), dtype, device)
    grad, = torch.autograd.grad(out, x, cotangent)
    grad_ref, = torch.autograd.grad(ref, x32, cotangent.float())
    assert grad.dtype == dtype
    torch.testing.assert_close(grad, grad_ref.to(device=device, dtype=dtype))


@pytest.mark.parametrize("dtype", SIXTEEN_BIT)
@pytest.mark.parametrize("shape", [(), (3,)], ids=["w1", "w3"])
def test_gather_matches_float32(device: str, dtype: torch.dtype, shape: tuple[int, ...]) -> None:
    idx = layout(COUNTS, device)
    y = _rows((len(COUNTS), *shape), dtype, device).requires_grad_()
    out = segops.segmented_gather(y, idx)
    assert out.dtype == dtype
    torch.testing.assert_close(out, y.detach()[idx.long()])
    cotangent = _rows(tuple(out.shape), dtype, device)
    grad, = torch.autograd.grad(out, y, cotangent)
    ref = torch.zeros(len(COUNTS), *shape, device=device).index_add(
        0, idx.long(), cotangent.float())
    assert grad.dtype == dtype
    torch.testing.assert_close(grad, ref.to(dtype))


@pytest.mark.parametrize("dtype", SIXTEEN_BIT)
def test_second_order_of_mean(dtype: torch.dtype) -> None:
    """Gradients of gradients go through the float32 kernels too."""
    idx = layout(COUNTS)
    x = _rows((idx.shape[0], 3), dtype, "cpu").requires_grad_()
    x32 = x.detach().float().requires_grad_()
    results = []
    for rows in (x, x32):
        out = segops.segmented_mean(rows * rows, idx, len(COUNTS))
        grad, = torch.autograd.grad(out.sum(), rows, create_graph=True)
        results.append(torch.autograd.grad((grad * grad).sum(), rows)[0])
    assert results[0].dtype == dtype
    # x * x and its gradients are rounded to the dtype too: a few roundings.
    eps = torch.finfo(dtype).eps
    torch.testing.assert_close(results[0], results[1].to(dtype), rtol=4 * eps, atol=4 * eps)


def test_sums_accumulate_in_float32() -> None:
    """2,049 rows of 1: accumulated in bfloat16 the sum stops at 256 (256 + 1
    rounds to 256), as index_add_'s does here; in float32 it is 2,049,
    rounded once to 2,048."""
    x = torch.ones(2049, dtype=torch.bfloat16)
    idx = torch.zeros(2049, dtype=torch.int32)
    assert segops.segmented_sum(x, idx, 1).item() == 2048.0
    assert torch.zeros(1, dtype=torch.bfloat16).index_add(0, idx.long(), x).item() < 2048


@pytest.mark.parametrize("op, call", [
    ("segmented_dot", lambda x, idx: segops.segmented_dot(x, x, idx, 2)),
    ("segmented_rms_norm", lambda x, idx: segops.segmented_rms_norm(x, idx, 2)),
    ("segmented_mul", lambda x, idx: segops.segmented_mul(x, torch.ones(2, dtype=x.dtype), idx, 2)),
])
@pytest.mark.parametrize("dtype", SIXTEEN_BIT)
def test_other_ops_name_what_takes_16_bit_rows(op: str, call, dtype: torch.dtype) -> None:
    x = torch.ones(4, dtype=dtype)
    idx = torch.tensor([0, 0, 1, 1], dtype=torch.int32)
    with pytest.raises(DTypeError, match=rf"{op}: x must be float32 or float64, got {dtype}"
                                         r" \(bfloat16 and float16 rows are taken by "
                                         r"segmented_sum, segmented_mean, segmented_gather, "
                                         r"segmented_max, segmented_min"):
        call(x, idx)


def test_other_dtypes_are_refused_as_before() -> None:
    with pytest.raises(DTypeError, match=r"x must be float32 or float64, got torch.int32$"):
        segops.segmented_sum(torch.ones(2, dtype=torch.int32), torch.zeros(2, dtype=torch.int32), 1)


@pytest.mark.compiler
@pytest.mark.parametrize("dtype", SIXTEEN_BIT)
def test_jit_runs_16_bit_rows_in_float32(dtype: torch.dtype) -> None:
    @segops.jit
    def energy(x, w, idx, n: int):
        return segops.segmented_sum(torch.tanh(x) * w, idx, n)

    idx = layout(COUNTS)
    x = _rows((idx.shape[0], 3), dtype, "cpu").requires_grad_()
    w = _rows((idx.shape[0], 3), dtype, "cpu") / 8
    out = energy(x, w, idx, len(COUNTS))
    x32 = x.detach().float().requires_grad_()
    ref = torch.zeros(len(COUNTS), 3).index_add(0, idx.long(), torch.tanh(x32) * w.float())
    assert out.dtype == dtype
    torch.testing.assert_close(out, ref.to(dtype))
    grad, = torch.autograd.grad(out.sum(), x)
    grad_ref, = torch.autograd.grad(ref.sum(), x32)
    assert grad.dtype == dtype
    torch.testing.assert_close(grad, grad_ref.to(dtype))


@pytest.mark.compiler
def test_jit_still_refuses_mixed_dtypes() -> None:
    @segops.jit
    def scaled(x, w, idx, n: int):
        return segops.segmented_sum(x * w, idx, n)

    idx = layout([2, 1])
    with pytest.raises(segops.JitError, match="float tensors must all be float32 or all"):
        scaled(torch.ones(3, dtype=torch.bfloat16), torch.ones(3), idx, 2)


@pytest.mark.compiler
@pytest.mark.parametrize("dtype", SIXTEEN_BIT)
def test_compiled_with_fusion(fresh_fusion_compilation, dtype: torch.dtype) -> None:
    """torch.compile with segops.fusion's pass: 16-bit rows give the float32
    values and gradients, rounded (their clusters are not fused yet)."""
    from segops import fusion

    def energy(x, w, idx):
        e = segops.segmented_sum(torch.tanh(x) * w, idx, len(COUNTS))
        return (e * e).sum()

    idx = layout(COUNTS)
    x = _rows((idx.shape[0], 3), dtype, "cpu").requires_grad_()
    w = _rows((idx.shape[0], 3), dtype, "cpu") / 8
    out = torch.compile(energy, options=fusion.options())(x, w, idx)
    grad, = torch.autograd.grad(out, x)
    x32 = x.detach().float().requires_grad_()
    ref = energy(x32, w.float(), idx)
    grad_ref, = torch.autograd.grad(ref, x32)
    assert out.dtype == dtype and grad.dtype == dtype
    torch.testing.assert_close(out, ref.to(dtype), rtol=2e-2, atol=1e-2)
    torch.testing.assert_close(grad, grad_ref.to(dtype), rtol=2e-2, atol=1e-2)


@pytest.mark.slow
@pytest.mark.simulator
def test_16_bit_rows_on_the_gpu_simulator() -> None:
    """The same reductions and gather on the GPU kernels (simulated), at the
    warp's 32-row packing threshold and across it."""
    run_simulated("""
        import torch, segops
        from conftest import layout
        for counts in ([32, 31, 1, 0, 33], [70]):
            idx = layout(counts)
            s = len(counts)
            for dtype in (torch.bfloat16, torch.float16):
                x = (torch.randperm(idx.shape[0] * 3) / 64 - 4).reshape(-1, 3).to(dtype)
                x.requires_grad_()
                x32 = x.detach().float().requires_grad_()
                for op in ("segmented_sum", "segmented_mean", "segmented_max", "segmented_min"):
                    out = getattr(segops, op)(x, idx, s)
                    ref = getattr(segops, op)(x32, idx, s)
                    assert out.dtype == dtype
                    torch.testing.assert_close(out, ref.to(dtype))
                    g, = torch.autograd.grad(out.sum(), x)
                    g32, = torch.autograd.grad(ref.sum(), x32)
                    torch.testing.assert_close(g, g32.to(dtype))
                y = x.detach()[:s].clone().requires_grad_()
                out = segops.segmented_gather(y, idx)
                torch.testing.assert_close(out, y.detach()[idx.long()])
        print("ok")
    """)


def test_the_bench_section_times_every_case(capsys: pytest.CaptureFixture[str]) -> None:
    from bench import sixteen_bit

    rows = sixteen_bit.run("cpu", sizes=(2000,), widths=(1, 3), lengths=(10,),
                           dtypes=("bf16", "f16"), budget=0.01)
    assert [(r["dtype"], r["width"]) for r in rows] == [
        ("bf16", 1), ("f16", 1), ("bf16", 3), ("f16", 3)]
    assert all(r["segops_ms"] > 0 and r["index_add_ms"] > 0 for r in rows)
    assert "16-bit sum: worst vs index_add_" in sixteen_bit.summarize(rows)[0]
    assert "index_add_ ms" in capsys.readouterr().out
