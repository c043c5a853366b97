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

import concurrent.futures
import functools
import hashlib
import inspect
import json
import os
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from segops import _compiler, _extensions, _gpusim, _library, _validation
from segops import ops as _ops
from segops._dtypes import FLOAT_DTYPES, INDEX_DTYPES, SIXTEEN_BIT_DTYPES
from segops._jit_promote import integer_layout, number_arguments, promoted
from segops._jit_stages import StagedFunction, uses_several_indices
from segops._jit_trace import (
    TABLE,
    JitError,
    Signature,
    Traced,
    concrete,
    to_mlir,
    uniform_tail,
)
from segops._op_table import level_name, split_level_name
from segops._validation import (
    check_index_content,
)

__all__ = ["jit", "JitError", "JitFunction"]

# --------------------------------------------------------------------------
# Programs: one specialization's IR, its derivative levels and their kernels.
# --------------------------------------------------------------------------


@dataclass(frozen=True)
class _HostKernel:
    """A level's host code, loaded: the addresses of its symbols (the
    kernel's, and its tile and finish kernels')."""

    addresses: dict[str, int]


class Program:
    """The IR of one specialization (level 0) and, per derivative level,
    its manifest entry and compiled kernels, made on first use."""

    def __init__(self, name: str, source: str, idx_position: int, label: str) -> None:
        self.name = name
        self.source = source
        self.idx_position = idx_position
        self.label = label  # the user's function, for messages
        self._entries: dict[int, _library.KernelRecord] = {}
        self._host: dict[int, _HostKernel] = {}
        # Per level: its simulator image; per (level, device): its PTX.
        self._simulated: dict[int, str] = {}
        self._ptx: dict[tuple[int, int], str] = {}
        self._lock = threading.Lock()
        self._key_locks: dict[Any, threading.Lock] = {}

    def levels_used(self) -> set[int]:
        """The derivative levels this process has asked about."""
        return set(self._entries)

    def level_name(self, level: int) -> str:
        return level_name(self.name, level)

    def entry(self, level: int) -> _library.KernelRecord:
        """The kernel record of derivative level `level` (0: the forward)."""
        entry = self._entries.get(level)
        if entry is None:
            entry = self._entries[level] = self.compile_entry(level)
        return entry

    def compile_entry(self, level: int) -> _library.KernelRecord:
        """The level's kernel record, from the compiler's manifest (entry()
        keeps the first it gets, here or with the level's host code)."""
        manifest = _library.parse_manifest(_extensions.segc().manifest(self.source, level))
        return manifest.kernels[self.level_name(level)]

    def _once(self, cache: dict, key: Any, make: Callable[[], Any]) -> Any:
        """cache[key], made once (threads wait for the first maker of that
        key; other keys, say another level, are made meanwhile)."""
        found = cache.get(key)
        if found is None:
            with self._lock:
                lock = self._key_locks.setdefault((id(cache), key), threading.Lock())
            with lock:
                found = cache.get(key)
                if found is None:
                    found = cache[key] = make()
        return found

    def compile_ahead(self, levels: Sequence[int]) -> None:
        """Starts compiling these levels' host kernels on background threads
        (each with a compiler of its own), so that a first call waits for its
        level's compilation only, and a first backward finds its level done
        or under way. Errors surface when the level is used."""
        for level in levels:
            if level not in self._host:
                _background().submit(self._quietly, self.host_kernel, level)

    @staticmethod
    def _quietly(make: Callable[[int], Any], level: int) -> None:
        try:
            make(level)
        except Exception:  # noqa: BLE001 - raised again where the level is used
            pass

    def host_kernel(self, level: int) -> _HostKernel:
        return self._once(self._host, level, lambda: _compile_host(self, level))

    def simulator_image(self, level: int) -> str:
        """The level's GPU kernels as host code for the SIMT simulator
        (SEGOPS_SIMULATE_GPU=1), loaded: a module image for the simulated
        CUDA driver."""
        return self._once(self._simulated, level, lambda: _compile_simulated(self, level))

    def ptx(self, level: int, device: int) -> str:
        """The level's PTX for CUDA device `device` (its compute capability)."""
        def make() -> str:
            major, minor = torch.cuda.get_device_capability(device)
            return self.ptx_for_chip(level, f"sm_{major}{minor}")

        return self._once(self._ptx, (level, device), make)

    def ptx_for_chip(self, level: int, chip: str) -> str:
        """The level's PTX for `chip` (compile_ptx caches it)."""
        return _compiler.compile_ptx(self.source, order=level, chip=chip)


_PROGRAMS: dict[str, Program] = {}
_PROGRAMS_LOCK = threading.Lock()

# Background compilation (Program.compile_ahead): one worker, so that the
# forward's compilation has the cores (its parts compile in parallel) and
# the first derivative level follows it, overlapping the forward's run.
_BACKGROUND: concurrent.futures.ThreadPoolExecutor | None = None
_BACKGROUND_LOCK = threading.Lock()


def _background() -> concurrent.futures.ThreadPoolExecutor:
    global _BACKGROUND
    with _BACKGROUND_LOCK:
        if _BACKGROUND is None:
            _BACKGROUND = concurrent.futures.ThreadPoolExecutor(
                max_workers=1, thread_name_prefix="segops-jit-compile")
        return _BACKGROUND


def _forget_background() -> None:
    """A forked child has none of its parent's threads: it starts its own."""
    global _BACKGROUND
    _BACKGROUND = None


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_background)


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
        _PROGRAMS[name] = Program(name, source, idx_position, label)
    record = _program_record(name)
    if not record.exists():
        text = json.dumps({"source": source, "idx_position": idx_position, "label": label})
        _compiler.write_cache_file(record, text.encode())
    return name


def _recorded_program(name: str) -> Program | None:
    """A program registered by another process, from the disk cache."""
    data = _compiler.read_cache_file(_program_record(name))
    try:
        record = json.loads(data) if data is not None else None
    except ValueError:
        record = None
    if not isinstance(record, dict) or not {"source", "idx_position", "label"} <= set(record):
        return None
    with _PROGRAMS_LOCK:
        return _PROGRAMS.setdefault(name, Program(name, record["source"],
                                                   record["idx_position"], record["label"]))


def split_program(program: str) -> tuple[Program, int]:
    """The program and derivative level a jit_call names."""
    base, level = split_level_name(program)
    found = _PROGRAMS.get(base) or _recorded_program(base)
    if found is None:
        raise ValueError(f"segops::jit_call: unknown program {program!r} (programs are made "
                         "by calling a segops.jit function or compiling a graph with "
                         "segops.fusion, and recorded in the segops cache directory "
                         f"{_compiler.cache_dir()}; a graph cached by Inductor before that "
                         "directory was deleted names programs no longer there: clear "
                         "Inductor's cache too, torch._inductor.utils.clear_inductor_caches() "
                         "or its directory, TORCHINDUCTOR_CACHE_DIR)")
    return found, level


# One partial sum per reduction in long row loops (the op library keeps 4):
# a third less code to compile, measured in docs/benchmarks.md.
_HOST_INTERLEAVE = 1
# A level's kernel and its long-segment kernels are split into this many
# objects, which LLVM compiles in parallel (on the compiler's threads).
_HOST_PARTS = max(1, min(2, os.cpu_count() or 1))
_HOST_OPTIONS = f"O3 interleave={_HOST_INTERLEAVE} parts={_HOST_PARTS}"


# Host kernels take at most this many tensors, inputs and outputs together.
MAX_KERNEL_TENSORS: int = _library.native_module().max_kernel_pointers


def _pack(parts: Sequence[bytes]) -> bytes:
    """Object files in one cache entry: each preceded by its length."""
    return b"".join(len(p).to_bytes(8, "little") + p for p in parts)


def _unpack(data: bytes | None) -> list[bytes] | None:
    if data is None:
        return None
    parts, offset = [], 0
    while offset + 8 <= len(data):
        length = int.from_bytes(data[offset:offset + 8], "little")
        parts.append(data[offset + 8:offset + 8 + length])
        offset += 8 + length
    return parts if offset == len(data) and parts else None


def _cached_kernel(path: Path) -> _library.KernelRecord | None:
    """A cached kernel record, or None if missing or corrupt."""
    data = _compiler.read_cache_file(path)
    try:
        return _library.parse_kernel(data.decode()) if data is not None else None
    except (ValueError, UnicodeDecodeError):
        return None


def _compile_host(program: Program, level: int) -> _HostKernel:
    """Compiles (or reads from the disk cache) one level's host object and
    loads it into the process."""
    segc = _extensions.segc()
    name = program.level_name(level)
    path = _compiler.cache_path("o", ["host", segc.host_cpu(), _HOST_OPTIONS, str(level),
                                      name, program.source])
    manifest_path = path.with_suffix(".json")
    # The manifest is written last; each file is checksummed.
    entry, objects = _cached_kernel(manifest_path), _unpack(_compiler.read_cache_file(path))
    if entry is None or entry.name != name or objects is None:
        manifest_text, objects = segc.compile_host_objects(
            program.source, level, name, interleave=_HOST_INTERLEAVE, parts=_HOST_PARTS)
        entry = _library.parse_manifest(manifest_text).kernels[name]
        _compiler.write_cache_file(path, _pack(objects))
        _compiler.write_cache_file(manifest_path, entry.text.encode())
    program._entries.setdefault(level, entry)
    split = entry.split
    symbols = [entry.host_symbol]
    if split:
        symbols += [split.rows_symbol, split.finish_symbol]
    return _HostKernel(segc.load_host_object(objects, symbols))


def _compile_simulated(program: Program, level: int) -> str:
    segc = _extensions.segc()
    name = program.level_name(level)
    path = _compiler.cache_path("sim.o", ["gpusim", str(level), name, program.source])
    obj = _compiler.read_cache_file(path)
    if obj is None:
        obj = segc.compile_simulator_object(program.source, level, name)
        _compiler.write_cache_file(path, obj)
    # The object calls the simulator's runtime, resolved in its library.
    library = str(_gpusim.LIBRARY_PATH)
    addresses = segc.load_host_object(obj, sorted(program.entry(level).gpu_symbols), library)
    return _library.native_module().simulator_image(library, addresses)


# --------------------------------------------------------------------------
# The generic op: segops::jit_call(program, args, num_segments).
# --------------------------------------------------------------------------


def _check_lengths(program: Program, level: int, args: Sequence[Tensor],
                   num_segments: int) -> None:
    entry = program.entry(level)
    inputs = [b for b in entry.buffers if not b.is_output]
    if len(inputs) != len(args):
        raise ValueError(f"{program.label}: expected {len(inputs)} tensors, got {len(args)}")
    num_rows = args[program.idx_position].shape[0]
    for position, (buffer, tensor) in enumerate(zip(inputs, args)):
        leading = buffer.shape[0]
        expected = {"N": num_rows, "S": num_segments}.get(leading)
        if expected is not None and tensor.shape[0] != expected:
            what = "rows (the length of idx)" if leading == "N" else "num_segments"
            raise ValueError(f"{program.label}: tensor argument {position} has "
                             f"{tensor.shape[0]} rows, but is used per "
                             f"{'row' if leading == 'N' else 'segment'}: it must have "
                             f"{expected} ({what})")


def programs() -> list[Program]:
    """Every program registered in this process."""
    with _PROGRAMS_LOCK:
        return list(_PROGRAMS.values())


def program_entry(program: str, level: int = 0) -> _library.KernelRecord:
    """The kernel record of a registered program's level (raises
    ValueError if the compiler rejects the program)."""
    return _PROGRAMS[program].entry(level)


def _validator(program: Program, level: int) -> Callable[..., None]:
    """Raises the error for arguments the C++ kernel rejected."""
    def validate(floats: list[Tensor], idx: Tensor, num_segments: Any) -> None:
        tensors = floats[:program.idx_position] + [idx] + floats[program.idx_position:]
        _check_lengths(program, level, tensors, num_segments)
        check_index_content(program.label, idx, num_segments)
    return validate


def compiled_kernel(prog: Program, level: int) -> Any:
    """One program level, compiled, as the operator library takes it
    (_torchops.CompiledKernel, for register_jit_program and the row-width
    providers): its kernel record, the addresses of its host kernels (with
    SEGOPS_SIMULATE_GPU=1 its GPU kernels for the simulator instead), and
    where its PTX comes from for CUDA devices (compiled on first use)."""
    entry = prog.entry(level)
    addresses: dict[str, int] = {}
    if not _gpusim.ENABLED and getattr(_extensions.segc(), "makes_host_code", True):
        # Else no host code: the simulator's GPU kernels instead, or (a
        # compiler bundle without a compiler) CUDA only.
        addresses = prog.host_kernel(level).addresses
    return _native.CompiledKernel(
        entry.text, addresses, ptx_source=functools.partial(prog.ptx, level),
        simulator_image=prog.simulator_image(level) if _gpusim.ENABLED else "")


def _register_native(program_name: str) -> None:
    """Compiles one program level and registers it with the C++ jit_call
    kernels (their hook for a level not registered yet)."""
    prog, level = split_program(program_name)
    _native.register_jit_program(program_name, compiled_kernel(prog, level),
                                 prog.idx_position, _validator(prog, level))


# segops::jit_call is defined by the operator library, with its CPU, CUDA,
# autograd and Meta kernels, the library ops' (a warm call is a dispatch and
# a launch); they ask _register_native for a level the first time it runs.
_lib = torch.library.Library("segops", "FRAGMENT")
_native = _ops.native_kernels()
if _native is not None:
    _native.register_jit_op(_register_native)
_ops.register_missing_kernels(_lib, "jit_call")


# --------------------------------------------------------------------------
# The decorator.
# --------------------------------------------------------------------------

_JIT_CALL = _ops.jit_call_op()

_is_compiling = torch.compiler.is_compiling


@dataclass(frozen=True)
class _Specialization:
    program: str
    tensor_positions: tuple[int, ...]
    size_position: int
    single: bool
    source: str
    # Tensor arguments (indices into tensor_positions) that are uniform
    # values, with their element shapes: passed expanded over segments.
    uniform: tuple[tuple[int, tuple[int, ...]], ...] = ()
    # The function's tensor constants: trailing uniform arguments.
    constants: tuple[Tensor, ...] = ()
    # Tensor arguments (indices into tensor_positions) and results of shape
    # (L, 1): scalar columns, which the kernel takes and gives as (L,).
    column_arguments: tuple[int, ...] = ()
    column_results: tuple[int, ...] = ()


def _length_class(length: int, rows: int | None, segments: int | None) -> str:
    """What a tensor's leading length says of its space."""
    if length == rows:
        return "ambiguous" if length == segments else "row"
    return "segment" if length == segments else "other"


def _rows_and_segments(args: Sequence[Any]) -> tuple[int | None, int | None]:
    """The call's N (the 1-D integer tensor's length) and S (its int)."""
    rows = segments = None
    for a in args:
        if rows is None and isinstance(a, Tensor) and a.dim() == 1 and a.dtype in INDEX_DTYPES:
            rows = concrete(a.shape[0])
        elif segments is None and (type(a) is int or isinstance(a, torch.SymInt)):
            segments = concrete(a)
    return rows, segments


def _as_counts(args: tuple) -> tuple:
    """Counts given as 0-d integer tensors or numpy integers, as ints."""
    return tuple(_validation.as_count(a) if not isinstance(a, (int, float)) else a for a in args)


def _sixteen_bit_dtype(args: Sequence[Any]) -> torch.dtype | None:
    """The 16-bit dtype of the call's float tensors, if they all have one."""
    dtypes = {a.dtype for a in args if isinstance(a, Tensor) and a.is_floating_point()}
    if len(dtypes) == 1 and (dtype := dtypes.pop()) in SIXTEEN_BIT_DTYPES:
        return dtype
    return None


def _cast_floats(values: Any, source: torch.dtype, target: torch.dtype) -> Any:
    """`values` (a tensor, or a tuple or list of values) with its `source`
    tensors converted to `target` (differentiably)."""
    if isinstance(values, Tensor):
        return values.to(target) if values.dtype == source else values
    if isinstance(values, (tuple, list)):
        return type(values)(_cast_floats(v, source, target) for v in values)
    return values


class JitFunction:
    """A segops.jit function: call it like the Python function."""

    def __init__(self, fn: Callable, segment_index: int | None = None,
                 tables: Sequence[int] = ()) -> None:
        """`segment_index`, `tables`: for the kernel steps of a function of
        several indices (StagedFunction), the position of the reductions'
        index, and of the arguments read at the rows that other index
        arguments name (seg.gather_rows); the other index arguments are
        those second indices."""
        functools.update_wrapper(self, fn)
        self.fn = fn
        self._segment_index = segment_index
        self._tables = frozenset(tables)
        self._signature_of_fn = inspect.signature(fn)
        parameters = list(self._signature_of_fn.parameters.values())
        # Calls with exactly these many positional arguments need no binding.
        self._arity = None if any(p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD, p.KEYWORD_ONLY)
                                  for p in parameters) else len(parameters)
        self._specializations: dict[tuple, _Specialization] = {}
        # Per integer layout of a call, the integer arguments that the
        # function computes with (promoted to its float type).
        self._numbers: dict[tuple, tuple[int, ...]] = {}
        self._lock = threading.Lock()
        # Calls with several indices (message passing): kernels in sequence.
        self._staged = StagedFunction(fn, JitFunction)

        def call_in_graph(*args: Any) -> Any:
            return self._run(*self._promote(args))

        self._in_graph = torch._dynamo.allow_in_graph(call_in_graph)
        # Where the C++ kernels are: specializations keyed in C++ too.
        self._table = _native.JitCallTable() if _native is not None else None

    def _bind(self, args: tuple, kwargs: dict[str, Any]) -> tuple:
        """Keyword arguments and defaults, as positional arguments."""
        try:
            bound = self._signature_of_fn.bind(*args, **kwargs)
        except TypeError as error:
            raise TypeError(f"segops.jit({self.fn.__name__}): {error}") from None
        bound.apply_defaults()
        if bound.kwargs:
            raise JitError(f"segops.jit: {self.fn.__name__} takes keyword-only or **kwargs "
                           "parameters, which segops.jit cannot specialize on")
        return bound.args

    def _lookup(self, args: Sequence[Any]) -> tuple[Any, _Specialization | None]:
        """The call's specialization key (the operator library's, the warm
        path's: per tensor its dtype, element shape, device type and length
        class, rows, segments, both or neither, a tensor of neither keyed by
        its shape; ints by type; floats by their bits) and its
        specialization, if made."""
        key = _ops.specialization_key(args)
        return key, self._specializations.get(key)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if kwargs or len(args) != self._arity:
            args = self._bind(args, kwargs)
        compiling = _is_compiling()
        if not compiling and self._table is not None:
            # The warm path in C++: key, lookup and dispatch in one call. Its
            # key holds every tensor's dtype, so arguments that need promoting
            # (integer numbers) miss it until they are promoted.
            result = self._table(*args)
            if result is not None:
                return result
        if (sixteen_bit := _sixteen_bit_dtype(args)) is not None:
            return self._in_float32(args, sixteen_bit)
        if compiling:
            # Dynamo puts the call in its graph as one node, which fake
            # tensor tracing then runs: specializing needs no data.
            return self._in_graph(*_as_counts(args))
        promoted_args = self._promote(args)
        if self._table is not None and promoted_args is not args:
            result = self._table(*promoted_args)
            if result is not None:
                return result
        return self._run(*_as_counts(promoted_args))

    def _in_float32(self, args: tuple, dtype: torch.dtype) -> Any:
        """A call on bfloat16 or float16 rows: run in float32, the results
        in their dtype."""
        return _cast_floats(self(*_cast_floats(args, dtype, torch.float32)), torch.float32, dtype)

    def _promote(self, args: tuple) -> tuple:
        """Integer arguments the function computes with, as floats (as
        eager's type promotion does); index arguments as they are."""
        if self._segment_index is not None:  # a kernel step: its caller promoted
            return args
        layout = integer_layout(args)
        numbers = self._numbers.get(layout)
        if numbers is None:
            numbers = number_arguments(self.fn, _as_counts(args), layout)
            self._numbers[layout] = numbers
        return promoted(args, numbers) if numbers else args

    def _run(self, *args: Any) -> Any:
        if self._segment_index is None and uses_several_indices(args):
            return self._staged(args)
        key, spec = self._lookup(args)
        if spec is None:
            spec = self._specialize(key, args)
        tensors = [args[i] for i in spec.tensor_positions]
        num_segments = args[spec.size_position]
        if spec.uniform or spec.constants:
            tensors = self._with_uniform_values(spec, tensors, num_segments)
        for k in spec.column_arguments:
            tensors[k] = tensors[k].reshape(tensors[k].shape[0])
        outputs = _JIT_CALL(spec.program, tensors, num_segments)
        if spec.column_results:
            outputs = list(outputs)
            for k in spec.column_results:
                outputs[k] = outputs[k].unsqueeze(1)
        return outputs[0] if spec.single else tuple(outputs)

    @staticmethod
    def _with_uniform_values(spec: _Specialization, tensors: list[Tensor],
                             num_segments: Any) -> list[Tensor]:
        """Uniform arguments and constants as the kernel takes them: one
        value per segment (so autograd sums their gradients over segments:
        a full reduction, deterministic)."""
        device = tensors[0].device
        dtype = next((t.dtype for t in tensors if t.is_floating_point()), None)

        def per_segment(value: Tensor, tail: tuple[int, ...]) -> Tensor:
            return value.reshape(tail).expand(num_segments, *tail).contiguous()

        for position, tail in spec.uniform:
            tensors[position] = per_segment(tensors[position], tail)
        traced = type(tensors[0]) not in (Tensor, torch.nn.Parameter)
        for constant in spec.constants:
            if traced:
                # Inside torch.compile's tracing (fake or functional tensors):
                # the constant by value, which the graph holds.
                constant = torch.tensor(constant.tolist(), dtype=dtype, device=device)
            else:  # the tensor itself, so in-place updates are seen
                constant = constant.to(device=device, dtype=dtype or constant.dtype)
            tensors.append(per_segment(constant, uniform_tail(tuple(constant.shape))))
        return tensors

    def mlir(self, *args: Any, order: int = 0, **kwargs: Any) -> str:
        """The seg IR of this function for arguments like `args`, with its
        derivatives to `order` (seg-derive's output), as text."""
        if kwargs or len(args) != self._arity:
            args = self._bind(args, kwargs)
        args = _as_counts(self._promote(args))
        if self._segment_index is None and uses_several_indices(args):
            return self._staged.mlir(args)
        spec = self._specialize(self._lookup(args)[0], args)
        if order == 0:
            return spec.source
        return _extensions.segc().derive(spec.source, order)

    def _signature(self, args: Sequence[Any]) -> tuple[Signature, str, list[str | None]]:
        """How the call's arguments map to the kernel, its element type, and
        per argument its space ("row", "segment", "uniform", "ambiguous")."""
        name = self.fn.__name__
        tensors = [i for i, a in enumerate(args) if isinstance(a, Tensor)]
        indices = [i for i in tensors if args[i].dtype in INDEX_DTYPES]
        floats = [i for i in tensors if i not in indices]
        for i, a in enumerate(args):
            if isinstance(a, bool) or not isinstance(a, (Tensor, int, float, torch.SymInt)):
                raise JitError(f"segops.jit: {name}: argument {i} is a {type(a).__name__}; "
                               "arguments are tensors, float constants and num_segments, "
                               "which must be an int (or a 0-d integer tensor)")
        sizes = [i for i, a in enumerate(args) if isinstance(a, (int, torch.SymInt))]
        # No int, and besides idx a one-element integer tensor: a count
        # given as a tensor other than 0-d.
        counts = [i for i in indices if args[i].numel() <= 1]
        if not sizes and len(indices) == 2 and len(counts) == 1:
            raise JitError(f"segops.jit: {name}: num_segments must be an int (or a 0-d integer "
                           f"tensor), got a tensor of shape {tuple(args[counts[0]].shape)}")
        gather_indices: tuple[int, ...] = ()
        if self._segment_index is not None:
            gather_indices = tuple(i for i in indices if i != self._segment_index)
            indices = [self._segment_index]
            floats = [i for i in floats if i not in self._tables]
        if len(indices) != 1:
            raise JitError(f"segops.jit: {name} takes {len(indices)} integer tensors; it needs "
                           "exactly one segment index (int32 or int64)")
        idx = args[indices[0]]
        if idx.dim() != 1:
            raise JitError(f"segops.jit: {name}: idx must be 1-D, got shape {tuple(idx.shape)}")
        if len(sizes) != 1:
            raise JitError(f"segops.jit: {name} takes {len(sizes)} int arguments; it needs "
                           "exactly one, num_segments, which must be an int (or a 0-d integer "
                           "tensor)")
        conditions = [i for i in floats if args[i].dtype == torch.bool]
        if conditions:
            raise JitError(f"segops.jit: {name}: argument {conditions[0]} is a bool tensor used "
                           "as a condition, which kernels cannot take; pass it as a float "
                           "(mask.to(x.dtype)) and write the condition in the function "
                           "(mask > 0)")
        dtypes = {args[i].dtype for i in floats} | {args[i].dtype for i in self._tables}
        if not dtypes or not dtypes <= set(FLOAT_DTYPES) or len(dtypes) > 1:
            found = ", ".join(sorted(str(d) for d in dtypes)) or "none"
            raise JitError(f"segops.jit: {name}: float tensors must all be float32 or all "
                           f"float64 (found {found})")
        rows, segments = _rows_and_segments(args)
        spaces: list[str | None] = [None] * len(args)
        for i in floats:
            spaces[i] = self._space_of(i, args[i], rows, segments)
        for i in self._tables:
            spaces[i] = TABLE
        devices = {args[i].device for i in tensors}
        if any(d.type not in ("cpu", "cuda") for d in devices):
            raise JitError(f"segops.jit: {name}: tensors must be on CPU or CUDA, got "
                           f"{sorted(str(d) for d in devices)}")
        if len(devices) > 1:
            raise JitError(f"segops.jit: {name}: all tensors must be on one device, got "
                           f"{sorted(str(d) for d in devices)}")
        return (Signature(tensors, indices[0], sizes[0], gather_indices=gather_indices),
                FLOAT_DTYPES[dtypes.pop()], spaces)

    def _space_of(self, position: int, value: Tensor, rows: int | None,
                  segments: int | None) -> str:
        shape = tuple(concrete(d) for d in value.shape)
        if value.dim() == 0:
            return "uniform"
        length = _length_class(shape[0], rows, segments)
        if value.dim() == 3 and shape[1:] == (3, 3):
            if length in ("segment", "ambiguous"):
                return "segment"
            raise ValueError(f"segops.jit({self.fn.__name__}): argument {position} has shape "
                             f"{shape}; a (S, 3, 3) matrix needs num_segments ({segments}) rows")
        if len(shape) > 2 or (len(shape) == 2 and shape[1] < 1):
            raise JitError(f"segops.jit: {self.fn.__name__}: argument {position} has shape "
                           f"{shape}; tensors must be (L,), (L, F) rows of F >= 1 features, "
                           "(S, 3, 3), or uniform values: 0-d or (F,)")
        if length != "other":
            return length
        if uniform_tail(shape) is not None:
            return "uniform"
        raise ValueError(f"segops.jit({self.fn.__name__}): argument {position} has {shape[0]} "
                         f"rows: neither the rows of idx ({rows}) nor num_segments ({segments}), "
                         "nor a uniform value (0-d or (F,))")

    def _compile_ahead(self, args: Sequence[Any], signature: Signature) -> Callable[[str], None]:
        """An on_source hook for to_mlir: for real CPU tensors, the forward
        (and, where an argument requires grad, the first derivative) starts
        compiling in the background while the trace is checked."""
        tensors = [args[i] for i in signature.tensor_positions]
        real = all(type(t) in (Tensor, torch.nn.Parameter) for t in tensors)
        if not real or _gpusim.ENABLED or any(t.is_cuda for t in tensors):
            return lambda source: None
        levels = [0, 1] if torch.is_grad_enabled() and any(t.requires_grad for t in tensors) \
            else [0]
        idx_position = signature.tensor_positions.index(signature.idx_position)

        def start(source: str) -> None:
            name = register_program(source, _kernel_stem(self.fn.__name__), idx_position,
                                    f"segops.jit({self.fn.__name__})")
            _PROGRAMS[name].compile_ahead(levels)

        return start

    def _trace(self, args: Sequence[Any], signature: Signature, element: str,
               spaces: list[str | None]) -> Traced:
        """The function traced with the spaces the lengths suggest. Where
        that fails and a (1,) or (3,) argument's length is ambiguous, the
        other reading is tried: as a uniform value (a per-feature weight
        when S or N happens to be 3), or, for one taken as uniform because
        its length is neither N nor S, per row (then the call's lengths are
        wrong, and the error says so)."""
        try:
            return to_mlir(self.fn, "jit_kernel", args, signature, element, spaces,
                           on_source=self._compile_ahead(args, signature))
        except JitError as error:
            small = [i for i, space in enumerate(spaces) if space not in (None, TABLE)
                     and args[i].dim() == 1 and uniform_tail(tuple(args[i].shape)) is not None]
            as_uniform = [i for i in small if spaces[i] != "uniform"]
            if as_uniform:
                other = ["uniform" if i in as_uniform else space for i, space in enumerate(spaces)]
                try:
                    return to_mlir(self.fn, "jit_kernel", args, signature, element, other)
                except JitError:
                    pass
            guessed = [i for i in small if spaces[i] == "uniform"]
            if guessed:
                other = ["row" if i in guessed else space for i, space in enumerate(spaces)]
                try:
                    to_mlir(self.fn, "jit_kernel", args, signature, element, other)
                except JitError:
                    pass
                else:
                    position = signature.tensor_positions.index(guessed[0])
                    rows = args[signature.idx_position].shape[0]
                    raise ValueError(
                        f"segops.jit({self.fn.__name__}): tensor argument {position} has "
                        f"{args[guessed[0]].shape[0]} rows, but is used per row: it must have "
                        f"{rows} (rows (the length of idx))") from None
            raise error

    def _specialize(self, key: tuple, args: Sequence[Any]) -> _Specialization:
        with self._lock:
            spec = self._specializations.get(key)
            if spec is not None:
                return spec
            signature, element, spaces = self._signature(args)
            traced = self._trace(args, signature, element, spaces)
            idx_position = signature.tensor_positions.index(signature.idx_position)
            name = register_program(traced.source, _kernel_stem(self.fn.__name__), idx_position,
                                    f"segops.jit({self.fn.__name__})")
            program = _PROGRAMS[name]
            source = program.source
            try:
                entry = program.entry(0)  # diagnostics of the compiler, at the first call
            except ValueError as error:
                raise JitError(f"segops.jit: {self.fn.__name__} is not a segment kernel:\n"
                               f"{error}") from None
            if len(entry.buffers) > MAX_KERNEL_TENSORS:
                raise JitError(f"segops.jit: {self.fn.__name__}'s kernel takes "
                               f"{len(entry.buffers)} tensors (inputs and outputs); host "
                               f"kernels take at most {MAX_KERNEL_TENSORS}")
            uniform = tuple((k, uniform_tail(tuple(concrete(d) for d in args[i].shape)))
                            for k, i in enumerate(signature.tensor_positions)
                            if traced.spaces[i] == "uniform")
            columns = tuple(k for k, i in enumerate(signature.tensor_positions)
                            if traced.spaces[i] != "uniform" and args[i].dim() == 2
                            and concrete(args[i].shape[1]) == 1)
            spec = _Specialization(name, tuple(signature.tensor_positions),
                                   signature.size_position, traced.single, source, uniform,
                                   tuple(traced.constants), columns, traced.column_results)
            self._specializations[key] = spec
            if self._table is not None and not uniform and not traced.constants \
                    and not columns and not traced.column_results:
                self._table.add(*args, program=name, tensor_positions=list(spec.tensor_positions),
                                size_position=spec.size_position, single=traced.single)
            return spec


def _kernel_stem(name: str) -> str:
    """A Python function's name as part of a kernel symbol: characters
    other than ASCII letters, digits and '_' (a lambda's '<lambda>', a
    non-ASCII name) written as their code points."""
    return "".join(c if (c.isascii() and (c.isalnum() or c == "_")) else f"_u{ord(c):x}_"
                   for c in name)


def jit(fn: Callable) -> JitFunction:
    """Compiles `fn`, a function of segops ops and elementwise torch code over
    row tensors, per-segment tensors, one segment index and num_segments,
    into one fused kernel per call (see the module docstring)."""
    if not callable(fn):
        raise TypeError(f"segops.jit expects a function, got {type(fn).__name__}")
    return JitFunction(fn)
