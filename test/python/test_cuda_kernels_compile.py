"""The C++ CUDA operator kernels (python/src/torch_ops_cuda.cpp) are built
only against a PyTorch with CUDA, which this machine may lack: compile them
here anyway (syntax and types, no linking) against the installed PyTorch's
c10/cuda headers and the CUDA toolkit's, so that a GPU machine's build does
not meet their errors first. PyTorch's CPU wheels ship c10/cuda without the
header its CMake build generates (cuda_cmake_macros.h); an empty one stands
in for it."""

from __future__ import annotations

import shutil
import subprocess
import sysconfig
from pathlib import Path

import pytest
import torch.utils.cpp_extension as cpp_extension

REPO = Path(__file__).resolve().parents[2]
CUDA_INCLUDE = Path("/usr/local/cuda/include")


@pytest.mark.skipif(not (CUDA_INCLUDE / "cuda_runtime_api.h").exists(),
                    reason="no CUDA toolkit headers")
@pytest.mark.skipif(shutil.which("c++") is None, reason="no C++ compiler")
def test_cuda_operator_kernels_compile(tmp_path: Path) -> None:
    stub = tmp_path / "c10" / "cuda" / "impl" / "cuda_cmake_macros.h"
    stub.parent.mkdir(parents=True)
    stub.write_text("#pragma once\n")
    includes = [f"-isystem{path}" for path in cpp_extension.include_paths()]
    command = ["c++", "-std=c++17", "-fsyntax-only", "-Wall", "-Werror=return-type",
               "-DSEGOPS_TORCH_CUDA", *includes, f"-isystem{tmp_path}",
               f"-isystem{CUDA_INCLUDE}", f"-I{sysconfig.get_paths()['include']}",
               f"-I{REPO / 'runtime' / 'include'}",
               str(REPO / "python" / "src" / "torch_ops_cuda.cpp")]
    result = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-6000:]
