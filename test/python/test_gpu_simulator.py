"""The op library's GPU kernels, run on the CPU by the SIMT simulator
(segops/_gpusim.py): every kernel against its host kernel over layouts that
stress warp, chunk, block and tile boundaries; results bitwise independent
of the grid and of the order blocks run in; no access outside a buffer and
no divergent collective, whatever idx holds; the op tests through the GPU
kernels. Skipped where the simulator library was not built (a build
without the compiler)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import harness
import pytest
import torch
from guard_pages import extent

from bench.gpu_model import window_chunks
from segops import _gpusim as gpusim
from segops import _library
from segops._dtypes import MANIFEST_DTYPES

pytestmark = [pytest.mark.simulator,
              pytest.mark.skipif(not gpusim.LIBRARY_PATH.exists(),
                                 reason="libsegops_gpusim.so not built (no compiler)")]

MANIFEST = json.loads((Path(_library.NATIVE_DIR) / "manifest.json").read_text())
KERNELS = [entry["name"] for entry in MANIFEST["kernels"]]

# Rows per segment. Warps own 32-row chunks and blocks 256 rows: segments
# start and end on both sides of those boundaries; empty segments at the
# head, middle and tail; one segment longer than a block. One-pass programs
# reduce segments covering a whole 1024-row tile from their tiles' partials:
# long segments starting on and off tile boundaries, ending on one, two
# long segments sharing a tile, and short ones around them.
LONG_SEGMENTS = next(entry["gpu"]["long_segments"] for entry in MANIFEST["kernels"]
                     if "long_segments" in entry.get("gpu", {}))
TILE = LONG_SEGMENTS["tile_rows"]
WINDOW_EDGES = [96, 31, 1, 224, 1, 300, 0, 0]
# Tails a rows before a chunk's end, ending e rows into the next: packed
# where e <= 3a (rows read segment values) or e < 32 (one-pass programs
# reading none: gpu.packed_tail_from_next_chunk), on both sides of each.
PACKED_TAILS = harness.packed_tail_counts(
    [(2, 6), (2, 7), (1, 3), (1, 4), (32, 31), (32, 32), (5, 40), (13, 18), (20, 12),
     (1, 31), (1, 32), (2, 30), (2, 31), (3, 5)])
PACKED_TAILS.insert(1, 0)  # an empty segment before the first tail
LAYOUTS = {
    "empty-rows": [0, 0, 0],
    "no-segments": [],
    "one-row": [1],
    "gaps": [0, 3, 0, 0, 5, 1, 0],
    "singletons": [1] * 40,
    "chunk-edges": [31, 1, 33, 64, 2, 0, 97],
    "long-and-short": [1, 600, 2, 0, 3],
    "one-long": [3 * TILE + 5],
    "tile-aligned": [TILE, 2 * TILE, 1, 0],
    "long-unaligned": [700, 3000, 1, 2 * TILE + 77, 0, TILE + 6],
    "longs-sharing-a-tile": [1500, 1600, 2],
    "short-across-tiles": [TILE - 3, 2 * TILE - 1, 5],
    "exact-tiles": [TILE, TILE],
    # Segments that start and end in one 32-row chunk run packed, a lane per
    # row; one row longer, or crossing a chunk's end, they are walked.
    "packed-threshold": [32, 32, 31, 2, 29, 1, 1, 0, 1, 33, 32, 5, 27, 1],
    # A segment neither packed nor long finds its end in rounds of 128 rows
    # (4 chunks a lane, then ballots): ending on both sides of the first
    # round's end and of the second's.
    "walk-rounds": [127, 128, 129, 1, 255, 256, 257, 3],
    # A walk's rounds start at the start's sector of idx (8 rows): ends on
    # both sides of the first round's end from starts 1, 5 and 7 rows in.
    "walk-sector-rounds": harness.walk_sector_counts(),
    # A segment running from a rows before a chunk's end to row e of the
    # next (the chunk's tail) runs packed where e <= 3a (4 rows a lane of
    # its a lanes), else it is walked: both sides at a = 1 and 2; a whole
    # chunk ending 31 and 32 rows into the next; one ending past the next
    # chunk; longer tails (a filler between two is one); an empty segment
    # before a tail; one ending at N.
    "packed-tails": PACKED_TAILS,
    # Warps take windows of 4 chunks and run only the chunks where a segment
    # starts or the last row is: starts on a window's fourth chunk (row 96)
    # and last row (127), segments covering chunks with no start, a last
    # chunk with no start before empty segments, a partial last window.
    "window-edges": WINDOW_EDGES,
    # Segments that do not end in their chunk and are not long, ending at
    # every distance up to the last row of the tile after their start, and
    # at N.
    "segment-ends": harness.segment_end_counts(TILE),
    "ending-at-n": [10, 100],
}


@pytest.fixture(scope="module")
def simulator() -> harness.GpuSimulator:
    return harness.simulator()


def _entry(name: str) -> dict:
    return next(entry for entry in MANIFEST["kernels"] if entry["name"] == name)


def _buffers(name: str, counts: list[int], seed: int) -> tuple[list[torch.Tensor],
                                                                 list[torch.Tensor], int, int]:
    entry = _entry(name)
    dtype = MANIFEST_DTYPES[entry["dtype"]]
    generator = torch.Generator().manual_seed(seed)
    n, s = sum(counts), len(counts)
    idx = torch.repeat_interleave(torch.arange(s), torch.tensor(counts, dtype=torch.int64))
    inputs, outputs = [], []
    for buffer in entry["buffers"]:
        shape = [extent(e, n, s) for e in buffer["shape"]]
        if buffer["dtype"] == "i32":
            inputs.append(idx.to(torch.int32))
        elif buffer["role"] == "output":
            outputs.append(torch.full(shape, float("nan"), dtype=dtype))
        else:
            inputs.append(torch.randn(shape, dtype=dtype, generator=generator))
    return harness.with_saved_results(_library.kernel(name), inputs, n, s), outputs, n, s


def _tolerance(name: str) -> dict[str, float]:
    if _entry(name)["dtype"] == "f64":
        return {"rtol": 1e-9, "atol": 1e-9}
    return {"rtol": 2e-4, "atol": 2e-4}


def _check_against_host(simulator: harness.GpuSimulator, name: str, counts: list[int],
                        seed: int, label: str) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
    """Runs kernel `name` on the simulator and its host kernel on the same
    inputs, checks their outputs agree, and returns the inputs and the
    simulated outputs."""
    inputs, simulated, n, s = _buffers(name, counts, seed)
    _, host, _, _ = _buffers(name, counts, seed)
    simulator.run(name, inputs, simulated, n, s)
    harness.run(name, inputs, host, n, s)
    for index, (got, want) in enumerate(zip(simulated, host)):
        torch.testing.assert_close(got, want, **_tolerance(name),
                                   msg=lambda m: f"{name}, {label}, output {index}: {m}")
    return inputs, simulated


@pytest.mark.parametrize("name", KERNELS)
def test_gpu_kernel_matches_host_kernel(simulator: harness.GpuSimulator, name: str) -> None:
    for seed, (layout, counts) in enumerate(LAYOUTS.items()):
        _check_against_host(simulator, name, counts, seed, layout)


# One kernel of each kind of long-segment launches: one-pass programs (sum;
# max, combining by max; mul and matvec backward, storing rows in
# `__tiles`), pass-by-pass ones (rms_norm and dot backward; max and min
# backward, whose totals combine by max and min, masked ones as -inf and
# +inf), in f32 and f64, at widths 1 and 3.
ONE_PASS_ROW_OUTPUT_KERNELS = ["segmented_mul_f32_w1_grad", "segmented_matvec_f64_w3_grad"]
LONG_SEGMENT_KERNELS = ["segmented_sum_f32_w1", "segmented_sum_f64_w3",
                        "segmented_rms_norm_f32_w3_grad", "segmented_dot_f64_w3_grad_grad",
                        "segmented_max_f32_w1", "segmented_min_f64_w3_grad",
                        "segmented_max_f32_w3_grad_grad_grad", *ONE_PASS_ROW_OUTPUT_KERNELS]

# A segment within one super-tile is added from its tiles' slots, one
# spanning several from the super-tiles' (`__super_tiles`, run from more
# than one super-tile of rows).
SUPER = LONG_SEGMENTS["super_tile_rows"]
assert SUPER % TILE == 0
SUPER_TILE_LAYOUTS = {
    # From inside a tile of super-tile 0 to inside super-tile 2.
    "across-two-boundaries": [5, 2 * SUPER + 17, 3],
    # Starting on a super-tile's first row (its head slot); exactly one
    # super-tile (within one: tile slots), then one past it.
    "super-aligned": [SUPER, SUPER, SUPER + 1, 2],
    # Starting on a tile's first row inside a super-tile (the super-tile's
    # tail slot from the tile's head slot), ending on a super-tile's end.
    "tile-aligned-start": [SUPER - 2 * TILE, 2 * TILE + SUPER, 0, 7],
    # Two long segments sharing a super-tile (its head and tail), a short
    # one between, and one starting in the last tile of a super-tile.
    "sharing-a-super-tile": [SUPER + 3 * TILE + 11, 40, SUPER - 100, TILE + 300, 9],
    # Short segments across a super-tile boundary, a long one after.
    "short-across-boundary": [SUPER - 10, 20, 500, SUPER + TILE, 1],
}


@pytest.mark.slow
@pytest.mark.parametrize("name", LONG_SEGMENT_KERNELS)
def test_segment_of_more_tiles_than_one_step_adds(simulator: harness.GpuSimulator,
                                                  name: str) -> None:
    """A long segment's slots are combined 128 (32 lanes x 4) per step: a
    segment of 130 tiles spans 5 super-tiles (one step of super-tile
    slots); one of 130 super-tiles takes two steps, the second partly
    masked."""
    for counts in ([5, 130 * TILE + 17, 3], [5, 130 * SUPER + 17, 3]):
        _check_against_host(simulator, name, counts, 11, f"{sum(counts)} rows")


@pytest.mark.slow
@pytest.mark.parametrize("name", [k for k in KERNELS
                                  if "long_segments" in _entry(k).get("gpu", {})])
def test_every_segment_kernel_across_a_super_tile(simulator: harness.GpuSimulator,
                                                  name: str) -> None:
    """Every op, dtype and derivative level with long-segment kernels: one
    long segment from inside a tile of super-tile 0 into super-tile 1 (its
    super-tiles' slots), a short one, and one within super-tile 1 (its
    tiles' slots), against the host kernel."""
    _check_against_host(simulator, name, [5, SUPER + 3 * TILE + 17, 3, 2 * TILE + 9, 1],
                        13, "across a super-tile")


@pytest.mark.parametrize("name", LONG_SEGMENT_KERNELS)
def test_segments_across_super_tiles(simulator: harness.GpuSimulator, name: str) -> None:
    """Long segments spanning super-tiles from every kind of start and end,
    against the host kernel, and bitwise the same on grids of 1 and 3
    blocks run in reverse."""
    for seed, (layout, counts) in enumerate(SUPER_TILE_LAYOUTS.items()):
        inputs, simulated = _check_against_host(simulator, name, counts, seed, layout)
        n, s = sum(counts), len(counts)
        for grid, reverse in [(1, False), (3, True)]:
            _, again, _, _ = _buffers(name, counts, seed)
            simulator.run(name, inputs, again, n, s, grid=grid, reverse_blocks=reverse)
            for got, want in zip(again, simulated):
                assert torch.equal(got.nan_to_num(7.0), want.nan_to_num(7.0)), (
                    f"{name}, {layout}: grid {grid} differs from the default grid")


@pytest.mark.parametrize("name", ["segmented_max_f32_w1", "segmented_min_f64_w3",
                                  "segmented_max_f32_w1_grad", "segmented_min_f64_w3_grad"])
def test_nan_in_one_tile_of_a_long_segment_wins(simulator: harness.GpuSimulator,
                                                 name: str) -> None:
    """max and min over tiles: a NaN in one tile of a long segment makes its
    result NaN (its gradient too), as the host kernel's and torch.amax's;
    the segments around it are untouched."""
    counts = [3, 3 * TILE + 5, 2]
    inputs, simulated, n, s = _buffers(name, counts, 5)
    inputs[0][3 + TILE + 100] = float("nan")
    # The gradient's saved extremum is the forward's on these rows.
    inputs = harness.with_saved_results(_library.kernel(name), inputs, n, s)
    _, host, _, _ = _buffers(name, counts, 5)
    simulator.run(name, inputs, simulated, n, s)
    harness.run(name, inputs, host, n, s)
    assert simulated[0].isnan().any()
    for got, want in zip(simulated, host):
        torch.testing.assert_close(got, want, equal_nan=True, **_tolerance(name))


@pytest.mark.parametrize("name", ["segmented_sum_f32_w1", "segmented_max_f64_w3",
                                  "segmented_mean_f64_w1", "segmented_rms_norm_f32_w3_grad",
                                  "segmented_dot_f32_w3_grad", "segmented_min_f32_w1_grad"])
def test_chunks_with_an_invalid_segment_run_their_starts_one_at_a_time(
        simulator: harness.GpuSimulator, name: str) -> None:
    """idx holding -1 on its first rows and S on its last (sorted; segments
    outside [0, S)): the chunks holding them pack nothing, so their valid
    short segments run one at a time, each ending at the chunk's next start
    (or at N) without a walk, and one crossing into the next chunk is
    walked. Against the host kernel on the valid rows alone; the invalid
    rows' row outputs are zero."""
    harness.check_invalid_segments_at_the_ends(
        [(b["role"], b["dtype"], b["shape"]) for b in _entry(name)["buffers"]],
        lambda inputs, outputs, n, s: simulator.run(name, inputs, outputs, n, s),
        lambda inputs, outputs, n, s: harness.run(name, inputs, outputs, n, s),
        _tolerance(name))


@pytest.mark.parametrize("name", [*ONE_PASS_ROW_OUTPUT_KERNELS, "segmented_mul_f64_w3_grad_grad",
                                  "segmented_rms_norm_f32_w1_grad", "segmented_mean_f64_w1_grad"])
def test_long_invalid_segments_get_zero_rows(simulator: harness.GpuSimulator,
                                             name: str) -> None:
    """idx holding -1 on its first 2,500 rows and S on its last 2,100
    (invalid segments covering whole tiles) around valid segments, one of
    them long: rows of the invalid ones get zero row outputs, from `__tiles`
    in one-pass programs that store rows (mul's and matvec's backward, mul's
    second derivative: no `__bounds`), from pass 0's `__tiles` in
    pass-by-pass ones (rms_norm's backward; mean's, whose rows read the row
    count). Against the host kernel on the valid rows alone."""
    counts, head, tail = [5, 3 * TILE + 40, 7, 2, 300, 1], 2500, 2100
    launches = [kernel for kernel, _ in _library.kernels()[name].gpu_launches(
        head + sum(counts) + tail, len(counts))]
    one_pass = name in ONE_PASS_ROW_OUTPUT_KERNELS or name.startswith("segmented_mul_")
    assert (f"{name}__bounds" not in launches) == one_pass and f"{name}__tiles" in launches
    harness.check_invalid_segments_at_the_ends(
        [(b["role"], b["dtype"], b["shape"]) for b in _entry(name)["buffers"]],
        lambda inputs, outputs, n, s: simulator.run(name, inputs, outputs, n, s),
        lambda inputs, outputs, n, s: harness.run(name, inputs, outputs, n, s),
        _tolerance(name), counts=counts, head=head, tail=tail)


# Row maps (programs that only map rows): each thread takes 4 rows of its
# block's tile (rows t, t + 256, t + 512, t + 768 of 1,024 at 256 threads),
# their idx loaded first.
ROW_MAPS = [entry["name"] for entry in MANIFEST["kernels"]
            if "gpu" in entry and "window_chunks" not in entry["gpu"]]


@pytest.mark.parametrize("name", ROW_MAPS)
def test_row_map_threads_take_four_rows_of_a_tile(simulator: harness.GpuSimulator,
                                                  name: str) -> None:
    """Row counts on both sides of a block's tile and of each quarter of it
    (a thread's second to fourth rows in range or not), and several tiles
    per block on a small grid: against the host kernel, bitwise the same
    across grids; segments of 1 to 9 rows with empty ones between. Striped
    row maps (3-vector rows a warp at a time) take 2 rows a thread, or 1."""
    tile = _entry(name)["gpu"]["grid"]["per_block"]
    block = _entry(name)["gpu"]["block"][0]
    assert tile in (block, 2 * block, 4 * block), "a thread per 1, 2 or 4 rows"
    for n in (block - 1, block + 1, 2 * block, 3 * block + 1, tile - 1, tile, tile + 1,
              3 * tile + 3 * block + 5):
        counts = []
        while sum(counts) < n:
            counts.append(min(len(counts) % 10, n - sum(counts)))
        inputs, first = _check_against_host(simulator, name, counts, n, f"{n} rows")
        for grid, reverse in [(1, False), (2, True)]:
            _, again, _, _ = _buffers(name, counts, n)
            simulator.run(name, inputs, again, n, len(counts), grid=grid,
                          reverse_blocks=reverse)
            for got, want in zip(again, first):
                assert torch.equal(got, want), f"{name}, {n} rows: grid {grid} differs"


@pytest.mark.parametrize("name", [k for k in KERNELS if "_grad" not in k or k.endswith("w3")])
def test_gpu_kernel_is_bitwise_independent_of_grid(simulator: harness.GpuSimulator,
                                                   name: str) -> None:
    counts = [*PACKED_TAILS, 5, 0, 300, 1, 40, 0, 257, 3, 2 * TILE + 9, 4]
    inputs, first, n, s = _buffers(name, counts, 7)
    simulator.run(name, inputs, first, n, s)
    for grid, reverse in [(1, False), (3, True), (simulator.grid_for(name, n) + 2, True)]:
        _, again, _, _ = _buffers(name, counts, 7)
        simulator.run(name, inputs, again, n, s, grid=grid, reverse_blocks=reverse)
        for got, want in zip(again, first):
            assert torch.equal(got.nan_to_num(7.0), want.nan_to_num(7.0)), (
                f"{name}: grid {grid} (reverse {reverse}) differs from the default grid")


# Segment kernels' windows: ceil(chunks / warps of the grid) chunks, within
# the manifest's bounds. Every op at width 1 and at every derivative level,
# in f32 and f64 (a vec3 sum and max besides).
WINDOW_KERNELS = [k for k in KERNELS if "window_chunks" in _entry(k).get("gpu", {})
                  and (k.split("_grad")[0].endswith("_w1")
                       or k in ("segmented_sum_f32_w3", "segmented_max_f64_w3_grad"))]


def _window_chunks(name: str, num_rows: int, grid: int) -> int:
    # The manifest's rule, as the performance model reads it.
    return window_chunks(_library.kernel(name), num_rows, grid)


@pytest.mark.parametrize("name", WINDOW_KERNELS)
def test_windows_sized_by_the_grid(simulator: harness.GpuSimulator, name: str) -> None:
    """On one block (8 warps): chunk counts that give windows of the fewest
    chunks (4, and 5 just past), of 25, of the most (32), and past it (a
    warp then takes a second window, grid-stride); segments of 0 to 70 rows
    starting on every lane of a window, and one covering more than a
    window (whole windows without work). Against the host kernel, and
    bitwise the same on the launcher's grid, on 2 blocks in reverse and on
    1 block."""
    gpu = _entry(name)["gpu"]
    block_warps = gpu["block"][0] // 32
    low, high = gpu["window_chunks"]["min"], gpu["window_chunks"]["max"]
    cases = {low * block_warps: low, low * block_warps + 1: low + 1,
             25 * block_warps: 25, high * block_warps: high, high * block_warps + 3: high}
    for seed, (chunks, windows) in enumerate(cases.items()):
        n = 32 * chunks - 5  # a partial last chunk
        assert _window_chunks(name, n, 1) == windows
        counts = harness.window_counts(n, windows)
        inputs, first = _check_against_host(simulator, name, counts, seed,
                                            f"{chunks} chunks")
        for grid, reverse in [(None, False), (2, True), (1, False)]:
            _, again, _, _ = _buffers(name, counts, seed)
            simulator.run(name, inputs, again, n, len(counts), grid=grid,
                          reverse_blocks=reverse)
            for got, want in zip(again, first):
                assert torch.equal(got.nan_to_num(7.0), want.nan_to_num(7.0)), (
                    f"{name}, {chunks} chunks: grid {grid} differs from 1 block")


def test_the_segment_kernel_grid_is_capped_and_windows_grow(
        simulator: harness.GpuSimulator) -> None:
    """Where segments hold 1,024 rows or more on average, the launcher's
    grid for a segment kernel grows with N up to the manifest's `max`
    blocks; past it, windows grow, up to 32 chunks (then warps take
    several). Shorter segments on average: a block per 1,024 rows."""
    name = "segmented_sum_f32_w1"
    gpu = _entry(name)["gpu"]
    per_block, cap = gpu["grid"]["per_block"], gpu["grid"]["max"]
    mean = gpu["grid"]["max_from_mean_segment_rows"]
    assert (cap * gpu["block"][0] // 32, mean) == (16384, 1024)
    n = per_block * cap
    for segments in (1, n // mean):
        assert simulator.grid_for(name, n, segments) == cap
        assert _window_chunks(name, n, cap) == gpu["window_chunks"]["min"]
        assert simulator.grid_for(name, n + 1, segments) == cap
        assert _window_chunks(name, n + 1, cap) == gpu["window_chunks"]["min"] + 1
    assert simulator.grid_for(name, n + 1, n // mean + 1) == cap + 1
    assert simulator.grid_for(name, 10**7, 10**7 // 1000) == -(-10**7 // per_block)
    assert simulator.grid_for(name, 10**7, 1) == cap
    assert _window_chunks(name, 10**7, cap) == 20
    assert _window_chunks(name, 10**9, cap) == gpu["window_chunks"]["max"]
    # Row maps are not capped (a thread per 4 rows).
    row_map = ROW_MAPS[0]
    assert "max" not in _entry(row_map)["gpu"]["grid"]
    assert simulator.grid_for(row_map, 10**7) == \
        -(-10**7 // _entry(row_map)["gpu"]["grid"]["per_block"])


PROBE = textwrap.dedent('''
    import json, sys
    import torch
    from segops import _library
    from guard_pages import kernel_buffers
    import harness

    simulator = harness.simulator()
    generator = torch.Generator().manual_seed(int(sys.argv[1]))
    manifest = json.loads((_library.NATIVE_DIR / "manifest.json").read_text())
    # Random values are unsorted almost everywhere (a segment start at every
    # row: slow to simulate), so long indices are sorted, with a few rows
    # overwritten; all hold values out of range too (below 0 and at or above
    # S), and the long ones few values, so that segments valid and invalid
    # cover whole 1024-row tiles (one-pass programs' tile kernels).
    cases = [(0, 3, "random"), (1, 1, "random"), (5, 0, "random"), (33, 2, "random"),
             (300, 20, "random"), (300, 20, "sorted"), (6000, 1, "sorted"),
             (6000, 2, "perturbed")]
    kernels = manifest["kernels"]
    if len(sys.argv) > 2:  # these kernels and cases only
        names, cases = json.loads(sys.argv[2])
        kernels = [kernel for kernel in kernels if kernel["name"] in names]
    for kernel in kernels:
        for n, s, order in cases:
            for side in ("after", "before"):
                spread = 3 if n < 1000 else 1
                values = torch.randint(-spread, s + spread, (n,), generator=generator)
                if order != "random":
                    values = torch.sort(values).values
                if order == "perturbed":
                    rows = torch.randint(0, n, (n // 100,), generator=generator)
                    values[rows] = torch.randint(-3, s + 4, (len(rows),),
                                                 generator=generator)
                inputs, outputs = kernel_buffers(kernel, n, s, side, values, generator)
                simulator.run(kernel["name"], inputs, outputs, n, s)
    print("ok")
''')


@pytest.mark.slow
def test_gpu_kernels_stay_inside_their_buffers_and_converge() -> None:
    """Garbage indices (unsorted, negative, beyond S): no access outside a
    buffer (guard pages), and no deadlock or malformed collective (the
    simulator raises on those)."""
    result = subprocess.run([sys.executable, "-c", PROBE, "0"], capture_output=True,
                            text=True, timeout=900, cwd=Path(__file__).parent)
    assert result.returncode == 0 and result.stdout.strip() == "ok", (
        f"exit {result.returncode} (a negative code is the signal: -11 is SIGSEGV)\n"
        f"{result.stdout[-2000:]}\n{result.stderr[-4000:]}")


def test_super_tile_kernels_stay_inside_their_buffers_and_converge() -> None:
    """The same over more than one super-tile of rows (`__super_tiles` runs):
    sorted indices with values out of range, and sorted ones with a few rows
    overwritten, for one kernel of each kind of long-segment launches."""
    # Values from -1 to S: segments, valid and not, of more than a super-tile.
    cases = [(4 * SUPER + 500, 1, "sorted"), (4 * SUPER + 500, 1, "perturbed"),
             (4 * SUPER + 500, 2, "perturbed")]
    result = subprocess.run(
        [sys.executable, "-c", PROBE, "1", json.dumps([LONG_SEGMENT_KERNELS, cases])],
        capture_output=True, text=True, timeout=900, cwd=Path(__file__).parent)
    assert result.returncode == 0 and result.stdout.strip() == "ok", (
        f"exit {result.returncode} (a negative code is the signal: -11 is SIGSEGV)\n"
        f"{result.stdout[-2000:]}\n{result.stderr[-4000:]}")


# The simulator itself, on hand-written kernels: PTX shuffle and ballot
# semantics, block barriers, and the errors for divergent collectives.
SIMULATOR_KERNELS = """
module attributes {gpu.container_module} {
  gpu.module @kernels {
    // out[t, m] = shuffle of t with offset 5 in mode m (xor, up, down, idx),
    // out[t, 4 + m] = its valid flag; out[t, 8] = ballot(t % 3 == 0).
    gpu.func @modes(%out: !llvm.ptr, %n: i64, %s: i64) kernel {
      %tid = gpu.thread_id x
      %t = arith.index_cast %tid : index to i32
      %t64 = arith.index_cast %tid : index to i64
      %c5 = arith.constant 5 : i32
      %c32 = arith.constant 32 : i32
      %c9 = arith.constant 9 : i64
      %row = arith.muli %t64, %c9 : i64
      %x, %xv = gpu.shuffle xor %t, %c5, %c32 : i32
      %u, %uv = gpu.shuffle up %t, %c5, %c32 : i32
      %d, %dv = gpu.shuffle down %t, %c5, %c32 : i32
      %i, %iv = gpu.shuffle idx %t, %c5, %c32 : i32
      %c3 = arith.constant 3 : i32
      %c0 = arith.constant 0 : i32
      %rem = arith.remui %t, %c3 : i32
      %pred = arith.cmpi eq, %rem, %c0 : i32
      %all = arith.constant -1 : i32
      %vote = nvvm.vote.ballot.sync %all, %pred : i32
      %p0 = llvm.getelementptr %out[%row] : (!llvm.ptr, i64) -> !llvm.ptr, i32
      llvm.store %x, %p0 : i32, !llvm.ptr
      %p1 = llvm.getelementptr %p0[1] : (!llvm.ptr) -> !llvm.ptr, i32
      llvm.store %u, %p1 : i32, !llvm.ptr
      %p2 = llvm.getelementptr %p0[2] : (!llvm.ptr) -> !llvm.ptr, i32
      llvm.store %d, %p2 : i32, !llvm.ptr
      %p3 = llvm.getelementptr %p0[3] : (!llvm.ptr) -> !llvm.ptr, i32
      llvm.store %i, %p3 : i32, !llvm.ptr
      %xv32 = arith.extui %xv : i1 to i32
      %uv32 = arith.extui %uv : i1 to i32
      %dv32 = arith.extui %dv : i1 to i32
      %iv32 = arith.extui %iv : i1 to i32
      %p4 = llvm.getelementptr %p0[4] : (!llvm.ptr) -> !llvm.ptr, i32
      llvm.store %xv32, %p4 : i32, !llvm.ptr
      %p5 = llvm.getelementptr %p0[5] : (!llvm.ptr) -> !llvm.ptr, i32
      llvm.store %uv32, %p5 : i32, !llvm.ptr
      %p6 = llvm.getelementptr %p0[6] : (!llvm.ptr) -> !llvm.ptr, i32
      llvm.store %dv32, %p6 : i32, !llvm.ptr
      %p7 = llvm.getelementptr %p0[7] : (!llvm.ptr) -> !llvm.ptr, i32
      llvm.store %iv32, %p7 : i32, !llvm.ptr
      %p8 = llvm.getelementptr %p0[8] : (!llvm.ptr) -> !llvm.ptr, i32
      llvm.store %vote, %p8 : i32, !llvm.ptr
      gpu.return
    }

    // Each thread writes its id, waits at the barrier, then reads the next
    // thread's: without the barrier, fibers running in order would read
    // the next thread's slot before it was written.
    gpu.func @barrier(%a: !llvm.ptr, %b: !llvm.ptr, %n: i64, %s: i64) kernel {
      %tid = gpu.thread_id x
      %dim = gpu.block_dim x
      %t = arith.index_cast %tid : index to i64
      %size = arith.index_cast %dim : index to i64
      %c1 = arith.constant 1 : i64
      %slot = llvm.getelementptr %a[%t] : (!llvm.ptr, i64) -> !llvm.ptr, i64
      llvm.store %t, %slot : i64, !llvm.ptr
      gpu.barrier
      %next = arith.addi %t, %c1 : i64
      %wrapped = arith.remui %next, %size : i64
      %from = llvm.getelementptr %a[%wrapped] : (!llvm.ptr, i64) -> !llvm.ptr, i64
      %value = llvm.load %from : !llvm.ptr -> i64
      %to = llvm.getelementptr %b[%t] : (!llvm.ptr, i64) -> !llvm.ptr, i64
      llvm.store %value, %to : i64, !llvm.ptr
      gpu.return
    }

    // Lanes below 16 shuffle, the others do not: a deadlock on a GPU.
    gpu.func @divergent(%out: !llvm.ptr, %n: i64, %s: i64) kernel {
      %tid = gpu.thread_id x
      %t = arith.index_cast %tid : index to i32
      %c16 = arith.constant 16 : i32
      %c1 = arith.constant 1 : i32
      %c32 = arith.constant 32 : i32
      %low = arith.cmpi slt, %t, %c16 : i32
      scf.if %low {
        %x, %v = gpu.shuffle xor %t, %c1, %c32 : i32
        llvm.store %x, %out : i32, !llvm.ptr
      }
      gpu.return
    }

    // Every lane runs a shuffle whose member mask is the low 16 lanes.
    gpu.func @outside_mask(%out: !llvm.ptr, %n: i64, %s: i64) kernel {
      %tid = gpu.thread_id x
      %t = arith.index_cast %tid : index to i32
      %c1 = arith.constant 1 : i32
      %c16 = arith.constant 16 : i32
      %x, %v = gpu.shuffle xor %t, %c1, %c16 : i32
      llvm.store %x, %out : i32, !llvm.ptr
      gpu.return
    }
  }
}
"""


@pytest.fixture(scope="module")
def test_kernels(tmp_path_factory: pytest.TempPathFactory) -> harness.GpuSimulator:
    from segops import _compiler

    llvm_bin = Path("/usr/lib/llvm-19/bin")
    directory = tmp_path_factory.mktemp("gpusim")
    lowered = _compiler.seg_opt(
        SIMULATOR_KERNELS, "--convert-gpu-to-simulator", "--convert-scf-to-cf",
        "--convert-arith-to-llvm", "--convert-cf-to-llvm", "--convert-func-to-llvm",
        "--reconcile-unrealized-casts")
    (directory / "kernels.mlir").write_text(lowered)
    subprocess.run([str(llvm_bin / "mlir-translate"), "--mlir-to-llvmir", "kernels.mlir",
                    "-o", "kernels.ll"], cwd=directory, check=True)
    subprocess.run([str(llvm_bin / "llc"), "-filetype=obj", "-relocation-model=pic",
                    "kernels.ll", "-o", "kernels.o"], cwd=directory, check=True)
    repo = Path(__file__).resolve().parents[2]
    subprocess.run(["c++", "-std=c++17", "-O1", "-shared", "-fPIC",
                    f"-I{repo / 'runtime' / 'include'}",
                    str(repo / "runtime" / "lib" / "GpuSimulator.cpp"), "kernels.o",
                    "-o", "libkernels.so"], cwd=directory, check=True)
    return harness.GpuSimulator(directory / "libkernels.so")


def test_shuffles_and_ballots_follow_ptx(test_kernels: harness.GpuSimulator) -> None:
    out = torch.full((64, 9), -7, dtype=torch.int32)
    test_kernels.launch("modes", [out], 0, 0, grid=1, block=64)
    for t in range(64):
        lane, base = t % 32, t - t % 32
        xor_source = lane ^ 5
        up_valid, down_valid = lane - 5 >= 0, lane + 5 <= 31
        expected = [base + xor_source,
                    base + (lane - 5 if up_valid else lane),
                    base + (lane + 5 if down_valid else lane),
                    base + 5,
                    1, int(up_valid), int(down_valid), 1]
        ballot = sum(1 << lane for lane in range(32) if (base + lane) % 3 == 0)
        expected.append(ballot - (1 << 32) if ballot >= 1 << 31 else ballot)
        assert out[t].tolist() == expected, f"thread {t}"


def test_barrier_orders_the_block(test_kernels: harness.GpuSimulator) -> None:
    a = torch.zeros(96, dtype=torch.int64)
    b = torch.full((96,), -1, dtype=torch.int64)
    test_kernels.launch("barrier", [a, b], 0, 0, grid=1, block=96)
    assert b.tolist() == [(t + 1) % 96 for t in range(96)]


def test_divergent_collectives_are_reported(test_kernels: harness.GpuSimulator) -> None:
    out = torch.zeros(1, dtype=torch.int32)
    with pytest.raises(harness.SimulatorError, match="deadlock in block 0.*16:exited"):
        test_kernels.launch("divergent", [out], 0, 0, grid=2, block=32)
    with pytest.raises(harness.SimulatorError, match="lane 16 of warp 0 runs collective"):
        test_kernels.launch("outside_mask", [out], 0, 0, grid=1, block=32)
    with pytest.raises(harness.SimulatorError, match="block size must be a multiple of 32"):
        test_kernels.launch("modes", [out], 0, 0, grid=1, block=48)


@pytest.mark.slow
@pytest.mark.long
def test_op_suite_on_gpu_kernels() -> None:
    """test_ops.py (every op against the PyTorch reference, gradcheck and
    gradgradcheck, third order, opcheck, torch.compile, bad input, layouts)
    with CPU tensors running the GPU kernels on the simulator
    (SEGOPS_SIMULATE_GPU=1): the public contract, through the GPU kernels."""
    env = dict(os.environ, SEGOPS_SIMULATE_GPU="1")
    result = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                             "test_ops.py"], capture_output=True, text=True, timeout=900,
                            cwd=Path(__file__).parent, env=env)
    assert result.returncode == 0 and " passed" in result.stdout, (
        f"exit {result.returncode}\n{result.stdout[-4000:]}\n{result.stderr[-2000:]}")
