//===- SegToGPU.cpp - kernel functions to gpu.func kernels ----------------===//

#include "segops/Conversion/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/SymbolTable.h"
#include "segops/Conversion/KernelCodeBuilder.h"
#include "segops/Conversion/SegmentProgram.h"

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
/// Emits one gpu.func kernel for a segment program.
//
// Warps own chunks of 32 rows (grid-stride) and the segments that *start* in
// them (row 0, or where idx changes), found with a ballot. For each such
// segment the warp finds where it ends (a lane-strided walk over idx and a
// warp minimum), runs the program's passes over its rows lane-strided (so
// loads coalesce), and combines partial sums with a fixed xor butterfly, so
// every lane holds the totals and results are bitwise reproducible; lane 0
// stores the segment outputs. Empty segments (between two starts, before the
// first or after the last) are evaluated one per lane with no rows. Rows
// whose segment is outside [0, S) get zero row outputs. No atomics, no
// binary searches, and every access is checked against N and S whatever idx
// holds.
class GPUKernelEmitter {
public:
  GPUKernelEmitter(const SegmentProgram &program, gpu::GPUFuncOp kernel,
                   int64_t blockSize)
      : program(program), kernel(kernel), blockSize(blockSize),
        builder(OpBuilder::atBlockBegin(&kernel.getBody().front())),
        loc(program.func.getLoc()),
        buffers(kernel.getArguments().take_front(program.buffers.size())),
        numRows(kernel.getArgument(program.buffers.size())),
        numSegments(kernel.getArgument(program.buffers.size() + 1)),
        emitter(program, buffers, numRows, numSegments) {
    idx = buffers[program.argumentBuffer[cast<BlockArgument>(program.idx)
                                             .getArgNumber()]];
  }

  void emit();

private:
  Value i64(OpBuilder &b, int64_t value) {
    return KernelCodeBuilder(b, loc).i64(value);
  }
  Value indexToI64(OpBuilder &b, Value value) {
    return b.create<arith::IndexCastOp>(loc, b.getI64Type(), value);
  }
  /// idx[row] where `inRange`, else -1, never reading outside idx.
  Value segmentOr(OpBuilder &b, Value inRange, Value row);
  /// Butterfly over the warp; every lane gets the result.
  Value warpReduce(OpBuilder &b, Value value, bool minimum);
  /// Each lane of a group of `groupSize` threads evaluates the empty
  /// segments [lo, hi) (clamped to [0, S)) it is given, `member` being its
  /// position in the group.
  void emitEmptySegments(OpBuilder &b, Value lo, Value hi, Value member,
                         Value groupSize);
  void emitOwnedSegment(OpBuilder &b, Value rowBase, Value mask);

  const SegmentProgram &program;
  gpu::GPUFuncOp kernel;
  int64_t blockSize;
  OpBuilder builder;
  Location loc;
  SmallVector<Value> buffers;
  Value numRows, numSegments, idx;
  Value lane;
  SegmentProgramEmitter emitter;
};
} // namespace

Value GPUKernelEmitter::segmentOr(OpBuilder &b, Value inRange, Value row) {
  auto ifOp = b.create<scf::IfOp>(
      loc, inRange,
      [&](OpBuilder &tb, Location tl) {
        tb.create<scf::YieldOp>(
            tl, KernelCodeBuilder(tb, tl).loadSegment(idx, row));
      },
      [&](OpBuilder &eb, Location el) {
        eb.create<scf::YieldOp>(el, KernelCodeBuilder(eb, el).i64(-1));
      });
  return ifOp.getResult(0);
}

Value GPUKernelEmitter::warpReduce(OpBuilder &b, Value value, bool minimum) {
  Value width = b.create<arith::ConstantIntOp>(loc, kWarpSize, 32);
  for (int64_t offset = kWarpSize / 2; offset >= 1; offset /= 2) {
    Value offsetValue = b.create<arith::ConstantIntOp>(loc, offset, 32);
    Value other = b.create<gpu::ShuffleOp>(loc, value, offsetValue, width,
                                           gpu::ShuffleMode::XOR)
                      .getShuffleResult();
    value = minimum ? b.create<arith::MinSIOp>(loc, value, other).getResult()
                    : b.create<arith::AddFOp>(loc, value, other).getResult();
  }
  return value;
}

void GPUKernelEmitter::emitEmptySegments(OpBuilder &b, Value lo, Value hi,
                                         Value member, Value groupSize) {
  auto clamp = [&](Value v) {
    return b.create<arith::MinSIOp>(
        loc, b.create<arith::MaxSIOp>(loc, v, i64(b, 0)), numSegments);
  };
  Value first = b.create<arith::AddIOp>(loc, clamp(lo), member);
  b.create<scf::ForOp>(
      loc, first, clamp(hi), groupSize, ValueRange{},
      [&](OpBuilder &sb, Location sl, Value segment, ValueRange) {
        emitter.emitSegment(sb, sl, segment, i64(sb, 0), /*rowLoop=*/nullptr,
                            /*combine=*/nullptr, Value());
        sb.create<scf::YieldOp>(sl);
      });
}

void GPUKernelEmitter::emitOwnedSegment(OpBuilder &b, Value rowBase,
                                        Value mask) {
  KernelCodeBuilder code(b, loc);
  Value leader = b.create<LLVM::CountTrailingZerosOp>(loc, b.getI32Type(), mask,
                                                      /*is_zero_poison=*/false);
  Value start = b.create<arith::AddIOp>(
      loc, rowBase, b.create<arith::ExtUIOp>(loc, b.getI64Type(), leader));
  Value segment = code.loadSegment(idx, start);
  Value hasPrevious = b.create<arith::CmpIOp>(loc, arith::CmpIPredicate::sgt,
                                              start, code.i64(0));
  Value previous = segmentOr(b, hasPrevious,
                             b.create<arith::SubIOp>(loc, start, code.i64(1)));
  emitEmptySegments(b, b.create<arith::AddIOp>(loc, previous, code.i64(1)),
                    segment, lane, code.i64(kWarpSize));

  // The segment's end: each lane walks rows start + lane, + 32, ... while idx
  // stays the same; the first row that leaves it is the warp minimum.
  auto walk = b.create<scf::WhileOp>(
      loc, TypeRange{b.getI64Type()},
      ValueRange{b.create<arith::AddIOp>(loc, start, lane)},
      [&](OpBuilder &cb, Location cl, ValueRange rows) {
        Value inRange = cb.create<arith::CmpIOp>(cl, arith::CmpIPredicate::slt,
                                                 rows[0], numRows);
        Value same =
            cb.create<arith::CmpIOp>(cl, arith::CmpIPredicate::eq,
                                     segmentOr(cb, inRange, rows[0]), segment);
        cb.create<scf::ConditionOp>(
            cl, cb.create<arith::AndIOp>(cl, inRange, same), rows);
      },
      [&](OpBuilder &ab, Location al, ValueRange rows) {
        ab.create<scf::YieldOp>(al, ValueRange{ab.create<arith::AddIOp>(
                                        al, rows[0], i64(ab, kWarpSize))});
      });
  Value end = warpReduce(b, walk.getResult(0), /*minimum=*/true);
  Value first = b.create<arith::AddIOp>(loc, start, lane);

  auto ifValid = b.create<scf::IfOp>(
      loc, code.isValidSegment(segment, numSegments), /*withElse=*/true);
  {
    OpBuilder vb = ifValid.getThenBodyBuilder();
    Value count = vb.create<arith::SubIOp>(loc, end, start);
    auto rowLoop = [&](OpBuilder &rb, Location rl, ValueRange init,
                       SegmentProgramEmitter::RowBody body,
                       bool /*storesRows*/) -> SmallVector<Value> {
      auto loop = rb.create<scf::ForOp>(
          rl, first, end, i64(rb, kWarpSize), init,
          [&](OpBuilder &ib, Location il, Value row, ValueRange acc) {
            ib.create<scf::YieldOp>(
                il, body(ib, il, row, /*lanes=*/1, /*laneMask=*/Value(), acc));
          });
      return SmallVector<Value>(loop.getResults());
    };
    auto combine = [&](OpBuilder &cb, Location, Value partial) {
      return warpReduce(cb, partial, /*minimum=*/false);
    };
    Value isLaneZero = vb.create<arith::CmpIOp>(loc, arith::CmpIPredicate::eq,
                                                lane, i64(vb, 0));
    emitter.emitSegment(vb, loc, segment, count, rowLoop, combine, isLaneZero);
  }
  if (program.hasRowOutputs) {
    // Rows of an invalid segment: zero row outputs.
    OpBuilder eb = ifValid.getElseBodyBuilder();
    eb.create<scf::ForOp>(
        loc, first, end, i64(eb, kWarpSize), ValueRange{},
        [&](OpBuilder &ib, Location il, Value row, ValueRange) {
          emitter.emitZeroRowOutputs(ib, il, row);
          ib.create<scf::YieldOp>(il);
        });
  }
}

void GPUKernelEmitter::emit() {
  OpBuilder &b = builder;
  Value threadId =
      indexToI64(b, b.create<gpu::ThreadIdOp>(loc, gpu::Dimension::x));
  Value blockId =
      indexToI64(b, b.create<gpu::BlockIdOp>(loc, gpu::Dimension::x));
  Value gridDim =
      indexToI64(b, b.create<gpu::GridDimOp>(loc, gpu::Dimension::x));
  lane = b.create<arith::AndIOp>(loc, threadId, i64(b, kWarpSize - 1));
  Value warpsPerBlock = i64(b, blockSize / kWarpSize);
  Value globalWarp = b.create<arith::AddIOp>(
      loc, b.create<arith::MulIOp>(loc, blockId, warpsPerBlock),
      b.create<arith::ShRUIOp>(loc, threadId, i64(b, 5)));
  Value totalWarps = b.create<arith::MulIOp>(loc, gridDim, warpsPerBlock);
  Value numChunks = b.create<arith::DivUIOp>(
      loc, b.create<arith::AddIOp>(loc, numRows, i64(b, kWarpSize - 1)),
      i64(b, kWarpSize));

  // No rows: every thread of the grid evaluates empty segments.
  Value noRows = b.create<arith::CmpIOp>(loc, arith::CmpIPredicate::eq, numRows,
                                         i64(b, 0));
  auto ifEmpty = b.create<scf::IfOp>(loc, noRows, /*withElse=*/false);
  {
    OpBuilder eb = ifEmpty.getThenBodyBuilder();
    Value globalThread = eb.create<arith::AddIOp>(
        loc, eb.create<arith::MulIOp>(loc, blockId, i64(eb, blockSize)),
        threadId);
    Value totalThreads =
        eb.create<arith::MulIOp>(loc, gridDim, i64(eb, blockSize));
    emitEmptySegments(eb, i64(eb, 0), numSegments, globalThread, totalThreads);
  }

  b.create<scf::ForOp>(
      loc, globalWarp, numChunks, totalWarps, ValueRange{},
      [&](OpBuilder &cb, Location, Value chunk, ValueRange) {
        KernelCodeBuilder code(cb, loc);
        Value rowBase =
            cb.create<arith::MulIOp>(loc, chunk, i64(cb, kWarpSize));
        Value row = cb.create<arith::AddIOp>(loc, rowBase, lane);
        Value inRange = cb.create<arith::CmpIOp>(loc, arith::CmpIPredicate::slt,
                                                 row, numRows);
        Value segment = segmentOr(cb, inRange, row);
        Value hasPrevious = cb.create<arith::AndIOp>(
            loc, inRange,
            cb.create<arith::CmpIOp>(loc, arith::CmpIPredicate::sgt, row,
                                     i64(cb, 0)));
        Value previous = segmentOr(
            cb, hasPrevious, cb.create<arith::SubIOp>(loc, row, i64(cb, 1)));
        Value changes = cb.create<arith::CmpIOp>(loc, arith::CmpIPredicate::ne,
                                                 previous, segment);
        Value isFirstRow = cb.create<arith::CmpIOp>(
            loc, arith::CmpIPredicate::eq, row, i64(cb, 0));
        Value isStart = cb.create<arith::AndIOp>(
            loc, inRange, cb.create<arith::OrIOp>(loc, isFirstRow, changes));
        Value fullMask = cb.create<arith::ConstantIntOp>(loc, -1, 32);
        Value starts = cb.create<NVVM::VoteBallotOp>(loc, cb.getI32Type(),
                                                     fullMask, isStart);
        Value zero32 = cb.create<arith::ConstantIntOp>(loc, 0, 32);
        cb.create<scf::WhileOp>(
            loc, TypeRange{cb.getI32Type()}, ValueRange{starts},
            [&](OpBuilder &wb, Location wl, ValueRange mask) {
              Value more = wb.create<arith::CmpIOp>(
                  wl, arith::CmpIPredicate::ne, mask[0], zero32);
              wb.create<scf::ConditionOp>(wl, more, mask);
            },
            [&](OpBuilder &wb, Location wl, ValueRange mask) {
              emitOwnedSegment(wb, rowBase, mask[0]);
              Value one32 = wb.create<arith::ConstantIntOp>(wl, 1, 32);
              Value rest = wb.create<arith::AndIOp>(
                  wl, mask[0], wb.create<arith::SubIOp>(wl, mask[0], one32));
              wb.create<scf::YieldOp>(wl, rest);
            });

        // The warp holding the last row evaluates the segments after it.
        Value lastRow = cb.create<arith::SubIOp>(loc, numRows, i64(cb, 1));
        Value holdsLast = cb.create<arith::CmpIOp>(
            loc, arith::CmpIPredicate::slt, lastRow,
            cb.create<arith::AddIOp>(loc, rowBase, i64(cb, kWarpSize)));
        auto ifLast = cb.create<scf::IfOp>(loc, holdsLast, /*withElse=*/false);
        OpBuilder lb = ifLast.getThenBodyBuilder();
        Value lastSegment =
            KernelCodeBuilder(lb, loc).loadSegment(idx, lastRow);
        emitEmptySegments(
            lb, lb.create<arith::AddIOp>(loc, lastSegment, i64(lb, 1)),
            numSegments, lane, i64(lb, kWarpSize));
        cb.create<scf::YieldOp>(loc);
      });
  b.create<gpu::ReturnOp>(loc);
}

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

    OpBuilder builder(ctx);
    builder.setInsertionPointToEnd(module.getBody());
    auto gpuModule = module.lookupSymbol<gpu::GPUModuleOp>(kKernelModuleName);
    if (!gpuModule)
      gpuModule =
          builder.create<gpu::GPUModuleOp>(module.getLoc(), kKernelModuleName);
    module->setAttr(gpu::GPUDialect::getContainerModuleAttrName(),
                    builder.getUnitAttr());
    SymbolTable kernels(gpuModule);

    auto ptrType = LLVM::LLVMPointerType::get(ctx);
    for (func::FuncOp func : candidates) {
      FailureOr<SegmentProgram> program = SegmentProgram::analyze(func);
      if (failed(program))
        return signalPassFailure();
      SmallVector<Type> params(program->buffers.size(), ptrType);
      params.append(2, builder.getI64Type());
      OpBuilder detached(ctx);
      auto kernel =
          detached.create<gpu::GPUFuncOp>(func.getLoc(), func.getSymName(),
                                          builder.getFunctionType(params, {}));
      kernel->setAttr(gpu::GPUDialect::getKernelFuncAttrName(),
                      builder.getUnitAttr());
      kernel.setKnownBlockSizeAttr(builder.getDenseI32ArrayAttr(
          {static_cast<int32_t>(blockSize), 1, 1}));
      GPUKernelEmitter(*program, kernel, blockSize).emit();
      useSqrtIntrinsic(kernel);
      func.erase();
      kernels.insert(kernel);
    }
  }
};
} // namespace
