"""Compiling seg modules at run time with the build's tools (seg-opt,
seg-compile) and running their host kernels: what the tests use to execute
derived gradient programs, and the seed of the JIT.

Needs a build tree (the compiler is not part of the runtime) and a C
compiler to link the host object.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Sequence

import torch

from segops import _library

_REPO = Path(__file__).resolve().parents[2]


def tool(name: str) -> Path:
    """A compiler tool from $SEGOPS_BUILD_DIR/bin (default: <repo>/build/bin)."""
    build = Path(os.environ.get("SEGOPS_BUILD_DIR", _REPO / "build"))
    path = build / "bin" / name
    if not path.exists():
        raise FileNotFoundError(f"{path} does not exist; build the compiler first (`make build`)")
    return path


def seg_opt(source: str, *flags: str) -> str:
    """Runs seg-opt on `source` and returns the printed module."""
    result = subprocess.run([str(tool("seg-opt")), "-", *flags], input=source, text=True,
                            capture_output=True)
    if result.returncode != 0:
        raise RuntimeError(f"seg-opt {' '.join(flags)} failed:\n{result.stderr}")
    return result.stdout


_DTYPES = {"f32": torch.float32, "f64": torch.float64, "i32": torch.int32}


class CompiledModule:
    """The host kernels of one compiled module, with their manifest."""

    def __init__(self, source: str) -> None:
        self._dir = Path(tempfile.mkdtemp(prefix="segops-"))
        (self._dir / "module.mlir").write_text(source)
        result = subprocess.run(
            [str(tool("seg-compile")), str(self._dir / "module.mlir"), "-o", str(self._dir)],
            capture_output=True, text=True)
        if result.returncode != 0:
            raise RuntimeError(f"seg-compile failed:\n{result.stderr}")
        compiler = shutil.which("cc") or shutil.which("gcc")
        if compiler is None:
            raise RuntimeError("no C compiler (cc) to link the host kernels")
        library = self._dir / "libmodule.so"
        subprocess.run([compiler, "-shared", "-o", str(library), str(self._dir / "segops_host.o")],
                       check=True)
        self.manifest = json.loads((self._dir / "manifest.json").read_text())
        self.kernels = {entry["name"]: entry for entry in self.manifest["kernels"]}
        self._library = _library._native_module().HostLibrary(str(library))

    def run(self, name: str, inputs: Sequence[torch.Tensor], num_rows: int,
            num_segments: int) -> list[torch.Tensor]:
        """Runs kernel `name` on CPU tensors (in argument order, idx included)
        and returns its outputs, allocated from the manifest's shapes."""
        entry = self.kernels[name]
        sizes = {"N": num_rows, "S": num_segments}
        outputs = []
        for buffer in entry["buffers"]:
            if buffer["role"] != "output":
                continue
            shape = [sizes[d] if d in sizes else int(d) for d in buffer["shape"]]
            outputs.append(torch.empty(shape, dtype=_DTYPES[buffer["dtype"]]))
        inputs = [t.contiguous() for t in inputs]  # kept alive across the call
        pointers = [t.data_ptr() for t in inputs] + [t.data_ptr() for t in outputs]
        self._library.call(name, pointers, num_rows, num_segments, 0, num_segments)
        return outputs

    def __del__(self) -> None:
        shutil.rmtree(getattr(self, "_dir", ""), ignore_errors=True)
