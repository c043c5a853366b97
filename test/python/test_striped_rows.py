"""Row maps of rows of an odd number of components (3-vectors; 5 and 7
features held a row per lane) move their rows a warp at a time
(SegmentProgram::gpuStripesRowMap, lib/Conversion/SegToGPU/
GPUStripedRows.cpp): load k of lane l reads value 32k + l of the warp's
rows, and shuffles hand each lane its row; row outputs go back the same
way. A row of F components per lane would read F sectors for each one it
uses. The warp's segment inputs are read together, in loads of 32 values,
where its lanes' segments lie within a window of segments from lane 0's
(at least SegmentProgram::kGPUStripedSegments), else a lane each.

Against the host kernels: segment lengths on both sides of every window
(1 to 12 rows, with and without empty segments between), unsorted idx
with invalid values, and row counts ending inside a warp's rows; bitwise
the same on any grid and block order. The model's claim: the striped
kernels' sectors are at least 90% useful, the lane-by-lane path's not."""

from __future__ import annotations

import harness
import pytest
import torch

from segops import _gpusim, _library, _wide

pytestmark = [pytest.mark.simulator,
              pytest.mark.skipif(not _gpusim.LIBRARY_PATH.exists(),
                                 reason="libsegops_gpusim.so not built (no compiler)")]


# The op library's striped row maps, as its manifest records them.
STRIPED = harness.kernels_whose_plan_sets("striped_rows")


def test_the_manifest_records_the_striped_row_maps() -> None:
    """The 3-vector row maps: gather, mul and matvec forward, the sum's
    and dot's backward (rows of one component, and split rows, are not
    striped), at 2 rows a thread, or 1 for the dot's f64 backward (four
    3-vectors of f64 a row: 96 bytes)."""
    expected = {f"segmented_{op}_{dtype}_w3{suffix}"
                for op, suffix in [("gather", ""), ("mul", ""), ("matvec", ""),
                                   ("sum", "_grad"), ("dot", "_grad")]
                for dtype in ("f32", "f64")}
    assert set(STRIPED) == expected
    for name in STRIPED:
        gpu = harness.gpu_plan(_library.kernel(name))
        per_thread = gpu["rows_per_thread"]
        assert per_thread == (1 if name == "segmented_dot_f64_w3_grad" else 2), name
        assert gpu["grid"]["per_block"] == per_thread * gpu["block"][0]
    narrow = harness.gpu_plan(_library.kernel("segmented_gather_f32_w1"))
    assert not narrow["striped_rows"] and narrow["rows_per_thread"] == 4


@pytest.fixture(scope="module")
def simulator() -> harness.GpuSimulator:
    return harness.simulator()


def _layouts() -> dict[str, tuple[torch.Tensor, int]]:
    """idx of each layout, and its segment count."""
    layouts = {}
    for length in range(1, 13):
        for empty in (0, 1):
            # Segments of `length` rows, `empty` empty ones after each: a
            # warp's 32 rows span about 32 (1 + empty) / length segments.
            counts = ([length] + [0] * empty) * (700 // length)
            counts[-1] = 5  # the last warp's rows end inside it
            layouts[f"{length}-rows-{empty}-empty"] = (
                torch.repeat_interleave(torch.arange(len(counts)),
                                        torch.tensor(counts)), len(counts))
    generator = torch.Generator().manual_seed(3)
    # Unsorted, with values outside [0, S): zero rows for those.
    layouts["unsorted-and-invalid"] = (
        torch.randint(-3, 43, (613,), generator=generator), 40)
    layouts["unsorted"] = (torch.randint(0, 40, (613,), generator=generator), 40)
    # Sorted, invalid at both ends.
    layouts["invalid-ends"] = (torch.cat([torch.full((40,), -1), torch.arange(300) // 7,
                                          torch.full((45,), 50)]), 43)
    return layouts


LAYOUTS = _layouts()


def _tolerance(dtype: str) -> dict[str, float]:
    return {"rtol": 1e-12, "atol": 1e-12} if dtype == "f64" else {"rtol": 1e-5, "atol": 1e-5}


@pytest.mark.parametrize("name", STRIPED)
def test_striped_row_maps_match_the_host_kernels(simulator: harness.GpuSimulator,
                                                 name: str) -> None:
    record = _library.kernel(name)
    for seed, (layout, (idx, num_segments)) in enumerate(LAYOUTS.items()):
        inputs, simulated = harness.kernel_buffers(record, idx, num_segments, seed)
        _, host = harness.kernel_buffers(record, idx, num_segments, seed)
        n = idx.shape[0]
        simulator.run(name, inputs, simulated, n, num_segments)
        harness.run(name, inputs, host, n, num_segments)
        for index, (got, want) in enumerate(zip(simulated, host)):
            torch.testing.assert_close(got, want, **_tolerance(record.dtype),
                                       msg=lambda m: f"{name}, {layout}, output {index}: {m}")


@pytest.mark.parametrize("name", STRIPED)
def test_striped_row_maps_are_bitwise_independent_of_the_grid(
        simulator: harness.GpuSimulator, name: str) -> None:
    for layout in ("3-rows-0-empty", "1-rows-1-empty", "unsorted-and-invalid"):
        harness.check_bitwise_independent_of_the_grid(simulator, name, *LAYOUTS[layout],
                                                      layout)


# Row maps compiled at run time of other odd widths held a row per lane
# (5 and 7 features), and an even one that is not striped (6).
@pytest.mark.parametrize("dtype", ["f32", "f64"])
@pytest.mark.parametrize("width", [5, 6, 7])
@pytest.mark.parametrize("op,level", [("segmented_gather", 0), ("segmented_mul", 0),
                                      ("segmented_sum", 1), ("segmented_dot", 1)])
def test_run_time_row_maps_of_odd_widths(simulator: harness.GpuSimulator, op: str, level: int,
                                         width: int, dtype: str) -> None:
    program = _wide.program(op, dtype, width)
    gpu = harness.SimulatedProgram(program, level, simulator)
    assert harness.gpu_plan(gpu.record)["striped_rows"] == (width % 2 == 1)
    # (The host kernels of run-time programs check idx's range.)
    harness.check_program_against_host(
        gpu, {layout: LAYOUTS[layout]
              for layout in ("2-rows-0-empty", "9-rows-1-empty", "unsorted")},
        lambda got, want, message: torch.testing.assert_close(
            got, want, **_tolerance(dtype), msg=lambda m: f"{message}: {m}"),
        check_grid=True)


def _useful(launch: dict) -> float:
    sectors = launch["load_sectors"] + launch["store_sectors"]
    return (launch["load_useful_bytes"] + launch["store_useful_bytes"]) / (32 * sectors)


@pytest.mark.parametrize("dtype", ["f32", "f64"])
@pytest.mark.parametrize("op,level", [("segmented_gather", 0), ("segmented_matvec", 0)])
def test_striped_rows_read_whole_sectors(op: str, level: int, dtype: str) -> None:
    """8,192 rows in segments of 6 (a warp's 7 at most, within the window)
    and of 1 with an empty one after each (64 segments a warp: each lane
    loads its segment's values): at least 90% of the first's sectors are
    useful; the second's rows are still stored striped (whole sectors),
    its segment loads not."""
    together, apart = (trace["launches"][-1] for trace in harness.traced_on_simulator(
        [[op, dtype, level, 3, counts] for counts in ([6] * 1365 + [2], [1, 0] * 8192)],
        "trace_layout"))
    assert _useful(together) >= 0.9, together
    row_sectors = 8192 * 3 * {"f32": 4, "f64": 8}[dtype] // 32
    assert together["store_sectors"] == apart["store_sectors"] == row_sectors
    assert apart["load_sectors"] > together["load_sectors"], (together, apart)
