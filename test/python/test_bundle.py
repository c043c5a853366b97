"""Compiler bundles (segops._bundle): the compiler's answers recorded where
it is, replayed where it is not (the GPU machine)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from segops import _bundle

pytest.importorskip("segops._native._segc")

pytestmark = pytest.mark.compiler

ROOT = Path(__file__).resolve().parents[2]
SUM = """
func.func @f(%x: tensor<?x3xf32>, %idx: tensor<?xi32>, %n: index) -> tensor<?x3xf32> {
  %0 = seg.sum %x, %idx, %n : tensor<?x3xf32>, tensor<?xi32> -> tensor<?x3xf32>
  return %0 : tensor<?x3xf32>
}
"""


def _segc():
    from segops._native import _segc

    return _segc


def test_recorded_answers_replay_and_misses_name_the_call(tmp_path: Path) -> None:
    recording = _bundle.RecordingCompiler(_segc(), tmp_path)
    manifest = recording.manifest(SUM, 1)
    ptx = recording.compile_ptx(SUM, 1, "sm_90", opt_level=0, quick=True)
    signature = recording.derived_signature(SUM, "f", 1)
    assert recording.host_cpu() == _segc().host_cpu()  # not recorded, passed through

    replay = _bundle.BundledCompiler(tmp_path, host_compiler=None)
    assert replay.manifest(SUM, 1) == manifest
    assert replay.compile_ptx(SUM, 1, "sm_90", opt_level=0, quick=True) == ptx
    params, results = replay.derived_signature(SUM, "f", 1)
    assert [tuple(p) for p in params] == list(signature[0]) and results == signature[1]
    with pytest.raises(_bundle.BundleMissError, match="no answer to compile_ptx .*@f"):
        replay.compile_ptx(SUM, 1, "sm_80", opt_level=0, quick=True)
    with pytest.raises(_bundle.BundleMissError, match="no host code here"):
        replay.compile_host_objects(SUM, 0, "f")
    assert not replay.makes_host_code
    assert _bundle.BundledCompiler(tmp_path, _segc()).makes_host_code


def test_a_directory_that_is_not_a_bundle(tmp_path: Path) -> None:
    with pytest.raises(_bundle.BundleMissError, match="not a compiler bundle"):
        _bundle.BundledCompiler(tmp_path, None)


@pytest.mark.slow
def test_jit_programs_run_from_a_bundle_without_the_compiler(tmp_path: Path) -> None:
    """Record test_jit_devices.py's softmax test; replay it (the compiler's
    answers and every level's PTX from the bundle); then, with no compiler
    module at all, the same program has no host code and says so on CPU."""
    bundle, env = tmp_path / "bundle", dict(os.environ, SEGOPS_CACHE_DIR=str(tmp_path / "c1"))
    test = str(ROOT / "test" / "python" / "test_jit_devices.py")
    subprocess.run([sys.executable, str(ROOT / "scripts" / "record_bundle.py"), "record",
                    str(bundle), test, "-k", "softmax"], check=True, env=env,
                   capture_output=True)
    env.update(SEGOPS_COMPILER_BUNDLE=str(bundle), SEGOPS_CACHE_DIR=str(tmp_path / "c2"))
    replayed = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                               test, "-k", "softmax or bundle"], env=env, capture_output=True,
                              text=True)
    assert replayed.returncode == 0 and "2 passed" in replayed.stdout, replayed.stdout

    script = f"""
import sys
sys.modules["segops._native._segc"] = None  # a runtime-only install
sys.path.insert(0, {str(ROOT / "test" / "python")!r})
import torch, segops
from test_jit_devices import softmax_pool, make_index, rows
idx = make_index("cpu")
score, v = rows("cpu", dtype=torch.float32), rows("cpu", 3, dtype=torch.float32)
try:
    segops.jit(softmax_pool)(score, v, torch.tensor(0.7, requires_grad=True), idx, 8)
except RuntimeError as error:
    print("raised:", error)
"""
    env["SEGOPS_CACHE_DIR"] = str(tmp_path / "c3")
    result = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True,
                            text=True)
    assert "has no host code here" in result.stdout, result.stdout + result.stderr
