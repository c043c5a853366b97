//===- SegToGPU.cpp - kernel functions to gpu.func kernels ----------------===//
//
// The convert-seg-to-gpu pass: a gpu.func per kernel function (and per
// long-segment kernel), emitted by GPUKernelEmitter.
//
//===----------------------------------------------------------------------===//

#include "GPUKernelEmitter.h"
#include "segops/Conversion/Passes.h"

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/IR/TypeUtilities.h"
#include "segops/Conversion/LongSegmentKernels.h"

namespace mlir {
namespace seg {
#define GEN_PASS_DEF_CONVERTSEGTOGPU
#include "segops/Conversion/Passes.h.inc"
} // namespace seg
} // namespace mlir

using namespace mlir;
using namespace mlir::seg;

static constexpr StringLiteral kKernelModuleName = "seg_kernels";

/// math.sqrt as a direct call of llvm.sqrt (NVPTX's sqrt.rn): GPU-to-NVVM
/// would otherwise turn it into a libdevice call, which would make PTX
/// generation depend on a CUDA installation.
static void useSqrtIntrinsic(gpu::GPUFuncOp kernel) {
  kernel.walk([](math::SqrtOp sqrt) {
    OpBuilder b(sqrt);
    Type type = sqrt.getType();
    std::string name = "llvm.sqrt." + std::string(type.isF32() ? "f32" : "f64");
    auto call = b.create<LLVM::CallIntrinsicOp>(sqrt.getLoc(), TypeRange{type},
                                                b.getStringAttr(name),
                                                ValueRange{sqrt.getOperand()});
    sqrt.replaceAllUsesWith(call.getResults());
    sqrt.erase();
  });
}


/// The GPU pipeline lowers f32 transcendental functions to arith
/// (seg-approximate-math) and has no libdevice: an f64 one is reported
/// here, rather than as an illegal LLVM intrinsic after lowering.
static LogicalResult checkGPUMath(func::FuncOp func) {
  WalkResult result = func.walk([&](Operation *op) {
    if (isa<arith::RemFOp>(op)) {
      op->emitError() << "'" << op->getName()
                      << "' (fmod) has no GPU lowering (NVVM's is a "
                         "libdevice call, and the GPU pipeline links no "
                         "libdevice); compute it on the host";
      return WalkResult::interrupt();
    }
    if (!isa<math::MathDialect>(op->getDialect()) ||
        isa<math::SqrtOp, math::RsqrtOp, math::AbsFOp, math::FmaOp>(op))
      return WalkResult::advance();
    Type element = getElementTypeOrSelf(op->getResultTypes().front());
    if (!element.isF64())
      return WalkResult::advance();
    op->emitError() << "'" << op->getName()
                    << "' on f64 has no GPU lowering (the GPU pipeline "
                       "approximates f32 only and links no libdevice); "
                       "compute it in f32 or on the host";
    return WalkResult::interrupt();
  });
  return failure(result.wasInterrupted());
}

namespace {
struct ConvertSegToGPUPass
    : public seg::impl::ConvertSegToGPUBase<ConvertSegToGPUPass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    MLIRContext *ctx = &getContext();
    if (blockSize < kWarpSize || blockSize > 1024 ||
        blockSize % kWarpSize != 0) {
      module.emitError() << "block-size must be a multiple of 32 between 32 "
                            "and 1024, but got "
                         << static_cast<int64_t>(blockSize);
      return signalPassFailure();
    }

    SmallVector<func::FuncOp> candidates;
    for (auto func : module.getOps<func::FuncOp>())
      if (SegmentProgram::isCandidate(func))
        candidates.push_back(func);
    if (candidates.empty())
      return;
    for (func::FuncOp func : candidates)
      if (!allowF64Math && failed(checkGPUMath(func)))
        return signalPassFailure();

    OpBuilder builder(ctx);
    builder.setInsertionPointToEnd(module.getBody());
    auto gpuModule = module.lookupSymbol<gpu::GPUModuleOp>(kKernelModuleName);
    if (!gpuModule)
      gpuModule =
          builder.create<gpu::GPUModuleOp>(module.getLoc(), kKernelModuleName);
    module->setAttr(gpu::GPUDialect::getContainerModuleAttrName(),
                    builder.getUnitAttr());
    SymbolTable kernels(gpuModule);

    for (func::FuncOp func : candidates) {
      FailureOr<SegmentProgram> program = SegmentProgram::analyze(func);
      if (failed(program))
        return signalPassFailure();
      // Segment programs with long-segment kernels share a scratch buffer
      // with them (written and read by the kernels launched before, read by
      // the kernel); those kernels also take the pass they run.
      auto addKernel = [&](StringRef name, segrt::abi::Entry entry,
                           function_ref<void(GPUKernelEmitter &)> emit) {
        OpBuilder detached(ctx);
        auto kernel = detached.create<gpu::GPUFuncOp>(
            func.getLoc(), name,
            builder.getFunctionType(
                kernelParameterTypes(ctx, program->buffers.size(), entry),
                {}));
        kernel->setAttr(gpu::GPUDialect::getKernelFuncAttrName(),
                        builder.getUnitAttr());
        nameTrailingArguments(kernel, program->buffers.size(), entry);
        kernel.setKnownBlockSizeAttr(builder.getDenseI32ArrayAttr(
            {static_cast<int32_t>(blockSize), 1, 1}));
        GPUKernelEmitter emitter(*program, kernel, entry, blockSize);
        emit(emitter);
        useSqrtIntrinsic(kernel);
        kernels.insert(kernel);
      };
      std::string name = func.getSymName().str();
      addKernel(name,
                program->hasLongSegmentKernels()
                    ? segrt::abi::Entry::GpuSegmentKernel
                    : segrt::abi::Entry::GpuKernel,
                [&](GPUKernelEmitter &e) {
                  e.setColumnBlocks(program->gpuColumnBlocks());
                  e.emit();
                });
      for (const LongSegmentKernel &longKernel : longSegmentKernels(*program))
        addKernel(name + longKernel.suffix, segrt::abi::Entry::GpuLongSegment,
                  [&](GPUKernelEmitter &e) {
          e.setColumnBlocks(longKernel.columnBlocks(*program));
          switch (longKernel.kind) {
          case LongSegmentKernel::Tiles:
            return e.emitTiles();
          case LongSegmentKernel::Bounds:
            return e.emitBounds();
          case LongSegmentKernel::PassTiles:
            return e.emitPassTiles();
          case LongSegmentKernel::PassTotals:
            return e.emitPassTotals();
          case LongSegmentKernel::SuperTiles:
            return e.emitSuperTiles();
          }
        });
      func.erase();
    }
  }
};
} // namespace
