"""Argument checks shared by the real and the fake (meta) kernels.

Cheap checks (types, dtypes, shapes, devices, counts) run on every call and
never read tensor data. Index content is checked where that costs no host
synchronisation: always on CPU, and on CUDA only in debug mode, since the
kernels stay in bounds whatever idx holds. Values must lie in
[0, num_segments); order matters only to the segment kernels on CUDA (on
CPU an unsorted index's rows are sorted first, and row maps take any order).

Errors follow the wording of nvalchemiops (the package segops stands in
for): a dtype error is a DTypeError, which ``except TypeError`` and
``except ValueError`` both catch.
"""

from __future__ import annotations

import operator
import os
from collections.abc import Callable, Sequence

import torch

from segops import _library
from segops._dtypes import FLOAT_DTYPES, INDEX_DTYPES, SIXTEEN_BIT_DTYPES

INT32_MAX = 2**31 - 1

_debug_checks = os.environ.get("SEGOPS_DEBUG", "") not in ("", "0")
_debug_checks_listeners: list[Callable[[bool], None]] = []


def set_debug_checks(enabled: bool) -> None:
    """Check idx range and order on CUDA too (costs a host sync per call).

    Also enabled by the environment variable SEGOPS_DEBUG=1.
    """
    global _debug_checks
    _debug_checks = bool(enabled)
    for listener in _debug_checks_listeners:
        listener(_debug_checks)


def on_debug_checks_change(listener: Callable[[bool], None]) -> None:
    """Calls `listener(enabled)` whenever set_debug_checks is called (the
    C++ CUDA kernels keep their own copy of the switch)."""
    _debug_checks_listeners.append(listener)


def debug_checks_enabled() -> bool:
    return _debug_checks


class DTypeError(TypeError, ValueError):
    """A tensor of the wrong dtype. segops raised TypeError, nvalchemiops
    raises ValueError: code written against either keeps working."""


def _shape(tensor: torch.Tensor) -> str:
    return "(" + ", ".join(str(d) for d in tensor.shape) + ("," if tensor.dim() == 1 else "") + ")"


def _sixteen_bit_note(dtype: torch.dtype, sixteen_bit_ops: Sequence[str]) -> str:
    """For a 16-bit dtype an op refuses, which ops take it."""
    if dtype not in SIXTEEN_BIT_DTYPES or not sixteen_bit_ops:
        return ""
    return (f" (bfloat16 and float16 rows are taken by {', '.join(sixteen_bit_ops)}; "
            "convert to float32 for the others)")


def check_tensor(op: str, name: str, value: object) -> torch.Tensor:
    if not isinstance(value, torch.Tensor):
        raise TypeError(f"{op}: {name} must be a torch.Tensor, got {type(value).__name__}")
    return value


def check_float_rows(op: str, name: str, value: object, leading: str = "N",
                     sixteen_bit_ops: Sequence[str] = ()) -> int:
    """Checks a (L,) or (L, F) float32/float64 tensor (F >= 1 features: 3 for
    the seed's vectors); returns its row width F (1 for (L,)). The dtype
    error for 16-bit rows names `sixteen_bit_ops`, the ops that take them."""
    tensor = check_tensor(op, name, value)
    if tensor.dtype not in FLOAT_DTYPES:
        raise DTypeError(f"{op}: {name} must be float32 or float64, got {tensor.dtype}"
                         + _sixteen_bit_note(tensor.dtype, sixteen_bit_ops))
    if tensor.dim() == 1:
        return 1
    if tensor.dim() == 2 and tensor.shape[1] >= 1:
        return int(tensor.shape[1])
    raise ValueError(
        f"{op}: {name} must have shape ({leading},) or ({leading}, 3), or ({leading}, F) rows of "
        f"F >= 1 features (segops.{op} flattens ({leading}, *f) to them), got {_shape(tensor)}")


def as_count(num_segments: object) -> object:
    """A segment count given as PyG users give it, as an int: a 0-d integer
    tensor (`batch.max() + 1`: its value is read, a device sync on CUDA) or
    a numpy integer. Anything else is returned as it is (checked by
    check_num_segments)."""
    if isinstance(num_segments, torch.Tensor):
        if num_segments.dim() == 0 and not num_segments.is_floating_point() \
                and not num_segments.is_complex() and num_segments.dtype != torch.bool:
            return int(num_segments)
        return num_segments
    if not isinstance(num_segments, (int, torch.SymInt)) and hasattr(num_segments, "__index__") \
            and type(num_segments).__module__ == "numpy":
        return operator.index(num_segments)
    return num_segments


def check_num_segments(op: str, num_segments: object) -> int:
    if isinstance(num_segments, bool) or not isinstance(num_segments, (int, torch.SymInt)):
        raise TypeError(
            f"{op}: num_segments must be an int (or a 0-d integer tensor), got "
            f"{_describe(num_segments)}")
    if num_segments < 0:
        raise ValueError(f"{op}: num_segments must be non-negative, got {num_segments}")
    if num_segments > INT32_MAX:
        raise ValueError(
            f"{op}: num_segments must fit int32 (at most {INT32_MAX}), got {num_segments}")
    return num_segments


def _describe(value: object) -> str:
    if isinstance(value, torch.Tensor):
        return f"a tensor of shape {tuple(value.shape)} and dtype {value.dtype}"
    return type(value).__name__


def check_index(op: str, idx: object, num_rows: int, rows_from: str) -> torch.Tensor:
    tensor = check_tensor(op, "idx", idx)
    if tensor.dtype not in INDEX_DTYPES:
        raise DTypeError(
            f"{op}: idx must be int32 or int64 (values fitting int32), got {tensor.dtype}"
        )
    if tensor.dim() != 1:
        raise ValueError(f"{op}: idx must be 1-D with shape (N,), got {_shape(tensor)}")
    if tensor.shape[0] != num_rows:
        raise ValueError(
            f"{op}: idx must have one entry per row of {rows_from} ({num_rows}), "
            f"got {tensor.shape[0]}")
    return tensor


def check_same_device(op: str, **tensors: torch.Tensor) -> None:
    devices = {name: t.device for name, t in tensors.items()}
    if len(set(devices.values())) > 1:
        listing = ", ".join(f"{name} on {device}" for name, device in devices.items())
        raise ValueError(f"{op}: all tensors must be on one device, got {listing}")


def check_index_content(op: str, idx: torch.Tensor, num_segments: int,
                        require_sorted: bool = False) -> None:
    """idx's values in [0, num_segments) (and non-decreasing if
    `require_sorted`): on CPU always, on CUDA in debug mode only."""
    if idx.numel() == 0 or idx.dtype not in INDEX_DTYPES or idx.dim() != 1:
        return  # nothing to read, or not an index (check_index words that)
    if idx.device.type != "cpu":
        if not _debug_checks:
            return
        idx = idx.cpu()  # debug mode: a host sync is accepted
    idx = idx.contiguous()
    problem, row = _library.native_module().check_index(
        idx.data_ptr(), idx.dtype == torch.int64, idx.numel(), num_segments,
        torch.get_num_threads(), require_sorted)
    if problem == "range":
        raise index_range_error(op, idx, row, num_segments)
    if problem == "order":
        # Not a memory-safety matter: unsorted rows silently land in wrong
        # segments, so the contract rejects them.
        raise ValueError(f"{op}: idx must be sorted (non-decreasing) on CUDA; row {row} "
                         f"({int(idx[row])}) follows {int(idx[row - 1])}")


def index_range_error(op: str, idx: torch.Tensor, row: int, num_segments: int) -> ValueError:
    """The error for a host index whose first value outside [0, num_segments)
    is at `row`: int64 values beyond int32 are named first, wherever they are."""
    if idx.dtype == torch.int64:
        beyond = ((idx > INT32_MAX) | (idx < -INT32_MAX - 1)).nonzero()
        if beyond.numel():
            first = int(beyond[0, 0])
            return ValueError(f"{op}: idx value {int(idx[first])} at row {first} is not "
                              f"representable as int32 (idx values must fit int32)")
    value = int(idx[row])
    if value < 0:
        return ValueError(f"{op}: idx value {value} at row {row} is negative (idx values "
                          f"must lie in [0, num_segments) = [0, {num_segments}))")
    return ValueError(f"{op}: idx value {value} at row {row} is out of range for "
                      f"num_segments = {num_segments} (idx values must lie in "
                      f"[0, num_segments) = [0, {num_segments}))")
