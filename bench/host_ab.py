"""A/B of two builds of the host kernel library in one process.

    python -m bench.host_ab OLD.so NEW.so [--kernels segmented_mul_f32_w1,...]
                            [--lengths 10,1000] [--rows 10000000] [--rounds 5]

Loads both shared objects (e.g. a copy of python/segops/_native/
libsegops_host_x86-64-v3.so saved before a change, and the rebuilt one; or
the two builds of one op library, SSE and AVX2) and times
each kernel on the same tensors, alternating A and B round by round so
that both see the same machine state: the kernel alone (outputs written
before, no index check, no allocation), over PyTorch's intra-op threads.
On a noisy VM this is how a code-generation change was measured; the
whole-op suite (`python -m bench`) cannot separate a 10% kernel change from
the noise."""

from __future__ import annotations

import argparse
import statistics
import time
from typing import Any

import torch

from segops import _library
from segops._dtypes import MANIFEST_DTYPES


def _median_ms(call, repeats: int = 9) -> float:
    samples = []
    for _ in range(repeats):
        begin = time.perf_counter()
        call()
        samples.append(time.perf_counter() - begin)
    return statistics.median(samples) * 1e3


def _tensors(kernel: Any, num_rows: int, num_segments: int,
             idx: torch.Tensor) -> list[torch.Tensor]:
    dtype = MANIFEST_DTYPES[kernel.dtype]
    tensors = []
    for buffer in kernel.buffers:
        if buffer.dtype == "i32":
            tensors.append(idx)
            continue
        shape = buffer.extents(num_rows, num_segments)
        tensors.append(torch.randn(shape, dtype=dtype))
    return tensors


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("a", help="host kernel library A (e.g. the old build)")
    parser.add_argument("b", help="host kernel library B")
    parser.add_argument("--kernels", default="segmented_sum_f32_w1,segmented_mul_f32_w1,"
                        "segmented_matvec_f32_w3")
    parser.add_argument("--lengths", default="10,1000,0", help="mean segment lengths (0: one)")
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()

    native = _library.native_module()
    libraries = [native.HostLibrary(args.a), native.HostLibrary(args.b)]
    threads = torch.get_num_threads()
    print(f"{threads} threads; ms per call, best (median) of {args.rounds} rounds")
    for name in args.kernels.split(","):
        kernel = _library.kernel(name)
        for length in (int(v) for v in args.lengths.split(",")):
            num_segments = max(1, args.rows // length) if length else 1
            idx = torch.sort(torch.randint(0, num_segments, (args.rows,),
                                           dtype=torch.int32)).values
            tensors = _tensors(kernel, args.rows, num_segments, idx)
            pointers = [t.data_ptr() for t in tensors]

            def run(library):
                library.call_parallel(kernel, pointers, args.rows, num_segments, threads)

            times: list[list[float]] = [[], []]
            for _ in range(args.rounds):
                for which, library in enumerate(libraries):
                    times[which].append(_median_ms(lambda: run(library)))
            cells = [f"{min(t):8.2f} ({statistics.median(t):.2f})" for t in times]
            print(f"{name:28} len {length or args.rows:>9}: A {cells[0]}  B {cells[1]}  "
                  f"B/A {min(times[1]) / min(times[0]):.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
