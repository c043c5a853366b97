"""bench.gpu_model's reading of ptxas and its occupancy rule, on ptxas
output written out here and on cases the CUDA Occupancy Calculator gives
for compute capability 9.0."""

from __future__ import annotations

import shutil

import pytest

from bench.gpu_model import KernelResources, library_rows, occupancy, parse_ptxas

LOG = """\
ptxas info    : 0 bytes gmem
ptxas info    : Compiling entry function 'segmented_sum_f32_w3' for 'sm_90'
ptxas info    : Function properties for segmented_sum_f32_w3
    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 39 registers, used 0 barriers, 400 bytes cmem[0]
ptxas info    : Compiling entry function 'segmented_max_f64_w3_grad_grad__long1' for 'sm_90'
ptxas info    : Function properties for segmented_max_f64_w3_grad_grad__long1
    24 bytes stack frame, 28 bytes spill stores, 20 bytes spill loads
ptxas info    : Used 255 registers, used 1 barriers, 2048 bytes smem, 400 bytes cmem[0]
"""


def test_parse_ptxas_reads_every_entry() -> None:
    kernels = parse_ptxas(LOG)
    assert kernels == {
        "segmented_sum_f32_w3": KernelResources("segmented_sum_f32_w3", 39, 0, 0, 0, 0),
        "segmented_max_f64_w3_grad_grad__long1": KernelResources(
            "segmented_max_f64_w3_grad_grad__long1", 255, 24, 28, 20, 2048),
    }


@pytest.mark.parametrize("registers, block, shared, expected", [
    (32, 256, 0, 1.0),      # 8 blocks of 8 warps: every warp slot
    (40, 256, 0, 0.75),     # 40 x 32 = 1,280 per warp: 51 warps -> 6 blocks
    (64, 256, 0, 0.5),      # 2,048 per warp: 32 warps
    (255, 256, 0, 0.125),   # 8,192 per warp: one block of 8 warps
    (32, 1024, 0, 1.0),     # 2 blocks of 32 warps
    (32, 256, 100 * 1024, 0.25),  # two blocks' shared memory fit in 228 KiB
    (16, 32, 0, 0.5),       # 32 blocks of one warp: the block limit
])
def test_occupancy_matches_the_calculator(registers: int, block: int, shared: int,
                                          expected: float) -> None:
    kernel = KernelResources("k", registers, 0, 0, 0, shared)
    assert occupancy(kernel, block) == pytest.approx(expected)


@pytest.mark.skipif(shutil.which("ptxas") is None, reason="needs ptxas")
def test_every_shipped_kernel_has_a_row() -> None:
    rows = library_rows("sm_90")
    assert len(rows) >= 300
    launched = [row for row in rows if row["launched"]]
    assert len(launched) >= 300
    assert all(row["block"] > 0 and 0 < row["occupancy"] <= 1 for row in launched)
    assert {row["op"] for row in rows} >= {"segmented_sum", "segmented_max", "segmented_matvec"}
