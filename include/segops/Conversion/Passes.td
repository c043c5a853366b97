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

    Reductions run one thread block per segment (grid-stride over segments):
    each block finds its segment's rows by binary search in `idx`, strides
    over the segment's elements as flat scalars (so vec3 rows use every
    lane), and combines partial sums with a fixed-order tree in shared
    memory. Results are deterministic, no atomics are used, and no access
    leaves its buffer whatever `idx` holds. Row-wise ops (gather) run one
    thread per output element.
  }];
  let dependentDialects = [
    "::mlir::arith::ArithDialect",
    "::mlir::gpu::GPUDialect",
    "::mlir::LLVM::LLVMDialect",
    "::mlir::memref::MemRefDialect",
    "::mlir::scf::SCFDialect",
  ];
  let options = [
    Option<"blockSize", "block-size", "int64_t", /*default=*/"192",
           "Threads per block of reduction kernels (3 * 2^k, 6 <= it <= 1536)">,
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
    "::mlir::scf::SCFDialect",
  ];
}

#endif // SEGOPS_CONVERSION_PASSES_TD
