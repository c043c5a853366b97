//===- Pipelines.h - named seg compilation pipelines ------------*- C++ -*-===//
#ifndef SEGOPS_PIPELINES_PIPELINES_H
#define SEGOPS_PIPELINES_PIPELINES_H

#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassOptions.h"

namespace mlir {
namespace seg {

/// Options of the `seg-to-ptx` pipeline.
struct SegToPTXOptions : public PassPipelineOptions<SegToPTXOptions> {
  PassOptions::Option<std::string> chip{
      *this, "chip", llvm::cl::desc("GPU architecture (e.g. sm_80, sm_90)"),
      llvm::cl::init("sm_90")};
  PassOptions::Option<std::string> features{*this, "features",
                                            llvm::cl::desc("PTX ISA features"),
                                            llvm::cl::init("+ptx80")};
  PassOptions::Option<unsigned> optLevel{
      *this, "opt-level", llvm::cl::desc("LLVM optimization level"),
      llvm::cl::init(3)};
  PassOptions::Option<int64_t> blockSize{
      *this, "block-size",
      llvm::cl::desc("Threads per block (a multiple of 32)"),
      llvm::cl::init(256)};
};

/// Options of the `seg-to-host` pipeline.
struct SegToHostOptions : public PassPipelineOptions<SegToHostOptions> {
  PassOptions::Option<int64_t> vectorBits{
      *this, "vector-bits",
      llvm::cl::desc("Bits of the target CPU's vector registers (128: SSE, "
                     "256: AVX2, 512: AVX-512)"),
      llvm::cl::init(128)};
  PassOptions::Option<int64_t> interleave{
      *this, "interleave",
      llvm::cl::desc("Independent vector partial sums per reduction in long "
                     "row loops (1, 2, 4 or 8)"),
      llvm::cl::init(4)};
};

/// Options of the `seg-derive` pipeline.
struct SegDeriveOptions : public PassPipelineOptions<SegDeriveOptions> {
  PassOptions::Option<unsigned> order{
      *this, "order",
      llvm::cl::desc("Highest derivative order (1: f_grad, 2: f_grad_grad...)"),
      llvm::cl::init(1)};
  PassOptions::Option<bool> savedResults{
      *this, "saved-results",
      llvm::cl::desc("Each level takes the results of the level before it "
                     "(seg-differentiate's saved-results)"),
      llvm::cl::init(false)};
};

/// Adds, for every function f with seg ops, f_grad (and f_grad_grad ... up
/// to `order`), each order followed by canonicalize and cse.
void buildSegDerivePipeline(OpPassManager &pm, const SegDeriveOptions &options);

/// The name seg-derive gives derivative level `level` of function `name`:
/// `name` itself at level 0, then name_grad, name_grad_grad...
std::string derivativeFunctionName(llvm::StringRef name, unsigned level);

/// Inlines every call of a private function (derived functions linked into
/// a fused kernel, see segops.fusion), removes those functions, then CSE:
/// a derivative's recomputation of its forward merges with the caller's
/// forward on the same operands. Nothing else is simplified.
void buildSegInlinePipeline(OpPassManager &pm);

/// seg kernel functions -> gpu.module of NVVM kernels -> gpu.binary holding
/// PTX text (`gpu-module-to-binary{format=isa}`).
void buildSegToPTXPipeline(OpPassManager &pm, const SegToPTXOptions &options);

/// Like buildSegToPTXPipeline, stopping at the NVVM/LLVM dialect kernels
/// (before serialization), for inspection and tests: convert-seg-to-gpu,
/// then buildKernelModulesToNVVMPipeline.
void buildSegToNVVMPipeline(OpPassManager &pm, const SegToPTXOptions &options);

/// The second half of buildSegToNVVMPipeline: gpu.module(s) of gpu.func
/// kernels, as convert-seg-to-gpu leaves them, -> NVVM/LLVM dialect kernels
/// with an NVVM target attached. The work is nested on the gpu.modules, so
/// several of them are lowered in parallel.
void buildKernelModulesToNVVMPipeline(OpPassManager &pm,
                                      const SegToPTXOptions &options);

/// seg kernel functions -> LLVM dialect host functions, ready for translation
/// to LLVM IR: buildSegToHostKernelsPipeline, then buildHostToLLVMPipeline.
void buildSegToHostPipeline(OpPassManager &pm,
                            const SegToHostOptions &options = {});

/// The first half of buildSegToHostPipeline: seg kernel functions -> host
/// func.func kernels of scf/arith/vector/math (convert-seg-to-host,
/// simplified). Each function is then independent of the others.
void buildSegToHostKernelsPipeline(OpPassManager &pm,
                                   const SegToHostOptions &options = {});

/// The second half: host functions of scf/arith/vector/math/func -> the
/// LLVM dialect.
void buildHostToLLVMPipeline(OpPassManager &pm);

/// seg kernel functions -> the GPU kernels of buildSegToPTXPipeline, turned
/// into host functions calling the SIMT simulator (convert-gpu-to-simulator),
/// -> LLVM dialect. Only `options.blockSize` is used.
void buildSegToGPUSimulatorPipeline(OpPassManager &pm,
                                    const SegToPTXOptions &options);

/// Registers `seg-to-ptx`, `seg-to-nvvm`, `seg-derive`, `seg-inline`,
/// `seg-to-host` and `seg-to-gpu-simulator` for textual pipelines and `seg-opt --help`.
void registerSegPipelines();

} // namespace seg
} // namespace mlir

#endif // SEGOPS_PIPELINES_PIPELINES_H
