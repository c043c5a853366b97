//===- Pipelines.cpp - named seg compilation pipelines --------------------===//

#include "segops/Pipelines/Pipelines.h"

#include "mlir/Conversion/ArithToLLVM/ArithToLLVM.h"
#include "mlir/Conversion/ControlFlowToLLVM/ControlFlowToLLVM.h"
#include "mlir/Conversion/FuncToLLVM/ConvertFuncToLLVMPass.h"
#include "mlir/Conversion/GPUToNVVM/GPUToNVVMPass.h"
#include "mlir/Conversion/MathToLLVM/MathToLLVM.h"
#include "mlir/Conversion/MathToLibm/MathToLibm.h"
#include "mlir/Conversion/ReconcileUnrealizedCasts/ReconcileUnrealizedCasts.h"
#include "mlir/Conversion/SCFToControlFlow/SCFToControlFlow.h"
#include "mlir/Conversion/VectorToLLVM/ConvertVectorToLLVMPass.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/GPU/Transforms/Passes.h"
#include "mlir/Dialect/LLVMIR/Transforms/Passes.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Transforms/Passes.h"
#include "segops/Conversion/Passes.h"
#include "segops/Dialect/Seg/Transforms/Passes.h"
#include "segrt/OpLibrary.h"

using namespace mlir;
using namespace mlir::seg;

/// Canonicalization of lowered kernels: bottom-up. The default top-down
/// traversal folds constants into the front of their block as it meets
/// them, and each move makes the next dominance query renumber the whole
/// block: quadratic in a kernel's size (a chain of 100 matvecs derived to
/// second order: 19.5 s against 4.3 s to canonicalize its host code).
static std::unique_ptr<Pass> createLoweredCanonicalizerPass() {
  GreedyRewriteConfig config;
  config.useTopDownTraversal = false;
  return createCanonicalizerPass(config);
}

/// Kernel functions -> simplified gpu.func kernels.
/// The GPU kernels for the SIMT simulator, whose math calls the host's libm.
static void addSegToGPUPasses(OpPassManager &pm, int64_t blockSize) {
  ConvertSegToGPUOptions toGPU;
  toGPU.blockSize = blockSize;
  toGPU.allowF64Math = true;
  pm.addPass(createConvertSegToGPU(toGPU));
  pm.addPass(createLoweredCanonicalizerPass());
  pm.addPass(createCSEPass());
}

void mlir::seg::buildKernelModulesToNVVMPipeline(
    OpPassManager &pm, const SegToPTXOptions &options) {
  // Everything on the kernel modules: several of them run in parallel.
  OpPassManager &kernels = pm.nest<gpu::GPUModuleOp>();
  kernels.addPass(createLoweredCanonicalizerPass());
  kernels.addPass(createCSEPass());
  kernels.addPass(createConvertSCFToCFPass());
  // f32 transcendental functions as arith, then math to LLVM intrinsics, so
  // that nothing needs libdevice.
  SegApproximateMathOptions approximate;
  approximate.expandFloor = true;
  kernels.addPass(createSegApproximateMath(approximate));
  kernels.addPass(createConvertMathToLLVMPass());
  kernels.addPass(createConvertGpuOpsToNVVMOps());
  kernels.addPass(createLoweredCanonicalizerPass());
  kernels.addPass(createCSEPass());
  kernels.addPass(createReconcileUnrealizedCastsPass());
  GpuNVVMAttachTargetOptions target;
  target.chip = options.chip;
  target.features = options.features;
  target.optLevel = options.optLevel;
  pm.addPass(createGpuNVVMAttachTarget(target));
}

void mlir::seg::buildSegToNVVMPipeline(OpPassManager &pm,
                                       const SegToPTXOptions &options) {
  ConvertSegToGPUOptions toGPU;
  toGPU.blockSize = options.blockSize;
  pm.addPass(createConvertSegToGPU(toGPU));
  buildKernelModulesToNVVMPipeline(pm, options);
}

void mlir::seg::buildSegToPTXPipeline(OpPassManager &pm,
                                      const SegToPTXOptions &options) {
  buildSegToNVVMPipeline(pm, options);
  GpuModuleToBinaryPassOptions binary;
  binary.compilationTarget = "isa";
  pm.addPass(createGpuModuleToBinaryPass(binary));
}

std::string mlir::seg::derivativeFunctionName(llvm::StringRef name,
                                              unsigned level) {
  std::string result = name.str();
  for (unsigned k = 0; k < level; ++k)
    result += segrt::kGradientSuffix;
  return result;
}

void mlir::seg::buildSegDerivePipeline(OpPassManager &pm,
                                       const SegDeriveOptions &options) {
  for (unsigned level = 0; level < options.order; ++level) {
    SegDifferentiateOptions differentiate;
    differentiate.suffix = segrt::kGradientSuffix;
    differentiate.onlySuffix = derivativeFunctionName("", level);
    differentiate.savedResults = options.savedResults;
    pm.addPass(createSegDifferentiate(differentiate));
    pm.addPass(createCanonicalizerPass());
    pm.addPass(createCSEPass());
  }
}

void mlir::seg::buildSegInlinePipeline(OpPassManager &pm) {
  // No simplification pipeline between inlining steps: the caller's IR
  // stays as written, apart from the calls.
  pm.addPass(createInlinerPass(/*opPipelines=*/{},
                               /*defaultPipelineBuilder=*/[](OpPassManager &) {}));
  pm.addPass(createSymbolDCEPass());
  pm.addPass(createCSEPass());
}

/// Host functions of scf/arith/math/func -> LLVM dialect.
static void addHostToLLVMPasses(OpPassManager &pm) {
  // f32 transcendental functions as (vector) arith: no libm call per lane.
  pm.addPass(createSegApproximateMath());
  pm.addPass(createConvertSCFToCFPass());
  // maximumf/minimumf as compares and selects the SLP vectoriser bundles.
  pm.addPass(createSegExpandExtrema());
  // Math with an LLVM intrinsic (exp, floor, sin of f64, ...) to it; the
  // rest (erf, atan, and expm1/log1p, whose intrinsic-free forms lose
  // precision near 0) to libm calls.
  ConvertMathToLLVMPassOptions mathToLLVM;
  mathToLLVM.approximateLog1p = false;
  pm.addPass(createConvertMathToLLVMPass(mathToLLVM));
  pm.addPass(createConvertMathToLibmPass());
  pm.addPass(createConvertVectorToLLVMPass());
  pm.addPass(createArithToLLVMConversionPass());
  pm.addPass(createConvertControlFlowToLLVMPass());
  pm.addPass(createConvertFuncToLLVMPass());
  pm.addPass(createReconcileUnrealizedCastsPass());
  pm.addPass(createLoweredCanonicalizerPass());
}

void mlir::seg::buildSegToHostKernelsPipeline(OpPassManager &pm,
                                              const SegToHostOptions &options) {
  ConvertSegToHostOptions passOptions;
  passOptions.vectorBits = options.vectorBits;
  passOptions.interleave = options.interleave;
  pm.addPass(createConvertSegToHost(passOptions));
  pm.addPass(createLoweredCanonicalizerPass());
  pm.addPass(createCSEPass());
}

void mlir::seg::buildHostToLLVMPipeline(OpPassManager &pm) {
  addHostToLLVMPasses(pm);
}

void mlir::seg::buildSegToHostPipeline(OpPassManager &pm,
                                       const SegToHostOptions &options) {
  buildSegToHostKernelsPipeline(pm, options);
  buildHostToLLVMPipeline(pm);
}

void mlir::seg::buildSegToGPUSimulatorPipeline(OpPassManager &pm,
                                               const SegToPTXOptions &options) {
  addSegToGPUPasses(pm, options.blockSize);
  pm.addPass(createConvertGPUToSimulator());
  addHostToLLVMPasses(pm);
}

void mlir::seg::registerSegPipelines() {
  PassPipelineRegistration<SegToPTXOptions>(
      "seg-to-ptx",
      "Compile seg kernel functions to PTX: gpu.func kernels, NVVM, and a "
      "gpu.binary whose object holds the PTX text",
      buildSegToPTXPipeline);
  PassPipelineRegistration<SegToPTXOptions>(
      "seg-to-nvvm",
      "Compile seg kernel functions to NVVM/LLVM dialect kernels with an "
      "NVVM target attached (seg-to-ptx without serialization)",
      buildSegToNVVMPipeline);
  PassPipelineRegistration<SegDeriveOptions>(
      "seg-derive",
      "Derive gradient functions up to an order: seg-differentiate, "
      "canonicalize and cse per order (use --mlir-print-ir-after-all to see "
      "each order)",
      buildSegDerivePipeline);
  PassPipelineRegistration<>(
      "seg-inline",
      "Inline the calls of private functions (derived functions linked into "
      "a fused kernel), drop those functions, then cse",
      buildSegInlinePipeline);
  PassPipelineRegistration<SegToHostOptions>(
      "seg-to-host",
      "Compile seg kernel functions to LLVM dialect host functions",
      buildSegToHostPipeline);
  PassPipelineRegistration<SegToPTXOptions>(
      "seg-to-gpu-simulator",
      "Compile seg kernel functions to the GPU kernels of seg-to-ptx, then "
      "to LLVM dialect host functions for the SIMT simulator (a testing aid; "
      "only block-size matters)",
      buildSegToGPUSimulatorPipeline);
}
