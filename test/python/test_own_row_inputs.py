"""Packed segments of programs of several passes, their lanes' own rows
loaded once (SegmentProgram::gpuCachesOwnRowInputs, GPUKernelEmitter::
emitPackedSegments): a lane of a packed chunk loads its own row's inputs
before the first pass and runs its own row's body in every pass from them;
a packed tail's other rows (up to 3 more a lane, from the next chunk) load
in each pass as before. Programs whose row inputs come to at least 2
components a row and at most 6 32-bit words: the 3-vector max's and min's
backward, and the higher levels of the scalar ones that read a second row
input.

Against the host kernels: short segments packed in their chunks, tails of
1 to 4 rows a lane (both sides of 3a rows into the next chunk: packed, and
walked), empty and invalid segments, N ending inside a chunk, mixed
lengths around a walked and a long segment; bitwise the same on any grid;
run-time programs of 2 (cached) and 1 (not) row components; and the trace's
claim: the segment kernel of packed 3-vector segments loads each row once,
not once a pass."""

from __future__ import annotations

import harness
import pytest
import torch

from segops import _gpusim, _library, _wide

pytestmark = [pytest.mark.simulator,
              pytest.mark.skipif(not _gpusim.LIBRARY_PATH.exists(),
                                 reason="libsegops_gpusim.so not built (no compiler)")]

# The op library's kernels that load their own rows once, as its manifest says.
CACHING = harness.kernels_whose_plan_sets("caches_own_rows")


def test_the_manifest_records_the_kernels_that_load_own_rows_once() -> None:
    """Several passes, two row components or more, at most six 32-bit words
    of them: max's and min's 3-vector first backward (x), f32's second and
    third (x and its tangent); the scalars' second and third (x and its
    tangent). Not the scalar max's first backward (one component), not the
    f64 3-vectors' second and third (twelve words), nor one-pass programs
    (every rms_norm level: they read the saved norm), nor split rows."""
    expected = {f"segmented_{op}_{dtype}_w3_grad" for op in ("max", "min")
                for dtype in ("f32", "f64")}
    expected |= {f"segmented_{op}_f32_w3{levels}" for op in ("max", "min")
                 for levels in ("_grad_grad", "_grad_grad_grad")}
    expected |= {f"segmented_{op}_{dtype}_w1{levels}" for op in ("max", "min")
                 for dtype in ("f32", "f64") for levels in ("_grad_grad", "_grad_grad_grad")}
    assert set(CACHING) == expected
    for name in ("segmented_max_f32_w1_grad", "segmented_sum_f32_w3",
                 "segmented_mul_f32_w3_grad", "segmented_rms_norm_f64_w3_grad_grad",
                 "segmented_rms_norm_f32_w3_grad", "segmented_max_f64_w3_grad_grad"):
        assert not harness.gpu_plan(_library.kernel(name))["caches_own_rows"], name


@pytest.fixture(scope="module")
def simulator() -> harness.GpuSimulator:
    return harness.simulator()


def _layouts() -> dict[str, tuple[torch.Tensor, int]]:
    layouts = {
        # Segments of 1 to 9 rows: several packed in every chunk.
        "short": harness.index_from_counts([1, 4, 9, 2, 7, 3, 5, 8, 6] * 12),
        # Tails of a lanes here and e rows in the next chunk: 1 to 4 rows a
        # lane packed (e <= 3a), and just past that (walked).
        "tails": harness.index_from_counts(harness.packed_tail_counts(
            [(1, 1), (2, 5), (3, 9), (4, 8), (5, 12), (2, 7), (1, 4), (8, 24), (3, 10),
             (31, 1), (16, 31)]) + [5]),
        # Empty segments between packed ones, invalid ones at both ends.
        "empty-and-invalid": harness.index_from_counts([3, 0, 5, 0, 0, 2, 9, 0, 4, 6, 0, 3],
                                    invalid={0: -1, 11: 40}),
        # N ending inside a chunk, inside a packed segment.
        "ends-inside-a-chunk": harness.index_from_counts([7, 5, 9, 11, 6, 3]),
        # Short segments around a walked one and a long one (tile kernels).
        "mixed": harness.index_from_counts([5, 3, 70, 2, 9, 2100, 4, 1, 6]),
    }
    return layouts


LAYOUTS = _layouts()


@pytest.mark.parametrize("name", CACHING)
def test_own_rows_loaded_once_match_the_host_kernels(simulator: harness.GpuSimulator,
                                                     name: str) -> None:
    for seed, (layout, (idx, num_segments)) in enumerate(LAYOUTS.items()):
        harness.check_against_host(simulator, name, idx, num_segments, seed, layout)


@pytest.mark.parametrize("name", CACHING)
def test_own_rows_loaded_once_are_bitwise_independent_of_the_grid(
        simulator: harness.GpuSimulator, name: str) -> None:
    for layout in ("tails", "empty-and-invalid"):
        harness.check_bitwise_independent_of_the_grid(simulator, name, *LAYOUTS[layout],
                                                      layout)


@pytest.mark.parametrize("dtype", ["f32", "f64"])
@pytest.mark.parametrize("width,level,cached_in_f32,cached_in_f64", [
    (2, 1, True, True), (5, 1, True, False), (1, 1, False, False), (2, 2, True, False),
    (16, 1, False, False)])
def test_run_time_programs_of_several_passes(simulator: harness.GpuSimulator, width: int,
                                             level: int, cached_in_f32: bool,
                                             cached_in_f64: bool, dtype: str) -> None:
    """The max's backward (three passes) loads its own rows once where they
    hold 2 to 6 words: rows of 2 features, of 5 in f32, and x with its
    tangent of 2 in f32 (level 2); not rows of 1 feature, of 5 in f64 (10
    words), of 2 with their tangent in f64 (8), nor of 16 (features split
    over lanes, no packed segments)."""
    cached = cached_in_f64 if dtype == "f64" else cached_in_f32
    program = _wide.program("segmented_max", dtype, width)
    gpu = harness.SimulatedProgram(program, level, simulator)
    assert harness.gpu_plan(gpu.record).get("caches_own_rows", False) == cached
    harness.check_program_against_host(gpu, {
        layout: LAYOUTS[layout] for layout in ("tails", "short", "ends-inside-a-chunk")},
        check_grid=True)


@pytest.mark.parametrize("dtype", ["f32", "f64"])
@pytest.mark.parametrize("op", ["segmented_max", "segmented_min"])
def test_packed_rows_load_once_for_every_pass(op: str, dtype: str) -> None:
    """Segments of 4 rows, 8 to a chunk, all packed: the segment kernel
    loads x's rows once (2 passes: the rows attaining the saved extremum
    counted, then the row map), beside idx (a row's, the row before it and
    the row 32 after it: 12 bytes a row), the saved extremum and the
    gradient once a segment and the windows' probes (under 2 KiB). Each
    pass's reload would add x's bytes again."""
    per_segment = 2 * 3  # the extremum and the gradient, 3 components each
    rows, size = 4096, 8 if dtype == "f64" else 4
    (trace,) = harness.traced_on_simulator([[op, dtype, 1, 3, [4] * (rows // 4)]],
                                           "trace_layout")
    kernel = trace["launches"][-1]
    assert kernel["kernel"] == f"{op}_{dtype}_w3_grad", kernel
    x_bytes = rows * 3 * size
    others = rows * 12 + rows // 4 * per_segment * size + 2048
    assert x_bytes <= kernel["load_useful_bytes"] <= x_bytes + others, kernel


@pytest.mark.parametrize("name", CACHING)
def test_own_rows_loaded_once_beside_a_million_row_segment(simulator: harness.GpuSimulator,
                                                           name: str) -> None:
    """Packed segments on both sides of one segment of 1e6 rows (run pass
    by pass by the tile kernels)."""
    idx, num_segments = harness.index_from_counts([3, 5, 2, 1_000_000, 4, 6, 1])
    harness.check_against_host(simulator, name, idx, num_segments, 11, "1e6 rows")
