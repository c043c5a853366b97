"""A design study for issue 40: backward levels that take the forward's
results, by the GPU model.

The library's first backward recomputes what it needs of the forward:
rms_norm's reads its rows twice (the norm, then the row map), max's and
min's three times (the extremum, the rows attaining it, then the row map).
seg-differentiate's `saved-results` derives a level that takes the
forward's results instead (rms_norm's then reads its rows once, max's
twice). The operator library does not run such levels yet (its levels
take the forward's arguments and the cotangents); this study runs them as
segops.jit programs on the SIMT simulator and prices them with
bench.gpu_model beside the library's level, at the model's target N.

    SEGOPS_SIMULATE_GPU=1 PYTHONPATH=python:. python -m bench.saved_results \\
        --ops segmented_rms_norm,segmented_max --widths 1,16 --dtypes f32
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path
from typing import Any

import torch

from bench import gpu_model, gpu_traffic
from segops import _compiler, _jit
from segops._op_table import OPS, level_name


def saved_results_program(op: str, dtype: str, width: int) -> str:
    """Registers `op`'s first backward derived with saved results (its
    arguments: the op's floats, idx, the forward's result, the cotangent)
    as a segops.jit program; returns the program's name."""
    forward = OPS[op].kernel_name(dtype, width, 0)
    derived = _compiler.seg_opt(OPS[op].kernel_source(dtype, width),
                                "--seg-derive=order=1 saved-results=1")
    draft = derived.replace(f"@{level_name(forward, 1)}(", "@jit_kernel(", 1)
    return _jit.register_program(draft, f"saved_{forward}", len(OPS[op].float_args), op)


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


def _arguments(op: str, dtype: str, width: int, idx: torch.Tensor, num_segments: int,
               ties: bool) -> list[torch.Tensor]:
    """A study level's tensors in argument order: the op's floats, idx,
    its result (computed: max's rows attain it), with `ties` the count of
    rows attaining it, and a cotangent."""
    floats = gpu_traffic.level_arguments(op, 0, width, gpu_traffic.DTYPES[dtype], idx,
                                         num_segments)
    result = getattr(torch.ops.segops, op)(*floats, idx, num_segments)
    saved = [result]
    if ties:
        hits = (floats[0] == result[idx.long()]).to(result.dtype)
        saved.append(result.new_zeros(result.shape).index_add_(0, idx.long(), hits))
    return [*floats, idx, *saved, torch.randn_like(result)]


def _trace(program: str, op: str, dtype: str, width: int, rows: int, length: int | None,
           target: int) -> gpu_traffic.Call:
    idx, num_segments = gpu_traffic.segment_index(rows, length)
    tensors = _arguments(op, dtype, width, idx, num_segments, program.startswith("jit_ties"))
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
    """Per op, dtype, width and layout: the library's first backward, the
    saved-results one and (max, min) the one on the saved extremum and tie
    count at `target` rows, each against the library level's ideal (the
    saved values add one or two values per segment)."""
    library = gpu_model.library_resources(chip)
    table = []
    for op in ops:
        for dtype in dtypes:
            for width in widths:
                programs = {"saved": saved_results_program(op, dtype, width)}
                if op in ("segmented_max", "segmented_min"):
                    programs["ties"] = ties_program(op, dtype, width)
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ops", default="segmented_rms_norm,segmented_max")
    parser.add_argument("--dtypes", default="f32,f64")
    parser.add_argument("--widths", default="1,3,16,64")
    parser.add_argument("--chip", default="sm_90")
    args = parser.parse_args()
    rows(args.ops.split(","), args.dtypes.split(","),
         [int(w) for w in args.widths.split(",")], args.chip)


if __name__ == "__main__":
    main()
