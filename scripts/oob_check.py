"""Runs every op-library kernel on CUDA with index content that is garbage
(unsorted, negative, huge), bypassing validation, and with sorted indices of
a few values, in and out of range, whose segments cover whole 1024-row tiles
(the long-segment kernels). Meant to run under compute-sanitizer (memcheck),
which reports any out-of-bounds access."""

from __future__ import annotations

import sys
from pathlib import Path

import torch

from segops import _library
from segops._dtypes import MANIFEST_DTYPES

# The kernel-launching harness the tests use.
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "test" / "python"))
import harness  # noqa: E402


def main() -> None:
    n, segments = 4099, 37
    generator = torch.Generator(device="cuda").manual_seed(1)
    idx = torch.randint(-2**31, 2**31 - 1, (n,), device="cuda", dtype=torch.int64,
                        generator=generator).to(torch.int32)
    idx[::3] = torch.randint(-2, segments + 2, (len(range(0, n, 3)),), device="cuda",
                             dtype=torch.int32, generator=generator)
    long_idx = torch.sort(torch.randint(-1, 3, (n,), device="cuda", dtype=torch.int32,
                                        generator=generator)).values
    entries = _library.manifest().kernels.values()
    for entry in entries:
        for index, rows, count in ((idx, n, segments), (idx, 0, segments), (idx, n, 0),
                                   (long_idx, n, 2)):
            sizes = {"N": rows, "S": count, "?": rows}
            inputs, outputs = [], []
            for buffer in entry.buffers:
                if buffer.name == "idx":
                    inputs.append(index[:rows])
                    continue
                shape = [sizes[d] if d in sizes else int(d) for d in buffer.shape]
                tensor = torch.randn(
                    shape, device="cuda", dtype=MANIFEST_DTYPES[buffer.dtype]
                )
                (outputs if buffer.is_output else inputs).append(tensor)
            harness.run(entry.name, inputs, outputs, rows, count)
    torch.cuda.synchronize()
    print(f"oob_check: ran {len(entries)} kernels x 4 layouts on garbage indices")


if __name__ == "__main__":
    main()
