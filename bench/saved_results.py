"""A design study for issue 40: max's and min's first backward on the
saved extremum and the count of rows attaining it, by the GPU model.

The library's first backward takes the forward's results where its rule
reads them (autograd saves them; seg-differentiate's saved-results):
rms_norm's reads its rows once, max's and min's twice (the rows attaining
the saved extremum are counted, then the row map). With the count saved
as well (a second output the forward would write) max's would read its
rows once. This study runs that level as a segops.jit program on the SIMT
simulator and prices it with bench.gpu_model beside the library's level,
at the model's target N.

    SEGOPS_SIMULATE_GPU=1 PYTHONPATH=python:. python -m bench.saved_results \\
        --ops segmented_max --widths 1,16 --dtypes f32
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path
from typing import Any

import torch

from bench import gpu_model, gpu_traffic, timing
from segops import _jit
from segops._op_table import OPS


def ties_program(op: str, dtype: str, width: int) -> str:
    """Registers the first backward of max or min on the saved extremum and
    the count of rows attaining it (a second output the forward would
    write): one read of the rows. The rule of SegDerivatives.cpp's
    buildExtremumAdjoints, with the hits given."""
    scalar = f"tensor<?x{dtype}>"
    rows = scalar if width == 1 else f"tensor<?x{width}x{dtype}>"
    mask = "tensor<?xi1>" if width == 1 else f"tensor<?x{width}xi1>"
    segments = rows
    nan = "0x7FC00000" if dtype == "f32" else "0x7FF8000000000000"
    draft = f"""func.func @jit_kernel(%x: {rows}, %idx: tensor<?xi32>, %n: index,
    %m: {segments}, %hits: {segments}, %g: {segments}) -> {rows} {{
  %c0 = arith.constant 0 : index
  %zero = arith.constant 0.0 : {dtype}
  %nan = arith.constant {nan} : {dtype}
  %rows = tensor.dim %x, %c0 : {rows}
  %zeros = tensor.splat %zero[%rows] : {rows}
  %nans = tensor.splat %nan[%rows] : {rows}
  %attained = seg.gather %m, %idx : {segments}, tensor<?xi32> -> {rows}
  %hit = arith.cmpf oeq, %x, %attained : {rows}
  %share = arith.divf %g, %hits : {segments}
  %spread = seg.gather %share, %idx : {segments}, tensor<?xi32> -> {rows}
  %picked = arith.select %hit, %spread, %zeros : {mask}, {rows}
  %undefined = arith.cmpf uno, %attained, %attained : {rows}
  %grad = arith.select %undefined, %nans, %picked : {mask}, {rows}
  return %grad : {rows}
}}
"""
    return _jit.register_program(draft, f"ties_{OPS[op].kernel_name(dtype, width, 0)}",
                                 1, op)


def _arguments(op: str, dtype: str, width: int, idx: torch.Tensor,
               num_segments: int) -> list[torch.Tensor]:
    """The study level's tensors in argument order: the op's floats, idx,
    its result (computed: max's rows attain it), the count of rows
    attaining it, and a cotangent."""
    floats = gpu_traffic.level_arguments(op, 0, width, gpu_traffic.DTYPES[dtype], idx,
                                         num_segments)
    result = getattr(torch.ops.segops, op)(*floats, idx, num_segments)
    hits = (floats[0] == result[idx.long()]).to(result.dtype)
    count = result.new_zeros(result.shape).index_add_(0, idx.long(), hits)
    return [*floats, idx, result, count, torch.randn_like(result)]


def _trace(program: str, op: str, dtype: str, width: int, rows: int, length: int | None,
           target: int) -> gpu_traffic.Call:
    idx, num_segments = gpu_traffic.segment_index(rows, length)
    tensors = _arguments(op, dtype, width, idx, num_segments)
    record = _jit.program_entry(program)
    records: list[Any] = []
    with gpu_traffic.traced(records, grids=gpu_model.trace_grids(record, rows, target, length)):
        torch.ops.segops.jit_call(program, tensors, num_segments)
    plan = record.gpu_launches(rows, num_segments)
    launches = tuple(
        gpu_traffic.LaunchTraffic(kernel, **{name: getattr(r, name) for name, _ in r._fields_})
        for (kernel, _), r in zip(plan, records, strict=True))
    return gpu_traffic.Call(op, dtype, 1, width, rows, num_segments, launches,
                            gpu_traffic.required_bytes(record, rows, num_segments))


def _resources(program: str, chip: str) -> dict[str, gpu_model.KernelResources]:
    prog, _ = _jit.split_program(program)
    with tempfile.TemporaryDirectory() as scratch:
        path = Path(scratch) / "level.ptx"
        path.write_text(prog.ptx_for_chip(0, chip))
        return gpu_model.parse_ptxas(gpu_model.run_ptxas(path, chip))


def _program_row(program: str, op: str, dtype: str, width: int, layout: str, chip: str,
                 target: int) -> dict[str, Any]:
    """A study program's model row at `target` rows (as gpu_model's rows)."""
    length = gpu_model.LAYOUTS[layout]
    record = _jit.program_entry(program)
    large = gpu_model.simulated_rows()
    small_call, large_call = (_trace(program, op, dtype, width, n, length, target)
                              for n in (large // 2, large))
    plan = record.gpu_launches(target, gpu_model.layout_segments(target, length))
    call = gpu_model.extrapolate(small_call, large_call, target, length is None,
                                 [grid for _, grid in plan])
    return gpu_model.estimate_call(call, _resources(program, chip))


def rows(ops: list[str], dtypes: list[str], widths: list[int], chip: str,
         target: int = 10**7) -> list[dict[str, Any]]:
    """Per op (max or min), dtype, width and layout: the library's first
    backward and the one on the saved extremum and tie count at `target`
    rows, each against the library level's ideal (the count adds a value
    per segment)."""
    library = gpu_model.library_resources(chip)
    table = []
    for op in ops:
        for dtype in dtypes:
            for width in widths:
                programs = {"ties": ties_program(op, dtype, width)}
                library_resources = gpu_model.level_resources(op, dtype, width, 1, chip, library)
                for layout, length in gpu_model.LAYOUTS.items():
                    now = gpu_model.estimate_call(gpu_model.call_at(
                        *gpu_model.traced_pair(op, dtype, 1, width, length, target),
                        length, target), library_resources)
                    row = {"op": op, "dtype": dtype, "width": width, "layout": layout,
                           "launches": now["launches"], "estimate_us": now["estimate_us"],
                           "over_ideal": now["estimate_over_ideal"]}
                    for kind, program in programs.items():
                        study = _program_row(program, op, dtype, width, layout, chip, target)
                        row.update({f"{kind}_launches": study["launches"],
                                    f"{kind}_estimate_us": study["estimate_us"],
                                    f"{kind}_over_ideal": round(study["estimate_us"]
                                                                / now["ideal_us"], 3),
                                    f"{kind}_bound": study["bound"],
                                    f"{kind}_min_occupancy": study["min_occupancy"]})
                    table.append(row)
                    print(" ".join(str(v) for v in row.values()), flush=True)
    return table


def cpu_rows(widths: list[int], num_rows: int = 1_000_000, num_segments: int = 1000,
             repeats: int = 15) -> list[dict[str, Any]]:
    """On this CPU's host kernels, float32: rms_norm's first backward on the
    saved norm (`.saved`, what autograd calls) against its default
    overload, which recomputes the norm (the forward's kernel, then the
    same level): median milliseconds of `repeats` calls, sampled in turn."""
    generator = torch.Generator().manual_seed(0)
    idx = torch.sort(torch.randint(0, num_segments, (num_rows,), generator=generator)).values
    idx = idx.int()
    level = torch.ops.segops.segmented_rms_norm_grad
    table = []
    for width in widths:
        shape = (num_rows,) if width == 1 else (num_rows, width)
        x = torch.randn(shape, generator=generator)
        norm = torch.ops.segops.segmented_rms_norm(x, idx, num_segments)
        cotangent = torch.randn(num_segments, generator=generator)
        recomputing, saved = timing.interleaved_median_seconds(
            [lambda: level.default(x, cotangent, idx, num_segments),
             lambda: level.saved(x, norm, cotangent, idx, num_segments)], "cpu", repeats)
        times = {"recomputing_ms": round(recomputing * 1e3, 3),
                 "saved_ms": round(saved * 1e3, 3)}
        row = {"width": width, **times,
               "ratio": round(times["recomputing_ms"] / times["saved_ms"], 2)}
        print(" ".join(f"{k}={v}" for k, v in row.items()), flush=True)
        table.append(row)
    return table


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ops", default="segmented_max,segmented_min")
    parser.add_argument("--dtypes", default="f32,f64")
    parser.add_argument("--widths", default="1,3,16,64")
    parser.add_argument("--chip", default="sm_90")
    parser.add_argument("--cpu", action="store_true",
                        help="time rms_norm's first backward on the host instead (cpu_rows)")
    args = parser.parse_args()
    if args.cpu:
        cpu_rows([int(w) for w in args.widths.split(",")])
        return
    rows(args.ops.split(","), args.dtypes.split(","),
         [int(w) for w in args.widths.split(",")], args.chip)


if __name__ == "__main__":
    main()
