"""The host output cache (runtime/include/segrt/BufferCache.h).

A large CPU output (8 MiB or more) of the C++ kernels, or the contiguous copy
of a large non-contiguous input (the expanded gradient of ``out.sum()``),
takes the buffer of an earlier output of about the same size that was freed,
instead of fresh memory, whose first touch costs page faults and the zeroing
of every page (as much as the kernel itself for ops writing a row per input
row). At most ``limit_bytes`` are held (1 GiB by default, an eighth of the
memory on smaller machines), the least recently freed buffers released
first.

Environment: ``SEGOPS_OUTPUT_CACHE_MB`` sets the limit at import (0 turns
the cache off).
"""

from __future__ import annotations

import os
from typing import Any

from segops import _extensions

_KEYS = ("cached_bytes", "cached_buffers", "live_bytes", "limit_bytes", "hits", "misses")


def _native() -> Any:
    return _extensions.torchops()


def output_cache_info() -> dict[str, int]:
    """The cache's state: bytes held for reuse (``cached_bytes``, in
    ``cached_buffers`` buffers), bytes of live outputs from it
    (``live_bytes``), ``limit_bytes``, and allocations served from it
    (``hits``) or mapped afresh (``misses``). All 0 without the C++
    kernels."""
    native = _native()
    if native is None:
        return dict.fromkeys(_KEYS, 0)
    return dict(native.output_cache_info())


def empty_output_cache() -> None:
    """Returns every cached buffer to the system (live outputs are not
    affected)."""
    native = _native()
    if native is not None:
        native.empty_output_cache()


def set_output_cache_limit(num_bytes: int) -> None:
    """Caps the bytes the cache holds; 0 turns it off. Cached buffers over
    the new limit are released at once."""
    if num_bytes < 0:
        raise ValueError(f"set_output_cache_limit: num_bytes must be >= 0, got {num_bytes}")
    native = _native()
    if native is not None:
        native.set_output_cache_limit(int(num_bytes))


def apply_environment(native: Any) -> None:
    """Applies SEGOPS_OUTPUT_CACHE_MB, if set, to the loaded C++ kernels."""
    value = os.environ.get("SEGOPS_OUTPUT_CACHE_MB", "").strip()
    if not value:
        return
    try:
        megabytes = float(value)
    except ValueError:
        raise ValueError(f"SEGOPS_OUTPUT_CACHE_MB must be a number of MiB, got {value!r}") from None
    if megabytes < 0:
        raise ValueError(f"SEGOPS_OUTPUT_CACHE_MB must be >= 0, got {value!r}")
    native.set_output_cache_limit(int(megabytes * 2**20))
