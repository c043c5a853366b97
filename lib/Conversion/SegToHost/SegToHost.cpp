//===- SegToHost.cpp - seg kernel functions to host loop functions --------===//

#include "segops/Conversion/Passes.h"
#include "segops/Conversion/SegKernelABI.h"
#include "segops/Dialect/Seg/IR/SegOps.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"

namespace mlir {
namespace seg {
#define GEN_PASS_DEF_CONVERTSEGTOHOST
#include "segops/Conversion/Passes.h.inc"
} // namespace seg
} // namespace mlir

using namespace mlir;
using namespace mlir::seg;

namespace {
/// Emits the body of one host kernel: the work items [begin, end) of a
/// kernel function, in order.
class HostKernelEmitter {
public:
  HostKernelEmitter(const KernelInterface &interface, func::FuncOp kernel)
      : interface(interface), kernel(kernel), builder(kernel.getContext()),
        code(builder, interface.func.getLoc()) {
    builder.setInsertionPointToStart(&kernel.getBody().front());
  }

  void emit() {
    unsigned numBuffers = interface.getNumBuffers();
    numRows = kernel.getArgument(numBuffers);
    numSegments = kernel.getArgument(numBuffers + 1);
    Value begin = kernel.getArgument(numBuffers + 2);
    Value end = kernel.getArgument(numBuffers + 3);
    // Clamp the requested range to the work items that exist, so that no
    // caller can make the kernel write out of bounds.
    Value items = interface.strategy == KernelStrategy::SegmentReduction
                      ? numSegments
                      : numRows;
    begin = clamp(begin, items);
    end = clamp(end, items);
    if (interface.strategy == KernelStrategy::SegmentReduction)
      emitSegmentReduction(begin, end);
    else
      emitRowMap(begin, end);
    builder.create<func::ReturnOp>(code.loc);
  }

private:
  Value clamp(Value value, Value upper) {
    Value low = builder.create<arith::MaxSIOp>(code.loc, value, code.i64(0));
    return builder.create<arith::MinSIOp>(code.loc, low, upper);
  }
  Value buffer(Value operand) {
    return kernel.getArgument(interface.getBufferIndex(operand));
  }
  Value outputBuffer() {
    return kernel.getArgument(interface.getNumBuffers() - 1);
  }

  // Segments are walked in order; each one's rows end where the next
  // segment's begin, found by binary search from the previous boundary.
  void emitSegmentReduction(Value begin, Value end) {
    auto sum = cast<SumOp>(interface.op);
    Location loc = code.loc;
    int64_t width = interface.width;
    Type elementType = interface.elementType;
    Value idx = buffer(sum.getIdx());
    Value x = buffer(sum.getX());
    Value firstRow = code.lowerBound(idx, code.i64(0), numRows, begin);
    builder.create<scf::ForOp>(
        loc, begin, end, code.i64(1), ValueRange{firstRow},
        [&](OpBuilder &b, Location l, Value segment, ValueRange rowState) {
          KernelCodeBuilder local(b, l);
          Value rowBegin = rowState[0];
          Value next = b.create<arith::AddIOp>(l, segment, local.i64(1));
          Value rowEnd = local.lowerBound(idx, rowBegin, numRows, next);
          SmallVector<Value> zeros(width, local.zero(elementType));
          auto totals = b.create<scf::ForOp>(
              l, rowBegin, rowEnd, local.i64(1), zeros,
              [&](OpBuilder &ib, Location il, Value row, ValueRange acc) {
                KernelCodeBuilder inner(ib, il);
                Value base =
                    ib.create<arith::MulIOp>(il, row, inner.i64(width));
                SmallVector<Value> updated;
                for (int64_t c = 0; c < width; ++c) {
                  Value flat = ib.create<arith::AddIOp>(il, base, inner.i64(c));
                  Value term = inner.load(x, elementType, flat);
                  updated.push_back(ib.create<arith::AddFOp>(il, acc[c], term));
                }
                ib.create<scf::YieldOp>(il, updated);
              });
          Value outBase = b.create<arith::MulIOp>(l, segment, local.i64(width));
          for (int64_t c = 0; c < width; ++c) {
            Value flat = b.create<arith::AddIOp>(l, outBase, local.i64(c));
            local.store(totals.getResult(c), outputBuffer(), flat);
          }
          b.create<scf::YieldOp>(l, rowEnd);
        });
  }

  void emitRowMap(Value begin, Value end) {
    auto gather = cast<GatherOp>(interface.op);
    int64_t width = interface.width;
    builder.create<scf::ForOp>(
        code.loc, begin, end, code.i64(1), ValueRange{},
        [&](OpBuilder &b, Location l, Value row, ValueRange) {
          KernelCodeBuilder local(b, l);
          Value segment = local.loadSegment(buffer(gather.getIdx()), row);
          Value valid = local.isValidSegment(segment, numSegments);
          Value source = b.create<arith::MulIOp>(l, segment, local.i64(width));
          Value target = b.create<arith::MulIOp>(l, row, local.i64(width));
          for (int64_t c = 0; c < width; ++c) {
            Value from = b.create<arith::AddIOp>(l, source, local.i64(c));
            Value value = local.loadOrZero(valid, buffer(gather.getY()),
                                           interface.elementType, from);
            Value to = b.create<arith::AddIOp>(l, target, local.i64(c));
            local.store(value, outputBuffer(), to);
          }
          b.create<scf::YieldOp>(l);
        });
  }

  const KernelInterface &interface;
  func::FuncOp kernel;
  OpBuilder builder;
  KernelCodeBuilder code;
  Value numRows, numSegments;
};

struct ConvertSegToHostPass
    : public seg::impl::ConvertSegToHostBase<ConvertSegToHostPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    MLIRContext *ctx = &getContext();
    SmallVector<func::FuncOp> candidates;
    for (auto func : module.getOps<func::FuncOp>())
      if (isKernelFunctionCandidate(func))
        candidates.push_back(func);

    auto ptrType = LLVM::LLVMPointerType::get(ctx);
    OpBuilder builder(ctx);
    for (func::FuncOp func : candidates) {
      FailureOr<KernelInterface> interface = analyzeKernelFunction(func);
      if (failed(interface))
        return signalPassFailure();
      SmallVector<Type> params(interface->getNumBuffers(), ptrType);
      params.append(4, builder.getI64Type());
      builder.setInsertionPoint(func);
      auto kernel = builder.create<func::FuncOp>(
          func.getLoc(), func.getSymName(),
          builder.getFunctionType(params, {}));
      kernel.addEntryBlock();
      HostKernelEmitter(*interface, kernel).emit();
      func.erase();
    }
  }
};
} // namespace
