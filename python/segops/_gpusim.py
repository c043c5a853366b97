"""Runs the op library's GPU kernels on the CPU, through the SIMT simulator
(runtime/include/segrt/GpuSimulator.h): the same gpu.func kernels as the PTX,
compiled to host code by `seg-compile --gpu-simulator`. A testing aid for
machines without a GPU: it checks what the kernels compute, that their
collectives are convergent, and (with guard pages) that they stay inside
their buffers; it says nothing about speed. With SEGOPS_SIMULATE_GPU=1 (read
at import), the ops run CPU tensors through it instead of the host kernels
(python/segops/_launch.py), so that every op test exercises the GPU
kernels. The library exists only in builds with the compiler."""

from __future__ import annotations

import ctypes
import os
from functools import lru_cache
from pathlib import Path
from typing import Sequence

import torch

from segops import _library

LIBRARY_PATH = Path(_library.NATIVE_DIR) / "libsegops_gpusim.so"
ENABLED = os.environ.get("SEGOPS_SIMULATE_GPU", "") not in ("", "0")


class SimulatorError(RuntimeError):
    """A deadlock or malformed collective in a simulated kernel."""


class GpuSimulator:
    def __init__(self, path: Path = LIBRARY_PATH) -> None:
        self.path = Path(path)
        self.library = ctypes.CDLL(str(path))
        launch = self.library.segsim_launch
        launch.restype = ctypes.c_int
        launch.argtypes = [ctypes.c_void_p, ctypes.POINTER(ctypes.c_uint64), ctypes.c_int,
                           ctypes.c_int64, ctypes.c_int64, ctypes.POINTER(ctypes.c_int64),
                           ctypes.c_int, ctypes.c_int64, ctypes.c_int64, ctypes.c_int,
                           ctypes.c_char_p, ctypes.c_size_t]
        self._launch = launch

    def grid_for(self, name: str, num_rows: int) -> int:
        """The grid the CUDA launcher would use (python/segops/_library.py)."""
        info = _library.kernel(name)
        blocks = -(-num_rows // info.grid_per_block)
        return min(max(blocks, info.grid_min), _library.MAX_GRID)

    def run(self, name: str, inputs: Sequence[torch.Tensor], outputs: Sequence[torch.Tensor],
            num_rows: int, num_segments: int, grid: int | None = None,
            reverse_blocks: bool = False) -> None:
        """Runs kernel `name` like `_launch.run` would on a GPU: contiguous
        CPU `inputs` then `outputs` (in the kernel's argument order), N rows,
        S segments, on `grid` blocks (default: the CUDA launcher's grid)."""
        info = _library.kernel(name)
        if len(inputs) != info.num_inputs or len(outputs) != info.num_outputs:
            raise ValueError(f"kernel {name} takes {info.num_inputs} inputs and "
                             f"{info.num_outputs} outputs")
        tensors = list(inputs) + list(outputs)
        # Uninitialized on a GPU: 0xff bytes here (NaN floats, -1 integers),
        # so that a kernel reading what was never written shows.
        scratch = torch.full((info.gpu_scratch_bytes(num_rows, num_segments),), 255,
                             dtype=torch.uint8)
        launches = _library.gpu_launches(info, num_rows, scratch.data_ptr())
        for symbol, default_grid, trailing in launches:
            self.launch(symbol, tensors, num_rows, num_segments,
                        grid if grid is not None else default_grid, info.block, reverse_blocks,
                        trailing)

    def launch(self, symbol: str, tensors: Sequence[torch.Tensor], num_rows: int,
               num_segments: int, grid: int, block: int, reverse_blocks: bool = False,
               trailing: Sequence[int] = ()) -> None:
        """Runs kernel `symbol` of the library on `tensors` (their pointers,
        in order), then N, S and the `trailing` 64-bit values, on `grid`
        blocks of `block` threads."""
        for tensor in tensors:
            if tensor.device.type != "cpu" or not tensor.is_contiguous():
                raise ValueError("the simulator runs on contiguous CPU tensors")
        self.launch_address(ctypes.cast(getattr(self.library, symbol), ctypes.c_void_p),
                            tensors, num_rows, num_segments, grid, block, reverse_blocks,
                            trailing)

    def launch_address(self, kernel: ctypes.c_void_p | int, tensors: Sequence[torch.Tensor],
                       num_rows: int, num_segments: int, grid: int, block: int,
                       reverse_blocks: bool = False, trailing: Sequence[int] = ()) -> None:
        """launch() of a kernel given by address (one compiled at run time)."""
        pointers = (ctypes.c_uint64 * len(tensors))(*[t.data_ptr() for t in tensors])
        error = ctypes.create_string_buffer(4096)
        extra = (ctypes.c_int64 * max(1, len(trailing)))(*trailing)
        status = self._launch(kernel, pointers, len(tensors), num_rows, num_segments, extra,
                              len(trailing), grid, block, int(reverse_blocks), error,
                              len(error))
        if status != 0:
            raise SimulatorError(error.value.decode())


@lru_cache(maxsize=None)
def simulator() -> GpuSimulator:
    """The simulator over the op library's GPU kernels (loaded once)."""
    return GpuSimulator()
