"""Installs a segops wheel into a fresh venv and checks it from outside the
source tree, with the system's LLVM/MLIR out of reach: the library ops
against PyTorch, gradient checks, and, where the wheel carries the compiler
(make wheel), a segops.jit function and a segops.fusion compile against
eager PyTorch (else the message saying the compiler is absent). No shipped
shared library may need libLLVM or libMLIR (ldd), none may be loaded
(/proc/self/maps), and where the process may make a mount namespace
(unshare) the check runs with an empty directory mounted over the LLVM
installation, so that nothing could load from it. Prints the wheel's size,
its install time and `import segops`'s time.

    python3 scripts/check_wheel.py dist/segops-*.whl [--keep DIR]

The venv takes torch and numpy from this interpreter (--system-site-
packages: no network); the wheel is installed with --no-deps. Exits
non-zero on any failure.
"""

from __future__ import annotations

import argparse
import shlex
import subprocess
import sys
import tempfile
import textwrap
import time
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
    if segops.library_info().get("compiler", True):
        # The compiler inside: a function of a shipped width and of one the
        # op library lacks, with gradients, and a fused compile.
        @segops.jit
        def energy(t, i, n: int):
            return segops.segmented_sum(torch.sin(t) * t, i, n)
        for rows in (x, wide):
            got = energy(rows, idx, 4)
            want = torch.zeros(4, *rows.shape[1:], dtype=rows.dtype).index_add(
                0, seg, torch.sin(rows) * rows)
            torch.testing.assert_close(got, want)
            assert torch.autograd.gradcheck(lambda t: energy(t, idx, 4), (rows,))
        import segops.fusion
        def model(t, i):
            return segops.segmented_sum(torch.exp(t) * 2.0 + t, i, 4)
        fused = torch.compile(model, options=segops.fusion.options())
        torch.testing.assert_close(fused(wide, idx), model(wide, idx))
        assert segops.fusion.reports(), "segops.fusion fused nothing"
        import segops.export  # deployment: what a C++ build takes from the wheel
        assert (segops.export.include_dir() / "segops_deploy.h").is_file()
        assert segops.export.operator_library().is_file()
        print("wheel check: segops.jit and segops.fusion from the wheel's compiler: ok")
    else:
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
    maps = open("/proc/self/maps").read()
    loaded = sorted({line.split()[-1] for line in maps.splitlines()
                     if "libLLVM" in line or "libMLIR" in line})
    assert not loaded, f"LLVM/MLIR loaded: {loaded}"
    print("wheel check: library ops, wide rows, gradients, no LLVM/MLIR loaded: ok")
""")


# Where the system's LLVM/MLIR lives (Debian's layout).
LLVM_PREFIX = Path("/usr/lib/llvm-19")


def _linked_llvm(package: Path) -> list[str]:
    """The shipped shared libraries whose dependencies name libLLVM or
    libMLIR."""
    found = []
    for library in sorted(package.rglob("*.so")):
        needed = subprocess.run(["ldd", str(library)], capture_output=True, text=True).stdout
        if "libLLVM" in needed or "libMLIR" in needed:
            found.append(library.name)
    return found


def _out_of_reach(command: list[str]) -> list[str]:
    """`command` with an empty directory mounted over LLVM_PREFIX, where
    this process may make a mount namespace; else as it is."""
    if not LLVM_PREFIX.is_dir():
        return command
    probe = ["unshare", "--mount", "--", "sh", "-c", f"mount -t tmpfs none {LLVM_PREFIX}"]
    try:
        reachable = subprocess.run(probe, capture_output=True).returncode != 0
    except OSError:
        reachable = True
    if reachable:
        print(f"wheel check: cannot hide {LLVM_PREFIX} (no mount namespace here); "
              "checking ldd and the loaded libraries only")
        return command
    print(f"wheel check: {LLVM_PREFIX} is hidden (an empty tmpfs over it)")
    quoted = " ".join(shlex.quote(part) for part in command)
    return ["unshare", "--mount", "--", "sh", "-c",
            f"mount -t tmpfs none {LLVM_PREFIX} && exec {quoted}"]


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
        start = time.perf_counter()
        subprocess.run([str(python), "-m", "pip", "install", "--quiet", "--no-deps",
                        "--disable-pip-version-check", str(wheel)], check=True)
        install_seconds = time.perf_counter() - start
        package = Path(subprocess.run(
            [str(python), "-c", "import segops, os; print(os.path.dirname(segops.__file__))"],
            cwd=scratch, capture_output=True, text=True, check=True).stdout.strip())
        linked = _linked_llvm(package)
        if linked:
            print(f"wheel check: these need the system's LLVM/MLIR: {linked}")
            return 1
        # From outside the source tree, with no LLVM on the library path.
        env = {"PATH": f"{venv / 'bin'}:/usr/bin:/bin", "HOME": scratch}
        torch_seconds = min(_import_seconds(python, "torch", scratch, env) for _ in range(3))
        import_seconds = min(_import_seconds(python, "segops", scratch, env) for _ in range(3))
        print(f"wheel: {wheel.stat().st_size / 2**20:.1f} MiB; installed in "
              f"{install_seconds:.1f} s ({_size_mib(package):.0f} MiB installed); "
              f"import segops {import_seconds:.2f} s (import torch alone {torch_seconds:.2f} s)")
        script = Path(scratch) / "check_segops_wheel.py"
        script.write_text(CHECK)
        result = subprocess.run(_out_of_reach([str(python), str(script)]), cwd=scratch, env=env)
        return result.returncode


def _size_mib(directory: Path) -> float:
    return sum(f.stat().st_size for f in directory.rglob("*") if f.is_file()) / 2**20


def _import_seconds(python: Path, module: str, cwd: str, env: dict[str, str]) -> float:
    """Seconds to import `module` (with what it imports) in a fresh process."""
    result = subprocess.run(
        [str(python), "-c", f"import time; t = time.perf_counter(); import {module}; "
         "print(time.perf_counter() - t)"], cwd=cwd, env=env, capture_output=True, text=True,
        check=True)
    return float(result.stdout.split()[-1])


if __name__ == "__main__":
    sys.exit(main())
