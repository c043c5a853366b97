"""Every host kernel of the op library stays inside its buffers whatever idx
holds: each buffer is placed against a page that may not be touched
(PROT_NONE), after its last byte or before its first, and every kernel runs
on random sorted and unsorted indices, values out of range included. An
access outside a buffer kills the process (SIGSEGV), so the probes run in a
subprocess. This guards the vector code (16-row idx blocks, 16-row
short-segment blocks, vector loads of rows) whose reads run ahead of the
rows they compute."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

PROBE = textwrap.dedent('''
    import ctypes, json, mmap, sys
    import torch
    from segops import _launch, _library

    PAGE = mmap.PAGESIZE
    libc = ctypes.CDLL(None)
    libc.mprotect.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    keep = []

    def guarded(shape, dtype, side, fill):
        """A tensor touching a PROT_NONE page on `side` ('after'/'before')."""
        numel = 1
        for extent in shape:
            numel *= extent
        nbytes = numel * torch.empty((), dtype=dtype).element_size()
        data_pages = max(1, -(-nbytes // PAGE))
        region = mmap.mmap(-1, (data_pages + 1) * PAGE)
        base = ctypes.addressof(ctypes.c_char.from_buffer(region))
        keep.append(region)
        if side == "after":
            guard, offset = base + data_pages * PAGE, data_pages * PAGE - nbytes
        else:
            guard, offset = base, PAGE
        assert libc.mprotect(guard, PAGE, 0) == 0
        if numel == 0:
            return torch.empty(shape, dtype=dtype)
        tensor = torch.frombuffer(region, dtype=dtype, count=numel, offset=offset)
        tensor = tensor.view(shape)
        tensor.copy_(fill(shape, dtype))
        return tensor

    def extent(symbol, n, s):
        sizes = {"N": n, "S": s}
        return sizes[symbol] if symbol in sizes else int(symbol)

    generator = torch.Generator().manual_seed(int(sys.argv[1]))
    manifest = json.loads((_library.NATIVE_DIR / "manifest.json").read_text())
    cases = [(0, 0), (0, 3), (1, 1), (5, 0), (17, 3), (33, 2), (100, 50), (1000, 7)]
    for kernel in manifest["kernels"]:
        dtype = torch.float32 if kernel["dtype"] == "f32" else torch.float64
        for n, s in cases:
            for side in ("after", "before"):
                for order in ("sorted", "unsorted"):
                    values = torch.randint(-3, s + 4, (n,), generator=generator)
                    if order == "sorted":
                        values = torch.sort(values).values
                    inputs, outputs = [], []
                    for buffer in kernel["buffers"]:
                        shape = [extent(e, n, s) for e in buffer["shape"]]
                        if buffer["dtype"] == "i32":
                            tensor = guarded(shape, torch.int32, side,
                                             lambda sh, dt: values.to(dt).view(sh))
                        else:
                            tensor = guarded(shape, dtype, side,
                                             lambda sh, dt: torch.randn(sh, dtype=dt,
                                                                        generator=generator))
                        (outputs if buffer["role"] == "output" else inputs).append(tensor)
                    _launch.run(kernel["name"], inputs, outputs, n, s)
    print("ok")
''')


@pytest.mark.parametrize("seed", [0, 1])
def test_host_kernels_stay_inside_their_buffers(seed: int) -> None:
    result = subprocess.run([sys.executable, "-c", PROBE, str(seed)], capture_output=True,
                            text=True, timeout=600)
    assert result.returncode == 0 and result.stdout.strip() == "ok", (
        f"exit {result.returncode} (a negative code is the signal: -11 is SIGSEGV)\n"
        f"{result.stdout[-2000:]}\n{result.stderr[-4000:]}")
