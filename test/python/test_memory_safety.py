"""Every host kernel of the op library stays inside its buffers whatever idx
holds: each buffer is placed against a page that may not be touched
(PROT_NONE), after its last byte or before its first, and every kernel runs
on random sorted and unsorted indices, values out of range included. An
access outside a buffer kills the process (SIGSEGV), so the probes run in a
subprocess. This guards the vector code (16-row idx blocks, 16-row
short-segment blocks, vector loads of rows) whose reads run ahead of the
rows they compute, and the tiles of long segments."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

PROBE = textwrap.dedent('''
    import json, sys
    import torch
    import harness
    from segops import _library
    from guard_pages import kernel_buffers

    generator = torch.Generator().manual_seed(int(sys.argv[1]))
    manifest = json.loads((_library.NATIVE_DIR / "manifest.json").read_text())
    cases = [(0, 0), (0, 3), (1, 1), (5, 0), (17, 3), (33, 2), (100, 50), (1000, 7)]
    for kernel in manifest["kernels"]:
        for n, s in cases:
            for side in ("after", "before"):
                for order in ("sorted", "unsorted"):
                    values = torch.randint(-3, s + 4, (n,), generator=generator)
                    if order == "sorted":
                        values = torch.sort(values).values
                    inputs, outputs = kernel_buffers(kernel, n, s, side, values, generator)
                    harness.run(kernel["name"], inputs, outputs, n, s)
        # Segments of 2^17 rows or more run in tiles (pass by pass, row
        # outputs stored by the tiles): two long segments, a few rows
        # overwritten with values out of range or out of order.
        n, s = 300_000, 2
        for side in ("after", "before"):
            values = torch.sort(torch.randint(0, s, (n,), generator=generator)).values
            rows = torch.randint(0, n, (5,), generator=generator)
            values[rows] = torch.randint(-3, s + 4, (5,), generator=generator)
            inputs, outputs = kernel_buffers(kernel, n, s, side, values, generator)
            harness.run(kernel["name"], inputs, outputs, n, s)
    print("ok")
''')


@pytest.mark.parametrize("seed", [0, 1])
def test_host_kernels_stay_inside_their_buffers(seed: int) -> None:
    result = subprocess.run([sys.executable, "-c", PROBE, str(seed)], capture_output=True,
                            text=True, timeout=600, cwd=Path(__file__).parent)
    assert result.returncode == 0 and result.stdout.strip() == "ok", (
        f"exit {result.returncode} (a negative code is the signal: -11 is SIGSEGV)\n"
        f"{result.stdout[-2000:]}\n{result.stderr[-4000:]}")
