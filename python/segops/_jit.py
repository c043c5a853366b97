"""segops.jit: a Python function of segment ops and elementwise torch code,
compiled into one fused kernel with derived gradients.

>>> @segops.jit
... def centered_energy(x, q, idx, num_segments):
...     d = x - segops.segmented_gather(segops.segmented_mean(x, idx, num_segments), idx)
...     return segops.segmented_sum(q * (d * d).sum(-1), idx, num_segments)

A call traces the function once per specialization (float dtypes, element
shapes, idx dtype, device type: never N or S) into seg IR, compiles it in
process (host code through ORC LLJIT, PTX for CUDA) and runs it behind the
generic op ``segops::jit_call``. Derivative levels are derived by the
compiler and compiled on the first backward at each level. docs/jit.md has
the tutorial, the supported constructs and the cache controls.
"""

from __future__ import annotations

import functools
import hashlib
import json
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

import torch
from torch import Tensor

from segops import _compiler, _gpusim, _library, _validation
from segops._jit_trace import (
    _ELEMENT_TYPES,
    _INDEX_DTYPES,
    JitError,
    Signature,
    concrete,
    to_mlir,
)
from segops import ops as _ops
from segops._validation import (
    INT32_MAX,
    as_kernel_index,
    check_index_content,
    index_range_error,
)
from segops.ops import run_on_sorted_rows

__all__ = ["jit", "JitError", "JitFunction"]

_GRAD = "_grad"


# --------------------------------------------------------------------------
# Programs: one specialization's IR, its derivative levels and their kernels.
# --------------------------------------------------------------------------


@dataclass(frozen=True)
class _HostKernel:
    symbol: int
    split: tuple[int, int] | None  # tile and finish kernels' addresses
    info: _library.Kernel
    buffers: list[dict[str, Any]]


class _Program:
    """The IR of one specialization (level 0) and, per derivative level,
    its manifest entry and compiled kernels, made on first use."""

    def __init__(self, name: str, source: str, idx_position: int, label: str) -> None:
        self.name = name
        self.source = source
        self.idx_position = idx_position
        self.label = label  # the user's function, for messages
        self._entries: dict[int, dict[str, Any]] = {}
        self._host: dict[int, _HostKernel] = {}
        self._cuda: dict[tuple[int, int], Any] = {}
        self._lock = threading.Lock()

    def level_name(self, level: int) -> str:
        return self.name + _GRAD * level

    def entry(self, level: int) -> dict[str, Any]:
        """The manifest entry of derivative level `level` (0: the forward)."""
        entry = self._entries.get(level)
        if entry is None:
            manifest = json.loads(_compiler._segc().manifest(self.source, level))
            wanted = self.level_name(level)
            entry = next(k for k in manifest["kernels"] if k["name"] == wanted)
            self._entries[level] = entry
        return entry

    def _once(self, cache: dict, key: Any, make: Callable[[], Any]) -> Any:
        """cache[key], made once (threads wait for the first maker)."""
        found = cache.get(key)
        if found is None:
            with self._lock:
                found = cache.get(key)
                if found is None:
                    found = cache[key] = make()
        return found

    def host_kernel(self, level: int) -> _HostKernel:
        return self._once(self._host, level, lambda: _compile_host(self, level))

    def simulated_kernel(self, level: int) -> tuple[dict[str, int], _library.Kernel]:
        """The level's GPU kernels as host code for the SIMT simulator
        (SEGOPS_SIMULATE_GPU=1): their addresses by symbol, and the kernel."""
        return self._once(self._cuda, (level, -1), lambda: _compile_simulated(self, level))

    def cuda_kernel(self, level: int, device: int) -> tuple[Any, _library.Kernel]:
        def make() -> tuple[Any, _library.Kernel]:
            major, minor = torch.cuda.get_device_capability(device)
            ptx = _compiler.compile_ptx(self.source, order=level, chip=f"sm_{major}{minor}")
            module = _library._native_module().CudaModule(device, ptx)
            return module, _library.kernel_from_entry(self.entry(level))

        return self._once(self._cuda, (level, device), make)


_PROGRAMS: dict[str, _Program] = {}
_PROGRAMS_LOCK = threading.Lock()


def _program_record(name: str) -> Path:
    return _compiler.cache_dir() / "programs" / f"{name}.json"


def register_program(draft: str, stem: str, idx_position: int, label: str) -> str:
    """Registers the kernel function `draft` (named @jit_kernel) as a
    program and returns its name, jit_<stem>_<hash of the IR>: equal
    programs share a name and kernels. The program is also recorded in the
    disk cache, so that a graph compiled in another process (Inductor's
    caches hold calls of jit_call by name) finds it."""
    digest = hashlib.sha256(draft.encode()).hexdigest()[:20]
    name = f"jit_{stem}_{digest}"
    source = draft.replace("@jit_kernel(", f"@{name}(", 1)
    with _PROGRAMS_LOCK:
        if name in _PROGRAMS:
            return name
        _PROGRAMS[name] = _Program(name, source, idx_position, label)
    record = _program_record(name)
    if not record.exists():
        text = json.dumps({"source": source, "idx_position": idx_position, "label": label})
        _compiler.write_cache_file(record, text.encode())
    return name


def _recorded_program(name: str) -> _Program | None:
    """A program registered by another process, from the disk cache."""
    try:
        record = json.loads(_program_record(name).read_text())
    except (OSError, ValueError):
        return None
    with _PROGRAMS_LOCK:
        return _PROGRAMS.setdefault(name, _Program(name, record["source"],
                                                   record["idx_position"], record["label"]))


def _split_program(program: str) -> tuple[_Program, int]:
    level = 0
    base = program
    while base.endswith(_GRAD):
        base = base[: -len(_GRAD)]
        level += 1
    found = _PROGRAMS.get(base) or _recorded_program(base)
    if found is None:
        raise ValueError(f"segops::jit_call: unknown program {program!r} (programs are made "
                         "by calling a segops.jit function or compiling a graph with "
                         "segops.fusion, and recorded in the segops cache directory "
                         f"{_compiler.cache_dir()})")
    return found, level


def _cache_path(kind: str, key_parts: Sequence[str]) -> Path:
    key = hashlib.sha256("\0".join(key_parts).encode()).hexdigest()
    return _compiler.cache_dir() / f"{key}.{kind}"


# One partial sum per reduction in long row loops (the op library keeps 4):
# a third less code to compile, measured in docs/benchmarks.md.
_HOST_INTERLEAVE = 1
_HOST_OPTIONS = f"O3 interleave={_HOST_INTERLEAVE}"


def _compile_host(program: _Program, level: int) -> _HostKernel:
    """Compiles (or reads from the disk cache) one level's host object and
    loads it into the process."""
    segc = _compiler._segc()
    name = program.level_name(level)
    identity = _compiler.compiler_identity()
    path = _cache_path("o", [identity, "host", segc.host_cpu(), _HOST_OPTIONS, str(level),
                             name, program.source])
    manifest_path = path.with_suffix(".json")
    try:
        # The manifest is written last: with it, the object is whole.
        entry = json.loads(manifest_path.read_text())
        obj = path.read_bytes()
    except (OSError, ValueError):
        manifest_text, obj = segc.compile_host_object(program.source, level, name,
                                                      interleave=_HOST_INTERLEAVE)
        entry = next(k for k in json.loads(manifest_text)["kernels"] if k["name"] == name)
        _compiler.write_cache_file(path, obj)
        _compiler.write_cache_file(manifest_path, json.dumps(entry).encode())
    program._entries.setdefault(level, entry)
    host = entry["host"]
    symbols = [host["symbol"]]
    split = host.get("split")
    if split:
        symbols += [split["rows_symbol"], split["finish_symbol"]]
    addresses = segc.load_host_object(obj, symbols)
    return _HostKernel(
        symbol=addresses[host["symbol"]],
        split=(addresses[split["rows_symbol"]], addresses[split["finish_symbol"]])
        if split else None,
        info=_library.kernel_from_entry(entry),
        buffers=entry["buffers"])


def _compile_simulated(program: _Program, level: int) -> tuple[dict[str, int],
                                                              _library.Kernel]:
    segc = _compiler._segc()
    name = program.level_name(level)
    path = _cache_path("sim.o", [_compiler.compiler_identity(), "gpusim", str(level), name,
                                 program.source])
    try:
        obj = path.read_bytes()
    except OSError:
        obj = segc.compile_simulator_object(program.source, level, name)
        _compiler.write_cache_file(path, obj)
    info = _library.kernel_from_entry(program.entry(level))
    symbols = [name] + [symbol for symbol, _ in (info.gpu_long.launches if info.gpu_long else ())]
    # The object calls the simulator's runtime, resolved in its library.
    library = str(_gpusim.simulator().path)
    return segc.load_host_object(obj, sorted(set(symbols)), library), info


def _run_simulated(prog: _Program, level: int, inputs: list[Tensor], outputs: list[Tensor],
                   num_rows: int, num_segments: int) -> None:
    """The level's GPU kernels on CPU tensors, through the simulator, as a
    GPU launch would run them (idx sorted for segment kernels)."""
    addresses, info = prog.simulated_kernel(level)

    def run(ins: list[Tensor], outs: list[Tensor]) -> None:
        tensors = [t.contiguous() for t in ins] + list(outs)
        scratch = torch.full((info.gpu_scratch_bytes(num_rows, num_segments),), 255,
                             dtype=torch.uint8)
        for symbol, grid, trailing in _library.gpu_launches(info, num_rows, scratch.data_ptr()):
            _gpusim.simulator().launch_address(addresses[symbol], tensors, num_rows,
                                               num_segments, grid, info.block,
                                               trailing=trailing)

    idx = inputs[prog.idx_position]
    if not info.host_rows and not _validation.is_sorted_host_index(idx, num_segments):
        run_on_sorted_rows(prog.entry(level)["buffers"], inputs, outputs, prog.idx_position, run)
    else:
        run(inputs, outputs)


# --------------------------------------------------------------------------
# The generic op: segops::jit_call(program, args, num_segments).
# --------------------------------------------------------------------------


def _check_lengths(program: _Program, level: int, args: Sequence[Tensor],
                   num_segments: int) -> None:
    entry = program.entry(level)
    inputs = [b for b in entry["buffers"] if b["role"] == "input"]
    if len(inputs) != len(args):
        raise ValueError(f"{program.label}: expected {len(inputs)} tensors, got {len(args)}")
    num_rows = args[program.idx_position].shape[0]
    for position, (buffer, tensor) in enumerate(zip(inputs, args)):
        leading = buffer["shape"][0]
        expected = {"N": num_rows, "S": num_segments}.get(leading)
        if expected is not None and tensor.shape[0] != expected:
            what = "rows (the length of idx)" if leading == "N" else "num_segments"
            raise ValueError(f"{program.label}: tensor argument {position} has "
                             f"{tensor.shape[0]} rows, but is used per "
                             f"{'row' if leading == 'N' else 'segment'}: it must have "
                             f"{expected} ({what})")


def _outputs(buffers: Sequence[dict[str, Any]], num_rows: int, num_segments: int,
             like: Tensor) -> list[Tensor]:
    return [torch.empty(_library.buffer_shape(b["shape"], num_rows, num_segments),
                        dtype=_library.TORCH_DTYPES[b["dtype"]], device=like.device)
            for b in buffers if b["role"] == "output"]


def _run_host(kernel: _HostKernel, inputs: list[Tensor], outputs: list[Tensor],
              num_rows: int, num_segments: int) -> tuple[str, int]:
    pointers = [t.data_ptr() for t in inputs] + [t.data_ptr() for t in outputs]
    return _library.call_host_kernel_at(kernel.info, kernel.symbol, kernel.split, pointers,
                                        num_rows, num_segments)


def _jit_call(program: str, args: list[Tensor], num_segments: int) -> list[Tensor]:
    prog, level = _split_program(program)
    _check_lengths(prog, level, args, num_segments)
    idx = args[prog.idx_position]
    num_rows = idx.shape[0]
    inputs = [as_kernel_index(t) if i == prog.idx_position else t.contiguous()
              for i, t in enumerate(args)]
    if idx.device.type == "cuda":
        return _run_cuda(prog, level, inputs, idx, num_rows, num_segments)
    if _gpusim.ENABLED:
        check_index_content(prog.label, idx, num_segments)
        outputs = _outputs(prog.entry(level)["buffers"], num_rows, num_segments, idx)
        if num_rows or num_segments:
            _run_simulated(prog, level, inputs, outputs, num_rows, num_segments)
        return outputs
    kernel = prog.host_kernel(level)
    outputs = _outputs(kernel.buffers, num_rows, num_segments, idx)
    if num_rows == 0 and num_segments == 0:
        return outputs
    problem, row = _run_host(kernel, inputs, outputs, num_rows, num_segments)
    if problem == "range" or (idx.dtype == torch.int64 and problem and
                              bool(((idx > INT32_MAX) | (idx < 0)).any())):
        raise index_range_error(prog.label, idx, row, num_segments)
    if problem == "order":
        # An unsorted index: the kernel runs on its rows in a stable sort.
        run_on_sorted_rows(kernel.buffers, inputs, outputs, prog.idx_position,
                           lambda i, o: _run_host(kernel, i, o, num_rows, num_segments))
    return outputs


def _run_cuda(prog: _Program, level: int, inputs: list[Tensor], idx: Tensor,
              num_rows: int, num_segments: int) -> list[Tensor]:
    """The level's PTX on the current stream (sorted idx required, as for
    the library ops' segment kernels)."""
    device = idx.device.index if idx.device.index is not None else torch.cuda.current_device()
    module, info = prog.cuda_kernel(level, device)
    # As for the library ops: checked (sorted for segment kernels) in debug
    # mode only, which syncs; a CUDA graph capture must not.
    check_index_content(prog.label, idx, num_segments, require_sorted=not info.host_rows)
    outputs = _outputs(prog.entry(level)["buffers"], num_rows, num_segments, idx)
    if num_rows == 0 and num_segments == 0:
        return outputs
    scratch_bytes = info.gpu_scratch_bytes(num_rows, num_segments)
    scratch = torch.empty(scratch_bytes, dtype=torch.uint8, device=idx.device) \
        if scratch_bytes else None
    pointers = [t.data_ptr() for t in inputs] + [t.data_ptr() for t in outputs]
    stream = torch.cuda.current_stream(idx.device).cuda_stream
    for symbol, grid, extra in _library.gpu_launches(
            info, num_rows, scratch.data_ptr() if scratch is not None else 0):
        module.launch(symbol, grid, info.block, stream, pointers,
                      [num_rows, num_segments, *extra])
    return outputs


def _fake_jit_call(program: str, args: list[Tensor], num_segments: int) -> list[Tensor]:
    prog, level = _split_program(program)
    idx = args[prog.idx_position]
    return [idx.new_empty(_library.buffer_shape(b["shape"], idx.shape[0], num_segments),
                          dtype=_library.TORCH_DTYPES[b["dtype"]])
            for b in prog.entry(level)["buffers"] if b["role"] == "output"]


def _setup_context(ctx: Any, inputs: tuple, output: Any) -> None:
    program, args, num_segments = inputs
    ctx.program = program
    ctx.num_segments = num_segments
    ctx.save_for_backward(*args)
    ctx.output_meta = [(tuple(o.shape), o.dtype) for o in output]


def _backward(ctx: Any, *grads: Any) -> tuple:
    grads = grads[0] if len(grads) == 1 and isinstance(grads[0], (list, tuple)) else grads
    args = list(ctx.saved_tensors)
    prog, _ = _split_program(ctx.program)
    idx = args[prog.idx_position]
    cotangents = [g if g is not None else torch.zeros(shape, dtype=dtype, device=idx.device)
                  for g, (shape, dtype) in zip(grads, ctx.output_meta)]
    result = torch.ops.segops.jit_call.default(ctx.program + _GRAD, args + cotangents,
                                               ctx.num_segments)
    gradients = iter(result)
    arg_grads = [None if i == prog.idx_position else next(gradients) for i in range(len(args))]
    return None, arg_grads, None


def _validator(program: _Program, level: int) -> Callable[..., None]:
    """Raises the error for arguments the C++ kernel rejected."""
    def validate(*args: Any) -> None:
        floats, idx, num_segments = list(args[:-2]), args[-2], args[-1]
        tensors = floats[:program.idx_position] + [idx] + floats[program.idx_position:]
        _check_lengths(program, level, tensors, num_segments)
        check_index_content(program.label, idx, num_segments)
    return validate


def _register_native(program_name: str) -> None:
    """Compiles one program level's host kernel and registers it with the
    C++ jit_call kernels (their hook for a level not registered yet)."""
    prog, level = _split_program(program_name)
    kernel = prog.host_kernel(level)
    entry = prog.entry(level)
    host = entry["host"]
    split = dict(host["split"]) if host.get("split") else None
    if split is not None:
        split["rows_address"], split["finish_address"] = kernel.split[0], kernel.split[1]
    inputs = [b for b in entry["buffers"] if b["role"] == "input"]
    num_floats = len(inputs) - 1
    variant = {
        "kernel": entry["name"], "address": kernel.symbol, "buffers": entry["buffers"],
        "row_range": kernel.info.host_rows, "split": split, "gpu": entry["gpu"],
        "saved_for_backward": [True] * num_floats,
    }
    _native.register_jit_program(program_name, num_floats,
                                 len(entry["buffers"]) - len(inputs), variant,
                                 prog.idx_position, _validator(prog, level))


_lib = torch.library.Library("segops", "FRAGMENT")
_lib.define("jit_call(str program, Tensor[] args, SymInt num_segments) -> Tensor[]")
torch.library.register_fake("segops::jit_call", _fake_jit_call, lib=_lib)
_lib.impl("jit_call", _jit_call, "CUDA")
# The CPU and autograd kernels: C++ where the library ops' are (a warm call
# is a dispatch and a launch), else Python.
_native = _ops._native
if _native is not None:
    _native.register_jit_op(_register_native)
else:
    _lib.impl("jit_call", _jit_call, "CPU")
    torch.library.register_autograd("segops::jit_call", _backward,
                                    setup_context=_setup_context, lib=_lib)


# --------------------------------------------------------------------------
# The decorator.
# --------------------------------------------------------------------------

_JIT_CALL = torch.ops.segops.jit_call.default
_is_compiling = torch.compiler.is_compiling


@dataclass(frozen=True)
class _Specialization:
    program: str
    tensor_positions: tuple[int, ...]
    size_position: int
    single: bool
    source: str


class JitFunction:
    """A segops.jit function: call it like the Python function."""

    def __init__(self, fn: Callable) -> None:
        functools.update_wrapper(self, fn)
        self.fn = fn
        self._specializations: dict[tuple, _Specialization] = {}
        self._lock = threading.Lock()

        def call_in_graph(*args: Any) -> Any:
            return self._run(*args)

        self._in_graph = torch._dynamo.allow_in_graph(call_in_graph)
        # Where the C++ kernels are: specializations keyed in C++ too.
        self._table = _native.JitCallTable() if _native is not None else None

    @staticmethod
    def _key(args: Sequence[Any], shape: Callable[[Tensor], tuple] = lambda a: a.shape[1:]
             ) -> tuple:
        """The specialization of a call: per tensor its dtype, element shape
        and device type (CUDA or not: other devices are rejected when
        specializing); ints (num_segments) by type only; other scalars by
        value (they are baked in). Built on every call: kept cheap."""
        key = []
        for a in args:
            if isinstance(a, Tensor):
                key.append((a.dtype, shape(a), a.is_cuda))
            elif type(a) is int or isinstance(a, torch.SymInt):
                key.append(int)
            else:
                key.append((type(a), a))
        return tuple(key)

    def _lookup(self, args: Sequence[Any]) -> tuple[tuple, _Specialization | None]:
        key = self._key(args)
        try:
            return key, self._specializations.get(key)
        except TypeError:  # symbolic sizes (fake tensors inside torch.compile)
            key = self._key(args, lambda a: torch.Size([concrete(d) for d in a.shape[1:]]))
            return key, self._specializations.get(key)

    def __call__(self, *args: Any) -> Any:
        if _is_compiling():
            # Dynamo puts the call in its graph as one node, which fake
            # tensor tracing then runs: specializing needs no data.
            return self._in_graph(*args)
        if self._table is not None:
            # The warm path in C++: key, lookup and dispatch in one call.
            result = self._table(*args)
            if result is not None:
                return result
        return self._run(*args)

    def _run(self, *args: Any) -> Any:
        key, spec = self._lookup(args)
        if spec is None:
            spec = self._specialize(key, args)
        outputs = _JIT_CALL(spec.program, [args[i] for i in spec.tensor_positions],
                            args[spec.size_position])
        return outputs[0] if spec.single else tuple(outputs)

    def mlir(self, *args: Any, order: int = 0) -> str:
        """The seg IR of this function for arguments like `args`, with its
        derivatives to `order` (seg-derive's output), as text."""
        spec = self._specialize(self._lookup(args)[0], args)
        if order == 0:
            return spec.source
        return _compiler._segc().derive(spec.source, order)

    def _signature(self, args: Sequence[Any]) -> tuple[Signature, str]:
        name = self.fn.__name__
        tensors = [i for i, a in enumerate(args) if isinstance(a, Tensor)]
        indices = [i for i in tensors if args[i].dtype in _INDEX_DTYPES]
        floats = [i for i in tensors if i not in indices]
        sizes = [i for i, a in enumerate(args)
                 if isinstance(a, (int, torch.SymInt)) and not isinstance(a, bool)]
        if len(indices) != 1:
            raise JitError(f"segops.jit: {name} takes {len(indices)} integer tensors; it needs "
                           "exactly one segment index (int32 or int64)")
        idx = args[indices[0]]
        if idx.dim() != 1:
            raise JitError(f"segops.jit: {name}: idx must be 1-D, got shape {tuple(idx.shape)}")
        if len(sizes) != 1:
            raise JitError(f"segops.jit: {name} takes {len(sizes)} int arguments; it needs "
                           "exactly one, num_segments")
        dtypes = {args[i].dtype for i in floats}
        if not dtypes or not dtypes <= set(_ELEMENT_TYPES) or len(dtypes) > 1:
            found = ", ".join(sorted(str(d) for d in dtypes)) or "none"
            raise JitError(f"segops.jit: {name}: float tensors must all be float32 or all "
                           f"float64 (found {found})")
        for i in floats:
            shape = tuple(concrete(d) for d in args[i].shape[1:])
            if shape not in ((), (3,), (3, 3)):
                raise JitError(f"segops.jit: {name}: argument {i} has shape "
                               f"{tuple(args[i].shape)}; tensors must be (L,), (L, 3) or "
                               "(S, 3, 3)")
        devices = {args[i].device for i in tensors}
        if any(d.type not in ("cpu", "cuda") for d in devices):
            raise JitError(f"segops.jit: {name}: tensors must be on CPU or CUDA, got "
                           f"{sorted(str(d) for d in devices)}")
        if len(devices) > 1:
            raise JitError(f"segops.jit: {name}: all tensors must be on one device, got "
                           f"{sorted(str(d) for d in devices)}")
        for i, a in enumerate(args):
            if not isinstance(a, (Tensor, int, float, torch.SymInt)):
                raise JitError(f"segops.jit: {name}: argument {i} is a {type(a).__name__}; "
                               "arguments are tensors, num_segments and float constants")
        return Signature(tensors, indices[0], sizes[0]), _ELEMENT_TYPES[dtypes.pop()]

    def _specialize(self, key: tuple, args: Sequence[Any]) -> _Specialization:
        with self._lock:
            spec = self._specializations.get(key)
            if spec is not None:
                return spec
            signature, element = self._signature(args)
            draft, single = to_mlir(self.fn, "jit_kernel", args, signature, element)
            idx_position = signature.tensor_positions.index(signature.idx_position)
            name = register_program(draft, self.fn.__name__, idx_position,
                                    f"segops.jit({self.fn.__name__})")
            program = _PROGRAMS[name]
            source = program.source
            try:
                program.entry(0)  # diagnostics of the compiler, at the first call
            except ValueError as error:
                raise JitError(f"segops.jit: {self.fn.__name__} is not a segment kernel:\n"
                               f"{error}") from None
            spec = _Specialization(name, tuple(signature.tensor_positions),
                                   signature.size_position, single, source)
            self._specializations[key] = spec
            if self._table is not None:
                self._table.add(*args, program=name, tensor_positions=list(spec.tensor_positions),
                                size_position=spec.size_position, single=single)
            return spec


def jit(fn: Callable) -> JitFunction:
    """Compiles `fn`, a function of segops ops and elementwise torch code over
    row tensors, per-segment tensors, one segment index and num_segments,
    into one fused kernel per call (see the module docstring)."""
    if not callable(fn):
        raise TypeError(f"segops.jit expects a function, got {type(fn).__name__}")
    return JitFunction(fn)
