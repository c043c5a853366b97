"""Shared fixtures: the pure-PyTorch reference and segment layouts."""

from __future__ import annotations

import pytest
import torch

DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])


def reference_sum(x: torch.Tensor, idx: torch.Tensor, num_segments: int) -> torch.Tensor:
    out = x.new_zeros((num_segments,) + tuple(x.shape[1:]))
    return out.index_add_(0, idx.long(), x)


def layout(counts: list[int], device: str = "cpu") -> torch.Tensor:
    """A sorted int32 index with counts[s] rows in segment s."""
    sizes = torch.tensor(counts, dtype=torch.int64)
    return torch.repeat_interleave(torch.arange(len(counts)), sizes).to(
        device=device, dtype=torch.int32)


@pytest.fixture(params=DEVICES)
def device(request: pytest.FixtureRequest) -> str:
    return request.param


@pytest.fixture
def fresh_fusion_compilation(monkeypatch: pytest.MonkeyPatch):
    """torch.compile compiles anew (no FX graph or autograd cache hits: the
    fusion pass would not run) and segops.fusion starts with no reports."""
    import segops.fusion as fusion

    monkeypatch.setattr(torch._inductor.config, "fx_graph_cache", False)
    monkeypatch.setattr(torch._functorch.config, "enable_autograd_cache", False)
    torch._dynamo.reset()
    fusion.clear_reports()
    yield
    torch._dynamo.reset()
