"""Every kernel of the op library against a pure-PyTorch reference: the
forward functions, and the derived first and second derivatives (compiled
from seg-differentiate's output) against torch.autograd of the reference, in
float64 and float32, on CPU and (where present) CUDA."""

from __future__ import annotations

from collections.abc import Callable

import harness
import pytest
import torch
from conftest import layout

from segops import _library
from segops._dtypes import MANIFEST_DTYPES

COUNTS = [3, 0, 1, 4, 0, 2, 0]
S = len(COUNTS)


def _count(idx: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
    return torch.zeros(S, dtype=like.dtype, device=like.device).index_add_(
        0, idx.long(), torch.ones(idx.shape[0], dtype=like.dtype, device=like.device))


def _sum(x: torch.Tensor, idx: torch.Tensor) -> torch.Tensor:
    return torch.zeros((S,) + x.shape[1:], dtype=x.dtype, device=x.device).index_add(
        0, idx.long(), x
    )


def _rows(x: torch.Tensor) -> torch.Tensor:
    """|x|^2 per row, for scalar or vec3 rows."""
    return x * x if x.dim() == 1 else (x * x).sum(-1)


def _rms(x: torch.Tensor, idx: torch.Tensor) -> torch.Tensor:
    mean_square = _sum(_rows(x), idx) / _count(idx, x).clamp(min=1)
    positive = mean_square > 0
    # sqrt with gradient 0 at 0, as the contract asks.
    return torch.where(positive, torch.sqrt(torch.where(positive, mean_square, 1.0)), 0.0)


def _mul(x: torch.Tensor, y: torch.Tensor, idx: torch.Tensor) -> torch.Tensor:
    scale = y[idx.long()]
    return x * (scale if x.dim() == 1 else scale[:, None])


def _extremum(x: torch.Tensor, idx: torch.Tensor, reduce: str) -> torch.Tensor:
    """scatter_reduce's amax/amin: 0 for an empty segment, ties sharing the
    gradient evenly (as seg.max/min)."""
    index = idx.long().view(-1, *([1] * (x.dim() - 1))).expand_as(x)
    return x.new_zeros((S,) + x.shape[1:]).scatter_reduce(
        0, index, x, reduce, include_self=False)


REFERENCES: dict[str, Callable[..., torch.Tensor]] = {
    "segmented_sum": lambda x, idx: _sum(x, idx),
    "segmented_mean": lambda x, idx: _sum(x, idx) / (
        _count(idx, x).clamp(min=1) if x.dim() == 1 else _count(idx, x).clamp(min=1)[:, None]),
    "segmented_rms_norm": _rms,
    "segmented_dot": lambda x, y, idx: _sum(x * y if x.dim() == 1 else (x * y).sum(-1), idx),
    "segmented_mul": _mul,
    "segmented_matvec": lambda v, m, idx: torch.einsum("nij,ni->nj", m[idx.long()], v),
    "segmented_gather": lambda y, idx: y[idx.long()],
    "segmented_max": lambda x, idx: _extremum(x, idx, "amax"),
    "segmented_min": lambda x, idx: _extremum(x, idx, "amin"),
}



def _forward_kernels() -> list[str]:
    return sorted(name for name in _library.kernels() if not name.endswith("_grad"))


def _entry(name: str) -> dict:
    return next(e for e in _library.manifest().kernels.values() if e.name == name)


def _op(name: str) -> str:
    return name.rsplit("_", 2)[0]


def _make(buffer: dict, n: int, generator: torch.Generator, device: str) -> torch.Tensor:
    shape = buffer.extents(n, S)
    return torch.randn(shape, dtype=torch.float64, generator=generator).to(
        device=device, dtype=MANIFEST_DTYPES[buffer.dtype])


def _run(name: str, floats: list[torch.Tensor], idx: torch.Tensor,
         extra: list[torch.Tensor]) -> list[torch.Tensor]:
    """Calls kernel `name` with its function's arguments in order: the float
    inputs with idx placed where the function has it, the results of the
    level below it reads (computed, as autograd saves them), then the
    cotangents."""
    entry = _entry(name)
    saved = harness.saved_result_positions(entry)
    inputs, floats_left = [], list(floats) + list(extra)
    for position, buffer in enumerate(b for b in entry.buffers if not b.is_output):
        if position in saved:
            inputs.append(torch.empty(0))  # with_saved_results fills it
            continue
        inputs.append(idx if buffer.name == "idx" else floats_left.pop(0))
    inputs = harness.with_saved_results(entry, inputs, idx.shape[0], S)
    outputs = [torch.empty(buffer.extents(idx.shape[0], S),
                           dtype=MANIFEST_DTYPES[buffer.dtype], device=idx.device)
               for buffer in entry.buffers if buffer.is_output]
    harness.run(name, inputs, outputs, idx.shape[0], S)
    return outputs


def _tolerance(dtype: torch.dtype) -> dict[str, float]:
    return (
        {"rtol": 2e-4, "atol": 2e-4} if dtype == torch.float32 else {"rtol": 1e-10, "atol": 1e-10}
    )


@pytest.mark.parametrize("name", _forward_kernels())
def test_kernel_and_derived_gradients_match_reference(device: str, name: str) -> None:
    idx = layout(COUNTS, device)
    n = idx.shape[0]
    generator = torch.Generator().manual_seed(hash(name) % 2**31)
    entry = _entry(name)
    floats = [_make(b, n, generator, device) for b in entry.buffers
              if not b.is_output and b.name != "idx"]
    dtype = floats[0].dtype
    reference = REFERENCES[_op(name)]

    (forward,) = _run(name, floats, idx, [])
    leaves = [f.double().requires_grad_() for f in floats]
    expected = reference(*leaves, idx)
    torch.testing.assert_close(forward.double(), expected.detach(), **_tolerance(dtype))

    # First order: the derived _grad kernel against autograd.
    cotangent = torch.randn(expected.shape, dtype=torch.float64, generator=generator).to(device)
    grads = _run(name + "_grad", floats, idx, [cotangent.to(dtype)])
    expected_grads = torch.autograd.grad(expected, leaves, cotangent, create_graph=True)
    for got, want in zip(grads, expected_grads):
        torch.testing.assert_close(got.double(), want.detach(), **_tolerance(dtype))

    # Second order: _grad_grad(inputs, g, h) = d<grad(inputs, g), h>/d(inputs, g).
    weights = [torch.randn(g.shape, dtype=torch.float64, generator=generator).to(device)
               for g in grads]
    second = _run(name + "_grad_grad", floats, idx,
                  [cotangent.to(dtype), *[w.to(dtype) for w in weights]])
    # Where the first level reads the forward's result, the second also
    # gives that result's gradient: pulled back through the first level
    # (autograd does so through the forward's node), it adds to x's.
    first_inputs = [b for b in _entry(name + "_grad").buffers
                    if not b.is_output and b.name != "idx"]
    saved = [i for i, b in enumerate(first_inputs) if b.saved_result >= 0]
    for i in reversed(saved):
        pulled = _run(name + "_grad", floats, idx, [second.pop(i)])
        second[:len(pulled)] = [own + more for own, more in zip(second, pulled)]
    cotangent_leaf = cotangent.clone().requires_grad_()
    first = torch.autograd.grad(reference(*leaves, idx), leaves, cotangent_leaf, create_graph=True)
    pairing = sum((g * w).sum() for g, w in zip(first, weights))
    expected_second = torch.autograd.grad(pairing, [*leaves, cotangent_leaf], allow_unused=True)
    for got, want in zip(second, expected_second):
        want = torch.zeros_like(got.double()) if want is None else want
        torch.testing.assert_close(got.double(), want, **_tolerance(dtype))


def test_library_has_every_public_op_to_second_order() -> None:
    names = set(_library.kernels())
    for op in ("sum", "mean", "rms_norm", "dot", "mul"):
        for dtype in ("f32", "f64"):
            for width in (1, 3):
                base = f"segmented_{op}_{dtype}_w{width}"
                assert {base, base + "_grad", base + "_grad_grad"} <= names
    for dtype in ("f32", "f64"):
        base = f"segmented_matvec_{dtype}_w3"
        assert {base, base + "_grad", base + "_grad_grad"} <= names
