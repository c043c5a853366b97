"""Rows of 8 features or more in the GPU kernels hold their features over a
group of G lanes (SegmentProgram::kGPUFeatureLanesFrom, gpuFeatureLanes: G
= 8, 16 or 32): lane l of a group holds features l, l + G, ..., a warp runs
32 / G rows at a time, dots and norms combine their lanes' parts by a
butterfly, and long segments add their tiles' partials (lanes over tiles
for up to 32 components, else lane by lane). Narrower rows keep a row per
lane, and row maps split from 32 features (a warp per row).

The run-time compiled kernels of every op at widths on both sides of each
threshold (7 | 8, 15 | 16, 31 | 32), with padding lanes (12, 31, 33) and
several features per lane (64, 256), forward and derivative levels, f32
and f64, run on the SIMT
simulator against their host kernels over layouts crossing the chunk, tile
and packing boundaries; results bitwise the same on any grid and block
order. Skipped where the simulator library was not built."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import harness
import pytest
import torch

from bench.gpu_model import window_chunks
from segops import _gpusim, _jit, _library, _wide

pytestmark = [pytest.mark.simulator, pytest.mark.compiler,
              pytest.mark.skipif(not _gpusim.LIBRARY_PATH.exists(),
                                 reason="libsegops_gpusim.so not built (no compiler)")]

# The tile and super-tile sizes of the op library's kernels (run-time
# programs come from the same compiler; every program's super-tiles have
# these rows, and programs of rows held a row per lane these tiles).
_LONG_SEGMENTS = next(record for record in _library.kernels().values() if record.tile_rows)
ROW_PER_LANE_TILE = _LONG_SEGMENTS.tile_rows
SUPER_TILE = _LONG_SEGMENTS.super_tile_rows


def _layouts(tile: int, alignment: int) -> dict[str, list[int]]:
    """Rows per segment around a program's tile size (1,024 rows for a row
    per lane, 256 for split rows; 0, programs without tiles: the former):
    short ones (a warp walks each), empty
    ones at the head, middle and tail, mid-length ones on both sides of a
    tile (walked; long), long ones covering whole tiles (tile kernels;
    aligned and not, two sharing a tile). Where long segments cover a tile
    of rows from any multiple of `alignment` < tile (split rows: half a
    tile), ones long only so."""
    tile = tile or ROW_PER_LANE_TILE
    layouts = {
        "short-and-empty": [0, 3, 31, 1, 33, 0, 64, 2, 0],
        # Windows of 4 chunks: starts at rows 96 and 127, chunks with no
        # start, a last chunk with none before empty segments.
        "window-edges": [96, 31, 1, 224, 1, 300, 0, 0],
        "around-a-tile": [tile - 1, 1, tile - 2, 2 * tile - 2, tile + 1, 3],
        "long-unaligned": [5, tile + 300, 2, 0, 2 * tile + 7, 1],
        "tile-aligned": [tile, tile, 0],
        # Ends past the start's chunk, up to the tile after the start, at N.
        "segment-ends": harness.segment_end_counts(tile),
    }
    if alignment and alignment < tile:
        # T the tile, A the alignment: A rows (walked); T rows from A, long
        # only by the span across tiles 0 and 1 (tile 0's tail, tile 1's
        # head); T + A - 2 rows from one past a multiple of A, the most a
        # walked segment holds; T + A - 1 rows from one past one, long only
        # by the span across the next tiles' boundary; T - 1 rows (walked).
        layouts["long-spans"] = [alignment, tile, 1, tile + alignment - 2, 2,
                                 tile + alignment - 1, 3, tile - 1, 1]
    return layouts


def _long_span_alignment(program: _jit.Program, level: int) -> int:
    """Where the spans of a tile of rows that long segments cover start
    (the manifest's `long_span_alignment`; 0 without long segments)."""
    long_segments = json.loads(program.entry(level).text)["gpu"].get("long_segments", {})
    return long_segments.get("long_span_alignment", 0)


# Rows of 8 features or more split over groups of G lanes: 7 runs a row per
# lane; 8 (G = 8, four rows a warp; a long segment's 8 components added
# lanes over tiles), 12 (a padded second feature; 12 components, lane by
# lane: kMaxPickedComponents), 16 and 31 (G = 16, two rows a warp; 31
# padded), 32 (a warp per row), 33 (padded), 64, 96, 192 and 256 (2, 3, 6
# and 8 features a lane; loaded in pairs of consecutive features but at 96,
# 3 a lane, where rows do not fold into whole values: gpuFeatureVectorWidth).
WIDTHS = [7, 8, 12, 16, 31, 32, 33, 64, 96, 192, 256]
# Every op that takes wide rows, at the levels its gradients reach (third
# order included): the
# reductions (one-pass programs and, for their backward, row maps), the
# contractions (a butterfly per row) and the row maps.
CASES = [("segmented_sum", 0), ("segmented_sum", 2), ("segmented_mean", 1),
         ("segmented_max", 0), ("segmented_max", 1), ("segmented_min", 1),
         ("segmented_dot", 0), ("segmented_dot", 1), ("segmented_rms_norm", 0),
         ("segmented_rms_norm", 2), ("segmented_gather", 0), ("segmented_gather", 1),
         ("segmented_mul", 1), ("segmented_sum", 3), ("segmented_dot", 3),
         ("segmented_rms_norm", 3), ("segmented_max", 3)]


@pytest.fixture(scope="module")
def simulator() -> harness.GpuSimulator:
    return harness.simulator()


def _buffers(gpu: harness.SimulatedProgram, counts: list[int], seed: int
             ) -> tuple[list[torch.Tensor], list[torch.Tensor], int, int]:
    n, s = sum(counts), len(counts)
    idx = torch.repeat_interleave(torch.arange(s), torch.tensor(counts, dtype=torch.int64))
    inputs, outputs = harness.kernel_buffers(gpu.record, idx, s, seed,
                                             harness.program_level_below(gpu.program))
    return inputs, outputs, n, s


def _tolerance(dtype: str, width: int) -> dict[str, float]:
    # The GPU adds a row's features in another order than the host (a
    # butterfly over lanes), and long segments tile by tile.
    if dtype == "f64":
        return {"rtol": 1e-10, "atol": 1e-10 * width}
    return {"rtol": 1e-4, "atol": 1e-4 * width}


def _check_against_host(simulator: harness.GpuSimulator, op: str, level: int, width: int,
                        dtype: str, layouts: dict[str, list[int]] | None = None) -> None:
    """Level `level` of `op`'s kernel for rows of `width` on the simulator
    against its host kernel, over `layouts` (default: around its tile)."""
    program = _wide.program(op, dtype, width)
    gpu = harness.SimulatedProgram(program, level, simulator)
    host = harness.host_level(program, level)
    layouts = layouts or _layouts(gpu.record.tile_rows, _long_span_alignment(program, level))
    for seed, (layout, counts) in enumerate(layouts.items()):
        inputs, simulated, n, s = _buffers(gpu, counts, seed)
        gpu.run(inputs, simulated, n, s)
        wanted = host.run(gpu.record.name, inputs, n, s)
        for index, (got, want) in enumerate(zip(simulated, wanted)):
            torch.testing.assert_close(
                got, want, **_tolerance(dtype, width),
                msg=lambda m: f"{gpu.record.name}, {layout}, output {index}: {m}")


@pytest.mark.parametrize("dtype", ["f32", "f64"])
@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("op,level", CASES, ids=[f"{op[10:]}-{level}" for op, level in CASES])
def test_split_rows_match_the_host_kernels(simulator: harness.GpuSimulator, op: str,
                                           level: int, width: int, dtype: str) -> None:
    _check_against_host(simulator, op, level, width, dtype)


# Rows of more than 8 features a lane (256 over 32 lanes) run as column
# blocks (SegmentProgram::gpuColumnBlocks): 512 features in 2 blocks of
# 256, 1,024 in 4, 256 whole. The kernels that hold rows run on C times
# the rule's grid, the others (super-tiles, pass totals, bounds) on its
# own; dot and mul's backward fold every feature into one value, so they
# run whole. Grids of 1 and 3 blocks take the column loop's other paths: a
# block running every column block (1 < C), a block idle (3 blocks, C = 2:
# one row block of 2 columns), blocks running 2 (3 blocks, C = 4).
COLUMN_CASES = [("segmented_sum", 0, True), ("segmented_mean", 1, True),
                ("segmented_max", 0, True), ("segmented_max", 1, True),
                ("segmented_min", 2, True), ("segmented_gather", 0, True),
                ("segmented_gather", 1, True), ("segmented_mul", 0, True),
                ("segmented_mul", 1, False), ("segmented_dot", 0, False)]
COLUMN_BLOCKS = {512: 2, 1024: 4, 256: 1}
# Every case at 256 and 512 features, f32 and f64; two at 1,024 (its host
# kernels compile slowly).
COLUMN_RUNS = [(*case, dtype, width) for case in COLUMN_CASES for dtype in ("f32", "f64")
               for width in (256, 512)] + [("segmented_sum", 0, True, "f32", 1024),
                                           ("segmented_gather", 0, True, "f64", 1024)]


@pytest.mark.parametrize("op,level,splits,dtype,width", COLUMN_RUNS,
                         ids=[f"{op[10:]}-{level}-{dtype}-{width}"
                              for op, level, _, dtype, width in COLUMN_RUNS])
def test_column_blocks_match_the_host_kernels(simulator: harness.GpuSimulator, op: str,
                                              level: int, splits: bool, dtype: str,
                                              width: int) -> None:
    """Against the host kernel over the layouts around a tile, then bitwise
    the same on grids of 1, 3 (in reverse) and 50 blocks."""
    blocks = COLUMN_BLOCKS[width] if splits else 1
    program = _wide.program(op, dtype, width)
    gpu_record = json.loads(program.entry(level).text)["gpu"]
    assert gpu_record["column_blocks"] == blocks
    holds_rows = {launch["kernel"].rsplit("__", 1)[-1]: launch["column_blocks"]
                  for launch in gpu_record.get("long_segments", {}).get("launches", [])}
    assert holds_rows.get("tiles", blocks) == blocks
    assert all(holds_rows.get(kind, 1) == 1 for kind in ("super_tiles", "pass_totals", "bounds"))
    if width == 256:
        return  # whole rows: test_split_rows_match_the_host_kernels (WIDTHS)
    _check_against_host(simulator, op, level, width, dtype)
    _check_bitwise_on_grids(harness.SimulatedProgram(program, level, simulator), seed=11)


# Segments walked in rounds of 128 rows from their start (walkSegmentEnd):
# ends on both sides of the first and second round's end, none covering a
# whole tile of split rows (256 rows), so none long.
WALK_ROUNDS = [127, 128, 129, 1, 255, 2, 256, 257, 3]


@pytest.mark.parametrize("dtype", ["f32", "f64"])
@pytest.mark.parametrize("width", [8, 33])
@pytest.mark.parametrize("op,level", CASES, ids=[f"{op[10:]}-{level}" for op, level in CASES])
def test_split_rows_walk_segments_in_rounds(simulator: harness.GpuSimulator, op: str,
                                            level: int, width: int, dtype: str) -> None:
    _check_against_host(simulator, op, level, width, dtype,
                        {"walk-rounds": WALK_ROUNDS,
                         "walk-sector-rounds": harness.walk_sector_counts()})


# Row maps of rows split over groups of 8 or 16 lanes take 32 rows a warp
# a step: N on both sides of a step's and a block's (256 rows) end, so the
# last step has rows past N in some groups and not others.
GROUP_STEP_LAYOUTS = {f"n{n}": [3, 0, n - 4, 1] if n > 4 else [n]
                      for n in (1, 31, 32, 33, 63, 65, 255, 257)}


@pytest.mark.parametrize("dtype", ["f32", "f64"])
@pytest.mark.parametrize("width", [8, 12, 16, 31])
@pytest.mark.parametrize("op,level", [("segmented_gather", 0), ("segmented_sum", 1),
                                      ("segmented_mul", 0), ("segmented_dot", 1)])
def test_group_row_maps_at_the_ends_of_steps(simulator: harness.GpuSimulator, op: str,
                                             level: int, width: int, dtype: str) -> None:
    _check_against_host(simulator, op, level, width, dtype, GROUP_STEP_LAYOUTS)


@pytest.mark.parametrize("width", [7, 12, 31, 33, 256])
@pytest.mark.parametrize("op,level", [("segmented_sum", 0), ("segmented_rms_norm", 1),
                                      ("segmented_max", 1), ("segmented_dot", 2),
                                      ("segmented_mul", 0)])
def test_split_rows_are_bitwise_independent_of_the_grid(simulator: harness.GpuSimulator,
                                                        op: str, level: int,
                                                        width: int) -> None:
    program = _wide.program(op, "f32", width)
    _check_bitwise_on_grids(harness.SimulatedProgram(program, level, simulator), seed=7)


def _check_bitwise_on_grids(gpu: harness.SimulatedProgram, seed: int) -> None:
    """`gpu` on short, empty and long segments (around its tile), bitwise
    the same on grids of 1, 3 (blocks in reverse) and 50 blocks as on the
    launcher's."""
    tile = gpu.record.tile_rows or ROW_PER_LANE_TILE
    counts = [5, 0, 300, 1, 40, 0, tile + 200, 2 * tile + 9, 4]
    inputs, first, n, s = _buffers(gpu, counts, seed)
    gpu.run(inputs, first, n, s)
    for grid, reverse in [(1, False), (3, True), (50, True)]:
        _, again, _, _ = _buffers(gpu, counts, seed)
        gpu.run(inputs, again, n, s, grid=grid, reverse_blocks=reverse)
        for got, want in zip(again, first):
            assert torch.equal(got, want), f"{gpu.record.name}: grid {grid} differs"



@pytest.mark.parametrize("dtype", ["f32", "f64"])
@pytest.mark.parametrize("width", [8, 64])
@pytest.mark.parametrize("op,level", [("segmented_sum", 0), ("segmented_rms_norm", 1),
                                      ("segmented_max", 1)])
def test_split_rows_in_windows_sized_by_the_grid(simulator: harness.GpuSimulator, op: str,
                                                 level: int, width: int, dtype: str) -> None:
    """The segment kernel's warps take windows of ceil(chunks / warps)
    chunks, 4 to 32: on one block, chunk counts giving 4 and 5, 32, and
    past 32 (a second window a warp). Against the host kernel, bitwise the
    same on the launcher's grid."""
    program = _wide.program(op, dtype, width)
    gpu = harness.SimulatedProgram(program, level, simulator)
    host = harness.host_level(program, level)
    record = json.loads(gpu.record.text)["gpu"]
    warps = record["block"][0] // 32
    low, high = record["window_chunks"]["min"], record["window_chunks"]["max"]
    for seed, (chunks, windows) in enumerate([(low * warps, low), (low * warps + 1, low + 1),
                                              (high * warps, high),
                                              (high * warps + 3, high)]):
        n = 32 * chunks - 5
        assert window_chunks(gpu.record, n, 1) == windows
        counts = harness.window_counts(n, windows)
        inputs, first, n, s = _buffers(gpu, counts, seed)
        gpu.run(inputs, first, n, s, grid=1)
        wanted = host.run(gpu.record.name, inputs, n, s)
        for index, (got, want) in enumerate(zip(first, wanted)):
            torch.testing.assert_close(
                got, want, **_tolerance(dtype, width),
                msg=lambda m: f"{gpu.record.name}, {chunks} chunks, output {index}: {m}")
        _, again, _, _ = _buffers(gpu, counts, seed)
        gpu.run(inputs, again, n, s)
        for got, want in zip(again, first):
            assert torch.equal(got, want), f"{gpu.record.name}: {chunks} chunks differ"


def _check_against_host_on_grids(gpu: harness.SimulatedProgram,
                                 host: harness.CompiledModule, counts: list[int], seed: int,
                                 dtype: str, width: int) -> None:
    """`gpu` on segments of `counts` rows against `host`, then bitwise the
    same on grids of 1 and 3 blocks in reverse."""
    inputs, first, n, s = _buffers(gpu, counts, seed)
    gpu.run(inputs, first, n, s)
    wanted = host.run(gpu.record.name, inputs, n, s)
    for index, (got, want) in enumerate(zip(first, wanted)):
        torch.testing.assert_close(got, want, **_tolerance(dtype, width),
                                   msg=lambda m: f"{gpu.record.name}, output {index}: {m}")
    for grid, reverse in [(1, False), (3, True)]:
        _, again, _, _ = _buffers(gpu, counts, seed)
        gpu.run(inputs, again, n, s, grid=grid, reverse_blocks=reverse)
        for got, want in zip(again, first):
            assert torch.equal(got, want), f"{gpu.record.name}: grid {grid} differs"


@pytest.mark.parametrize("dtype", ["f32", "f64"])
@pytest.mark.parametrize("width", [4, 5, 7, 8, 12, 64])
@pytest.mark.parametrize("op,level", [("segmented_sum", 0), ("segmented_rms_norm", 1),
                                      ("segmented_max", 1)])
def test_split_rows_across_super_tiles(simulator: harness.GpuSimulator, op: str,
                                       level: int, width: int, dtype: str) -> None:
    """Long segments spanning super-tiles (added from the super-tiles'
    slots, which `__super_tiles` combines from the tiles' feature by
    feature): 8 components added lanes over tiles, 12 and 64 lane by lane;
    one-pass and pass-by-pass programs. `__super_tiles` runs a warp per 4
    components: 4 one warp, 5 two (the second with one), 7 two (4 and 3),
    64 sixteen; widths 4 to 7 hold a row per lane. Against the host
    kernel, and bitwise the same on grids of 1 and 3 blocks in reverse."""
    program = _wide.program(op, dtype, width)
    assert json.loads(program.entry(0).text)["gpu"]["long_segments"][
        "super_tile_rows"] == SUPER_TILE
    gpu = harness.SimulatedProgram(program, level, simulator)
    host = harness.host_level(program, level)
    tile = gpu.record.tile_rows
    counts = [5, SUPER_TILE + 2 * tile + 9, 3, SUPER_TILE - 2 * tile, 2 * tile + 1,
              SUPER_TILE + tile - 1]
    _check_against_host_on_grids(gpu, host, counts, 3, dtype, width)


@pytest.mark.parametrize("dtype", ["f32", "f64"])
@pytest.mark.parametrize("width", [5, 64])
@pytest.mark.parametrize("op,level", [("segmented_max", 2), ("segmented_rms_norm", 3)])
def test_split_rows_across_super_tiles_at_higher_levels(simulator: harness.GpuSimulator,
                                                        op: str, level: int, width: int,
                                                        dtype: str) -> None:
    """The same layouts at the second and third derivative levels
    (pass-by-pass programs with more totals a pass): rows held a row per
    lane (5) and split over lanes (64)."""
    test_split_rows_across_super_tiles(simulator, op, level, width, dtype)


# A sum and a max of the same rows in one pass: its totals are F sums then F
# maxima, so a warp of `__super_tiles` (4 components) can hold both kinds
# (F = 3: components 0-2 and 3; F = 10, split rows: 8-9 and 10-11), each
# lane combining and shuffling as its component's kind.
_SUM_AND_MAX = """\
func.func @{name}(%x: {rows}, %idx: tensor<?xi32>, %n: index) -> {rows} {{
  %0 = seg.sum %x, %idx, %n : {rows}, tensor<?xi32> -> {rows}
  %1 = seg.max %x, %idx, %n : {rows}, tensor<?xi32> -> {rows}
  %2 = arith.addf %0, %1 : {rows}
  return %2 : {rows}
}}
"""


@pytest.mark.parametrize("dtype", ["f32", "f64"])
@pytest.mark.parametrize("width", [3, 10])
def test_super_tiles_of_a_pass_that_sums_and_takes_maxima(simulator: harness.GpuSimulator,
                                                          width: int, dtype: str) -> None:
    """Long segments across super-tiles of a program whose one pass sums and
    takes maxima: against the host kernel, and bitwise the same on grids of
    1 and 3 blocks in reverse."""
    name = f"sum_and_max_{dtype}_w{width}"
    source = _SUM_AND_MAX.format(name=name, rows=f"tensor<?x{width}x{dtype}>")
    program = _jit.Program(name, source, idx_position=1, label=name)
    record = json.loads(program.entry(0).text)
    assert record["passes"] == 1
    assert record["host"]["split"]["combine"] == ["add"] * width + ["max"] * width
    gpu = harness.SimulatedProgram(program, 0, simulator)
    host = harness.host_level(program, 0)
    tile = gpu.record.tile_rows
    counts = [5, SUPER_TILE + 2 * tile + 9, 3, SUPER_TILE - 2 * tile, 2 * tile + 1,
              SUPER_TILE + tile - 1]
    _check_against_host_on_grids(gpu, host, counts, 4, dtype, width)


@pytest.mark.parametrize("dtype", ["f32", "f64"])
@pytest.mark.parametrize("width", [8, 64])
@pytest.mark.parametrize("op,level", [("segmented_sum", 0), ("segmented_rms_norm", 1),
                                      ("segmented_max", 1)])
def test_split_rows_long_only_across_a_super_tile_boundary(
        simulator: harness.GpuSimulator, op: str, level: int, width: int,
        dtype: str) -> None:
    """A segment of a tile of rows from half a tile before a super-tile's
    end (long only by the span across that boundary, which `__super_tiles`
    must see to combine the slots it is added from: the first super-tile's
    tail and the second's head), beside one of a tile less a row from a
    tile's middle (walked). Against the host kernel, and bitwise the same
    on grids of 1 and 3 blocks in reverse."""
    program = _wide.program(op, dtype, width)
    gpu = harness.SimulatedProgram(program, level, simulator)
    host = harness.host_level(program, level)
    tile = gpu.record.tile_rows
    alignment = _long_span_alignment(program, level)
    assert alignment == tile // 2
    counts = [SUPER_TILE - alignment, tile, 2, tile - 1, 5]
    _check_against_host_on_grids(gpu, host, counts, 5, dtype, width)


@pytest.mark.parametrize("op,level,width", [("segmented_sum", 0, 16), ("segmented_max", 1, 8),
                                            ("segmented_rms_norm", 1, 33),
                                            ("segmented_dot", 1, 64),
                                            ("segmented_gather", 0, 12)])
def test_split_rows_of_invalid_segments(simulator: harness.GpuSimulator, op: str, level: int,
                                        width: int) -> None:
    """idx of -1 on the first rows and S on the last, around short valid
    segments: split rows walk no segment that ends in its chunk (its end is
    the chunk's next start, or N), and the invalid ones are neither long
    nor written but for zero row outputs. Against the host kernel on the
    valid rows."""
    program = _wide.program(op, "f64", width)
    gpu = harness.SimulatedProgram(program, level, simulator)
    host = harness.host_level(program, level)

    def run_host(inputs, outputs, n, s):
        for output, result in zip(outputs, host.run(gpu.record.name, inputs, n, s)):
            output.copy_(result)

    harness.check_invalid_segments_at_the_ends(
        [(b.role, b.dtype, b.shape) for b in gpu.record.buffers], gpu.run, run_host,
        _tolerance("f64", width))


# (op, width, f32's lanes and vector, f64's lanes and vector, f32's rows a
# block of the grid).
@pytest.mark.parametrize("op,width,f32_rule,f64_rule,per_block", [
    ("segmented_sum", 7, (0, 1), (0, 1), 1024), ("segmented_sum", 8, (8, 1), (8, 1), 1024),
    ("segmented_sum", 15, (8, 1), (8, 1), 1024), ("segmented_sum", 16, (8, 2), (16, 1), 1024),
    ("segmented_max", 16, (8, 2), (16, 1), 1024), ("segmented_sum", 24, (16, 1), (16, 1), 1024),
    ("segmented_dot", 16, (16, 1), (16, 1), 1024), ("segmented_dot", 31, (16, 1), (16, 1), 1024),
    ("segmented_sum", 32, (16, 2), (32, 1), 1024), ("segmented_sum", 48, (32, 1), (32, 1), 1024),
    ("segmented_rms_norm", 32, (32, 1), (32, 1), 1024),
    ("segmented_sum", 96, (32, 1), (32, 1), 1024), ("segmented_sum", 128, (32, 2), (32, 2), 1024),
    ("segmented_dot", 256, (32, 1), (32, 1), 1024),
    ("segmented_rms_norm", 256, (32, 1), (32, 1), 1024),
    ("segmented_max", 256, (32, 2), (32, 2), 1024),
    ("segmented_gather", 7, (0, 1), (0, 1), 512), ("segmented_gather", 8, (8, 1), (8, 1), 256),
    ("segmented_gather", 31, (16, 1), (16, 1), 256),
    ("segmented_gather", 32, (16, 2), (32, 1), 256),
    ("segmented_gather", 64, (32, 2), (32, 2), 32)])
def test_the_manifest_records_the_rule(op: str, width: int, f32_rule: tuple[int, int],
                                       f64_rule: tuple[int, int], per_block: int) -> None:
    """How many lanes share a row, from how wide, and how many consecutive
    features a lane loads at once: 2 where the row is whole pairs over its
    lanes and no op folds it into a whole value, as dot's and rms_norm's
    reductions do, else 1. Rows of exactly 16 or 32 features (one a lane)
    take half the lanes in pairs where a pair is 8 bytes at most (f32; f64
    keeps a feature a lane). Row maps take 4 rows a
    thread, or split over 32 lanes a warp, so their grid has a block per
    1,024 rows (32 split rows); striped rows of odd widths 2 a thread (7
    features of f32: 512 rows; test_striped_rows.py), and rows split over
    groups of 8 or 16 lanes
    32 a warp (256 a block); segment kernels take a window of 4 chunks a
    warp, 1,024 rows a block, up to 2,048 blocks (then windows of up to 32
    chunks)."""
    gpu = json.loads(_wide.program(op, "f32", width).entry(0).text)["gpu"]
    assert gpu["feature_lanes_from"] == 8
    assert (gpu["feature_lanes"], gpu["feature_vector_width"]) == f32_rule
    f64 = json.loads(_wide.program(op, "f64", width).entry(0).text)["gpu"]
    assert (f64["feature_lanes"], f64["feature_vector_width"]) == f64_rule
    assert gpu["grid"]["per_block"] == per_block
    if op == "segmented_gather":
        assert "max" not in gpu["grid"] and "window_chunks" not in gpu
    else:
        assert gpu["grid"]["max"] == 2048
        assert gpu["window_chunks"] == {"min": 4, "max": 32}


@pytest.mark.parametrize("op,width,tile,super_tile_warps", [
    ("segmented_sum", 7, ROW_PER_LANE_TILE, 2), ("segmented_sum", 8, 256, 2),
    ("segmented_max", 64, 256, 16), ("segmented_rms_norm", 256, 256, 1),
    ("segmented_dot", 3, ROW_PER_LANE_TILE, 1)])
def test_split_rows_take_smaller_tiles(op: str, width: int, tile: int,
                                       super_tile_warps: int) -> None:
    """Split rows (a warp runs 1 to 4 of them at a time) take tiles of 256
    rows, rows held a row per lane of 1,024; super-tiles keep their rows,
    so a split row's super-tile has 128 tiles. Every launch's warp takes a
    tile, or a share of a super-tile: `__super_tiles` runs a warp per 4
    components of the totals (7 and 8 components: 2 warps; 64: 16; the
    one total of rms_norm and dot: 1)."""
    long_segments = json.loads(_wide.program(op, "f32", width).entry(0).text)["gpu"][
        "long_segments"]
    assert long_segments["tile_rows"] == tile
    # Long segments cover a tile of rows from a multiple of half a tile
    # (split rows) or of a tile.
    assert long_segments["long_span_alignment"] == (
        tile if tile == ROW_PER_LANE_TILE else tile // 2)
    assert long_segments["super_tile_rows"] == SUPER_TILE
    for launch in long_segments["launches"]:
        super_tiles = launch["kernel"].endswith("__super_tiles")
        assert launch["rows_per_unit"] == (SUPER_TILE if super_tiles else tile), launch
        assert launch["warps_per_unit"] == (super_tile_warps if super_tiles else 1), launch
        assert launch["min_rows"] == (SUPER_TILE + 1 if super_tiles else tile)


# Garbage indices over several super-tiles, every buffer against a guard
# page (a subprocess: an access outside dies with SIGSEGV).
_GUARDED_PROBE = textwrap.dedent('''
    import json, sys
    import torch
    from guard_pages import kernel_buffers
    import harness
    from segops import _wide

    simulator = harness.simulator()
    generator = torch.Generator().manual_seed(5)
    programs, cases = json.loads(sys.argv[1])
    for op, width, level in programs:
        program = _wide.program(op, "f32", width)
        gpu = harness.SimulatedProgram(program, level, simulator)
        kernel = json.loads(program.entry(level).text)
        for n, s, order in cases:
            for side in ("after", "before"):
                values = torch.sort(torch.randint(-1, s + 1, (n,), generator=generator)).values
                if order == "perturbed":
                    rows = torch.randint(0, n, (n // 100,), generator=generator)
                    values[rows] = torch.randint(-3, s + 4, (len(rows),), generator=generator)
                inputs, outputs = kernel_buffers(kernel, n, s, side, values, generator)
                gpu.run(inputs, outputs, n, s)
    print("ok")
''')


def test_split_row_tile_kernels_stay_inside_their_buffers_and_converge() -> None:
    """Split rows' smaller tiles (128 to a super-tile, four a lane in
    `__super_tiles`) on sorted indices holding values out of range (-1 and
    S: invalid segments longer than a super-tile) and on sorted ones with
    a few rows overwritten: no access outside a buffer, no deadlock."""
    programs = [("segmented_sum", 64, 0), ("segmented_max", 12, 1),
                ("segmented_rms_norm", 33, 1)]
    cases = [(3 * SUPER_TILE + 300, 1, "sorted"), (3 * SUPER_TILE + 300, 2, "perturbed")]
    result = subprocess.run(
        [sys.executable, "-c", _GUARDED_PROBE, json.dumps([programs, cases])],
        capture_output=True, text=True, timeout=900, cwd=Path(__file__).parent)
    assert result.returncode == 0 and result.stdout.strip() == "ok", (
        f"exit {result.returncode} (a negative code is the signal: -11 is SIGSEGV)\n"
        f"{result.stdout[-2000:]}\n{result.stderr[-4000:]}")
