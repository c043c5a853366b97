"""Reductions of rows of an odd number of components (3-vectors; 5 and 7
features held a row per lane) as they are: sum, mean, max and min, and
gather's adjoint (SegmentProgram::gpuStripedReductions, lib/Conversion/
SegToGPU/GPUStripedRows.cpp). The tile kernel loads a long piece's rows a
warp at a time, a step of 32 rows as F loads of 32 consecutive values, each
lane reducing what it loads (F accumulators of F different components),
the first and last step masked; a row per lane would read F sectors for
each one it uses.

Against the host kernels: long segments starting and ending anywhere in a
chunk and a tile (so every piece's first and last step is partial, or
whole), on both sides of the tile's 1,024 rows and of two tiles, empty and
invalid long segments, N ending inside a chunk, and one segment of 1e6
rows; bitwise the same on any grid and block order; run-time programs of 5
and 7 features (striped) and 6 (not). The model's claim: the tile kernel
of one long segment reads at least 90% useful sectors."""

from __future__ import annotations

import harness
import pytest
import torch

from segops import _gpusim, _library, _wide

pytestmark = [pytest.mark.simulator,
              pytest.mark.skipif(not _gpusim.LIBRARY_PATH.exists(),
                                 reason="libsegops_gpusim.so not built (no compiler)")]


# The op library's kernels with striped reductions, as its manifest says.
STRIPED = harness.kernels_whose_plan_sets("striped_reductions")


def test_the_manifest_records_the_striped_reductions() -> None:
    """The 3-vector sum, mean, max and min and gather's adjoint (a sum);
    not scalars (whole sectors already), not the dot or rms_norm (their
    row terms combine a row's components)."""
    expected = {f"segmented_{op}_{dtype}_w3{suffix}"
                for op, suffix in [("sum", ""), ("mean", ""), ("max", ""), ("min", ""),
                                   ("gather", "_grad")]
                for dtype in ("f32", "f64")}
    assert set(STRIPED) == expected
    for name in ("segmented_sum_f32_w1", "segmented_dot_f32_w3",
                 "segmented_rms_norm_f64_w3"):
        assert not harness.gpu_plan(_library.kernel(name))["striped_reductions"], name


@pytest.fixture(scope="module")
def simulator() -> harness.GpuSimulator:
    return harness.simulator()


def _layouts() -> dict[str, tuple[torch.Tensor, int]]:
    layouts = {}
    # A long segment from row `offset` of `length` rows: a tile (1,024
    # rows) is long where a segment covers it, so 1,023 rows from row 0 are
    # walked, 1,024 make one tile piece, and 2,047 to 2,049 from odd offsets
    # give a tail piece in one tile and a head piece in the next, each
    # starting or ending inside a chunk (masked first or last steps).
    for offset in (0, 1, 31, 33, 1000):
        for length in (1023, 1024, 1025, 2047, 2048, 2049, 3100):
            counts = [offset, length, 5] if offset else [length, 5]
            layouts[f"{length}-rows-from-{offset}"] = harness.index_from_counts(counts)
    # Empty segments around long ones, and invalid long ones at both ends
    # (idx sorted: -1 first, 11 >= S last), whose rows reduce into nothing.
    layouts["empty-and-invalid"] = harness.index_from_counts(
        [1500, 0, 2600, 0, 7, 3000, 0, 2100], invalid={0: -1, 7: 11})
    # N ending inside a chunk, inside the last long piece.
    layouts["ends-inside-a-chunk"] = harness.index_from_counts([17, 2061])
    return layouts


LAYOUTS = _layouts()


@pytest.mark.parametrize("name", STRIPED)
def test_striped_reductions_match_the_host_kernels(simulator: harness.GpuSimulator,
                                                   name: str) -> None:
    for seed, (layout, (idx, num_segments)) in enumerate(LAYOUTS.items()):
        harness.check_against_host(simulator, name, idx, num_segments, seed, layout)


@pytest.mark.parametrize("name", STRIPED)
def test_striped_reductions_over_a_million_row_segment(simulator: harness.GpuSimulator,
                                                       name: str) -> None:
    idx, num_segments = harness.index_from_counts([3, 1_000_000, 2])
    harness.check_against_host(simulator, name, idx, num_segments, 7, "1e6 rows")


@pytest.mark.parametrize("name", STRIPED)
def test_striped_reductions_are_bitwise_independent_of_the_grid(
        simulator: harness.GpuSimulator, name: str) -> None:
    for layout in ("2049-rows-from-33", "empty-and-invalid"):
        harness.check_bitwise_independent_of_the_grid(simulator, name, *LAYOUTS[layout],
                                                      layout)


# Programs compiled at run time of other odd widths held a row per lane (5
# and 7 features), and an even one that is not striped (6).
@pytest.mark.parametrize("dtype", ["f32", "f64"])
@pytest.mark.parametrize("width", [5, 6, 7])
@pytest.mark.parametrize("op,level", [("segmented_sum", 0), ("segmented_max", 0),
                                      ("segmented_gather", 1)])
def test_run_time_reductions_of_odd_widths(simulator: harness.GpuSimulator, op: str,
                                           level: int, width: int, dtype: str) -> None:
    program = _wide.program(op, dtype, width)
    gpu = harness.SimulatedProgram(program, level, simulator)
    assert harness.gpu_plan(gpu.record)["striped_reductions"] == (width % 2 == 1)
    # (The host kernels of run-time programs check idx's range.)
    harness.check_program_against_host(gpu, {
        layout: LAYOUTS[layout]
        for layout in ("2047-rows-from-33", "1025-rows-from-1", "ends-inside-a-chunk")})


def _useful(launch: dict) -> float:
    sectors = launch["load_sectors"] + launch["store_sectors"]
    return (launch["load_useful_bytes"] + launch["store_useful_bytes"]) / (32 * sectors)


@pytest.mark.parametrize("dtype", ["f32", "f64"])
@pytest.mark.parametrize("op,level", [("segmented_sum", 0), ("segmented_max", 0),
                                      ("segmented_gather", 1)])
def test_striped_tiles_read_whole_sectors(op: str, level: int, dtype: str) -> None:
    """One segment of 16,384 rows: at least 90% of the tile kernel's
    sectors are useful (a third where a lane loaded its own 3-vectors)."""
    (trace,) = harness.traced_on_simulator([[op, dtype, level, 3, [16384]]],
                                           "trace_layout")
    (tiles,) = [launch for launch in trace["launches"]
                if launch["kernel"].endswith("__tiles")]
    assert _useful(tiles) >= 0.9, tiles
