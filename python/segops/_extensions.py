"""segops' native parts, loaded here and nowhere else.

- ``_segrt``: the runtime (host and GPU launchers, index checks), in every
  install;
- ``_torchops``: the Python side of the operator library
  (``libsegops_ops.so``, which defines the operators in C++), where they are
  built;
- ``_segc``: the compiler, in builds with LLVM/MLIR (not the runtime wheel).

Each loads on first use, so importing segops costs nothing until an op runs.
"""

from __future__ import annotations

import json
import os
from functools import cache
from pathlib import Path
from typing import Any

from segops import _bundle

NATIVE_DIR = Path(__file__).resolve().parent / "_native"
# The operator library: every library op defined in C++ (schemas, CPU, CUDA,
# autograd and Meta kernels), loadable without this package
# (torch.ops.load_library) or linked into a C++ program; _torchops loads it.
OPERATOR_LIBRARY = NATIVE_DIR / "libsegops_ops.so"


class LibraryNotBuiltError(ImportError):
    """The native part of segops has not been built."""


def segrt() -> Any:
    """The runtime extension (raises LibraryNotBuiltError if it is missing)."""
    try:
        from segops._native import _segrt  # type: ignore[attr-defined]
    except ImportError as error:
        raise LibraryNotBuiltError(
            f"segops' native runtime is missing from {NATIVE_DIR} ({error}); "
            "build it with `make build` (or `make demo`) first"
        ) from error
    return _segrt


@cache
def torchops() -> Any | None:
    """The operators' C++ kernels, or None where they are not built."""
    try:
        from segops._native import _torchops  # type: ignore[attr-defined]
    except ImportError:
        return None
    return _torchops


def segc() -> Any:
    """The in-process compiler (raises RuntimeError where it is not built):
    _segc, or what segops._bundle makes of it (a compiler bundle in its
    place where SEGOPS_COMPILER_BUNDLE is set, recording with
    SEGOPS_RECORD_BUNDLE)."""
    bundle = os.environ.get("SEGOPS_COMPILER_BUNDLE", "")
    record = os.environ.get("SEGOPS_RECORD_BUNDLE", "")
    try:
        from segops._native import _segc  # type: ignore[attr-defined]
    except ImportError as error:
        if bundle:
            return _bundled(bundle, record, None)
        if not has_compiler():
            raise RuntimeError(
                "run-time compilation needs segops' compiler module (_segc), which is not "
                "part of this install (the runtime wheel: the library ops only); install "
                "segops from source where LLVM/MLIR 19 is installed (pip install . "
                "--no-build-isolation, or make build)") from None
        raise RuntimeError(
            "run-time compilation needs segops' compiler module (_segc), built by "
            "`make build` where LLVM/MLIR 19 is installed") from error
    return _bundled(bundle, record, _segc) if bundle or record else _segc


def has_compiler() -> bool:
    """Whether this install has the compiler (segops.jit), by its build
    record: source builds do, the runtime wheel does not."""
    try:
        return bool(json.loads((NATIVE_DIR / "build_info.json").read_text())["compiler"])
    except (OSError, ValueError, KeyError):
        return True  # a build tree: _segc's import says if it is missing


@cache
def _bundled(bundle: str, record: str, real: Any | None) -> Any:
    """The compiler for these settings (made once each: a recording
    compiler keeps its directory)."""
    return _bundle.compiler(real, bundle=bundle, record=record)
