"""Library ops on rows of widths the op library does not ship.

The op library holds kernels for rows of 1 and 3 features (the seed's
shapes). Rows of any other width F run the same op's kernel function at
that width (``SegmentOp.kernel_source``), compiled at run time on first use
with its derivative levels, like a segops.jit program, and cached on disk:
``segops::segmented_sum`` on (N, 64) rows runs ``segmented_sum_f32_w64``.
The C++ operator kernels ask for such a variant the first time they meet
its key, through the provider this module installs in ``ops``
(``ops.provide_run_time_widths``; segops/__init__ imports it).
"""

from __future__ import annotations

import threading
from typing import Any

from segops import _extensions, _jit, ops
from segops._op_table import OPS

_PROGRAMS: dict[tuple[str, str, int], _jit.Program] = {}
_LOCK = threading.Lock()


def program(op: str, dtype: str, width: int) -> _jit.Program:
    """The compiled program of `op`'s kernel for `dtype` rows of `width`."""
    key = (op, dtype, width)
    with _LOCK:
        found = _PROGRAMS.get(key)
        if found is None:
            spec = OPS[op]
            found = _PROGRAMS[key] = _jit.Program(
                spec.kernel_name(dtype, width, 0), spec.kernel_source(dtype, width),
                idx_position=spec.num_tensors, label=op)
    return found


def programs() -> list[_jit.Program]:
    """The widths' programs this process compiled (for compiler bundles)."""
    with _LOCK:
        return list(_PROGRAMS.values())


def compiled_kernel(op: str, dtype: str, width: int, level: int) -> Any:
    """Level `level` for these rows, compiled, as the operator library takes
    it (_torchops.CompiledKernel)."""
    try:
        _extensions.segc()
    except RuntimeError as error:
        raise RuntimeError(
            f"segops::{op}: rows of {width} features need a kernel compiled at run time "
            f"(the op library ships rows of 1 and 3 features), and {error}") from None
    return _jit.compiled_kernel(program(op, dtype, width), level)


def host_rows(op: str, dtype: str, width: int, level: int) -> bool:
    """Whether the level's host kernel maps rows (any idx order)."""
    return program(op, dtype, width).entry(level).host_rows


ops.provide_run_time_widths(ops.RunTimeWidths(compiled_kernel, host_rows))
