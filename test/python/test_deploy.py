"""Deployment without Python: models exported with segops.export run from
a Python that never imports segops and from C++ (examples/cpp, built here
against the libtorch in the torch wheel), and match eager PyTorch; the C++
MD loop conserves energy. docs/deploy.md describes the steps."""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path
from types import ModuleType

import pytest
import torch

import segops.export

# One pytest worker runs them all: the export and the C++ build happen once.
pytestmark = [pytest.mark.xdist_group("deploy"), pytest.mark.long]

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples" / "cpp"


def _example(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"cpp_example_{name}", EXAMPLES / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.path.insert(0, str(EXAMPLES))
    try:
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(EXAMPLES))
    return module


@pytest.fixture(scope="module")
def packages(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """demo.pt2 and lj.pt2 with their programs, written by the example's
    export script as a user runs it."""
    out = tmp_path_factory.mktemp("deploy")
    result = subprocess.run([sys.executable, str(EXAMPLES / "export_models.py"), str(out)],
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    return out


@pytest.fixture(scope="module")
def cpp_programs() -> Path:
    return _example("build").build()


def _run_python(code: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """`code` in a fresh interpreter that never imports segops."""
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True,
                          text=True, env={**os.environ, **(env or {})})


def test_package_runs_in_a_python_without_segops(packages: Path) -> None:
    result = _run_python(f"""
        import sys, torch
        torch.ops.load_library({str(segops.export.operator_library())!r})
        levels = torch.ops.segops.load_programs({str(packages / "demo.segops")!r})
        model = torch._inductor.aoti_load_package({str(packages / "demo.pt2")!r})
        outputs = model(*torch.load({str(packages / "demo_inputs.pt")!r}))
        expected = torch.load({str(packages / "demo_expected.pt")!r})
        assert len(outputs) == len(expected) == 2
        for output, reference in zip(outputs, expected):
            torch.testing.assert_close(output, reference, rtol=1e-10, atol=1e-12)
        assert "segops" not in sys.modules
        print(levels)
    """)
    assert result.returncode == 0, result.stderr
    assert int(result.stdout.split()[-1]) == len(list((packages / "demo.segops").iterdir()))


def test_programs_named_by_the_environment(packages: Path) -> None:
    """SEGOPS_PROGRAMS instead of load_programs; another size than the
    export's (dynamic N and E), against eager PyTorch."""
    models = _example("models")
    inputs = models.lj_inputs(cells=4, seed=3)
    energy, forces = models.LennardJones()(*inputs)
    torch.save(list(inputs), packages / "lj_inputs.pt")
    torch.save([energy.detach(), forces.detach()], packages / "lj_expected.pt")
    result = _run_python(f"""
        import torch
        torch.ops.load_library({str(segops.export.operator_library())!r})
        model = torch._inductor.aoti_load_package({str(packages / "lj.pt2")!r})
        outputs = model(*torch.load({str(packages / "lj_inputs.pt")!r}))
        for output, reference in zip(outputs, torch.load({str(packages / "lj_expected.pt")!r})):
            torch.testing.assert_close(output, reference, rtol=1e-10, atol=1e-10)
    """, env={"SEGOPS_PROGRAMS": str(packages / "lj.segops")})
    assert result.returncode == 0, result.stderr


def test_package_names_the_programs_written_beside_it(packages: Path) -> None:
    for model in ("demo", "lj"):
        called = segops.export.programs_called(packages / f"{model}.pt2")
        written = sorted(p.name for p in (packages / f"{model}.segops").iterdir())
        # With the library op levels on rows the op library lacks (demo: 8).
        assert called == [name for name in written if name.startswith("jit_")]
        # The segops.jit function (and its first derivative: the forces) and
        # fused clusters.
        assert any("_grad" in name for name in called)
        assert any(name.startswith("jit_fused_") for name in called)
        for name in written:
            manifest = segops._library.native_module().read_manifest(
                str(packages / f"{model}.segops" / name / "manifest.json"))
            assert list(manifest.kernels) == [name]
            assert [build.cpu for build in manifest.host_builds] == [
                build.cpu for build in segops._library.manifest().host_builds]


def test_cpp_program_matches_python(packages: Path, cpp_programs: Path) -> None:
    result = subprocess.run([str(cpp_programs / "run_package"), str(packages / "demo.pt2"),
                             str(packages / "demo.segops"), str(packages / "demo_inputs.pt"),
                             str(packages / "cpp_outputs.pt")], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    outputs = torch.load(packages / "cpp_outputs.pt")
    for output, reference in zip(outputs, torch.load(packages / "demo_expected.pt"), strict=True):
        torch.testing.assert_close(output, reference, rtol=1e-10, atol=1e-12)
    linked = subprocess.run(["ldd", str(cpp_programs / "run_package")], capture_output=True,
                            text=True).stdout
    assert "libpython" not in linked


def test_cpp_md_loop_conserves_energy(packages: Path, cpp_programs: Path) -> None:
    """Velocity Verlet on 4,000 Lennard-Jones atoms, 1,000 steps in float64,
    the neighbour list rebuilt in C++ every 10 steps."""
    result = subprocess.run([str(cpp_programs / "md_lj"), str(packages / "lj.pt2"),
                             str(packages / "lj.segops"), "4000", "1000", "10", "0.005"],
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
    found = re.search(r"drift_per_atom (\S+) max_deviation_per_atom (\S+)", result.stdout)
    assert found, result.stdout
    drift, deviation = float(found.group(1)), float(found.group(2))
    assert abs(drift) < 1e-4 and deviation < 1e-4, result.stdout


def test_library_op_rows_wider_than_the_op_library_ship(tmp_path: Path) -> None:
    """Without fusion the package calls segops::segmented_sum and its
    derivative level on rows of 5 features (the op library ships 1 and 3):
    their kernels ship beside it, and a Python without segops runs them."""
    class Model(torch.nn.Module):
        def forward(self, x: torch.Tensor, idx: torch.Tensor) -> tuple[torch.Tensor, ...]:
            x = x.detach().requires_grad_(True)
            energy = (segops.segmented_sum(x * x, idx, 3) ** 2).sum(-1)
            grad, = torch.autograd.grad(energy.sum(), x)
            return energy, grad

    def inputs(rows: int) -> tuple[torch.Tensor, torch.Tensor]:
        return (torch.randn(rows, 5, dtype=torch.float64),
                torch.arange(rows) * 3 // rows)

    dim = torch.export.Dim("rows", min=2, max=2**31 - 1)
    exported = segops.export.export(Model(), inputs(9), dynamic_shapes=({0: dim}, {0: dim}))
    package = segops.export.package(exported, tmp_path / "wide.pt2", use_fusion=False)
    written = sorted(p.name for p in segops.export.programs_directory(package).iterdir())
    assert written == ["segmented_sum_f64_w5", "segmented_sum_f64_w5_grad"]
    x, idx = inputs(20)
    torch.save([x, idx], tmp_path / "inputs.pt")
    torch.save([t.detach() for t in Model()(x, idx)], tmp_path / "expected.pt")
    result = _run_python(f"""
        import torch
        torch.ops.load_library({str(segops.export.operator_library())!r})
        torch.ops.segops.load_programs({str(segops.export.programs_directory(package))!r})
        model = torch._inductor.aoti_load_package({str(package)!r})
        outputs = model(*torch.load({str(tmp_path / "inputs.pt")!r}))
        for output, reference in zip(outputs, torch.load({str(tmp_path / "expected.pt")!r})):
            torch.testing.assert_close(output, reference, rtol=1e-10, atol=1e-12)
    """)
    assert result.returncode == 0, result.stderr


def test_load_programs_reports_what_is_wrong(tmp_path: Path) -> None:
    with pytest.raises(RuntimeError, match="is not a directory"):
        segops.export.load_programs(tmp_path / "missing")
    assert segops.export.load_programs(tmp_path) == 0  # a model that calls none
    (tmp_path / "notes.txt").write_text("not a program")
    with pytest.raises(RuntimeError, match="holds no programs"):
        segops.export.load_programs(tmp_path)
    level = tmp_path / "jit_broken"
    level.mkdir()
    (level / "manifest.json").write_text('{"format": "segops-op-library", "version": 1}')
    with pytest.raises(RuntimeError, match="manifest"):
        segops.export.load_programs(tmp_path)


def test_unknown_program_without_python_names_the_remedy() -> None:
    result = _run_python(f"""
        import torch
        torch.ops.load_library({str(segops.export.operator_library())!r})
        x, idx = torch.ones(4), torch.zeros(4, dtype=torch.int64)
        try:
            torch.ops.segops.jit_call("jit_nowhere_0123", [x, idx], 1)
        except RuntimeError as error:
            print(error)
    """)
    assert result.returncode == 0, result.stderr
    assert "no program jit_nowhere_0123" in result.stdout
    assert "load_programs" in result.stdout


def test_export_traces_forces_through_autograd() -> None:
    """segops.export.export takes a model that differentiates itself with
    ops whose derivative reads their output (tanh), which torch.export
    alone refuses; dynamic sizes stay dynamic."""
    class Model(torch.nn.Module):
        def forward(self, pos: torch.Tensor, idx: torch.Tensor) -> tuple[torch.Tensor, ...]:
            pos = pos.detach().requires_grad_(True)
            energy = segops.segmented_sum(torch.tanh(pos).sum(-1), idx, 2)
            forces, = torch.autograd.grad(energy.sum(), pos)
            return energy, -forces

    pos, idx = torch.randn(10, 3, dtype=torch.float64), torch.tensor([0] * 4 + [1] * 6)
    rows = torch.export.Dim("rows", min=2, max=2**31 - 1)
    exported = segops.export.export(Model(), (pos, idx), dynamic_shapes=({0: rows}, {0: rows}))
    pos2, idx2 = torch.randn(17, 3, dtype=torch.float64), torch.tensor([0] * 9 + [1] * 8)
    for output, reference in zip(exported.module()(pos2, idx2), Model()(pos2, idx2), strict=True):
        torch.testing.assert_close(output, reference.detach())
