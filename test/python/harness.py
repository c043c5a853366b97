"""Test harnesses: one op-library kernel run on tensors, on the host, on a
GPU, or on the SIMT simulator (runtime/include/segrt/GpuSimulator.h), and
the host kernels of one module compiled in this process. Tests use them to
check kernels below the operators; the package does not.
"""

from __future__ import annotations

import ctypes
import json
import os
import subprocess
import sys
import threading
from collections.abc import Callable, Sequence
from functools import cache
from pathlib import Path
from typing import Any

import torch

from segops import _gpusim, _jit, _library, _wide
from segops._dtypes import MANIFEST_DTYPES
from segops._extensions import segc as _segc
from segops._gpusim import LIBRARY_PATH
from segops._op_table import GRAD_SUFFIX


@cache
def _capability(device: int) -> tuple[int, int]:
    return torch.cuda.get_device_capability(device)


def _segrt() -> Any:
    return _library.native_module()


@cache
def host_library() -> Any:
    """The op library's host build this process runs, loaded."""
    return _segrt().HostLibrary(str(_library.NATIVE_DIR / _library.host_build().library))


def launch_host(kernel: Any, pointers: Sequence[int], num_rows: int, num_segments: int,
                library: Any = None) -> None:
    """Runs every segment (and zeroes row outputs of rows outside them) of
    op library kernel `kernel` (a KernelRecord), across PyTorch's intra-op
    threads when there are enough rows (the runtime decides, and cuts long
    segments into tiles). `library`: a loaded host build other than this
    process's (host_library)."""
    if num_rows == 0 and num_segments == 0:
        return
    (library or host_library()).call_parallel(kernel, list(pointers), num_rows, num_segments,
                                              torch.get_num_threads())


_cuda_modules: dict[int, Any] = {}
_cuda_lock = threading.Lock()


def cuda_module(device: int) -> Any:
    """The op library's PTX loaded on CUDA device `device` (once)."""
    with _cuda_lock:
        module = _cuda_modules.get(device)
        if module is None:
            if not _segrt().cuda_available():
                raise RuntimeError(_segrt().cuda_unavailable_reason())
            ptx = _library.ptx_for(_capability(device)).read_text()
            module = _cuda_modules[device] = _segrt().CudaModule(device, ptx)
    return module


def run_gpu(module: Any, kernel: Any, stream: int, pointers: Sequence[int], num_rows: int,
            num_segments: int, device: torch.device) -> None:
    """One run of `kernel` (a KernelRecord) on `module` (a CudaModule, of
    the driver or the simulated driver) through segrt's GPU launcher, with
    its scratch buffer allocated on `device` (on CUDA, PyTorch's
    stream-ordered allocator: freed on return, reused only by work queued
    after these launches)."""
    if num_rows == 0 and num_segments == 0:
        return
    scratch = _scratch(kernel, num_rows, num_segments, device)
    module.run(kernel, stream, list(pointers), num_rows, num_segments,
               scratch.data_ptr() if scratch.numel() else 0)


def _scratch(kernel: Any, num_rows: int, num_segments: int,
             device: torch.device) -> torch.Tensor:
    """The scratch buffer of one GPU run of `kernel` (empty if it takes
    none): on the simulated driver 0xff bytes (NaN floats, -1 integers), so
    that a kernel reading what was never written shows; on CUDA
    uninitialized."""
    size = _segrt().gpu_scratch_bytes(kernel, num_rows, num_segments)
    if device.type == "cpu":
        return torch.full((size,), 255, dtype=torch.uint8)
    return torch.empty(size, dtype=torch.uint8, device=device)


def run(name: str, inputs: Sequence[torch.Tensor], outputs: torch.Tensor | Sequence[torch.Tensor],
        num_rows: int, num_segments: int) -> None:
    """Runs kernel `name` with the segops ABI: contiguous `inputs` (in the
    kernel function's argument order), then `outputs`, then the sizes (N rows,
    S segments). Launches asynchronously on CUDA."""
    info = _library.kernel(name)
    if isinstance(outputs, torch.Tensor):
        outputs = [outputs]
    if len(inputs) != info.num_inputs or len(outputs) != info.num_outputs:
        raise ValueError(f"kernel {name} takes {info.num_inputs} inputs and "
                         f"{info.num_outputs} outputs, got {len(inputs)} and {len(outputs)}")
    pointers = [t.data_ptr() for t in inputs]
    pointers.extend(t.data_ptr() for t in outputs)
    device = outputs[0].device
    if device.type == "cpu" and _gpusim.ENABLED:
        simulator().run(name, inputs, outputs, num_rows, num_segments)
    elif device.type == "cpu":
        for output in outputs:  # segrt skips the small ones
            _library.advise_huge_pages(output)
        launch_host(info, pointers, num_rows, num_segments)
    elif device.type == "cuda":
        index = device.index if device.index is not None else torch.cuda.current_device()
        run_gpu(cuda_module(index), info, torch.cuda.current_stream(index).cuda_stream,
                pointers, num_rows, num_segments, device)
    else:
        raise ValueError(f"segops runs on CPU and CUDA tensors, not on {device.type}")


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
        native = _segrt()
        return native.CudaModule(0, native.simulator_image(str(self.path), addresses or {}),
                                 simulated=True)

    def grid_for(self, name: str, num_rows: int, num_segments: int = 0) -> int:
        """The grid the GPU launcher gives kernel `name` for N rows and S
        segments."""
        launches = _segrt().plan_gpu_launches(_library.kernel(name), num_rows,
                                              num_segments, 0)
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
        if grid is None and not reverse_blocks:
            if self._module is None:
                self._module = self.module()
            run_gpu(self._module, info, 0, [t.data_ptr() for t in tensors],
                    num_rows, num_segments, torch.device("cpu"))
            return
        scratch = _scratch(info, num_rows, num_segments, torch.device("cpu"))
        for symbol, default_grid, trailing in _segrt().plan_gpu_launches(
                info, num_rows, num_segments, scratch.data_ptr()):
            self.launch(symbol, tensors, trailing=trailing,
                        grid=grid if grid is not None else default_grid, block=info.block,
                        reverse_blocks=reverse_blocks)

    def launch(self, symbol: str | int, tensors: Sequence[torch.Tensor],
               *scalars: int | Sequence[int], grid: int, block: int,
               reverse_blocks: bool = False, trailing: Sequence[int] = ()) -> None:
        """Runs kernel `symbol` of the library (or the simulated kernel at
        address `symbol`, loaded to call into it) once on `tensors` (their
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
        kernel = (ctypes.c_void_p(symbol) if isinstance(symbol, int)
                  else ctypes.cast(getattr(self.library, symbol), ctypes.c_void_p))
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


class SimulatedProgram:
    """The GPU kernels of one derivative level of a program compiled at run
    time (segops.jit, segops._wide) on the simulator, run as segrt's GPU
    launcher plans them, on any grid."""

    def __init__(self, program: Any, level: int, simulator: GpuSimulator) -> None:
        compiler = _segc()
        self.program, self.level = program, level
        self.record = program.entry(level)
        obj = compiler.compile_simulator_object(program.source, level,
                                                program.level_name(level))
        self.addresses = compiler.load_host_object(obj, sorted(self.record.gpu_symbols),
                                                   str(simulator.path))
        self.simulator = simulator

    def run(self, inputs: Sequence[torch.Tensor], outputs: Sequence[torch.Tensor],
            num_rows: int, num_segments: int, grid: int | None = None,
            reverse_blocks: bool = False) -> None:
        """Runs the level on CPU `inputs` then `outputs` (argument order):
        the launcher's plan, on its grid or on `grid`."""
        tensors = [*inputs, *outputs]
        scratch = _scratch(self.record, num_rows, num_segments, torch.device("cpu"))
        for symbol, default_grid, trailing in _segrt().plan_gpu_launches(
                self.record, num_rows, num_segments, scratch.data_ptr()):
            self.simulator.launch(self.addresses[symbol], tensors, trailing=trailing,
                                  grid=grid if grid is not None else default_grid,
                                  block=self.record.block, reverse_blocks=reverse_blocks)


class CompiledModule:
    """The host kernels of one compiled module, with their manifest: compiled
    in this process (`_segc.compile_host_object`, for this CPU) and loaded
    with ORC's LLJIT, as segops.jit does; no seg-compile or C compiler.
    `order`: derivative levels up to it; `keep`: only that function."""

    def __init__(self, source: str, order: int = 0, keep: str = "") -> None:
        compiler = _segc()
        manifest, obj = compiler.compile_host_object(source, order, keep, interleave=4)
        self.kernels = _library.parse_manifest(manifest).kernels
        symbols = []
        for kernel in self.kernels.values():
            symbols.append(kernel.host_symbol)
            if kernel.split:
                symbols += [kernel.split.rows_symbol, kernel.split.finish_symbol]
        self._addresses = compiler.load_host_object(obj, symbols)

    @classmethod
    def of_level(cls, program: _jit.Program, level: int) -> CompiledModule:
        """Level `level` of a run-time program alone: its lower levels would
        double the compile time of a wide third level."""
        return cls(program.source, order=level, keep=program.level_name(level))

    def run(self, name: str, inputs: Sequence[torch.Tensor], num_rows: int,
            num_segments: int) -> list[torch.Tensor]:
        """Runs kernel `name` on CPU tensors (in argument order, idx included)
        and returns its outputs, allocated from the manifest's shapes."""
        kernel = self.kernels[name]
        outputs = [torch.empty(buffer.extents(num_rows, num_segments),
                               dtype=MANIFEST_DTYPES[buffer.dtype])
                   for buffer in kernel.buffers if buffer.is_output]
        inputs = [t.contiguous() for t in inputs]  # kept alive across the call
        pointers = [t.data_ptr() for t in inputs] + [t.data_ptr() for t in outputs]
        problem, row = _segrt().check_index_and_call(
            kernel, self._addresses, pointers, num_rows, num_segments, torch.get_num_threads())
        if problem:
            raise ValueError(f"{name}: idx broke the kernel's contract ({problem}) at row {row}")
        return outputs


def record_gpu_code(chips: Sequence[str]) -> int:
    """Asks the compiler (and so records, or checks a bundle) for the
    manifest entry and the PTX for `chips` of every level of every program
    this process ran; returns how many (program, level)s. (A level's manifest
    may have come with its host code, which a bundle does not hold.)"""
    count = 0
    for program in [*_jit.programs(), *_wide.programs()]:
        for level in sorted(program.levels_used()):
            program.compile_entry(level)
            for chip in chips:
                program.ptx_for_chip(level, chip)
            count += 1
    return count


def segment_end_counts(tile: int) -> list[int]:
    """Rows per segment whose ends a segment kernel must find past the
    chunk each starts in (no whole aligned tile of `tile` rows covered, so
    not long): in the chunk after, 128 rows after it, one row later, in
    the middle of the tile after the start, on the last row of that tile
    (the last a segment that is not long can hold), and at N."""
    def aligned(row: int) -> int:
        return -(-row // tile) * tile

    counts = [5, 40, 146, 129]
    start = sum(counts)
    counts.append(aligned(start) + tile // 2 - start)
    start += counts[-1]
    counts.append(aligned(start) + tile - 1 - start)
    return counts + [0, 300]


def walk_sector_counts(offsets: Sequence[int] = (1, 5, 7)) -> list[int]:
    """Rows per segment such that, for each o of `offsets`, two walked
    segments start o rows past a sector of idx (8 rows; a walk's rounds of
    128 rows start at the sector), each after a filler segment: one ending
    on the first round's last row (127 - o rows), one on the row after
    (128 - o rows: found by the second round)."""
    counts: list[int] = []
    row = 0
    for offset in offsets:
        for length in (127 - offset, 128 - offset):
            fill = (offset - row) % 32 or 32
            counts += [fill, length]
            row += fill + length
    return counts + [3]


def packed_tail_counts(tails: Sequence[tuple[int, int]]) -> list[int]:
    """Rows per segment such that, for each (a, e) of `tails`, a segment
    starts a rows before the end of a 32-row chunk and ends e rows into
    the next (the first past its end: row e of that chunk), after a filler
    segment from the previous one."""
    counts: list[int] = []
    row = 0
    for before, after in tails:
        fill = (32 - before - row) % 32
        if fill:
            counts.append(fill)
        counts.append(before + after)
        row += fill + before + after
    return counts


def window_counts(num_rows: int, window_chunks: int) -> list[int]:
    """Rows per segment of `num_rows` rows for segment kernels whose warps
    take windows of `window_chunks` 32-row chunks: a segment covering more
    than a window from its third row (windows without work), then
    segments of 0 to 70 rows, so that starts fall on every lane of a
    window."""
    lengths = [1, 0, 31, 33, 5, 64, 2, 70, 0, 7, 32, 1, 17]
    counts = [2, 40 * window_chunks + 9]
    while sum(counts) < num_rows:
        counts.append(min(lengths[len(counts) % len(lengths)], num_rows - sum(counts)))
    return counts


def check_invalid_segments_at_the_ends(
        buffers: Sequence[tuple[str, str, Sequence[str]]],
        run_gpu: Any, run_host: Any, tolerance: dict[str, float],
        counts: Sequence[int] = (2, 3, 1, 5, 0, 4, 7, 2, 3, 1, 9, 6, 1, 4, 2, 0, 3, 5),
        head: int = 3, tail: int = 6) -> None:
    """Runs a kernel on idx holding -1 on its first `head` rows and S on its
    last `tail` (sorted; segments outside [0, S)) around valid segments of
    `counts` rows (by default 18 short ones), and checks it against the
    host kernel on the valid rows alone: segment outputs equal, the invalid
    rows' row outputs zero. `buffers`: per buffer (role, dtype, symbolic
    shape) in kernel order; `run_gpu(inputs, outputs, n, s)` and
    `run_host(inputs, outputs, n, s)` run the kernel."""
    valid, s = sum(counts), len(counts)
    n = head + valid + tail
    generator = torch.Generator().manual_seed(3)

    def sizes(shape: Sequence[str], rows: int) -> list[int]:
        return [{"N": rows, "S": s}.get(e) or int(e) for e in shape]

    def valid_rows(tensor: torch.Tensor, shape: Sequence[str]) -> torch.Tensor:
        return tensor[head:head + valid] if shape and shape[0] == "N" else tensor

    inputs, outputs, host_outputs = [], [], []
    for role, dtype, shape in buffers:
        if role == "output":
            outputs.append(torch.full(sizes(shape, n), float("nan"),
                                      dtype=MANIFEST_DTYPES[dtype]))
            host_outputs.append(torch.full(sizes(shape, valid), float("nan"),
                                           dtype=MANIFEST_DTYPES[dtype]))
        elif dtype == "i32":
            inputs.append(torch.cat([
                torch.full((head,), -1),
                torch.repeat_interleave(torch.arange(s), torch.tensor(list(counts))),
                torch.full((tail,), s)]).to(torch.int32))
        else:
            inputs.append(torch.randn(sizes(shape, n), dtype=MANIFEST_DTYPES[dtype],
                                      generator=generator))
    run_gpu(inputs, outputs, n, s)
    input_shapes = [shape for role, _, shape in buffers if role != "output"]
    run_host([valid_rows(t, shape).contiguous() for t, shape in zip(inputs, input_shapes)],
             host_outputs, valid, s)
    output_shapes = [shape for role, _, shape in buffers if role == "output"]
    for shape, got, want in zip(output_shapes, outputs, host_outputs):
        if shape and shape[0] == "N":
            outside = torch.cat([got[:head], got[head + valid:]])
            assert torch.equal(outside, torch.zeros_like(outside)), "invalid rows not zero"
        torch.testing.assert_close(valid_rows(got, shape), want, **tolerance)


def traced_on_simulator(calls: Sequence[Sequence[Any]],
                        function: str = "trace_call") -> list[dict]:
    """bench.gpu_traffic.<function>(*call) for each call, as dicts, in a
    process that runs the ops on the simulator (SEGOPS_SIMULATE_GPU=1)."""
    code = ("import dataclasses, json, sys\n"
            f"from bench.gpu_traffic import {function} as trace\n"
            "calls = json.loads(sys.argv[1])\n"
            "print(json.dumps([dataclasses.asdict(trace(*c)) for c in calls]))\n")
    result = subprocess.run(
        [sys.executable, "-c", code, json.dumps(calls)],
        cwd=Path(__file__).resolve().parents[2], capture_output=True, text=True,
        env=dict(os.environ, SEGOPS_SIMULATE_GPU="1"), timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout.splitlines()[-1])


# The level below a kernel record: its record, and a runner of it on CPU
# inputs (argument order) returning its outputs.
LevelBelow = Callable[[Any], tuple[Any, Callable[[Sequence[torch.Tensor], int, int],
                                                 list[torch.Tensor]]]]


def library_level_below(record: Any) -> tuple[Any, Callable[..., list[torch.Tensor]]]:
    """The op library's kernel one derivative level below `record`'s."""
    below = _library.kernel(record.name.removesuffix(GRAD_SUFFIX))

    def run_below(inputs: Sequence[torch.Tensor], num_rows: int,
                  num_segments: int) -> list[torch.Tensor]:
        outputs = [torch.empty(b.extents(num_rows, num_segments), dtype=MANIFEST_DTYPES[b.dtype])
                   for b in below.buffers if b.is_output]
        run(below.name, inputs, outputs, num_rows, num_segments)
        return outputs
    return below, run_below


_HOST_LEVELS: dict[tuple[str, int], CompiledModule] = {}


def host_level(program: _jit.Program, level: int) -> CompiledModule:
    """Level `level` of run-time program `program` compiled for the host,
    once per process (the comparisons of a test's layouts, and the saved
    results of the level above, share it)."""
    key = (program.name, level)
    if key not in _HOST_LEVELS:
        _HOST_LEVELS[key] = CompiledModule.of_level(program, level)
    return _HOST_LEVELS[key]


def program_level_below(program: _jit.Program) -> LevelBelow:
    """The level below a record of run-time program `program`, on its host
    kernel compiled here."""
    def level_below(record: Any) -> tuple[Any, Callable[..., list[torch.Tensor]]]:
        level = next(k for k in range(1, 8) if program.level_name(k) == record.name) - 1
        below = program.entry(level)

        def run_below(inputs: Sequence[torch.Tensor], num_rows: int,
                      num_segments: int) -> list[torch.Tensor]:
            host = host_level(program, level)
            return host.run(below.name, inputs, num_rows, num_segments)
        return below, run_below
    return level_below


def saved_result_positions(record: Any, level_below: LevelBelow = library_level_below
                           ) -> set[int]:
    """The positions among kernel `record`'s inputs (argument order) of the
    results of lower levels it takes: its own level below's, and those its
    arguments of the level below take in turn."""
    buffers = [b for b in record.buffers if not b.is_output]
    own = {i for i, b in enumerate(buffers) if b.saved_result >= 0}
    if not record.name.endswith(GRAD_SUFFIX):
        return own  # a forward
    below, _ = level_below(record)
    return own | saved_result_positions(below, level_below)


def with_saved_results(record: Any, inputs: Sequence[torch.Tensor], num_rows: int,
                       num_segments: int, level_below: LevelBelow = library_level_below
                       ) -> list[torch.Tensor]:
    """Kernel `record`'s `inputs` (argument order), each buffer that is a
    result of the level below (saved_result) replaced by that level's
    output on the same inputs, as autograd passes it: the kernel's rule
    assumes it (max's backward counts the rows attaining the saved max;
    random values would give none). Lower levels' saved results among the
    inputs first, in turn."""
    buffers = [b for b in record.buffers if not b.is_output]
    saved = [(i, b.saved_result) for i, b in enumerate(buffers) if b.saved_result >= 0]
    if not saved:
        if not saved_result_positions(record, level_below):
            return list(inputs)
        below, _ = level_below(record)  # only lower levels' results
        count = below.num_inputs
        return [*with_saved_results(below, inputs[:count], num_rows, num_segments,
                                    level_below), *inputs[count:]]
    below, run_below = level_below(record)
    count = below.num_inputs
    prefix = with_saved_results(below, [t.cpu() for t in inputs[:count]], num_rows,
                                num_segments, level_below)
    results = run_below(prefix, num_rows, num_segments)
    filled = [*prefix, *inputs[count:]]
    for position, result in saved:
        filled[position] = results[result]
    return [t.to(original.device) for t, original in zip(filled, inputs)]


def kernel_buffers(record: Any, idx: torch.Tensor, num_segments: int, seed: int,
                   level_below: LevelBelow = library_level_below
                   ) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
    """A kernel record's inputs (idx as int32, random floats from `seed`,
    saved results of the level below computed: with_saved_results) and its
    outputs, filled with NaN so that a value never written shows."""
    dtype = MANIFEST_DTYPES[record.dtype]
    generator = torch.Generator().manual_seed(seed)
    num_rows = idx.shape[0]
    inputs, outputs = [], []
    for buffer in record.buffers:
        shape = buffer.extents(num_rows, num_segments)
        if buffer.is_index:
            inputs.append(idx.to(torch.int32))
        elif buffer.is_output:
            outputs.append(torch.full(shape, float("nan"), dtype=dtype))
        else:
            inputs.append(torch.randn(shape, dtype=dtype, generator=generator))
    return with_saved_results(record, inputs, num_rows, num_segments, level_below), outputs


def gpu_plan(record: Any) -> dict:
    """The manifest's GPU plan of a kernel record."""
    return json.loads(record.text).get("gpu", {})


def check_bitwise_independent_of_the_grid(simulator: GpuSimulator, name: str,
                                          idx: torch.Tensor, num_segments: int,
                                          label: str) -> None:
    """Kernel `name` gives the same bits on its planned grid as on grids of
    1 block and of 3 blocks run in reverse order."""
    record = _library.kernel(name)
    inputs, first = kernel_buffers(record, idx, num_segments, 5)
    simulator.run(name, inputs, first, idx.shape[0], num_segments)
    for grid, reverse in [(1, False), (3, True)]:
        _, again = kernel_buffers(record, idx, num_segments, 5)
        simulator.run(name, inputs, again, idx.shape[0], num_segments, grid=grid,
                      reverse_blocks=reverse)
        for got, want in zip(again, first):
            assert torch.equal(got, want), f"{name}, {label}: grid {grid} differs"


def kernels_whose_plan_sets(flag: str) -> list[str]:
    """The op library's kernels whose manifest GPU plan sets `flag`."""
    return sorted(name for name, record in _library.kernels().items()
                  if gpu_plan(record).get(flag))


def index_from_counts(counts: Sequence[int], invalid: dict[int, int] | None = None
                      ) -> tuple[torch.Tensor, int]:
    """idx of segments of `counts` rows (segment i's rows get invalid[i]
    instead of i where given), and the segment count."""
    values = [(invalid or {}).get(i, i) for i in range(len(counts))]
    return (torch.repeat_interleave(torch.tensor(values), torch.tensor(list(counts))),
            len(counts))


def close_by_magnitude(got: torch.Tensor, want: torch.Tensor, message: str) -> None:
    """Sums of up to millions of values added in another order than the
    host's: relative to the largest output (1e-9 for f64, 2e-4 for f32)."""
    tolerance = 1e-9 if got.dtype == torch.float64 else 2e-4
    scale = max(float(want.abs().max()) if want.numel() else 0.0, 1.0)
    torch.testing.assert_close(got, want, rtol=tolerance, atol=tolerance * scale,
                               equal_nan=True, msg=lambda m: f"{message}: {m}")


def check_against_host(simulator: GpuSimulator, name: str, idx: torch.Tensor,
                       num_segments: int, seed: int, label: str) -> None:
    """Library kernel `name` on the simulator against its host kernel, on
    the same random inputs (from `seed`), output by output."""
    record = _library.kernel(name)
    inputs, simulated = kernel_buffers(record, idx, num_segments, seed)
    _, host = kernel_buffers(record, idx, num_segments, seed)
    n = idx.shape[0]
    simulator.run(name, inputs, simulated, n, num_segments)
    run(name, inputs, host, n, num_segments)
    for index, (got, want) in enumerate(zip(simulated, host)):
        close_by_magnitude(got, want, f"{name}, {label}, output {index}")


def check_program_against_host(
        gpu: SimulatedProgram, layouts: dict[str, tuple[torch.Tensor, int]],
        close: Callable[[torch.Tensor, torch.Tensor, str], None] = close_by_magnitude,
        check_grid: bool = False) -> None:
    """A run-time program's level on the simulator against its host kernel
    compiled here, over `layouts` (label: idx and segment count), each on
    random inputs of its own seed; `close(got, want, message)` compares
    each output. With `check_grid`, also bitwise the same on 2 blocks run
    in reverse order."""
    host = host_level(gpu.program, gpu.level)
    for seed, (label, (idx, num_segments)) in enumerate(layouts.items()):
        inputs, simulated = kernel_buffers(gpu.record, idx, num_segments, seed,
                                           program_level_below(gpu.program))
        n = idx.shape[0]
        gpu.run(inputs, simulated, n, num_segments)
        wanted = host.run(gpu.record.name, inputs, n, num_segments)
        for index, (got, want) in enumerate(zip(simulated, wanted)):
            close(got, want, f"{label}, output {index}")
        if check_grid:
            _, again = kernel_buffers(gpu.record, idx, num_segments, seed,
                                      program_level_below(gpu.program))
            gpu.run(inputs, again, n, num_segments, grid=2, reverse_blocks=True)
            for got, want in zip(again, simulated):
                assert torch.equal(got, want), f"{label}: grid 2 differs"
