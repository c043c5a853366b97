"""Buffers placed against a page that may not be touched (PROT_NONE), after
their last byte or before their first, so that a kernel reading or writing
outside them dies with SIGSEGV. Used by probes that run in a subprocess."""

from __future__ import annotations

import ctypes
import mmap
from collections.abc import Callable

import torch

PAGE = mmap.PAGESIZE
_libc = ctypes.CDLL(None)
_libc.mprotect.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
_keep: list[mmap.mmap] = []

Fill = Callable[[list[int], torch.dtype], torch.Tensor]


def guarded(shape: list[int], dtype: torch.dtype, side: str, fill: Fill) -> torch.Tensor:
    """A tensor touching a PROT_NONE page on `side` ('after' or 'before'),
    filled with `fill(shape, dtype)`."""
    numel = 1
    for extent in shape:
        numel *= extent
    nbytes = numel * torch.empty((), dtype=dtype).element_size()
    data_pages = max(1, -(-nbytes // PAGE))
    region = mmap.mmap(-1, (data_pages + 1) * PAGE)
    base = ctypes.addressof(ctypes.c_char.from_buffer(region))
    _keep.append(region)
    if side == "after":
        guard, offset = base + data_pages * PAGE, data_pages * PAGE - nbytes
    else:
        guard, offset = base, PAGE
    assert _libc.mprotect(guard, PAGE, 0) == 0
    if numel == 0:
        return torch.empty(shape, dtype=dtype)
    tensor = torch.frombuffer(region, dtype=dtype, count=numel, offset=offset)
    tensor = tensor.view(shape)
    tensor.copy_(fill(shape, dtype))
    return tensor


def extent(symbol: str, n: int, s: int) -> int:
    sizes = {"N": n, "S": s}
    return sizes[symbol] if symbol in sizes else int(symbol)


def kernel_buffers(kernel: dict, n: int, s: int, side: str, idx_values: torch.Tensor,
                   generator: torch.Generator) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
    """Guarded inputs and outputs for a manifest kernel entry: idx from
    `idx_values`, floats random."""
    dtype = torch.float32 if kernel["dtype"] == "f32" else torch.float64
    inputs, outputs = [], []
    for buffer in kernel["buffers"]:
        shape = [extent(e, n, s) for e in buffer["shape"]]
        if buffer["dtype"] == "i32":
            tensor = guarded(shape, torch.int32, side,
                             lambda sh, dt: idx_values.to(dt).view(sh))
        else:
            tensor = guarded(shape, dtype, side,
                             lambda sh, dt: torch.randn(sh, dtype=dt, generator=generator))
        (outputs if buffer["role"] == "output" else inputs).append(tensor)
    return inputs, outputs
