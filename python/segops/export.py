"""segops.export: models that use segops, deployed without Python.

>>> exported = torch.export.export(model, inputs, dynamic_shapes=...)
>>> package = segops.export.package(exported, "model.pt2")   # and model.segops/

``torch.export`` traces a model's segops calls as operators: the library
ops (``segops::segmented_sum``, ...) and ``segops::jit_call("<program>",
...)`` for each segops.jit function and, with segops.fusion, each fused
cluster. AOTInductor compiles the rest into the package. A C++ process runs
it with ``torch::inductor::AOTIModelPackageLoader`` once it has loaded
``libsegops_ops.so`` (which defines every segops operator, with no Python)
and registered the programs the package names: :func:`package` writes them
beside the package, one directory per program level holding its manifest,
its host code as a shared library per CPU level the op library ships, and
its PTX per chip. docs/deploy.md has the steps and the limits.
"""

from __future__ import annotations

import inspect
import os
import re
import shutil
import subprocess
import tempfile
import warnings
import zipfile
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import torch

from segops import _extensions, _jit, _library, _wide, fusion
from segops._dtypes import FLOAT_DTYPES
from segops._op_table import OPS, split_level_name

__all__ = ["export", "package", "programs_called", "programs_directory", "write_programs",
           "write_row_widths", "load_programs", "operator_library", "include_dir"]

# Program names as jit_call names them (jit_<function>_<hash>[_grad...],
# jit_fused_<hash>...): the candidates in a package's text.
_PROGRAM_NAME = re.compile(rb"\bjit_[A-Za-z0-9_]+")
# The op library's code per reduction: a deployed model runs at its speed.
_HOST_INTERLEAVE = 4


def operator_library() -> Path:
    """libsegops_ops.so: the shared library that defines every segops
    operator (load it with torch.ops.load_library, or link it from C++).
    The op library it reads (manifest.json, host code, PTX) lies beside it."""
    return _extensions.OPERATOR_LIBRARY


class _Traced(torch.nn.Module):
    """A graph traced by make_fx, as a module torch.export takes."""

    def __init__(self, graph: torch.fx.GraphModule) -> None:
        super().__init__()
        self.graph_module = graph

    def forward(self, *args: Any) -> Any:
        return self.graph_module(*args)


def export(model: torch.nn.Module, args: tuple[Any, ...],
           dynamic_shapes: Any = None) -> torch.export.ExportedProgram:
    """``torch.export.export(model, args, dynamic_shapes=...)`` for a model
    whose forward differentiates itself (forces from
    ``torch.autograd.grad`` of an energy): the model is first traced
    through autograd with make_fx (symbolic sizes), so that the export
    sees the backward as operators, as NequIP's AOTInductor path does.
    torch.export alone refuses such models when an op's derivative reads
    its output (exp, tanh: "a fake tensor in the exported program
    constant's list"). Parameters become constants of the export (a
    deployed model's weights)."""
    from torch.fx.experimental.proxy_tensor import make_fx

    graph = make_fx(model, tracing_mode="symbolic", _allow_non_fake_inputs=True)(*args)
    if isinstance(dynamic_shapes, dict):  # by the forward's parameter names
        names = list(inspect.signature(model.forward).parameters)[:len(args)]
        dynamic_shapes = [dynamic_shapes.get(name) for name in names]
    if dynamic_shapes is not None:
        dynamic_shapes = (tuple(dynamic_shapes),)  # _Traced.forward's *args
    return torch.export.export(_Traced(graph), tuple(args), dynamic_shapes=dynamic_shapes)


def include_dir() -> Path:
    """The directory of segops_deploy.h, the C++ header with
    segops::loadPrograms (nothing to link but libtorch)."""
    return Path(__file__).resolve().parent / "include"


def programs_directory(package_path: str | os.PathLike[str]) -> Path:
    """Where :func:`package` writes the programs of `package_path`:
    model.pt2 -> model.segops/."""
    return Path(package_path).with_suffix(".segops")


def package(exported: torch.export.ExportedProgram, package_path: str | os.PathLike[str], *,
            use_fusion: bool = True, inductor_configs: dict[str, Any] | None = None,
            chips: Sequence[str] | None = None) -> Path:
    """Packages `exported` with AOTInductor (``aoti_compile_and_package``;
    with `use_fusion`, through segops.fusion's pass) at `package_path`, and
    writes the segops programs it calls to ``programs_directory(package_path)``
    with PTX for `chips` (default: the op library's). Returns the package's
    path."""
    configs = dict(fusion.options()) if use_fusion else {}
    configs.update(inductor_configs or {})
    path = Path(torch._inductor.aoti_compile_and_package(
        exported, package_path=str(package_path), inductor_configs=configs))
    directory = programs_directory(path)
    if directory.exists():
        shutil.rmtree(directory)  # a stale program must not be loaded
    directory.mkdir(parents=True)  # empty for a model that calls no program
    write_programs(programs_called(path), directory, chips)
    write_row_widths(exported, directory, chips)
    return path


def programs_called(package_path: str | os.PathLike[str]) -> list[str]:
    """The jit_call programs (with their derivative levels) that an
    AOTInductor package names, as this process knows them."""
    names: set[str] = set()
    with zipfile.ZipFile(package_path) as archive:
        for member in archive.namelist():
            names.update(match.decode() for match in _PROGRAM_NAME.findall(archive.read(member)))
    programs = []
    for name in sorted(names):
        try:
            _jit.split_program(name)
        except ValueError:
            continue  # not a program (jit_call itself, a kernel's name, ...)
        programs.append(name)
    return programs


def write_programs(names: Iterable[str], directory: str | os.PathLike[str],
                   chips: Sequence[str] | None = None) -> None:
    """Writes each program level in `names` (jit_call's program names) to
    its own subdirectory of `directory`, as load_programs reads them."""
    chips = list(chips) if chips is not None else sorted(_library.manifest().ptx)
    for name in names:
        program, level = _jit.split_program(name)
        _write_level(program, level, Path(directory) / name, chips)


def write_row_widths(exported: torch.export.ExportedProgram, directory: str | os.PathLike[str],
                     chips: Sequence[str] | None = None) -> None:
    """Writes, beside the programs, the kernels of the library op levels in
    `exported` whose rows are wider than the op library ships (a process
    with Python compiles those at run time): load_programs adds them to
    their ops."""
    chips = list(chips) if chips is not None else sorted(_library.manifest().ptx)
    shipped = _library.kernels()
    wanted: set[tuple[str, str, int, int]] = set()  # an op level used twice ships once
    for node in exported.graph.nodes:
        if node.op != "call_function" or not isinstance(node.target, torch._ops.OpOverload):
            continue
        if node.target.namespace != "segops":
            continue
        op, level = split_level_name(node.target._opname)
        if op not in OPS or not node.args or not isinstance(node.args[0], torch.fx.Node):
            continue
        first = node.args[0].meta.get("val")
        if not isinstance(first, torch.Tensor):
            continue
        dtype = FLOAT_DTYPES.get(first.dtype)
        width = 1 if first.dim() < 2 else int(first.shape[1])
        if dtype is not None and OPS[op].kernel_name(dtype, width, level) not in shipped:
            wanted.add((op, dtype, width, level))
    for op, dtype, width, level in sorted(wanted):
        program = _wide.program(op, dtype, width)
        _write_level(program, level, Path(directory) / program.level_name(level), chips)


def load_programs(directory: str | os.PathLike[str]) -> int:
    """Registers the programs under `directory` with jit_call (what a C++
    process does with segops::load_programs); returns how many levels."""
    return torch.ops.segops.load_programs(str(directory))


def _write_level(program: _jit.Program, level: int, directory: Path,
                 chips: Sequence[str]) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    segc = _extensions.segc()
    name = program.level_name(level)
    builds = []
    compiled = ""
    # The op library's CPU levels, so that the package runs wherever it does.
    for build in _library.manifest().host_builds:
        compiled, objects = segc.compile_host_objects(
            program.source, level, name, vector_bits=build.vector_bits,
            interleave=_HOST_INTERLEAVE, parts=1, cpu=build.cpu)
        library = f"host_{build.cpu}.so"
        _link_shared_library(objects, directory / library)
        builds.append((build.cpu, library, build.vector_bits))
    ptx = {}
    for chip in chips:
        try:
            text = program.ptx_for_chip(level, chip)
        except segc.CompileError as error:
            # Host code only (f64 tanh, say, has no GPU lowering): a CUDA
            # call of this program raises.
            warnings.warn(f"segops.export: {name} runs on the host only: {error}", stacklevel=3)
            continue
        (directory / f"{chip}.ptx").write_text(text)
        ptx[chip] = f"{chip}.ptx"
    manifest = _library.native_module().package_manifest(compiled, builds, ptx)
    (directory / "manifest.json").write_text(manifest)


def _c_compiler() -> str:
    for candidate in (os.environ.get("CC"), "cc", "gcc", "clang"):
        if candidate and shutil.which(candidate):
            return candidate
    raise RuntimeError("segops.export links each program's host code into a shared library "
                       "and needs a C compiler driver (cc, gcc or clang, or $CC); "
                       "AOTInductor needs one too")


def _link_shared_library(objects: Sequence[bytes], path: Path) -> None:
    with tempfile.TemporaryDirectory(prefix="segops-export-") as scratch:
        files = []
        for number, data in enumerate(objects):
            file = Path(scratch) / f"part{number}.o"
            file.write_bytes(data)
            files.append(str(file))
        result = subprocess.run([_c_compiler(), "-shared", "-o", str(path), *files, "-lm"],
                                capture_output=True, text=True)
    if result.returncode != 0:
        raise RuntimeError(f"segops.export: linking {path.name} failed:\n{result.stderr}")
