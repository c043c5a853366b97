//===- GPUToSimulator.cpp - gpu.func kernels to simulator host code -------===//
//
// Makes GPU kernels runnable on a CPU for testing: each kernel becomes a host
// function whose GPU operations call the SIMT simulator's runtime
// (runtime/lib/GpuSimulator.cpp), which runs every GPU thread as a fiber.
//
//===----------------------------------------------------------------------===//

#include "segops/Conversion/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Interfaces/DataLayoutInterfaces.h"

namespace mlir {
namespace seg {
#define GEN_PASS_DEF_CONVERTGPUTOSIMULATOR
#include "segops/Conversion/Passes.h.inc"
} // namespace seg
} // namespace mlir

using namespace mlir;
using namespace mlir::seg;

/// The simulator's numbering of shuffle modes (segrt/GpuSimulator.h).
static int64_t simulatorShuffleMode(gpu::ShuffleMode mode) {
  switch (mode) {
  case gpu::ShuffleMode::XOR:
    return 0;
  case gpu::ShuffleMode::UP:
    return 1;
  case gpu::ShuffleMode::DOWN:
    return 2;
  case gpu::ShuffleMode::IDX:
    return 3;
  }
  llvm_unreachable("unknown shuffle mode");
}

namespace {
/// Declares the simulator's runtime functions on demand and rewrites GPU
/// operations into calls of them.
class SimulatorCalls {
public:
  explicit SimulatorCalls(ModuleOp module) : module(module) {}

  /// Rewrites every GPU operation in `body` (the body of a former kernel).
  LogicalResult rewrite(Region &body);

private:
  func::CallOp call(OpBuilder &b, Location loc, StringRef name,
                    TypeRange results, ValueRange operands);
  Value i32(OpBuilder &b, Location loc, int64_t value) {
    return b.create<arith::ConstantIntOp>(loc, value, 32);
  }
  /// Replaces a thread/block id or grid/block dimension: the simulator's
  /// value for x, `yzValue` (0 or 1) for y and z.
  void replaceLaunchValue(Operation *op, gpu::Dimension dimension,
                          StringRef name, int64_t yzValue);
  void rewriteShuffle(gpu::ShuffleOp shuffle);
  void rewriteBallot(NVVM::VoteBallotOp ballot);
  /// Reports a load or store of `bytes` at `address` to the simulator's
  /// memory-traffic trace, before the access.
  void traceAccess(Operation *access, Value address, Type accessed,
                   bool isStore);

  ModuleOp module;
  int64_t nextSite = 0;
};
} // namespace

func::CallOp SimulatorCalls::call(OpBuilder &b, Location loc, StringRef name,
                                  TypeRange results, ValueRange operands) {
  auto callee = module.lookupSymbol<func::FuncOp>(name);
  if (!callee) {
    OpBuilder declare = OpBuilder::atBlockBegin(module.getBody());
    callee = declare.create<func::FuncOp>(
        module.getLoc(), name,
        declare.getFunctionType(TypeRange(operands), results));
    callee.setPrivate();
  }
  return b.create<func::CallOp>(loc, callee, operands);
}

void SimulatorCalls::replaceLaunchValue(Operation *op, gpu::Dimension dimension,
                                        StringRef name, int64_t yzValue) {
  OpBuilder b(op);
  Location loc = op->getLoc();
  Value value;
  if (dimension == gpu::Dimension::x) {
    Value id = call(b, loc, name, b.getI64Type(), {}).getResult(0);
    value = b.create<arith::IndexCastOp>(loc, b.getIndexType(), id);
  } else {
    value = b.create<arith::ConstantIndexOp>(loc, yzValue);
  }
  op->getResult(0).replaceAllUsesWith(value);
  op->erase();
}

void SimulatorCalls::rewriteShuffle(gpu::ShuffleOp shuffle) {
  OpBuilder b(shuffle);
  Location loc = shuffle.getLoc();
  Type type = shuffle.getValue().getType();
  unsigned bits = type.getIntOrFloatBitWidth();
  Type intType = b.getIntegerType(bits);
  // The value travels as the i64 holding its bits.
  Value asInt =
      isa<FloatType>(type)
          ? b.create<arith::BitcastOp>(loc, intType, shuffle.getValue())
                .getResult()
          : shuffle.getValue();
  Value wide =
      bits == 64 ? asInt : b.create<arith::ExtUIOp>(loc, b.getI64Type(), asInt);
  Value mode = i32(b, loc, simulatorShuffleMode(shuffle.getMode()));
  Value site = i32(b, loc, nextSite++);
  Value result =
      call(b, loc, "segsim_shuffle", b.getI64Type(),
           {mode, wide, shuffle.getOffset(), shuffle.getWidth(), site})
          .getResult(0);
  if (bits != 64)
    result = b.create<arith::TruncIOp>(loc, intType, result);
  if (isa<FloatType>(type))
    result = b.create<arith::BitcastOp>(loc, type, result);
  shuffle.getShuffleResult().replaceAllUsesWith(result);

  if (!shuffle.getValid().use_empty()) {
    Value valid = call(b, loc, "segsim_shuffle_valid", b.getI32Type(),
                       {mode, shuffle.getOffset(), shuffle.getWidth()})
                      .getResult(0);
    shuffle.getValid().replaceAllUsesWith(b.create<arith::CmpIOp>(
        loc, arith::CmpIPredicate::ne, valid, i32(b, loc, 0)));
  }
  shuffle.erase();
}

void SimulatorCalls::rewriteBallot(NVVM::VoteBallotOp ballot) {
  OpBuilder b(ballot);
  Location loc = ballot.getLoc();
  // i1 crosses the C boundary as i32: LLVM leaves an i1 argument's upper
  // bits undefined, C's bool does not.
  Value predicate =
      b.create<arith::ExtUIOp>(loc, b.getI32Type(), ballot.getPred());
  Value site = i32(b, loc, nextSite++);
  Value result = call(b, loc, "segsim_ballot", b.getI32Type(),
                      {ballot.getMask(), predicate, site})
                     .getResult(0);
  ballot.getRes().replaceAllUsesWith(result);
  ballot.erase();
}

void SimulatorCalls::traceAccess(Operation *access, Value address,
                                 Type accessed, bool isStore) {
  OpBuilder b(access);
  Location loc = access->getLoc();
  int64_t bytes = DataLayout::closest(access).getTypeSize(accessed);
  Value asInt = b.create<LLVM::PtrToIntOp>(loc, b.getI64Type(), address);
  call(b, loc, "segsim_access", {},
       {asInt, i32(b, loc, bytes), i32(b, loc, isStore ? 1 : 0),
        i32(b, loc, nextSite++)});
}

LogicalResult SimulatorCalls::rewrite(Region &body) {
  SmallVector<Operation *> ops;
  body.walk([&](Operation *op) { ops.push_back(op); });
  for (Operation *op : ops) {
    if (auto id = dyn_cast<gpu::ThreadIdOp>(op)) {
      replaceLaunchValue(op, id.getDimension(), "segsim_thread_id", 0);
    } else if (auto id = dyn_cast<gpu::BlockIdOp>(op)) {
      replaceLaunchValue(op, id.getDimension(), "segsim_block_id", 0);
    } else if (auto dim = dyn_cast<gpu::GridDimOp>(op)) {
      replaceLaunchValue(op, dim.getDimension(), "segsim_grid_dim", 1);
    } else if (auto dim = dyn_cast<gpu::BlockDimOp>(op)) {
      replaceLaunchValue(op, dim.getDimension(), "segsim_block_dim", 1);
    } else if (auto shuffle = dyn_cast<gpu::ShuffleOp>(op)) {
      rewriteShuffle(shuffle);
    } else if (auto ballot = dyn_cast<NVVM::VoteBallotOp>(op)) {
      rewriteBallot(ballot);
    } else if (auto load = dyn_cast<LLVM::LoadOp>(op)) {
      traceAccess(op, load.getAddr(), load.getType(), /*isStore=*/false);
    } else if (auto store = dyn_cast<LLVM::StoreOp>(op)) {
      traceAccess(op, store.getAddr(), store.getValue().getType(),
                  /*isStore=*/true);
    } else if (isa<gpu::BarrierOp>(op)) {
      OpBuilder b(op);
      call(b, op->getLoc(), "segsim_barrier", {},
           {i32(b, op->getLoc(), nextSite++)});
      op->erase();
    } else if (isa<gpu::ReturnOp>(op)) {
      OpBuilder b(op);
      b.create<func::ReturnOp>(op->getLoc());
      op->erase();
    } else if (isa<gpu::GPUDialect, NVVM::NVVMDialect>(op->getDialect())) {
      return op->emitOpError("is not supported by the GPU simulator");
    }
  }
  return success();
}

namespace {
struct ConvertGPUToSimulatorPass
    : public seg::impl::ConvertGPUToSimulatorBase<ConvertGPUToSimulatorPass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    SimulatorCalls calls(module);
    SmallVector<gpu::GPUModuleOp> gpuModules(module.getOps<gpu::GPUModuleOp>());
    for (gpu::GPUModuleOp gpuModule : gpuModules) {
      for (auto kernel :
           llvm::make_early_inc_range(gpuModule.getOps<gpu::GPUFuncOp>())) {
        if (!kernel.isKernel()) {
          kernel.emitOpError("the GPU simulator runs kernels only");
          return signalPassFailure();
        }
        if (kernel.getNumWorkgroupAttributions() ||
            kernel.getNumPrivateAttributions()) {
          kernel.emitOpError("has workgroup or private attributions, which "
                             "the GPU simulator does not support");
          return signalPassFailure();
        }
        if (module.lookupSymbol(kernel.getName())) {
          kernel.emitOpError("has the name of a symbol of the enclosing "
                             "module");
          return signalPassFailure();
        }
        OpBuilder b = OpBuilder::atBlockEnd(module.getBody());
        auto func = b.create<func::FuncOp>(kernel.getLoc(), kernel.getName(),
                                           kernel.getFunctionType());
        func.getBody().takeBody(kernel.getBody());
        if (failed(calls.rewrite(func.getBody())))
          return signalPassFailure();
      }
      gpuModule.erase();
    }
    module->removeAttr(gpu::GPUDialect::getContainerModuleAttrName());
  }
};
} // namespace
