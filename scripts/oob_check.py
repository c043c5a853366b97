"""Runs every op-library kernel on CUDA with index content that is garbage
(unsorted, negative, huge), bypassing validation. Meant to run under
compute-sanitizer (memcheck), which reports any out-of-bounds access."""

from __future__ import annotations

import torch

from segops import _launch, _library


def main() -> None:
    n, segments = 4099, 37
    generator = torch.Generator(device="cuda").manual_seed(1)
    idx = torch.randint(-2**31, 2**31 - 1, (n,), device="cuda", dtype=torch.int64,
                        generator=generator).to(torch.int32)
    idx[::3] = torch.randint(-2, segments + 2, (len(range(0, n, 3)),), device="cuda",
                             dtype=torch.int32, generator=generator)
    for kernel in _library.kernels().values():
        dtype = torch.float32 if kernel.dtype == "f32" else torch.float64
        tail = () if kernel.width == 1 else (3,)
        if kernel.work == "segments":
            source = torch.randn((n,) + tail, device="cuda", dtype=dtype)
            out = torch.empty((segments,) + tail, device="cuda", dtype=dtype)
        else:
            source = torch.randn((segments,) + tail, device="cuda", dtype=dtype)
            out = torch.empty((n,) + tail, device="cuda", dtype=dtype)
        _launch.run(kernel.name, [source, idx], out, n, segments)
        # Also with zero rows and zero segments.
        _launch.run(kernel.name, [source, idx], out, 0, segments)
    torch.cuda.synchronize()
    print(f"oob_check: ran {len(_library.kernels())} kernels on garbage indices")


if __name__ == "__main__":
    main()
