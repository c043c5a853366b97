"""Installs a segops wheel into a fresh venv and checks it from outside the
source tree, with no LLVM/MLIR loaded: the library ops against PyTorch, a
gradient check, and segops.jit's and segops.fusion's message where the
compiler is absent.

    python3 scripts/check_wheel.py dist/segops-*.whl [--keep DIR]

The venv takes torch and numpy from this interpreter (--system-site-
packages: no network); the wheel is installed with --no-deps. Exits
non-zero on any failure.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

CHECK = textwrap.dedent("""
    import sys, torch
    import segops
    assert "/python/segops" not in segops.__file__, segops.__file__  # not the source tree
    print("segops from", segops.__file__)
    idx = torch.tensor([0, 0, 1, 3, 3, 3], dtype=torch.int32)
    x = torch.randn(6, 3, dtype=torch.float64, requires_grad=True)
    y = torch.randn(6, 3, dtype=torch.float64)
    seg = idx.long()
    reference = torch.zeros(4, 3, dtype=torch.float64).index_add(0, seg, x)
    torch.testing.assert_close(segops.segmented_sum(x, idx, 4), reference)
    dot_reference = torch.zeros(4, dtype=torch.float64).index_add(0, seg, (x * y).sum(-1))
    torch.testing.assert_close(segops.segmented_dot(x, y, idx, 4), dot_reference)
    torch.testing.assert_close(segops.segmented_max(x, idx, 4)[3], x[3:].max(0).values)
    for op in (segops.segmented_sum, segops.segmented_mean, segops.segmented_rms_norm,
               segops.segmented_max):
        assert torch.autograd.gradcheck(lambda t: op(t, idx, 4), (x,))
        assert torch.autograd.gradgradcheck(lambda t: op(t, idx, 4), (x,))
    # Rows of 16 features and of (2, 3): no kernel ships for them, and the
    # wheel has no compiler: they run by columns (segops._columns).
    wide = torch.randn(6, 16, dtype=torch.float64, requires_grad=True)
    torch.testing.assert_close(segops.segmented_mean(wide, idx, 4)[3], wide[3:].mean(0))
    torch.testing.assert_close(segops.segmented_max(wide, idx, 4)[3], wide[3:].max(0).values)
    blocks = torch.randn(6, 2, 3, dtype=torch.float64, requires_grad=True)
    torch.testing.assert_close(segops.segmented_sum(blocks, idx, 4)[3], blocks[3:].sum(0))
    assert torch.autograd.gradgradcheck(lambda t: segops.segmented_rms_norm(t, idx, 4), (wide,))
    maps = open("/proc/self/maps").read()
    loaded = sorted({line.split()[-1] for line in maps.splitlines()
                     if "libLLVM" in line or "libMLIR" in line})
    assert not loaded, f"LLVM/MLIR loaded: {loaded}"
    if not segops.library_info().get("compiler", True):
        for rows in (x, wide):  # a shipped width, and one the op library lacks
            try:
                segops.jit(lambda t, i, n: segops.segmented_sum(t, i, n))(rows, idx, 4)
            except RuntimeError as error:
                assert "not part of this install" in str(error), error
                print("segops.jit:", str(error).split(";")[0])
            else:
                raise AssertionError("segops.jit ran without a compiler")
        import segops.fusion
        try:
            segops.fusion.enable()
        except RuntimeError as error:
            assert "not part of this install" in str(error), error
        else:
            raise AssertionError("segops.fusion enabled without a compiler")
    print("wheel check: library ops, wide rows, gradients, no LLVM/MLIR loaded: ok")
""")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("wheel", type=Path)
    parser.add_argument("--keep", type=Path, help="make the venv here and keep it")
    options = parser.parse_args()
    wheel = options.wheel.resolve()
    with tempfile.TemporaryDirectory() as scratch:
        venv = options.keep or Path(scratch) / "venv"
        subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", str(venv)],
                       check=True)
        python = venv / "bin" / "python"
        subprocess.run([str(python), "-m", "pip", "install", "--quiet", "--no-deps",
                        "--disable-pip-version-check", str(wheel)], check=True)
        # From outside the source tree, with no LLVM on the library path.
        env = {"PATH": f"{venv / 'bin'}:/usr/bin:/bin", "HOME": scratch}
        result = subprocess.run([str(python), "-c", CHECK], cwd=scratch, env=env)
        return result.returncode


if __name__ == "__main__":
    sys.exit(main())
