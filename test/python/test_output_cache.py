"""The host output cache (segrt::HostBufferCache behind the C++ CPU kernels):
large outputs reuse freed buffers, which hold the previous owner's values, so
every kernel must write every element of its outputs; the limit, emptying,
resizing, the environment variable and fork."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable

import pytest
import torch

import segops
from segops import ops

pytestmark = pytest.mark.skipif(ops._native is None, reason="C++ kernels not in use")

# Outputs from 8 MiB on come from the cache: 2^21 f64 rows is 16 MiB (vec3:
# 48 MiB) and half as many segments 8 MiB.
N = 1 << 21
S = N // 2


@pytest.fixture(scope="module")
def data() -> dict[str, torch.Tensor]:
    generator = torch.Generator().manual_seed(5)
    # ~2-row segments, about one in seven empty: reductions must write 0 there.
    idx = torch.sort(torch.randint(0, S, (N,), generator=generator)).values.to(torch.int32)
    return {
        "idx": idx,
        "x1": torch.randn(N, dtype=torch.float64, generator=generator),
        "x3": torch.randn(N, 3, dtype=torch.float64, generator=generator),
        "w": torch.randn(S, dtype=torch.float64, generator=generator),
        "m": torch.randn(S, 3, 3, dtype=torch.float64, generator=generator),
    }


def _segment_sum(values: torch.Tensor, idx: torch.Tensor) -> torch.Tensor:
    return torch.zeros((S,) + values.shape[1:], dtype=values.dtype).index_add_(
        0, idx.long(), values
    )


def _mean(x: torch.Tensor, idx: torch.Tensor) -> torch.Tensor:
    counts = _segment_sum(torch.ones(N, dtype=x.dtype), idx).clamp(min=1)
    return _segment_sum(x, idx) / counts


def _rms_norm(x: torch.Tensor, idx: torch.Tensor) -> torch.Tensor:
    return _mean(x * x, idx).sqrt()


# name -> (inputs, op, reference)
CASES: dict[str, tuple[Callable, Callable, Callable]] = {
    "sum": (lambda d: [d["x1"]], lambda x, idx: segops.segmented_sum(x, idx, S), _segment_sum),
    "mean": (lambda d: [d["x1"]], lambda x, idx: segops.segmented_mean(x, idx, S), _mean),
    "rms_norm": (lambda d: [d["x1"]], lambda x, idx: segops.segmented_rms_norm(x, idx, S),
                 _rms_norm),
    "dot": (lambda d: [d["x3"], d["x3"].flip(0)],
            lambda x, y, idx: segops.segmented_dot(x, y, idx, S),
            lambda x, y, idx: _segment_sum((x * y).sum(-1), idx)),
    "mul": (lambda d: [d["x1"], d["w"]], lambda x, w, idx: segops.segmented_mul(x, w, idx, S),
            lambda x, w, idx: x * w[idx.long()]),
    "matvec": (lambda d: [d["x3"], d["m"]],
               lambda v, m, idx: segops.segmented_matvec(v, m, idx, S),
               lambda v, m, idx: torch.einsum("nij,ni->nj", m[idx.long()], v)),
}


def _outputs(op: Callable, inputs: list[torch.Tensor], idx: torch.Tensor) -> list[torch.Tensor]:
    """The forward output, then the gradients of its inputs (the backward
    kernel's outputs), for a fixed cotangent."""
    leaves = [t.detach().requires_grad_() for t in inputs]
    out = op(*leaves, idx)
    cotangent = torch.linspace(-1, 1, out.numel(), dtype=out.dtype).reshape(out.shape)
    grads = torch.autograd.grad(out, leaves, cotangent)
    return [out.detach(), *grads]


@pytest.mark.parametrize("name", CASES)
def test_reused_buffers_are_wholly_overwritten(name: str, data: dict[str, torch.Tensor]) -> None:
    """Every output of the forward and backward kernels, computed into
    buffers that held NaN, equals the one computed into fresh memory, and
    the forward output matches the reference."""
    make_inputs, op, reference = CASES[name]
    inputs, idx = make_inputs(data), data["idx"]
    segops.empty_output_cache()
    first = _outputs(op, inputs, idx)
    torch.testing.assert_close(first[0], reference(*inputs, idx))
    expected = [t.clone() for t in first]
    large = [t for t in first if t.nbytes >= 8 << 20]
    assert large, "the case must have outputs large enough for the cache"
    for tensor in first:
        tensor.fill_(float("nan"))
    addresses = {t.data_ptr() for t in large}
    hits = segops.output_cache_info()["hits"]
    del first, large
    second = _outputs(op, inputs, idx)
    assert segops.output_cache_info()["hits"] > hits
    assert addresses & {t.data_ptr() for t in second}, "no buffer was reused"
    for got, want in zip(second, expected):
        assert torch.equal(got, want)


def test_limit_and_empty(data: dict[str, torch.Tensor]) -> None:
    x, idx = data["x1"], data["idx"]
    info = segops.output_cache_info()
    limit = info["limit_bytes"]
    assert limit > 0
    try:
        segops.empty_output_cache()
        out = segops.segmented_mul(x, data["w"], idx, S)
        live = segops.output_cache_info()["live_bytes"]
        assert live >= out.nbytes
        del out
        info = segops.output_cache_info()
        assert (
            info["cached_bytes"] >= 16 << 20 and info["live_bytes"] == live - info["cached_bytes"]
        )
        segops.empty_output_cache()
        assert segops.output_cache_info()["cached_bytes"] == 0
        segops.set_output_cache_limit(0)
        segops.segmented_mul(x, data["w"], idx, S)  # freed at once
        assert segops.output_cache_info()["cached_bytes"] == 0
        # A limit below what is cached releases the excess at once.
        segops.set_output_cache_limit(limit)
        a, b = (segops.segmented_mul(x, data["w"], idx, S) for _ in range(2))
        del a, b
        assert segops.output_cache_info()["cached_buffers"] == 2
        segops.set_output_cache_limit(20 << 20)
        info = segops.output_cache_info()
        assert info["cached_buffers"] == 1 and info["cached_bytes"] <= 20 << 20
        with pytest.raises(ValueError, match="must be >= 0"):
            segops.set_output_cache_limit(-1)
    finally:
        segops.set_output_cache_limit(limit)


def test_small_outputs_do_not_use_the_cache() -> None:
    info = segops.output_cache_info()
    idx = torch.zeros(1000, dtype=torch.int32)
    segops.segmented_mul(torch.randn(1000), torch.randn(1), idx, 1)
    after = segops.output_cache_info()
    assert (after["hits"], after["misses"]) == (info["hits"], info["misses"])


def test_cached_outputs_resize_like_any_tensor(data: dict[str, torch.Tensor]) -> None:
    out = segops.segmented_mul(data["x1"], data["w"], data["idx"], S)
    expected = out.clone()
    out.resize_(2 * N)
    assert torch.equal(out[:N], expected)
    out[N:] = 1.0
    assert out[N:].sum().item() == N
    out.resize_(10)
    assert torch.equal(out, expected[:10])


def _python(code: str, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], env={**os.environ, **env},
                          capture_output=True, text=True, timeout=120)


def test_environment_sets_the_limit() -> None:
    result = _python("import segops; print(segops.output_cache_info()['limit_bytes'])",
                     SEGOPS_OUTPUT_CACHE_MB="3")
    assert result.returncode == 0, result.stderr
    assert int(result.stdout) == 3 << 20
    result = _python("import segops", SEGOPS_OUTPUT_CACHE_MB="lots")
    assert result.returncode != 0
    assert "SEGOPS_OUTPUT_CACHE_MB must be a number of MiB" in result.stderr


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_forked_child_uses_the_cache(data: dict[str, torch.Tensor]) -> None:
    """A child forked while the parent holds cached and live buffers computes
    with its own copy of the cache."""
    x, w, idx = data["x1"], data["w"], data["idx"]
    live = segops.segmented_mul(x, w, idx, S)
    segops.segmented_mul(x, w, idx, S)  # freed at once
    pid = os.fork()
    if pid == 0:  # the child: never return into pytest
        status = 1
        try:
            torch.set_num_threads(1)
            out = segops.segmented_mul(x, w, idx, S)
            status = 0 if torch.equal(out, live) else 2
        finally:
            os._exit(status)
    _, status = os.waitpid(pid, 0)
    assert os.WEXITSTATUS(status) == 0
