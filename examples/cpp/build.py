"""Configures and builds the C++ examples against the libtorch inside the
torch wheel and this checkout's libsegops_ops.so:

    python examples/cpp/build.py [BUILD_DIR]     (default build/examples-cpp)

(`make examples-cpp` runs it; test/python/test_deploy.py calls build())."""

from __future__ import annotations

import fcntl
import subprocess
import sys
from pathlib import Path

import torch.utils

import segops.export

SOURCE = Path(__file__).resolve().parent
DEFAULT_BUILD = SOURCE.parents[1] / "build" / "examples-cpp"


def _run(command: list[str]) -> None:
    result = subprocess.run(command, capture_output=True, text=True)
    if result.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} failed:\n{result.stdout}\n{result.stderr}")


def build(directory: Path = DEFAULT_BUILD) -> Path:
    """Builds run_package and md_lj in `directory` (incrementally); returns
    it. Concurrent callers (pytest workers) take turns."""
    directory.mkdir(parents=True, exist_ok=True)
    with open(directory / ".build.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (directory / "build.ninja").exists():
            _run(["cmake", "-S", str(SOURCE), "-B", str(directory), "-G", "Ninja",
                  "-DCMAKE_BUILD_TYPE=Release",
                  f"-DCMAKE_PREFIX_PATH={torch.utils.cmake_prefix_path}",
                  f"-DSEGOPS_OPS_LIBRARY={segops.export.operator_library()}",
                  f"-DSEGOPS_INCLUDE_DIR={segops.export.include_dir()}"])
        _run(["cmake", "--build", str(directory)])
    return directory


if __name__ == "__main__":
    print(build(Path(sys.argv[1]) if len(sys.argv) > 1 else DEFAULT_BUILD))
