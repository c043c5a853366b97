"""Run-time compilation (segops._compiler.compile_ptx): the in-process
compiler, its caches and its errors. Needs the compiler module, which GPU
machines without LLVM do not build."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("segops._native._segc")

import harness  # noqa: E402

from segops import _compiler  # noqa: E402

pytestmark = pytest.mark.compiler

RMS_NORM = """
func.func @rms(%x: tensor<?x3xf32>, %idx: tensor<?xi32>, %n: index) -> tensor<?xf32> {
  %0 = seg.rms_norm %x, %idx, %n : tensor<?x3xf32>, tensor<?xi32> -> tensor<?xf32>
  return %0 : tensor<?xf32>
}
"""


@pytest.fixture(autouse=True)
def fresh_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("SEGOPS_CACHE_DIR", str(tmp_path))
    _compiler.clear_memory_cache()
    return tmp_path


def entries(ptx: str) -> list[str]:
    return re.findall(r"\.entry (\w+)\(", ptx)


def program_entries(ptx: str) -> list[str]:
    """The programs' kernels, without those for long segments."""
    return [name for name in entries(ptx) if "__" not in name]


def test_derivatives_to_the_requested_order() -> None:
    assert program_entries(_compiler.compile_ptx(RMS_NORM, order=0)) == ["rms"]
    ptx = _compiler.compile_ptx(RMS_NORM, order=2)
    assert sorted(program_entries(ptx)) == ["rms", "rms_grad", "rms_grad_grad"]
    # Long segments: the forward (one pass, no row outputs) has a tile
    # kernel and a super-tile kernel; the backward (two passes) runs them in
    # stages.
    long_kernels = set(entries(ptx)) - set(program_entries(ptx))
    assert {"rms__tiles", "rms__super_tiles", "rms_grad__bounds", "rms_grad__tiles",
            "rms_grad__super_tiles", "rms_grad__pass_totals"} <= long_kernels


@pytest.mark.parametrize("chip", ["sm_80", "sm_90"])
def test_ptx_passes_ptxas(chip: str, tmp_path: Path) -> None:
    ptx = _compiler.compile_ptx(RMS_NORM, order=2, chip=chip)
    assert f".target {chip}" in ptx
    ptxas = _compiler._segc().ptxas_path()
    if not ptxas:
        pytest.skip("ptxas is not installed")
    source = tmp_path / "kernels.ptx"
    source.write_text(ptx)
    result = subprocess.run([ptxas, f"-arch={chip}", str(source), "-o", str(tmp_path / "k.o")],
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stderr


@pytest.mark.parametrize("opt_level", [None, 0, 3])
def test_every_pipeline_passes_ptxas(opt_level: int | None, tmp_path: Path) -> None:
    ptx = _compiler.compile_ptx(RMS_NORM, order=2, chip="sm_90", opt_level=opt_level)
    # rms: 3 kernels; rms_grad and rms_grad_grad: 5 each.
    assert len(entries(ptx)) == 13
    ptxas = _compiler._segc().ptxas_path()
    if not ptxas:
        pytest.skip("ptxas is not installed")
    source = tmp_path / "kernels.ptx"
    source.write_text(ptx)
    result = subprocess.run([ptxas, "-arch=sm_90", str(source), "-o", str(tmp_path / "k.o")],
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stderr


@pytest.mark.parametrize("quick", [True, False])
def test_ptx_does_not_depend_on_the_groups(quick: bool) -> None:
    """LLVM compiles kernels in groups on several threads; the joined PTX is
    the same text for any number of groups (kernels in module order, branch
    labels renumbered), so builds are reproducible across machines."""
    segc = _compiler._segc()
    texts = [segc.compile_ptx(RMS_NORM, 2, "sm_90", opt_level=2, quick=quick, groups=groups)
             for groups in (1, 2, 3, 7, 100, 0)]
    assert all(text == texts[0] for text in texts[1:])
    names = entries(texts[0])
    assert len(names) == len(set(names)) == 13
    # Labels are numbered by the kernel's place in the module.
    kernels = texts[0].split("// .globl")[1:]
    for number, kernel in enumerate(kernels):
        assert set(re.findall(r"\$L__BB(\d+)_", kernel)) <= {str(number)}


def test_compiles_after_fork() -> None:
    """A forked child inherits the thread pool without its threads; it
    compiles on its own thread instead of waiting for them."""
    script = f"""
import os, sys
from segops import _compiler
source = {RMS_NORM!r}
_compiler._segc().compile_ptx(source, 2)  # the parent's threads start
pid = os.fork()
if pid == 0:
    ptx = _compiler._segc().compile_ptx(source.replace("@rms", "@child"), 2)
    os._exit(0 if ".entry child_grad_grad(" in ptx else 1)
_, status = os.waitpid(pid, 0)
sys.exit(os.waitstatus_to_exitcode(status))
"""
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 0, result.stderr


def test_memory_and_disk_cache(fresh_cache: Path) -> None:
    first = _compiler.compile_ptx(RMS_NORM, order=1)
    files = list(fresh_cache.glob("*.ptx"))
    assert len(files) == 1 and _compiler.read_cache_file(files[0]).decode() == first
    assert _compiler.compile_ptx(RMS_NORM, order=1) is first  # in-process hit
    _compiler.clear_memory_cache()
    # A valid entry is read from disk ...
    _compiler.write_cache_file(files[0], (first + "// from disk\n").encode())
    assert _compiler.compile_ptx(RMS_NORM, order=1).endswith("// from disk\n")
    # ... one that fails its checksum is compiled again.
    _compiler.clear_memory_cache()
    files[0].write_text(first + "// not checksummed\n")
    assert _compiler.compile_ptx(RMS_NORM, order=1) == first


def test_options_and_source_are_part_of_the_key(fresh_cache: Path) -> None:
    _compiler.compile_ptx(RMS_NORM, order=1)
    _compiler.compile_ptx(RMS_NORM, order=2)
    _compiler.compile_ptx(RMS_NORM, order=1, chip="sm_80")
    _compiler.compile_ptx(RMS_NORM, order=1, opt_level=2)
    _compiler.compile_ptx(RMS_NORM.replace("@rms", "@rms2"), order=1)
    assert len(list(fresh_cache.glob("*.ptx"))) == 5


def test_unwritable_cache_still_compiles(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    monkeypatch.setenv("SEGOPS_CACHE_DIR", str(blocker / "cache"))  # under a file
    assert program_entries(_compiler.compile_ptx(RMS_NORM)) == ["rms"]


@pytest.mark.parametrize("source, message", [
    ("func.func @f(", "cannot parse"),
    ("""func.func @f(%x: tensor<?xf32>, %idx: tensor<?xi64>, %n: index) -> tensor<?xf32> {
  %0 = seg.sum %x, %idx, %n : tensor<?xf32>, tensor<?xi64> -> tensor<?xf32>
  return %0 : tensor<?xf32>
}""", "operand #1 must be 1D tensor of 32-bit"),
])
def test_invalid_source_raises_with_diagnostics(source: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        _compiler.compile_ptx(source)


# --------------------------------------------------------------------------
# Linking derived functions into a kernel (segops.fusion's inlining).
# --------------------------------------------------------------------------

MAX = """
func.func @f(%x: tensor<?xf64>, %idx: tensor<?xi32>, %n: index) -> tensor<?xf64> {
  %0 = seg.max %x, %idx, %n : tensor<?xf64>, tensor<?xi32> -> tensor<?xf64>
  return %0 : tensor<?xf64>
}
"""

BACKWARD_CALLER = """
func.func @k(%x: tensor<?xf64>, %idx: tensor<?xi32>, %n: index, %g: tensor<?xf64>{extra_params})
    -> tensor<?xf64> {{
  %r = func.call @max_grad(%x, %idx, %n, %g{extra_args}) :
      (tensor<?xf64>, tensor<?xi32>, index, tensor<?xf64>{extra_types}) -> (tensor<?xf64>)
  return %r : tensor<?xf64>
}}
"""


def _segc():
    from segops import _extensions

    return _extensions.segc()


def test_derived_signature_names_types_and_spaces() -> None:
    params, results = _segc().derived_signature(MAX, "f", 1)
    assert params == [("tensor<?xf64>", "row"), ("tensor<?xi32>", ""), ("index", ""),
                      ("tensor<?xf64>", "segment")]
    assert results == ["tensor<?xf64>"]
    with pytest.raises(ValueError, match="no function 'g_grad'"):
        _segc().derived_signature(MAX, "g", 1)


@pytest.mark.parametrize("takes_forward", [False, True])
def test_inline_derived_links_inlines_and_drops_the_callee(takes_forward: bool) -> None:
    """The derivative of max is inlined; given the forward's result as an
    argument, it no longer recomputes the max; either way it matches the
    derivative run on its own."""
    extra = {"extra_params": ", %m: tensor<?xf64>", "extra_args": ", %m",
             "extra_types": ", tensor<?xf64>"} if takes_forward else \
        {"extra_params": "", "extra_args": "", "extra_types": ""}
    caller = BACKWARD_CALLER.format(**extra)
    inlined = _segc().inline_derived(caller, [("max_grad", MAX, "f", 1, takes_forward)])
    assert "call" not in inlined and "max_grad" not in inlined
    assert ("seg.max" in inlined) != takes_forward
    assert "seg.sum" in inlined  # the count of rows attaining the max

    import torch

    idx = torch.tensor([0, 0, 0, 2, 2], dtype=torch.int32)
    x = torch.tensor([1.0, 3.0, 3.0, -1.0, -2.0], dtype=torch.float64)
    g = torch.tensor([6.0, 5.0, 4.0], dtype=torch.float64)
    m = torch.tensor([3.0, 0.0, -1.0], dtype=torch.float64)
    inputs = [x, idx, g] + ([m] if takes_forward else [])
    (result,) = harness.CompiledModule(inlined).run("k", inputs, 5, 3)
    assert torch.equal(result, torch.tensor([0.0, 3.0, 3.0, 4.0, 0.0], dtype=torch.float64))


@pytest.mark.parametrize("caller, callees, message", [
    (BACKWARD_CALLER.format(extra_params="", extra_args="", extra_types=""), [],
     "does not reference a valid function"),
    (BACKWARD_CALLER.format(extra_params="", extra_args="", extra_types=""),
     [("max_grad", MAX, "f", 3, False)], "incorrect number of operands"),
    ("func.func @k(", [], "cannot parse the calling module"),
    (BACKWARD_CALLER.format(extra_params="", extra_args="", extra_types=""),
     [("max_grad", MAX, "f", 0, True)], "only a derivative"),
    (BACKWARD_CALLER.format(extra_params="", extra_args="", extra_types=""),
     [("max_grad", MAX, "f", 1, False), ("max_grad", MAX, "f", 1, False)],
     "redefinition of symbol"),
])
def test_inline_derived_rejects_what_it_cannot_link(caller: str, callees: list,
                                                    message: str) -> None:
    with pytest.raises(ValueError, match=message):
        _segc().inline_derived(caller, callees)


def _ptxas_report(ptx: str, tmp_path: Path) -> dict:
    """ptxas -v's report (sm_90) of each kernel of `ptx`, by name; skips
    where ptxas is not installed."""
    from bench.gpu_model import parse_ptxas

    ptxas = _compiler._segc().ptxas_path()
    if not ptxas:
        pytest.skip("ptxas is not installed")
    source = tmp_path / "kernels.ptx"
    source.write_text(ptx)
    report = subprocess.run([ptxas, "-arch=sm_90", "-v", str(source), "-o",
                             str(tmp_path / "k.o")], capture_output=True, text=True)
    assert report.returncode == 0, report.stderr[-2000:]
    return parse_ptxas(report.stdout + report.stderr)


def test_run_time_ptx_spills_no_registers(tmp_path: Path) -> None:
    """Where ptxas is installed, a kernel it spills registers in is compiled
    again with a higher register cap (`.maxnreg`), as seg-compile does for
    the op library: segmented_max of 16 float64 features, whose segment
    kernel ptxas squeezes into 32 registers and spills (8 bytes) under
    `.maxntid` alone."""
    from segops import _wide

    def spilled(ptx: str) -> list[str]:
        return [name for name, kernel in _ptxas_report(ptx, tmp_path).items()
                if kernel.spill_store_bytes or kernel.spill_load_bytes]

    source = _wide.program("segmented_max", "f64", 16).source
    unchecked = _compiler._segc().compile_ptx(source, 1, "sm_90", check_registers=False)
    checked = _compiler.compile_ptx(source, order=1)
    assert spilled(checked) == []
    # The case the check is for (ptxas 13 spills here; a later one may not).
    if spilled(unchecked):
        assert ".maxnreg" in checked and ".maxnreg" not in unchecked


def test_run_time_ptx_reaches_half_occupancy(tmp_path: Path) -> None:
    """Where ptxas is installed, a kernel it gives more registers than half
    occupancy allows (64 at blocks of 256) is capped there where ptxas then
    spills nothing: segmented_max of 256 float64 features, whose segment
    kernel ptxas gives 80 registers (37.5% occupancy) under `.maxntid`
    alone and fits in 64 without a spill."""
    from segops import _wide

    source = _wide.program("segmented_max", "f64", 256).source
    unchecked = _ptxas_report(
        _compiler._segc().compile_ptx(source, 0, "sm_90", check_registers=False), tmp_path)
    checked = _ptxas_report(_compiler.compile_ptx(source, order=0), tmp_path)
    assert sorted(checked) == sorted(unchecked)
    for name, kernel in checked.items():
        assert not kernel.spill_store_bytes and not kernel.spill_load_bytes, name
        assert kernel.registers <= max(64, unchecked[name].registers), name
    # The case the step is for (ptxas 13: 80 registers; a later one may differ).
    wide = [name for name, kernel in unchecked.items() if kernel.registers > 64]
    if wide:
        assert [name for name in wide if checked[name].registers <= 64] == wide
