"""Shared fixtures: the pure-PyTorch reference and segment layouts."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest
import torch

DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])


def pytest_configure(config: pytest.Config) -> None:
    """Idle OpenMP threads sleep instead of spinning. xdist's workers and
    the subprocesses tests start share the cores, each with a thread per
    core, and libgomp's spinning threads took the cores from the threads
    computing (docs/benchmarks.md, "make test time"). libgomp reads this
    when it loads, so it reaches the workers and subprocesses started
    after this, not this process."""
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Tests marked long run first: xdist hands tests out in collection
    order, and a long one handed out last keeps its worker busy after the
    other has finished. Simulator tests skip where the simulator is not
    built: it is built with the compiler, so a runtime-only build (the GPU
    machine's) lacks it."""
    items.sort(key=lambda item: item.get_closest_marker("long") is None)  # stable
    from segops import _gpusim

    if _gpusim.LIBRARY_PATH.exists():
        return
    skip = pytest.mark.skip(reason=f"the GPU simulator is not built ({_gpusim.LIBRARY_PATH})")
    for item in items:
        if item.get_closest_marker("simulator"):
            item.add_marker(skip)


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


def run_simulated(script: str, timeout: int = 900) -> None:
    """Runs a Python script (dedented) in a process whose segops runs GPU
    kernels on the simulator (SEGOPS_SIMULATE_GPU=1), from this directory
    (so it imports the tests' helpers); it must print "ok"."""
    env = dict(os.environ, SEGOPS_SIMULATE_GPU="1")
    result = subprocess.run([sys.executable, "-c", textwrap.dedent(script)], env=env,
                            capture_output=True, text=True, cwd=os.path.dirname(__file__),
                            timeout=timeout)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "ok" in result.stdout
