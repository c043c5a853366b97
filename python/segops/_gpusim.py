"""Runs the op library's GPU kernels on the CPU, through the SIMT simulator
(runtime/include/segrt/GpuSimulator.h): the same gpu.func kernels as the PTX,
compiled to host code by `seg-compile --gpu-simulator`. A testing aid for
machines without a GPU: it checks what the kernels compute, that their
collectives are convergent, and (with guard pages) that they stay inside
their buffers; it says nothing about speed. With SEGOPS_SIMULATE_GPU=1 (read
at import), the ops run CPU tensors through segrt's GPU launcher over the
simulated driver instead of the host kernels, so that every op test
exercises the GPU kernels and the launcher that ships. The library exists
only in builds with the compiler."""

from __future__ import annotations

import ctypes
import os
from collections.abc import Sequence
from functools import cache
from pathlib import Path
from typing import Any

import torch

from segops import _library

LIBRARY_PATH = Path(_library.NATIVE_DIR) / "libsegops_gpusim.so"
ENABLED = os.environ.get("SEGOPS_SIMULATE_GPU", "") not in ("", "0")


class SimulatorError(RuntimeError):
    """A deadlock or malformed collective in a simulated kernel."""


class GpuSimulator:
    """The simulator over one library of simulated kernels."""

    def __init__(self, path: Path = LIBRARY_PATH) -> None:
        self.path = Path(path)
        self.library = ctypes.CDLL(str(path))
        launch = self.library.segsim_launch
        launch.restype = ctypes.c_int
        launch.argtypes = [ctypes.c_void_p, ctypes.POINTER(ctypes.c_uint64), ctypes.c_int,
                           ctypes.POINTER(ctypes.c_int64), ctypes.c_int, ctypes.c_int64,
                           ctypes.c_int64, ctypes.c_int, ctypes.c_char_p, ctypes.c_size_t]
        self._launch = launch
        self._module: Any = None

    def module(self, addresses: dict[str, int] | None = None) -> Any:
        """A CUDA module of the simulated driver over this library's kernels
        (and kernels loaded at `addresses`, which call into this library):
        what segrt's GPU launcher runs on in place of the driver's."""
        native = _library.native_module()
        return native.CudaModule(0, native.simulator_image(str(self.path), addresses or {}),
                                 simulated=True)

    def grid_for(self, name: str, num_rows: int) -> int:
        """The grid the GPU launcher gives kernel `name` for N rows."""
        launches = _library.native_module().plan_gpu_launches(
            _library.kernel_entry(name), num_rows, 0, 0)
        return launches[-1][1]

    def run(self, name: str, inputs: Sequence[torch.Tensor], outputs: Sequence[torch.Tensor],
            num_rows: int, num_segments: int, grid: int | None = None,
            reverse_blocks: bool = False) -> None:
        """Runs kernel `name` of the op library as a GPU would: contiguous
        CPU `inputs` then `outputs` (in the kernel's argument order), N
        rows, S segments, through segrt's GPU launcher over the simulated
        driver. `grid` or `reverse_blocks` run the launcher's plan on
        another grid or block order instead (results must not change)."""
        info = _library.kernel(name)
        if len(inputs) != info.num_inputs or len(outputs) != info.num_outputs:
            raise ValueError(f"kernel {name} takes {info.num_inputs} inputs and "
                             f"{info.num_outputs} outputs")
        tensors = list(inputs) + list(outputs)
        _check_host_tensors(tensors)
        entry = _library.kernel_entry(name)
        if grid is None and not reverse_blocks:
            if self._module is None:
                self._module = self.module()
            _library.run_gpu(self._module, entry, 0, [t.data_ptr() for t in tensors],
                             num_rows, num_segments, torch.device("cpu"))
            return
        native = _library.native_module()
        # Uninitialized on a GPU: 0xff bytes here, as _library.run_gpu fills it.
        scratch = torch.full((native.gpu_scratch_bytes(entry, num_rows, num_segments),), 255,
                             dtype=torch.uint8)
        for symbol, default_grid, trailing in native.plan_gpu_launches(
                entry, num_rows, num_segments, scratch.data_ptr()):
            self.launch(symbol, tensors, trailing=trailing,
                        grid=grid if grid is not None else default_grid, block=info.block,
                        reverse_blocks=reverse_blocks)

    def launch(self, symbol: str, tensors: Sequence[torch.Tensor], *scalars: int | Sequence[int],
               grid: int, block: int, reverse_blocks: bool = False,
               trailing: Sequence[int] = ()) -> None:
        """Runs kernel `symbol` of the library once on `tensors` (their
        pointers, in order) and then its 64-bit scalar arguments, in its
        parameter order: `scalars` (ints, or one sequence of them) followed
        by `trailing`, on `grid` blocks of `block` threads. For the op
        library's kernels the order is the call contract's: take it from
        the launcher's plan (run, plan_gpu_launches), never write it here."""
        flat: list[int] = []
        for scalar in scalars:
            flat.extend([scalar] if isinstance(scalar, int) else scalar)
        trailing = [*flat, *trailing]
        _check_host_tensors(tensors)
        pointers = (ctypes.c_uint64 * len(tensors))(*[t.data_ptr() for t in tensors])
        error = ctypes.create_string_buffer(4096)
        extra = (ctypes.c_int64 * max(1, len(trailing)))(*trailing)
        kernel = ctypes.cast(getattr(self.library, symbol), ctypes.c_void_p)
        status = self._launch(kernel, pointers, len(tensors), extra, len(trailing), grid,
                              block, int(reverse_blocks), error, len(error))
        if status != 0:
            raise SimulatorError(error.value.decode())


def _check_host_tensors(tensors: Sequence[torch.Tensor]) -> None:
    for tensor in tensors:
        if tensor.device.type != "cpu" or not tensor.is_contiguous():
            raise ValueError("the simulator runs on contiguous CPU tensors")


@cache
def simulator() -> GpuSimulator:
    """The simulator over the op library's GPU kernels (loaded once)."""
    return GpuSimulator()
