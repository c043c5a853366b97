"""The compiled op library: manifest, host kernels and per-device PTX modules.

Everything here is loaded lazily and cached, so importing segops costs nothing
until the first op runs, and a machine without a GPU never touches CUDA.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import torch

from segops import _extensions

NATIVE_DIR = _extensions.NATIVE_DIR
# The manifest format this package reads (lib/Target/Manifest.cpp writes it).
MANIFEST_VERSION = 8


LibraryNotBuiltError = _extensions.LibraryNotBuiltError


@dataclass(frozen=True)
class Kernel:
    """One kernel of the op library, as described by its manifest."""

    name: str
    dtype: str
    num_inputs: int
    num_outputs: int
    idx_position: int  # which pointer is the segment index
    block: int  # GPU threads per block
    host_rows: bool  # a host call computes rows [begin, end), not segments
    # Tile and finish kernels for long segments (manifest host.split), for
    # segment programs.
    split: HostSplit | None
    # The GPU kernels' symbols: the kernel's and those of its long-segment
    # kernels (manifest gpu.long_segments).
    gpu_symbols: tuple[str, ...] = ()


@dataclass(frozen=True)
class HostSplit:
    """A segment program's host entry points for long segments (manifest
    host.split): the tile and finish kernels, the totals of each pass, how
    each total combines over tiles ('add', 'max', 'min') and their dtype."""

    rows_symbol: str
    finish_symbol: str
    pass_totals: tuple[int, ...]
    combine: tuple[str, ...]
    totals_dtype: str

    def call_arguments(self, rows: str | int, finish: str | int) -> dict[str, Any]:
        """The split_* keyword arguments of segrt's host calls, with the
        tile and finish kernels given as `rows` and `finish` (symbols for a
        HostLibrary, addresses for kernels compiled at run time)."""
        return {"split_rows": rows, "split_finish": finish,
                "split_pass_totals": list(self.pass_totals),
                "split_combine": list(self.combine),
                "split_double": self.totals_dtype == "f64"}


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


# The name earlier releases had (tests and scripts outside the package).
_native_module = native_module


@cache
def manifest() -> dict[str, Any]:
    path = NATIVE_DIR / "manifest.json"
    if not path.exists():
        raise LibraryNotBuiltError(
            f"the op library manifest {path} is missing; build segops first (`make build`)"
        )
    with path.open() as handle:
        data = json.load(handle)
    if data.get("format") != "segops-op-library" or data.get("version") != MANIFEST_VERSION:
        raise LibraryNotBuiltError(
            f"{path} is not a version {MANIFEST_VERSION} segops op library manifest; "
            "rebuild segops (`make build`)")
    return data


def _gpu_symbols_of(entry: dict[str, Any]) -> tuple[str, ...]:
    launches = entry["gpu"].get("long_segments", {}).get("launches", [])
    return tuple(dict.fromkeys([entry["name"], *(launch["kernel"] for launch in launches)]))


def _split_of(entry: dict[str, Any]) -> HostSplit | None:
    split = entry.get("host", {}).get("split")
    if split is None:
        return None
    return HostSplit(split["rows_symbol"], split["finish_symbol"],
                     tuple(int(count) for count in split["pass_totals"]),
                     tuple(split["combine"]), split["totals_dtype"])


def kernel_from_entry(entry: dict[str, Any]) -> Kernel:
    """A kernel as its manifest entry describes it."""
    outputs = sum(1 for buffer in entry["buffers"] if buffer["role"] == "output")
    return Kernel(
        name=entry["name"],
        dtype=entry["dtype"],
        num_inputs=len(entry["buffers"]) - outputs,
        num_outputs=outputs,
        idx_position=[b["name"] for b in entry["buffers"]].index("idx"),
        block=int(entry["gpu"]["block"][0]),
        host_rows=entry.get("host", {}).get("range") == "rows",
        split=_split_of(entry),
        gpu_symbols=_gpu_symbols_of(entry),
    )


@cache
def kernels() -> dict[str, Kernel]:
    return {entry["name"]: kernel_from_entry(entry) for entry in manifest()["kernels"]}


@cache
def _entries() -> dict[str, dict[str, Any]]:
    return {entry["name"]: entry for entry in manifest()["kernels"]}


def kernel_entry(name: str) -> dict[str, Any]:
    """The manifest's description of kernel `name` (buffers and shapes)."""
    try:
        return _entries()[name]
    except KeyError:
        raise NotImplementedError(f"the op library has no kernel named {name!r}") from None


def buffer_shape(symbolic: Sequence[str], num_rows: int, num_segments: int) -> list[int]:
    """A manifest buffer's shape (each extent "N", "S" or a number) for a
    call with `num_rows` rows and `num_segments` segments."""
    sizes = {"N": num_rows, "S": num_segments}
    return [sizes[extent] if extent in sizes else int(extent) for extent in symbolic]


def kernel(name: str) -> Kernel:
    try:
        return kernels()[name]
    except KeyError:
        raise NotImplementedError(f"the op library has no kernel named {name!r}") from None


@cache
def host_build() -> dict[str, Any]:
    """The manifest's host kernel build this process runs: the one
    SEGOPS_HOST_CPU names (an LLVM CPU such as x86-64-v2, e.g. to compare
    builds), else the first (best) one this CPU supports. Builds differ in
    vector width, so float sums may differ in their last bits between them."""
    builds = manifest()["host"]
    native = native_module()
    wanted = os.environ.get("SEGOPS_HOST_CPU", "").strip()
    if wanted:
        chosen = [build for build in builds if build["cpu"] == wanted]
        if not chosen:
            raise ValueError(f"SEGOPS_HOST_CPU={wanted!r}: the op library's host builds are "
                             f"{[build['cpu'] for build in builds]}")
        if not native.cpu_supports(wanted):
            raise ValueError(f"SEGOPS_HOST_CPU={wanted!r}: this CPU does not run that build")
        return chosen[0]
    for build in builds:
        if native.cpu_supports(build["cpu"]):
            return build
    raise RuntimeError(f"this CPU runs none of the op library's host builds "
                       f"{[build['cpu'] for build in builds]}")


def host_library_path() -> Path:
    """The shared library of host kernels this process runs (host_build)."""
    return NATIVE_DIR / host_build()["library"]


@cache
def host_library() -> Any:
    return native_module().HostLibrary(str(host_library_path()))


_cuda_modules: dict[int, Any] = {}
_cuda_lock = threading.Lock()


def ptx_for(capability: tuple[int, int]) -> Path:
    """The newest PTX in the library that the device can run."""
    device_sm = capability[0] * 10 + capability[1]
    candidates = []
    for chip, file_name in manifest()["ptx"].items():
        sm = int(chip.removeprefix("sm_"))
        if sm <= device_sm:
            candidates.append((sm, file_name))
    if not candidates:
        raise RuntimeError(
            f"segops has no PTX for compute capability {capability[0]}.{capability[1]}; "
            f"the op library targets {sorted(manifest()['ptx'])}"
        )
    return NATIVE_DIR / max(candidates)[1]


def cuda_module(device: int, capability: tuple[int, int]) -> Any:
    module = _cuda_modules.get(device)
    if module is not None:
        return module
    with _cuda_lock:
        module = _cuda_modules.get(device)
        if module is None:
            segrt = native_module()
            if not segrt.cuda_available():
                raise RuntimeError(segrt.cuda_unavailable_reason())
            module = segrt.CudaModule(device, ptx_for(capability).read_text())
            _cuda_modules[device] = module
    return module


def launch_host(kernel_info: Kernel, pointers: Sequence[int], num_rows: int,
                num_segments: int, library: Any = None) -> None:
    """Runs every segment (and zeroes row outputs of rows outside them),
    across PyTorch's intra-op threads when there are enough rows (the
    runtime decides, and cuts long segments into tiles). `library`: a loaded
    host kernel library other than this process's build (host_library)."""
    if num_rows == 0 and num_segments == 0:
        return
    split = kernel_info.split
    (library or host_library()).call_parallel(
        kernel_info.name, list(pointers), pointers[kernel_info.idx_position], num_rows,
        num_segments, torch.get_num_threads(), kernel_info.host_rows,
        **(split.call_arguments(split.rows_symbol, split.finish_symbol) if split else {}))


def call_host_kernel_at(kernel_info: Kernel, symbol: int, split: tuple[int, int] | None,
                        pointers: Sequence[int], num_rows: int,
                        num_segments: int) -> tuple[str, int]:
    """Runs every segment (or row) of the host kernel at address `symbol`
    (compiled at run time), checking idx as it reads it; `split`: the
    addresses of its tile and finish kernels. Returns ('', -1), or
    ('range' or 'order', row) where idx broke the contract."""
    split_arguments = kernel_info.split.call_arguments(*split) \
        if split and kernel_info.split else {}
    return native_module().check_index_and_call(
        symbol, list(pointers), pointers[kernel_info.idx_position], num_rows, num_segments,
        torch.get_num_threads(), kernel_info.host_rows, **split_arguments)


def advise_huge_pages(tensor: torch.Tensor) -> None:
    """Hints that a fresh host tensor be backed by transparent huge pages."""
    native_module().advise_huge_pages(tensor.data_ptr(), tensor.nbytes)


def run_gpu(module: Any, entry: dict[str, Any], stream: int, pointers: Sequence[int],
            num_rows: int, num_segments: int, device: torch.device) -> None:
    """One run of the kernel whose manifest entry is `entry` on `module` (a
    CudaModule, of the driver or the simulated driver) through segrt's GPU
    launcher, with its scratch buffer allocated on `device` (PyTorch's
    stream-ordered allocator on CUDA: freed on return, reused only by work
    queued after these launches)."""
    if num_rows == 0 and num_segments == 0:
        return
    scratch_bytes = native_module().gpu_scratch_bytes(entry, num_rows, num_segments)
    scratch = None
    if scratch_bytes and device.type == "cpu":
        # The simulated driver: 0xff bytes (NaN floats, -1 integers), so
        # that a kernel reading what was never written shows.
        scratch = torch.full((scratch_bytes,), 255, dtype=torch.uint8)
    elif scratch_bytes:
        scratch = torch.empty(scratch_bytes, dtype=torch.uint8, device=device)
    module.run(entry, stream, list(pointers), num_rows, num_segments,
               scratch.data_ptr() if scratch is not None else 0)
