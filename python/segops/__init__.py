"""segops: segmented reductions and per-segment algebra as PyTorch ops.

Kernels come from an MLIR-compiled op library (PTX for CUDA tensors, native
code for CPU tensors) and run behind ``torch.ops.segops.*`` custom ops.

>>> import torch, segops
>>> x = torch.tensor([1.0, 2.0, 3.0])
>>> idx = torch.tensor([0, 0, 2], dtype=torch.int32)
>>> segops.segmented_sum(x, idx, 3)
tensor([3., 0., 3.])
"""

from __future__ import annotations

from typing import Any

from segops import _extensions
from segops import _library as _build

_build.check_build()  # before any extension loads: a clear error on a PyTorch mismatch

from segops import _wide  # noqa: F401  (installs kernels for widths the library lacks)
from segops._jit import JitError, jit
from segops._output_cache import empty_output_cache, output_cache_info, set_output_cache_limit
from segops._validation import DTypeError, set_debug_checks
from segops.graph import Graph, clear_index_cache
from segops.ops import (
    segmented_dot,
    segmented_gather,
    segmented_matvec,
    segmented_max,
    segmented_mean,
    segmented_min,
    segmented_mul,
    segmented_rms_norm,
    segmented_sum,
)

__all__ = [
    "DTypeError",
    "segmented_sum",
    "segmented_dot",
    "segmented_mul",
    "segmented_mean",
    "segmented_rms_norm",
    "segmented_matvec",
    "segmented_gather",
    "segmented_max",
    "segmented_min",
    "jit",
    "JitError",
    "Graph",
    "clear_index_cache",
    "set_debug_checks",
    "output_cache_info",
    "empty_output_cache",
    "set_output_cache_limit",
    "library_info",
]
__version__ = "0.1.0"


def library_info() -> dict[str, Any]:
    """Where the op library lives and what it holds (kernels, PTX targets)."""
    manifest = _build.manifest()
    build = _build.host_build()
    return {
        "native_dir": str(_build.NATIVE_DIR),
        # Loadable with torch.ops.load_library without importing segops.
        "operator_library": str(_build.NATIVE_DIR / "libsegops_ops.so"),
        "kernels": sorted(_build.kernels()),
        "ptx": dict(manifest.ptx),
        "host_builds": [each.cpu for each in manifest.host_builds],
        "host_cpu": build.cpu,
        "host_library": build.library,
        "compiler": _extensions.has_compiler(),
    }
