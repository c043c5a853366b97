"""Compiling seg modules at run time: the in-process compiler (_segc) for
PTX and host code, and its disk cache. `seg_opt` runs the build's seg-opt
tool (tests only). The harness that runs one compiled module's host kernels
(CompiledModule) is in test/python/harness.py.
"""

from __future__ import annotations

import functools
import hashlib
import os
import subprocess
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from segops import _extensions

_REPO = Path(__file__).resolve().parents[2]


def tool(name: str) -> Path:
    """A compiler tool from $SEGOPS_BUILD_DIR/bin (default: <repo>/build/bin)."""
    build = Path(os.environ.get("SEGOPS_BUILD_DIR", _REPO / "build"))
    path = build / "bin" / name
    if not path.exists():
        raise FileNotFoundError(f"{path} does not exist; build the compiler first (`make build`)")
    return path


def seg_opt(source: str, *flags: str) -> str:
    """Runs seg-opt on `source` and returns the printed module."""
    result = subprocess.run([str(tool("seg-opt")), "-", *flags], input=source, text=True,
                            capture_output=True)
    if result.returncode != 0:
        raise RuntimeError(f"seg-opt {' '.join(flags)} failed:\n{result.stderr}")
    return result.stdout


@functools.cache
def _compiler_identity(path: Path) -> str:
    """Changes whenever the compiler binary does (so a rebuilt compiler
    never serves stale cache entries). Taken once per process: the module
    it loaded stays what compiles, and a compiler rebuilt while the process
    runs must not have this one's output filed under its name."""
    stat = path.stat()
    return f"{path}:{stat.st_size}:{stat.st_mtime_ns}"


def compiler_identity() -> str:
    """The in-process compiler's identity, part of every cache key."""
    return _compiler_identity(Path(_segc().__file__))


def cache_dir() -> Path:
    """Where compiled kernels are cached: $SEGOPS_CACHE_DIR, else
    $XDG_CACHE_HOME/segops, else ~/.cache/segops."""
    if "SEGOPS_CACHE_DIR" in os.environ:
        return Path(os.environ["SEGOPS_CACHE_DIR"])
    base = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache"))
    return base / "segops"


# A cache entry: this tag, the SHA-256 of the payload, the payload. A file
# that fails the check (flipped bits, a truncated write, something else's
# file) is treated as missing, so the entry is compiled again.
_CACHE_TAG = b"segops-cache-1\n"
_DIGEST_BYTES = 32


def write_cache_file(path: Path, data: bytes) -> None:
    """Writes a cache entry (checksummed) under a temporary name, then
    renames it: a concurrent reader (another process, a forked child) never
    sees half a file. An unwritable cache only costs recompilation."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        partial = path.with_name(f"{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
        partial.write_bytes(_CACHE_TAG + hashlib.sha256(data).digest() + data)
        os.replace(partial, path)
    except OSError:
        pass


def read_cache_file(path: Path) -> bytes | None:
    """A cache entry's payload, or None if it is missing or fails its
    checksum (a corrupt entry is removed)."""
    try:
        content = path.read_bytes()
    except OSError:
        return None
    header = len(_CACHE_TAG) + _DIGEST_BYTES
    data = content[header:]
    if (content.startswith(_CACHE_TAG) and len(content) >= header
            and hashlib.sha256(data).digest() == content[len(_CACHE_TAG):header]):
        return data
    try:
        path.unlink()
    except OSError:
        pass
    return None


def cache_generation() -> str:
    """A token that changes when the cache directory is deleted (made anew
    in a fresh directory): part of segops.fusion's cache key, so that
    Inductor's caches never replay graphs naming programs whose records
    went with the directory."""
    path = cache_dir() / "generation"
    token = read_cache_file(path)
    if token is None:
        write_cache_file(path, os.urandom(16).hex().encode())
        token = read_cache_file(path) or b"unwritable"
    return token.decode()


def cache_path(kind: str, key_parts: Sequence[str]) -> Path:
    """The disk-cache entry of a compiled artifact: named by a hash of the
    compiler's identity and `key_parts` (what it was compiled from, and
    how), with suffix `kind`. Every compiled artifact is cached under this
    one key."""
    key = hashlib.sha256("\0".join([compiler_identity(), *key_parts]).encode()).hexdigest()
    return cache_dir() / f"{key}.{kind}"


_ptx_cache: dict[Path, str] = {}
_ptx_cache_lock = threading.Lock()


def clear_memory_cache() -> None:
    """Forgets the in-process cache (the on-disk cache stays)."""
    with _ptx_cache_lock:
        _ptx_cache.clear()


def _segc() -> Any:
    """The in-process compiler (segops._extensions loads it)."""
    return _extensions.segc()


def compile_ptx(source: str, order: int = 0, chip: str = "sm_90",
                opt_level: int | None = None) -> str:
    """Compiles the kernel functions of `source` and their derivatives up to
    `order` (seg-derive) to PTX for `chip`, in this process; returns the PTX.

    LLVM optimizes with its O`opt_level` pipeline, or by default (None) with
    a short one made for run-time compilation (ptxas optimizes the PTX
    again; see docs/benchmarks.md), and compiles the kernels on all cores.
    Where ptxas is installed (the compiler's ptxas_path()), a kernel it
    spills registers in is compiled again with a higher register cap, as
    the op library's are.

    Results are cached by a hash of the source, the options and the compiler
    binary: first in this process, then on disk under cache_dir(), so a
    repeated compilation costs a dictionary lookup or one file read. Invalid
    source raises ValueError with the compiler's diagnostics."""
    compiler = _segc()
    # With ptxas at hand the compiler raises the register cap of kernels
    # ptxas spills in, so the PTX depends on which ptxas it found.
    options = (f"order={order} chip={chip} O={'quick' if opt_level is None else opt_level} "
               f"ptxas={compiler.ptxas_path()}")
    path = cache_path("ptx", [options, source])
    cached = _ptx_cache.get(path)
    if cached is not None:
        return cached
    cached_bytes = read_cache_file(path)
    if cached_bytes is not None:
        ptx = cached_bytes.decode()
    else:
        ptx = compiler.compile_ptx(source, order, chip, opt_level=opt_level or 0,
                                   quick=opt_level is None)
        write_cache_file(path, ptx.encode())
    with _ptx_cache_lock:
        _ptx_cache[path] = ptx
    return ptx
