"""The compiled op library as the Python package sees it: its manifest's
records (read in C++ by _segrt), the host build this process runs, and the
PTX per device.

Everything here is loaded lazily and cached, so importing segops costs nothing
until the first op runs.
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

import torch

from segops import _extensions

NATIVE_DIR = _extensions.NATIVE_DIR
LibraryNotBuiltError = _extensions.LibraryNotBuiltError


# The manifest's records (read once, in C++, by _segrt): a whole manifest,
# one kernel, one of its buffers.
Manifest = Any
KernelRecord = Any
BufferRecord = Any


def _release(version: str) -> str:
    """'2.13' of '2.13.0+cpu'."""
    return ".".join(version.split("+")[0].split(".")[:2])


def check_build() -> None:
    """Raises ImportError if this PyTorch is not the release the native
    extensions were compiled against (their C++ ABI is that release's)."""
    try:
        info = json.loads((NATIVE_DIR / "build_info.json").read_text())
    except (OSError, ValueError):
        return  # a build tree from before build_info.json: nothing recorded
    built = info.get("torch", "")
    if not built:
        return
    if _release(built) != _release(torch.__version__):
        raise ImportError(
            f"segops was built against PyTorch {built}, but this environment has "
            f"PyTorch {torch.__version__}: its C++ extensions need the same release "
            f"({_release(built)}.x). Install torch=={_release(built)}.* or rebuild segops "
            f"(pip install . --no-build-isolation) against this PyTorch.")


def native_module() -> Any:
    """The runtime extension, _segrt (segops._extensions loads it)."""
    return _extensions.segrt()



@cache
def manifest() -> Manifest:
    """The op library's manifest (_segrt.Manifest: host builds, PTX files
    and kernels, as typed records)."""
    path = NATIVE_DIR / "manifest.json"
    if not path.exists():
        raise LibraryNotBuiltError(
            f"the op library manifest {path} is missing; build segops first (`make build`)"
        )
    try:
        return native_module().read_manifest(str(path))
    except RuntimeError as error:
        raise LibraryNotBuiltError(str(error)) from None


@cache
def kernels() -> dict[str, KernelRecord]:
    return manifest().kernels


def kernel(name: str) -> KernelRecord:
    try:
        return kernels()[name]
    except KeyError:
        raise NotImplementedError(f"the op library has no kernel named {name!r}") from None


def parse_manifest(text: str) -> Manifest:
    """A manifest the compiler wrote for kernels compiled at run time."""
    return native_module().parse_manifest(text)


def parse_kernel(text: str) -> KernelRecord:
    """A kernel record from its text (KernelRecord.text)."""
    return native_module().parse_kernel(text)


@cache
def host_build() -> Any:
    """The manifest's host kernel build this process runs (cpu, library):
    the one SEGOPS_HOST_CPU names (an LLVM CPU such as x86-64-v2, e.g. to
    compare builds), else the first (best) one this CPU supports."""
    return manifest().host_build()


def ptx_for(capability: tuple[int, int]) -> Path:
    """The newest PTX in the library that the device can run."""
    device_sm = capability[0] * 10 + capability[1]
    chips = manifest().ptx
    candidates = [(int(chip.removeprefix("sm_")), file_name)
                  for chip, file_name in chips.items()
                  if int(chip.removeprefix("sm_")) <= device_sm]
    if not candidates:
        raise RuntimeError(
            f"segops has no PTX for compute capability {capability[0]}.{capability[1]}; "
            f"the op library targets {sorted(chips)}"
        )
    return NATIVE_DIR / max(candidates)[1]


def advise_huge_pages(tensor: torch.Tensor) -> None:
    """Hints that a fresh host tensor be backed by transparent huge pages."""
    native_module().advise_huge_pages(tensor.data_ptr(), tensor.nbytes)
