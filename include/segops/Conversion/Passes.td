//===- Passes.td - seg conversion passes -------------------*- tablegen -*-===//

#ifndef SEGOPS_CONVERSION_PASSES_TD
#define SEGOPS_CONVERSION_PASSES_TD

include "mlir/Pass/PassBase.td"

def ConvertSegToGPU : Pass<"convert-seg-to-gpu", "ModuleOp"> {
  let summary = "Lower seg kernel functions to gpu.func kernels";
  let description = [{
    Every `func.func` whose body is one seg operation (a *kernel function*,
    as in the op library) becomes a `gpu.func` kernel in the
    `gpu.module @seg_kernels` of the module, with the segops kernel ABI:
    one `!llvm.ptr` per tensor argument, one per result (written by the
    kernel), then `i64 %num_rows, i64 %num_segments`.

    Segment programs also take a `!llvm.ptr %scratch`, and get kernels for
    their long segments (`<name>__tiles`, and for programs with row outputs
    or several passes `<name>__bounds` and `<name>__pass_totals`), which take the
    same parameters and an `i64 %pass` and run first (see
    LongSegmentKernels.h).

    Segments: each warp owns chunks of 32 rows (grid-stride) and reduces
    the segments that start in its chunk, walking their rows lane-strided
    (coalesced) and summing lanes with a fixed butterfly of shuffles; a
    segment covering a whole aligned tile of 1024 rows is instead spread
    over the tiles, a warp each, and its totals added in tile order. No
    atomics, results are bitwise reproducible whatever the grid, empty
    segments are written as 0, and no access leaves its buffer whatever
    `idx` holds. Programs that only map rows (mul, matvec, gather) run one
    thread per row.
  }];
  let dependentDialects = [
    "::mlir::arith::ArithDialect",
    "::mlir::gpu::GPUDialect",
    "::mlir::LLVM::LLVMDialect",
    "::mlir::math::MathDialect",
    "::mlir::NVVM::NVVMDialect",
    "::mlir::scf::SCFDialect",
  ];
  let options = [
    Option<"blockSize", "block-size", "int64_t", /*default=*/"256",
           "Threads per block (a multiple of 32, at most 1024)">,
    Option<"allowF64Math", "allow-f64-math", "bool", /*default=*/"false",
           "Accept f64 transcendental math ops (exp, log, tanh...), which the "
           "NVVM pipeline cannot lower (no libdevice): for the SIMT "
           "simulator, whose kernels call the host's libm">,
  ];
}

def ConvertSegToHost : Pass<"convert-seg-to-host", "ModuleOp"> {
  let summary = "Lower seg kernel functions to host (CPU) loop functions";
  let description = [{
    Every kernel function becomes a `func.func` over raw pointers with the
    segops host ABI: the GPU kernel's parameters followed by `i64 %begin,
    i64 %end`, the range of work items (segments for reductions, rows for
    row-wise ops) that one call computes, so that the runtime can split work
    across threads without the results depending on the split.
  }];
  let dependentDialects = [
    "::mlir::arith::ArithDialect",
    "::mlir::func::FuncDialect",
    "::mlir::LLVM::LLVMDialect",
    "::mlir::math::MathDialect",
    "::mlir::scf::SCFDialect",
  ];
  let options = [
    Option<"vectorBits", "vector-bits", "int64_t", /*default=*/"128",
           "Bits of the target CPU's vector registers (128: SSE, 256: AVX2, "
           "512: AVX-512): row bodies take a register's worth of rows">,
    Option<"interleave", "interleave", "int64_t", /*default=*/"4",
           "Independent vector partial sums per reduction in long row loops "
           "(1, 2, 4 or 8): more overlap the adds' latency, fewer compile "
           "faster (run-time compilation takes 1)">,
  ];
}

def ConvertGPUToSimulator : Pass<"convert-gpu-to-simulator", "ModuleOp"> {
  let summary = "Turn gpu.func kernels into host functions for the SIMT simulator";
  let description = [{
    Testing aid for machines without a GPU. Every kernel `gpu.func` of the
    module's `gpu.module`s becomes a `func.func` of the same name and
    parameters in the top-level module, and the GPU operations in it become
    calls into the simulator runtime (`runtime/lib/GpuSimulator.cpp`), which
    runs each GPU thread as a fiber and synchronizes the threads of a warp
    (or block) at every collective:

    | operation | becomes |
    | --- | --- |
    | `gpu.thread_id/block_id/grid_dim/block_dim x` | `@segsim_thread_id()` etc. (`i64`) |
    | the same for `y`, `z` | `0` (ids) or `1` (dims): the simulator runs 1-D launches |
    | `gpu.shuffle` | `@segsim_shuffle(mode, bits, offset, width, site)`; its `valid` result `@segsim_shuffle_valid(mode, offset, width)` |
    | `nvvm.vote.ballot.sync` | `@segsim_ballot(mask, predicate, site)` |
    | `gpu.barrier` | `@segsim_barrier(site)` |
    | `llvm.load`, `llvm.store` | kept, after `@segsim_access(address, bytes, is_store, site)` |
    | `gpu.return` | `func.return` |

    `site` numbers each collective and memory access of the module, so that
    the simulator can report lanes that meet different collectives
    (divergence, undefined on a GPU) and group the lanes of a warp's access
    into one memory instruction (the memory-traffic trace, off unless asked
    for: `segsim_trace`). The `gpu.module`s are erased. Any other GPU or
    NVVM operation, and workgroup or private attributions, are errors.
    The result lowers to LLVM like the host kernels.
  }];
  let dependentDialects = [
    "::mlir::arith::ArithDialect",
    "::mlir::func::FuncDialect",
    "::mlir::LLVM::LLVMDialect",
  ];
}

def SegApproximateMath : Pass<"seg-approximate-math"> {
  let summary = "Replace f32 transcendental math ops by polynomial approximations";
  let description = [{
    Rewrites the f32 (scalar or vector) `math.exp`, `math.log`, `math.tanh`
    and their kin in lowered kernels into arith code, with MLIR's polynomial
    approximations (`populateMathPolynomialApproximationPatterns`, errors
    of a few ulp): GPU kernels then need no libdevice, and host kernels'
    vector rows stay vectors instead of one libm call per lane. f64 ops are
    left alone (the host calls libm; the GPU pipeline has no lowering for
    them), except `math.tanh`, which LLVM has no intrinsic for: it becomes
    `math.exp` (`populateExpandTanhPattern`).
  }];
  let options = [
    Option<"expandFloor", "expand-floor", "bool", /*default=*/"false",
           "Also rewrite scalar f32 math.floor (the approximations use it) "
           "as integer conversions and math.absf as a sign mask: for the "
           "GPU pipeline, whose NVVM lowering would call libdevice">,
  ];
  let dependentDialects = [
    "::mlir::arith::ArithDialect",
    "::mlir::math::MathDialect",
    "::mlir::vector::VectorDialect",
  ];
}

def SegExpandExtrema : Pass<"seg-expand-extrema"> {
  let summary = "Write arith.maximumf/minimumf as compares and selects";
  let description = [{
    Rewrites scalar and vector `arith.maximumf` and `arith.minimumf` of
    lowered host kernels into `arith.cmpf` and `arith.select` with the same
    semantics: NaN if either operand is NaN, and -0 < +0 (an equal pair
    picks by the sign bit), so a reduction's result does not depend on the
    order it combines its terms. x86 lowers `llvm.maximum` to a scalar
    sequence LLVM's SLP vectoriser leaves alone; compares and selects it
    vectorises, which brings the max of rows of many features to memory
    bandwidth (docs/benchmarks.md has the measurement).
  }];
  let dependentDialects = ["::mlir::arith::ArithDialect"];
}

#endif // SEGOPS_CONVERSION_PASSES_TD
