//===- SegToGPU.cpp - seg kernel functions to gpu.func kernels ------------===//

#include "segops/Conversion/Passes.h"
#include "segops/Conversion/SegKernelABI.h"
#include "segops/Dialect/Seg/IR/SegOps.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/SymbolTable.h"

namespace mlir {
namespace seg {
#define GEN_PASS_DEF_CONVERTSEGTOGPU
#include "segops/Conversion/Passes.h.inc"
} // namespace seg
} // namespace mlir

using namespace mlir;
using namespace mlir::seg;

static constexpr StringLiteral kKernelModuleName = "seg_kernels";
static constexpr int64_t kWarpSize = 32;

namespace {
/// Emits the body of one gpu.func kernel for a kernel function.
class GPUKernelEmitter {
public:
  GPUKernelEmitter(const KernelInterface &interface, gpu::GPUFuncOp kernel,
                   int64_t blockSize)
      : interface(interface), kernel(kernel), blockSize(blockSize),
        builder(kernel.getContext()),
        code(builder, interface.func.getLoc()) {
    builder.setInsertionPointToStart(&kernel.getBody().front());
  }

  void emit() {
    Location loc = code.loc;
    threadId = indexToI64(builder.create<gpu::ThreadIdOp>(loc,
                                                          gpu::Dimension::x));
    blockId = indexToI64(builder.create<gpu::BlockIdOp>(loc,
                                                        gpu::Dimension::x));
    gridDim = indexToI64(builder.create<gpu::GridDimOp>(loc,
                                                        gpu::Dimension::x));
    unsigned numBuffers = interface.getNumBuffers();
    numRows = kernel.getArgument(numBuffers);
    numSegments = kernel.getArgument(numBuffers + 1);
    if (interface.strategy == KernelStrategy::SegmentReduction)
      emitSegmentReduction();
    else
      emitRowMap();
    builder.create<gpu::ReturnOp>(loc);
  }

private:
  Value indexToI64(Value value) {
    return builder.create<arith::IndexCastOp>(code.loc, builder.getI64Type(),
                                              value);
  }
  Value buffer(Value operand) {
    return kernel.getArgument(interface.getBufferIndex(operand));
  }
  Value outputBuffer() {
    return kernel.getArgument(interface.getNumBuffers() - 1);
  }

  /// Accumulates row `row` of the reduced operand into `acc` (one value per
  /// row component).
  SmallVector<Value> emitAccumulate(OpBuilder &b, Location l, Value row,
                                    ValueRange acc) {
    auto sum = cast<SumOp>(interface.op);
    KernelCodeBuilder local(b, l);
    int64_t width = interface.width;
    Value base = b.create<arith::MulIOp>(l, row, local.i64(width));
    SmallVector<Value> updated;
    for (int64_t c = 0; c < width; ++c) {
      Value flat = b.create<arith::AddIOp>(l, base, local.i64(c));
      Value term = local.load(buffer(sum.getX()), interface.elementType, flat);
      updated.push_back(b.create<arith::AddFOp>(l, acc[c], term));
    }
    return updated;
  }

  /// Butterfly sum over the 32 lanes of a warp; every lane gets the total,
  /// always combined in the same order.
  Value emitWarpSum(OpBuilder &b, Location l, Value value) {
    Value width = b.create<arith::ConstantIntOp>(l, kWarpSize, 32);
    for (int64_t offset = kWarpSize / 2; offset >= 1; offset /= 2) {
      Value offsetValue = b.create<arith::ConstantIntOp>(l, offset, 32);
      auto shuffle = b.create<gpu::ShuffleOp>(l, value, offsetValue, width,
                                              gpu::ShuffleMode::XOR);
      value = b.create<arith::AddFOp>(l, value, shuffle.getShuffleResult());
    }
    return value;
  }

  /// The lanes of a group of `groupSize` threads, `member` being this one's
  /// position, write 0 to every element of segments [lo, hi) clamped to
  /// [0, S).
  void emitZeroSegments(OpBuilder &b, Location l, Value lo, Value hi,
                        Value member, Value groupSize) {
    KernelCodeBuilder local(b, l);
    int64_t width = interface.width;
    auto clamp = [&](Value v) {
      Value low = b.create<arith::MaxSIOp>(l, v, local.i64(0));
      return b.create<arith::MinSIOp>(l, low, numSegments);
    };
    Value first = b.create<arith::AddIOp>(
        l, b.create<arith::MulIOp>(l, clamp(lo), local.i64(width)), member);
    Value last = b.create<arith::MulIOp>(l, clamp(hi), local.i64(width));
    b.create<scf::ForOp>(
        l, first, last, groupSize, ValueRange{},
        [&](OpBuilder &ib, Location il, Value flat, ValueRange) {
          KernelCodeBuilder inner(ib, il);
          inner.store(inner.zero(interface.elementType), outputBuffer(), flat);
          ib.create<scf::YieldOp>(il);
        });
  }

  /// idx[row] for row in [0, N), else `fallback`, without reading memory
  /// outside idx.
  Value emitSegmentOr(OpBuilder &b, Location l, Value inRange, Value row,
                      int64_t fallback) {
    Value idx = buffer(interface.op->getOperand(1));
    auto ifOp = b.create<scf::IfOp>(
        l, inRange,
        [&](OpBuilder &tb, Location tl) {
          KernelCodeBuilder then(tb, tl);
          tb.create<scf::YieldOp>(tl, then.loadSegment(idx, row));
        },
        [&](OpBuilder &eb, Location el) {
          KernelCodeBuilder otherwise(eb, el);
          eb.create<scf::YieldOp>(el, otherwise.i64(fallback));
        });
    return ifOp.getResult(0);
  }

  // Warps own chunks of 32 rows and, within them, the segments that *start*
  // there (row 0, or idx changes): for each such segment the whole warp
  // walks its rows from the start (lane-strided, so loads coalesce) until
  // idx changes, then sums lanes with a fixed butterfly. Every row is read by
  // exactly one warp, no binary search is needed, and no atomics are used, so
  // results are bitwise reproducible. Empty segments are zeroed by the warp
  // owning the next segment start (or the last row). Any idx content keeps
  // every access in bounds: rows stop at N and writes are checked against S.
  void emitSegmentReduction() {
    Location loc = code.loc;
    Value idx = buffer(interface.op->getOperand(1));
    Value warpsPerBlock = code.i64(blockSize / kWarpSize);
    Value warpSize = code.i64(kWarpSize);
    Value lane = builder.create<arith::AndIOp>(loc, threadId,
                                               code.i64(kWarpSize - 1));
    Value warpInBlock = builder.create<arith::ShRUIOp>(loc, threadId,
                                                       code.i64(5));
    Value globalWarp = builder.create<arith::AddIOp>(
        loc, builder.create<arith::MulIOp>(loc, blockId, warpsPerBlock),
        warpInBlock);
    Value totalWarps = builder.create<arith::MulIOp>(loc, gridDim,
                                                     warpsPerBlock);
    Value numChunks = builder.create<arith::DivUIOp>(
        loc, builder.create<arith::AddIOp>(loc, numRows, code.i64(31)),
        warpSize);

    // No rows: every segment is empty.
    Value noRows = builder.create<arith::CmpIOp>(loc, arith::CmpIPredicate::eq,
                                                 numRows, code.i64(0));
    auto ifEmpty = builder.create<scf::IfOp>(loc, noRows, /*withElse=*/false);
    {
      OpBuilder b = ifEmpty.getThenBodyBuilder();
      KernelCodeBuilder then(b, loc);
      Value globalThread = b.create<arith::AddIOp>(
          loc, b.create<arith::MulIOp>(loc, blockId, then.i64(blockSize)),
          threadId);
      Value totalThreads =
          b.create<arith::MulIOp>(loc, gridDim, then.i64(blockSize));
      emitZeroSegments(b, loc, then.i64(0), numSegments, globalThread,
                       totalThreads);
    }

    builder.create<scf::ForOp>(
        loc, globalWarp, numChunks, totalWarps, ValueRange{},
        [&](OpBuilder &b, Location l, Value chunk, ValueRange) {
          KernelCodeBuilder local(b, l);
          Value rowBase = b.create<arith::MulIOp>(l, chunk, warpSize);
          Value row = b.create<arith::AddIOp>(l, rowBase, lane);
          Value inRange = b.create<arith::CmpIOp>(
              l, arith::CmpIPredicate::slt, row, numRows);
          Value segment = emitSegmentOr(b, l, inRange, row, -1);
          Value hasPrevious = b.create<arith::AndIOp>(
              l, inRange,
              b.create<arith::CmpIOp>(l, arith::CmpIPredicate::sgt, row,
                                      local.i64(0)));
          Value previousRow = b.create<arith::SubIOp>(l, row, local.i64(1));
          Value previous = emitSegmentOr(b, l, hasPrevious, previousRow, -1);
          Value changes = b.create<arith::CmpIOp>(l, arith::CmpIPredicate::ne,
                                                  previous, segment);
          Value isFirstRow = b.create<arith::CmpIOp>(
              l, arith::CmpIPredicate::eq, row, local.i64(0));
          Value isStart = b.create<arith::AndIOp>(
              l, inRange, b.create<arith::OrIOp>(l, isFirstRow, changes));
          Value fullMask = b.create<arith::ConstantIntOp>(l, -1, 32);
          Value starts = b.create<NVVM::VoteBallotOp>(l, b.getI32Type(),
                                                      fullMask, isStart);
          Value zero32 = b.create<arith::ConstantIntOp>(l, 0, 32);
          b.create<scf::WhileOp>(
              l, TypeRange{b.getI32Type()}, ValueRange{starts},
              [&](OpBuilder &cb, Location cl, ValueRange mask) {
                Value more = cb.create<arith::CmpIOp>(
                    cl, arith::CmpIPredicate::ne, mask[0], zero32);
                cb.create<scf::ConditionOp>(cl, more, mask);
              },
              [&](OpBuilder &wb, Location wl, ValueRange mask) {
                emitOwnedSegment(wb, wl, idx, rowBase, lane, mask[0]);
                Value one32 = wb.create<arith::ConstantIntOp>(wl, 1, 32);
                Value rest = wb.create<arith::AndIOp>(
                    wl, mask[0], wb.create<arith::SubIOp>(wl, mask[0], one32));
                wb.create<scf::YieldOp>(wl, rest);
              });

          // The warp holding the last row zeroes the segments after it.
          Value lastRow = b.create<arith::SubIOp>(l, numRows, local.i64(1));
          Value nextBase = b.create<arith::AddIOp>(l, rowBase, warpSize);
          Value holdsLast = b.create<arith::CmpIOp>(
              l, arith::CmpIPredicate::slt, lastRow, nextBase);
          auto ifLast = b.create<scf::IfOp>(l, holdsLast, /*withElse=*/false);
          OpBuilder tb = ifLast.getThenBodyBuilder();
          KernelCodeBuilder then(tb, l);
          Value lastSegment = then.loadSegment(idx, lastRow);
          Value after = tb.create<arith::AddIOp>(l, lastSegment, then.i64(1));
          emitZeroSegments(tb, l, after, numSegments, lane, warpSize);
          b.create<scf::YieldOp>(l);
        });
  }

  /// Reduces the segment starting at the lowest set lane of `mask` in the
  /// chunk at `rowBase`, after zeroing the empty segments just before it.
  void emitOwnedSegment(OpBuilder &b, Location l, Value idx, Value rowBase,
                        Value lane, Value mask) {
    KernelCodeBuilder local(b, l);
    Type elementType = interface.elementType;
    int64_t width = interface.width;
    Value leader = b.create<LLVM::CountTrailingZerosOp>(
        l, b.getI32Type(), mask, /*is_zero_poison=*/false);
    Value start = b.create<arith::AddIOp>(
        l, rowBase, b.create<arith::ExtUIOp>(l, b.getI64Type(), leader));
    Value segment = local.loadSegment(idx, start);
    Value hasPrevious = b.create<arith::CmpIOp>(l, arith::CmpIPredicate::sgt,
                                                start, local.i64(0));
    Value previous = emitSegmentOr(
        b, l, hasPrevious, b.create<arith::SubIOp>(l, start, local.i64(1)),
        -1);
    Value gapBegin = b.create<arith::AddIOp>(l, previous, local.i64(1));
    emitZeroSegments(b, l, gapBegin, segment, lane, local.i64(kWarpSize));

    auto ifValid = b.create<scf::IfOp>(
        l, local.isValidSegment(segment, numSegments), /*withElse=*/false);
    OpBuilder vb = ifValid.getThenBodyBuilder();
    KernelCodeBuilder valid(vb, l);
    SmallVector<Type> stateTypes{vb.getI64Type()};
    SmallVector<Value> state{
        vb.create<arith::AddIOp>(l, start, lane)};
    for (int64_t c = 0; c < width; ++c) {
      stateTypes.push_back(elementType);
      state.push_back(valid.zero(elementType));
    }
    // Each lane walks rows start + lane, + 32, ... while they belong to the
    // segment.
    auto walk = vb.create<scf::WhileOp>(
        l, stateTypes, state,
        [&](OpBuilder &cb, Location cl, ValueRange current) {
          Value row = current[0];
          Value inRange = cb.create<arith::CmpIOp>(
              cl, arith::CmpIPredicate::slt, row, numRows);
          Value rowSegment = emitSegmentOr(cb, cl, inRange, row, -1);
          Value same = cb.create<arith::CmpIOp>(cl, arith::CmpIPredicate::eq,
                                                rowSegment, segment);
          Value go = cb.create<arith::AndIOp>(cl, inRange, same);
          cb.create<scf::ConditionOp>(cl, go, current);
        },
        [&](OpBuilder &ab, Location al, ValueRange current) {
          KernelCodeBuilder inner(ab, al);
          SmallVector<Value> next{ab.create<arith::AddIOp>(
              al, current[0], inner.i64(kWarpSize))};
          llvm::append_range(
              next, emitAccumulate(ab, al, current[0], current.drop_front()));
          ab.create<scf::YieldOp>(al, next);
        });
    SmallVector<Value> totals;
    for (int64_t c = 0; c < width; ++c)
      totals.push_back(emitWarpSum(vb, l, walk.getResult(1 + c)));
    Value isLaneZero = vb.create<arith::CmpIOp>(l, arith::CmpIPredicate::eq,
                                                lane, valid.i64(0));
    auto ifWriter = vb.create<scf::IfOp>(l, isLaneZero, /*withElse=*/false);
    OpBuilder wb = ifWriter.getThenBodyBuilder();
    KernelCodeBuilder writer(wb, l);
    Value base = wb.create<arith::MulIOp>(l, segment, writer.i64(width));
    for (int64_t c = 0; c < width; ++c)
      writer.store(totals[c], outputBuffer(),
                   wb.create<arith::AddIOp>(l, base, writer.i64(c)));
  }

  // One thread per output element, grid-striding over the W * N elements.
  void emitRowMap() {
    Location loc = code.loc;
    auto gather = cast<GatherOp>(interface.op);
    int64_t width = interface.width;
    Value first = builder.create<arith::AddIOp>(
        loc, builder.create<arith::MulIOp>(loc, blockId, code.i64(blockSize)),
        threadId);
    Value stride =
        builder.create<arith::MulIOp>(loc, gridDim, code.i64(blockSize));
    Value total = builder.create<arith::MulIOp>(loc, numRows, code.i64(width));
    builder.create<scf::ForOp>(
        loc, first, total, stride, ValueRange{},
        [&](OpBuilder &b, Location l, Value flat, ValueRange) {
          KernelCodeBuilder local(b, l);
          Value row = b.create<arith::DivUIOp>(l, flat, local.i64(width));
          Value component = b.create<arith::RemUIOp>(l, flat, local.i64(width));
          Value segment = local.loadSegment(buffer(gather.getIdx()), row);
          Value valid = local.isValidSegment(segment, numSegments);
          Value source = b.create<arith::AddIOp>(
              l, b.create<arith::MulIOp>(l, segment, local.i64(width)),
              component);
          Value value = local.loadOrZero(valid, buffer(gather.getY()),
                                         interface.elementType, source);
          local.store(value, outputBuffer(), flat);
          b.create<scf::YieldOp>(l);
        });
  }

  const KernelInterface &interface;
  gpu::GPUFuncOp kernel;
  int64_t blockSize;
  OpBuilder builder;
  KernelCodeBuilder code;
  Value threadId, blockId, gridDim, numRows, numSegments;
};

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
      if (isKernelFunctionCandidate(func))
        candidates.push_back(func);
    if (candidates.empty())
      return;

    OpBuilder builder(ctx);
    builder.setInsertionPointToEnd(module.getBody());
    auto gpuModule = module.lookupSymbol<gpu::GPUModuleOp>(kKernelModuleName);
    if (!gpuModule)
      gpuModule = builder.create<gpu::GPUModuleOp>(module.getLoc(),
                                                   kKernelModuleName);
    module->setAttr(gpu::GPUDialect::getContainerModuleAttrName(),
                    builder.getUnitAttr());
    SymbolTable kernels(gpuModule);

    auto ptrType = LLVM::LLVMPointerType::get(ctx);
    for (func::FuncOp func : candidates) {
      FailureOr<KernelInterface> interface = analyzeKernelFunction(func);
      if (failed(interface))
        return signalPassFailure();
      SmallVector<Type> params(interface->getNumBuffers(), ptrType);
      params.append(2, builder.getI64Type());
      OpBuilder detached(ctx);
      auto kernel = detached.create<gpu::GPUFuncOp>(
          func.getLoc(), func.getSymName(),
          builder.getFunctionType(params, {}));
      kernel->setAttr(gpu::GPUDialect::getKernelFuncAttrName(),
                      builder.getUnitAttr());
      kernel.setKnownBlockSizeAttr(builder.getDenseI32ArrayAttr(
          {static_cast<int32_t>(blockSize), 1, 1}));
      GPUKernelEmitter(*interface, kernel, blockSize).emit();
      func.erase();
      kernels.insert(kernel);
    }
  }
};
} // namespace
