"""Host kernels on one segment of 1e7 rows: the long segment cut into tiles
spread over the threads (the kernel's `host.split` entry points given to the
runtime) against one thread for the segment (none given), in one process,
alternated round by round, outputs preallocated, no index check.

    python -m bench.long_segments [--rows N] [--threads T] [KERNEL ...]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time

import torch

from segops import _library
from segops._dtypes import MANIFEST_DTYPES

KERNELS = ["segmented_sum_f32_w3", "segmented_mean_f32_w3_grad",
           "segmented_rms_norm_f32_w1_grad", "segmented_rms_norm_f32_w3_grad",
           "segmented_mul_f32_w1_grad", "segmented_mul_f32_w3_grad",
           "segmented_matvec_f32_w3_grad", "segmented_matvec_f32_w3_grad_grad",
           "segmented_rms_norm_f64_w3_grad_grad"]


def _buffers(name: str, num_rows: int) -> list[torch.Tensor]:
    """The kernel's buffers in manifest order for one segment of `num_rows`
    rows: random inputs, idx all zero, empty outputs."""
    entry = _library.kernel(name)
    dtype = MANIFEST_DTYPES[entry.dtype]
    generator = torch.Generator().manual_seed(0)
    buffers = []
    for buffer in entry.buffers:
        shape = [num_rows if e == "N" else 1 if e == "S" else int(e) for e in buffer.shape]
        if buffer.dtype == "i32":
            buffers.append(torch.zeros(shape, dtype=torch.int32))
        elif buffer.is_output:
            buffers.append(torch.empty(shape, dtype=dtype))
        else:
            buffers.append(torch.randn(shape, dtype=dtype, generator=generator))
    return buffers


def measure(name: str, num_rows: int, threads: int, rounds: int = 7) -> tuple[float, float]:
    """Median ms with one thread per segment, and with tiles."""
    info = _library.kernels()[name]
    if info.split is None:
        raise ValueError(f"{name} maps rows: no long-segment entry points")
    buffers = _buffers(name, num_rows)
    pointers = [t.data_ptr() for t in buffers]
    library = _library.native_module().HostLibrary(
        str(_library.NATIVE_DIR / _library.host_build().library))

    def call(tiles: bool) -> None:
        library.call_parallel(info, pointers, num_rows, 1, threads, tiles=tiles)

    times: dict[bool, list[float]] = {False: [], True: []}
    for tiles in (False, True):
        call(tiles)  # first touch of the outputs
    for _ in range(rounds):
        for tiles in (False, True):
            start = time.perf_counter()
            call(tiles)
            times[tiles].append(time.perf_counter() - start)
    return statistics.median(times[False]) * 1e3, statistics.median(times[True]) * 1e3


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("kernels", nargs="*", default=KERNELS)
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--threads", type=int, default=torch.get_num_threads())
    args = parser.parse_args()
    print(f"one segment of {args.rows} rows, {args.threads} threads")
    for name in args.kernels:
        one_thread, tiles = measure(name, args.rows, args.threads)
        print(f"{name:42} one thread {one_thread:8.1f} ms, tiles {tiles:8.1f} ms "
              f"({one_thread / tiles:.2f}x)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
