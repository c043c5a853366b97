"""Compiler bundles: segops.jit and segops.fusion where there is no compiler.

The GPU machine has no LLVM/MLIR, so no program can be compiled there. A
bundle holds the in-process compiler's (_segc) answers to the calls a set of
programs needs: recorded here, where the compiler is, and replayed there.

* ``SEGOPS_RECORD_BUNDLE=dir``: the compiler records each answer of the
  calls below into ``dir`` as it gives it. ``python scripts/record_bundle.py
  record dir [pytest arguments]`` runs tests so, then compiles PTX for every level
  of every program they ran (for the chips in ``SEGOPS_BUNDLE_CHIPS``,
  default sm_90), so that a CUDA run of the same tests finds it.
* ``SEGOPS_COMPILER_BUNDLE=dir``: the compiler is the bundle. The recorded
  calls are answered from it (a call it lacks raises BundleMissError, naming
  the call); host code comes from the real compiler if this install has one
  (a dry run on the development machine), else there is none (programs then
  run on CUDA only).

Calls are keyed by their name and arguments. Programs are named by a hash of
their IR, so a bundle serves exactly the programs that were traced when it
was recorded; tracing elsewhere (another PyTorch) that yields other IR misses.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

# The compiler's calls a bundle answers: everything but host code.
RECORDED_CALLS = ("manifest", "derive", "derived_signature", "inline_derived", "compile_ptx")
# The compiler's calls that make host code (never in a bundle).
HOST_CALLS = ("compile_host_object", "compile_host_objects", "compile_simulator_object",
              "load_host_object", "host_cpu")
_INDEX = "bundle.json"


class BundleMissError(RuntimeError):
    """A compiler call the bundle has no answer for."""


def _key(call: str, args: Sequence[Any], kwargs: dict[str, Any]) -> str:
    text = json.dumps([call, list(args), sorted(kwargs.items())], sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()


class RecordingCompiler:
    """The real compiler, recording the answers of RECORDED_CALLS into a
    bundle directory as it gives them."""

    def __init__(self, compiler: Any, directory: Path) -> None:
        self._compiler = compiler
        self.directory = directory
        directory.mkdir(parents=True, exist_ok=True)
        index = directory / _INDEX
        if not index.exists():
            index.write_text(json.dumps({"format": 1, "calls": list(RECORDED_CALLS)}))
        self.CompileError = compiler.CompileError
        self.__file__ = compiler.__file__

    def __getattr__(self, name: str) -> Any:
        attribute = getattr(self._compiler, name)
        if name not in RECORDED_CALLS:
            return attribute

        def record(*args: Any, **kwargs: Any) -> Any:
            result = attribute(*args, **kwargs)
            path = self.directory / f"{_key(name, args, kwargs)}.json"
            if not path.exists():
                partial = path.with_suffix(f".{os.getpid()}.tmp")
                partial.write_text(json.dumps({"call": name, "result": result}))
                os.replace(partial, path)
            return result

        return record


class BundledCompiler:
    """A compiler that answers RECORDED_CALLS from a bundle, and host-code
    calls through `host_compiler` (None: there is no host code here)."""

    def __init__(self, directory: Path, host_compiler: Any | None) -> None:
        index = directory / _INDEX
        if not index.exists():
            raise BundleMissError(f"segops: {directory} is not a compiler bundle (it has no "
                                  f"{_INDEX}); make one with `make device-bundle`")
        self.directory = directory
        self._host = host_compiler
        self.CompileError = ValueError
        # The compiler's identity (part of every disk-cache key): the bundle.
        self.__file__ = str(index)

    @property
    def makes_host_code(self) -> bool:
        return self._host is not None

    def ptxas_path(self) -> str:
        """No ptxas checks PTX here: the bundle's was checked where it was
        recorded."""
        return ""

    def __getattr__(self, name: str) -> Any:
        if name in HOST_CALLS:
            if self._host is None:
                raise BundleMissError(
                    f"segops: no host code here: this install has no compiler, and compiler "
                    f"bundles ({self.directory}) hold GPU code only; run the program on CUDA")
            return getattr(self._host, name)
        if name not in RECORDED_CALLS:
            raise AttributeError(name)

        def replay(*args: Any, **kwargs: Any) -> Any:
            path = self.directory / f"{_key(name, args, kwargs)}.json"
            try:
                return json.loads(path.read_text())["result"]
            except (OSError, ValueError, KeyError):
                what = next((a for a in args if isinstance(a, str)), "")
                first_line = what.strip().splitlines()[0] if what.strip() else ""
                raise BundleMissError(
                    f"segops: the compiler bundle {self.directory} has no answer to {name} "
                    f"for this program ({first_line[:160]}...); this install has no compiler: "
                    "record the bundle again from the same tests (`make device-bundle`)"
                ) from None

        return replay


def compiler(real: Any | None, bundle: str, record: str) -> Any | None:
    """The compiler segops uses: `real` (the _segc module, or None where it
    is not built) as it is, recording into directory `record`, or a bundle
    (directory `bundle`) in its place."""
    if bundle:
        return BundledCompiler(Path(bundle), real)
    if record and real is not None:
        return RecordingCompiler(real, Path(record))
    return real
