"""GPU kernels' memory traffic, counted by the SIMT simulator.

The simulated kernels report every global load and store to the simulator
(`segsim_access`, runtime/include/segrt/GpuSimulator.h); while tracing, it
groups the lanes of a warp that run the same access site for the same time
into one warp instruction, as a GPU issues it, and counts per launch: warp
instructions and their active lanes, the bytes the lanes asked for and the
32-byte sectors they touched, the distinct sectors of the launch (what
moves between DRAM and L2 if L2 keeps every sector between its uses), and
the dependent load rounds of each warp.

This module runs one call of a library operator level on the simulator with
tracing on and returns each launch's counts beside the kernel the launcher
planned for it. It needs SEGOPS_SIMULATE_GPU=1 before segops is imported
(bench.gpu_model starts a process with it).
"""

from __future__ import annotations

import ctypes
import math
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, fields

import torch
from torch import Tensor

import segops  # noqa: F401  (registers the ops and run-time widths)
from segops import _gpusim, _library, _wide, ops
from segops._op_table import OPS, SEGMENT, level_name

# Loads one warp keeps in flight before it waits for the first: ptxas
# unrolls a row loop by about 4 (an assumption of the model; see
# docs/benchmarks.md, "GPU performance model").
LOADS_PER_ROUND = 4

DTYPES = {"f32": torch.float32, "f64": torch.float64}


class _Traffic(ctypes.Structure):
    """segrt's SegsimTraffic, field for field."""

    _fields_ = [(name, ctypes.c_int64) for name in (
        "grid_size", "block_size", "warps",
        "load_instructions", "load_lanes", "load_useful_bytes", "load_sectors",
        "store_instructions", "store_lanes", "store_useful_bytes", "store_sectors",
        "distinct_load_sectors", "distinct_store_sectors",
        "warp_rounds", "max_warp_rounds")]


@dataclass(frozen=True)
class LaunchTraffic:
    """One launch's counts (SegsimTraffic) and the kernel it ran."""

    kernel: str
    grid_size: int
    block_size: int
    warps: int
    load_instructions: int
    load_lanes: int
    load_useful_bytes: int
    load_sectors: int
    store_instructions: int
    store_lanes: int
    store_useful_bytes: int
    store_sectors: int
    distinct_load_sectors: int
    distinct_store_sectors: int
    warp_rounds: int
    max_warp_rounds: int

    @property
    def instructions(self) -> int:
        return self.load_instructions + self.store_instructions

    @property
    def sectors(self) -> int:
        return self.load_sectors + self.store_sectors

    @property
    def useful_bytes(self) -> int:
        return self.load_useful_bytes + self.store_useful_bytes

    @property
    def distinct_sectors(self) -> int:
        return self.distinct_load_sectors + self.distinct_store_sectors


def _simulator() -> ctypes.CDLL:
    if not _gpusim.ENABLED:
        raise RuntimeError("bench.gpu_traffic needs SEGOPS_SIMULATE_GPU=1 before segops "
                           "is imported")
    # The simulated driver loaded the same library: one copy, one trace.
    library = ctypes.CDLL(str(_gpusim.LIBRARY_PATH))
    library.segsim_trace.argtypes = [ctypes.c_int32]
    library.segsim_trace_count.restype = ctypes.c_int64
    library.segsim_trace_record.argtypes = [ctypes.c_int64, ctypes.POINTER(_Traffic)]
    library.segsim_trace_record.restype = ctypes.c_int32
    library.segsim_trace_grids.argtypes = [ctypes.POINTER(ctypes.c_int64), ctypes.c_int64]
    return library


@contextmanager
def traced(records: list[_Traffic], loads_per_round: int = LOADS_PER_ROUND,
           grids: Sequence[int] = ()) -> Iterator[None]:
    """Traces the launches run inside; appends their records, in order.
    Launch k runs on `grids[k]` blocks where that is given and positive."""
    library = _simulator()
    library.segsim_trace(loads_per_round)
    library.segsim_trace_grids((ctypes.c_int64 * len(grids))(*grids), len(grids))
    try:
        yield
    finally:
        library.segsim_trace(0)
        for index in range(library.segsim_trace_count()):
            record = _Traffic()
            library.segsim_trace_record(index, ctypes.byref(record))
            records.append(record)


def segment_index(num_rows: int, mean_length: int | None, seed: int = 0) -> tuple[Tensor, int]:
    """A sorted int32 idx of `num_rows` rows in segments of 1 to
    2 * mean_length - 1 rows (uniformly: mean `mean_length`), or one segment
    (None); and the number of segments."""
    if mean_length is None or mean_length >= num_rows:
        return torch.zeros(num_rows, dtype=torch.int32), 1
    generator = torch.Generator().manual_seed(seed)
    lengths = torch.randint(1, 2 * mean_length, (2 * num_rows // mean_length + 1,),
                            generator=generator)
    ends = lengths.cumsum(0)
    count = int(torch.searchsorted(ends, num_rows).item()) + 1
    lengths = lengths[:count].clone()
    lengths[-1] -= int(ends[count - 1]) - num_rows
    return index_of(lengths), count


def index_of(counts: Sequence[int] | Tensor) -> Tensor:
    """The sorted int32 idx of segments of `counts` rows each."""
    return torch.repeat_interleave(torch.arange(len(counts), dtype=torch.int32),
                                   torch.as_tensor(counts, dtype=torch.int64))


def _argument(op: str, name: str, space: str, width: int, rows: int, segments: int,
              dtype: torch.dtype, generator: torch.Generator) -> Tensor:
    spec = OPS[op]
    leading = segments if space == SEGMENT else rows
    if name in spec.scalar_args:
        shape: tuple[int, ...] = (leading,)
    elif name in spec.matrix_args:
        shape = (leading, width, width)
    else:
        shape = (leading,) if width == 1 else (leading, width)
    return torch.randn(shape, dtype=dtype, generator=generator)


def level_arguments(op: str, level: int, width: int, dtype: torch.dtype, idx: Tensor,
                    num_segments: int, seed: int = 0) -> list[Tensor]:
    """The float arguments level `level` of `op`'s kernels take: the op's
    (random), then what level_inputs adds per level below."""
    generator = torch.Generator().manual_seed(seed)
    spec = OPS[op]
    rows = idx.shape[0]
    floats = [_argument(op, name, space, width, rows, num_segments, dtype, generator)
              for name, space in zip(spec.float_args, spec.operand_spaces)]
    return level_inputs(op, level, floats, idx, num_segments, generator)[1]


def level_inputs(op: str, level: int, floats: list[Tensor], idx: Tensor, num_segments: int,
                 generator: torch.Generator | None = None) -> tuple[list[Tensor], list[Tensor]]:
    """Level `level`'s float arguments from the op's `floats`, without and
    with saved results: the default overload's contract and that of its
    kernels (overload `saved`, which autograd calls). Per level below, the
    outputs its backward takes (its signature's `saved_results`, computed
    as autograd saves them), then a random cotangent per output. A level
    whose backward takes none runs on the meta device, for the shapes alone."""
    native = ops.native_kernels()
    plain, full = list(floats), list(floats)
    for below in range(level):
        name = level_name(op, below)
        packet = getattr(torch.ops.segops, name)
        overload = packet.saved if "saved" in packet.overloads() else packet.default
        saved = native.operator_signature(name).saved_results
        with torch.no_grad():
            if saved:
                outputs = overload(*full, idx, num_segments)
            else:
                outputs = overload(*[f.to("meta") for f in full], idx.to("meta"), num_segments)
        outputs = outputs if isinstance(outputs, tuple) else (outputs,)
        cotangents = [torch.randn(o.shape, dtype=o.dtype, generator=generator) for o in outputs]
        full += [outputs[k] for k in saved] + cotangents
        plain += cotangents
    return plain, full


@dataclass(frozen=True)
class Call:
    """One traced call of a library operator level."""

    op: str
    dtype: str
    level: int
    width: int
    num_rows: int
    num_segments: int
    launches: tuple[LaunchTraffic, ...]
    # Bytes the call's arguments and results occupy: what it must move.
    required_bytes: int


def trace_call(op: str, dtype: str, level: int, width: int, num_rows: int,
               mean_length: int | None, seed: int = 0, grids: Sequence[int] = ()) -> Call:
    """Runs level `level` of `op` once on the simulator and traces it;
    launch k on `grids[k]` blocks where that is given and positive (else
    on the launcher's grid)."""
    idx, num_segments = segment_index(num_rows, mean_length, seed)
    return trace_idx(op, dtype, level, width, idx, num_segments, seed, grids)


def trace_layout(op: str, dtype: str, level: int, width: int, counts: Sequence[int],
                 seed: int = 0) -> Call:
    """trace_call on segments of `counts` rows each (empty ones allowed)."""
    return trace_idx(op, dtype, level, width, index_of(counts), len(counts), seed)


def trace_idx(op: str, dtype: str, level: int, width: int, idx: Tensor, num_segments: int,
              seed: int = 0, grids: Sequence[int] = ()) -> Call:
    """trace_call on a given sorted int32 idx of `num_segments` segments."""
    num_rows = idx.shape[0]
    floats = level_arguments(op, level, width, DTYPES[dtype], idx, num_segments, seed)
    operator = getattr(torch.ops.segops, level_name(op, level))
    records: list[_Traffic] = []
    with traced(records, grids=grids):
        outputs = operator(*floats, idx, num_segments)
    if isinstance(outputs, Tensor):
        outputs = (outputs,)
    record = kernel_record(op, dtype, width, level)
    plan = record.gpu_launches(num_rows, num_segments)
    if len(plan) != len(records):
        raise RuntimeError(f"{level_name(op, level)} (w{width}, {dtype}): the launcher "
                           f"planned {len(plan)} launches, the simulator ran {len(records)}")
    launches = tuple(
        LaunchTraffic(kernel, **{f.name: getattr(r, f.name) for f in fields(LaunchTraffic)
                                 if f.name != "kernel"})
        for (kernel, _), r in zip(plan, records))
    return Call(op, dtype, level, width, num_rows, num_segments, launches,
                required_bytes(record, num_rows, num_segments))


def kernel_record(op: str, dtype: str, width: int, level: int) -> _library.KernelRecord:
    """The kernel record of `op`'s level for `dtype` rows of `width`: the op
    library's, or that of the width compiled at run time."""
    return _library.kernels().get(OPS[op].kernel_name(dtype, width, level)) \
        or _wide.program(op, dtype, width).entry(level)


_ELEMENT_BYTES = {"f32": 4, "f64": 8, "i32": 4}


def required_bytes(entry: _library.KernelRecord, num_rows: int, num_segments: int) -> int:
    """Bytes a run must move at the least: every buffer its kernels read
    once and every output written once (not the scratch)."""
    total = 0
    for buffer in entry.buffers:
        if buffer.read or buffer.is_output:
            total += math.prod(buffer.extents(num_rows, num_segments)) \
                * _ELEMENT_BYTES[buffer.dtype]
    return total
