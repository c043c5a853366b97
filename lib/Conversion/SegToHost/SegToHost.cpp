//===- SegToHost.cpp - kernel functions to host loop functions ------------===//

#include "segops/Conversion/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "segops/Conversion/KernelCodeBuilder.h"
#include "segops/Conversion/KernelSignature.h"
#include "segops/Conversion/SegmentProgram.h"
#include "segops/Dialect/Seg/IR/SegOps.h"

#include <limits>

namespace mlir {
namespace seg {
#define GEN_PASS_DEF_CONVERTSEGTOHOST
#include "segops/Conversion/Passes.h.inc"
} // namespace seg
} // namespace mlir

using namespace mlir;
using namespace mlir::seg;

/// Zeroes the row outputs of rows [from, to).
static void zeroRows(OpBuilder &b, Location loc, SegmentProgramEmitter &emitter,
                     Value from, Value to) {
  KernelCodeBuilder code(b, loc);
  b.create<scf::ForOp>(loc, from, to, code.i64(1), ValueRange{},
                       [&](OpBuilder &lb, Location ll, Value row, ValueRange) {
                         emitter.emitZeroRowOutputs(lb, ll, row);
                         lb.create<scf::YieldOp>(ll);
                       });
}

namespace {
/// The parameters of a host kernel (the host ABI), with the range a call
/// computes (segments, or rows for row maps) clamped to [0, S] or [0, N], so
/// that no caller can make the kernel write out of bounds.
struct HostKernelArguments {
  HostKernelArguments(const SegmentProgram &program, func::FuncOp kernel,
                      KernelCodeBuilder &code, bool rowRange) {
    KernelArguments arguments(kernel.getBody().front(),
                              program.buffers.size(),
                              segrt::abi::Entry::HostKernel);
    buffers.assign(arguments.buffers().begin(), arguments.buffers().end());
    numRows = arguments.get(segrt::abi::Param::NumRows);
    // Segments past INT32_MAX hold no rows (idx is i32) and the runtime
    // passes no more: with S clamped, every segment a segment kernel walks
    // and its successor fit i32, as scanSegment requires.
    numSegments = arguments.get(segrt::abi::Param::NumSegments);
    if (!rowRange)
      numSegments = code.builder.create<arith::MinSIOp>(
          code.loc, numSegments, code.i64(std::numeric_limits<int32_t>::max()));
    Value limit = rowRange ? numRows : numSegments;
    begin = clamp(code, arguments.get(segrt::abi::Param::Begin), limit);
    end = clamp(code, arguments.get(segrt::abi::Param::End), limit);
    firstRow = arguments.get(segrt::abi::Param::FirstRow);
    idx = buffers[program.argumentBuffer[cast<BlockArgument>(program.idx)
                                             .getArgNumber()]];
  }

  SmallVector<Value> buffers;
  Value numRows, numSegments, begin, end, idx;
  /// Segment kernels: the first row of segment `begin` if the caller knows
  /// it (>= 0; clamped to [0, N]), else -1. Row maps ignore it.
  Value firstRow;

private:
  Value clamp(KernelCodeBuilder &code, Value value, Value limit) {
    Value low =
        code.builder.create<arith::MaxSIOp>(code.loc, value, code.i64(0));
    return code.builder.create<arith::MinSIOp>(code.loc, low, limit);
  }
};
} // namespace

/// The host's CombineBuilder: one thread holds a segment's whole total.
static Value combineNothing(OpBuilder &, Location, Value total,
                            arith::AtomicRMWKind) {
  return total;
}

// The number of interleaved partial sums per reduction in a segment's row
// loop is the pass's `interleave` option (4 for the op library).

/// Rows of the whole-block path for short segments.
static constexpr int64_t kShortSegmentRows = 16;

/// Rows per vector body for `elementType` on a target whose vector
/// registers hold `vectorBits` (the pass's vector-bits): a register's worth
/// of each component, at least 2 and at most a short-segment block.
static int64_t vectorLanes(Type elementType, int64_t vectorBits) {
  int64_t lanes = vectorBits / elementType.getIntOrFloatBitWidth();
  return std::clamp<int64_t>(lanes, 2, kShortSegmentRows);
}

/// Components per element past which rows are not vectorised across rows:
/// a vector of rows holds every component of `lanes` rows, so wide feature
/// rows would make vectors of lanes * F elements, shuffled apart into F
/// vectors. A wide row's F contiguous components are vectorised across
/// components instead (by LLVM's SLP vectoriser, on scalar row code).
static constexpr int64_t kMaxRowVectorComponents = 9;

/// Rows per vector body of `program`: 1 (scalar rows) for wide rows.
static int64_t rowLanes(const SegmentProgram &program, int64_t vectorBits) {
  if (program.maxComponents() > kMaxRowVectorComponents)
    return 1;
  return vectorLanes(program.elementType, vectorBits);
}

/// A segment's rows one at a time, in order: the row loop of wide rows.
static SmallVector<Value>
emitScalarRowLoop(OpBuilder &b, Location loc, Value rowBegin, Value rowEnd,
                  ValueRange init, SegmentProgramEmitter::RowBody body) {
  KernelCodeBuilder code(b, loc);
  auto rows = b.create<scf::ForOp>(
      loc, rowBegin, rowEnd, code.i64(1), init,
      [&](OpBuilder &lb, Location ll, Value row, ValueRange acc) {
        lb.create<scf::YieldOp>(
            ll, body(lb, ll, row, /*lanes=*/1, /*laneMask=*/Value(), acc));
      });
  return SmallVector<Value>(rows.getResults());
}

/// Combines groups of `kinds.size()` vectors (a power-of-two count of them)
/// pairwise, group i + n/2 into group i, then each remaining vector's lanes:
/// one scalar per accumulator, combined (by its kind) in a fixed order.
static SmallVector<Value>
sumVectorGroups(OpBuilder &b, Location loc, SmallVector<Value> vectors,
                ArrayRef<arith::AtomicRMWKind> kinds) {
  unsigned width = kinds.size();
  if (width == 0) // a pass with no reductions
    return {};
  for (size_t live = vectors.size() / width; live > 1; live /= 2)
    for (size_t i = 0; i < live / 2; ++i)
      for (unsigned c = 0; c < width; ++c)
        vectors[i * width + c] =
            arith::getReductionOp(kinds[c], b, loc, vectors[i * width + c],
                                  vectors[(i + live / 2) * width + c]);
  KernelCodeBuilder code(b, loc);
  SmallVector<Value> sums;
  for (unsigned c = 0; c < width; ++c)
    sums.push_back(code.horizontalReduce(vectors[c], kinds[c]));
  return sums;
}

/// Vectors of `lanes` copies of each accumulator's initial value (its
/// combining kind's identity).
static SmallVector<Value> splatInit(KernelCodeBuilder &code, ValueRange init,
                                    int64_t lanes) {
  SmallVector<Value> vectors;
  for (Value value : init)
    vectors.push_back(code.splat(value, lanes));
  return vectors;
}

// A segment's rows run through the body as vectors of `lanes` rows, in
// interleave independent vector partial sums (row r, counted from the
// segment's first row, adds into lane r mod lanes of partial
// (r / lanes) mod interleave); then whole vectors into partial 0; then the
// last rows, as one vector with the rows past the segment's end masked off
// where a whole vector from there lies below `tailLimit` (the same rule as
// the short-segment block's), else one at a time. The partials are added
// pairwise, their lanes added in a fixed order, and scalar rows added
// after. Independent chains let the adds overlap. A masked tail saves up to
// lanes - 1 scalar trips of the body per segment: ~30-row segments of a
// body with transcendentals spent most of their time there.
static SmallVector<Value>
emitVectorRowLoop(OpBuilder &b, Location loc, Value rowBegin, Value rowEnd,
                  ValueRange init, ArrayRef<arith::AtomicRMWKind> kinds,
                  SegmentProgramEmitter::RowBody body, int64_t lanes,
                  int64_t interleave, Value tailLimit) {
  KernelCodeBuilder code(b, loc);
  Value count = b.create<arith::SubIOp>(loc, rowEnd, rowBegin);
  auto roundDown = [&](int64_t multiple) {
    Value step = code.i64(multiple);
    return b.create<arith::AddIOp>(
        loc, rowBegin,
        b.create<arith::MulIOp>(loc, b.create<arith::DivUIOp>(loc, count, step),
                                step));
  };
  Value interleavedEnd = roundDown(interleave * lanes);
  Value vectorEnd = roundDown(lanes);
  unsigned width = init.size();
  SmallVector<Value> partialsInit;
  for (int64_t i = 0; i < interleave; ++i)
    llvm::append_range(partialsInit, splatInit(code, init, lanes));
  auto interleaved = b.create<scf::ForOp>(
      loc, rowBegin, interleavedEnd, code.i64(interleave * lanes),
      partialsInit,
      [&](OpBuilder &lb, Location ll, Value row, ValueRange partials) {
        KernelCodeBuilder local(lb, ll);
        SmallVector<Value> next;
        for (int64_t i = 0; i < interleave; ++i) {
          Value r =
              i == 0 ? row
                     : lb.create<arith::AddIOp>(ll, row, local.i64(i * lanes));
          llvm::append_range(next, body(lb, ll, r, lanes, /*laneMask=*/Value(),
                                        partials.slice(i * width, width)));
        }
        lb.create<scf::YieldOp>(ll, next);
      });
  auto vectors = b.create<scf::ForOp>(
      loc, interleavedEnd, vectorEnd, code.i64(lanes),
      interleaved.getResults().take_front(width),
      [&](OpBuilder &lb, Location ll, Value row, ValueRange acc) {
        lb.create<scf::YieldOp>(
            ll, body(lb, ll, row, lanes, /*laneMask=*/Value(), acc));
      });
  SmallVector<Value> partials(vectors.getResults());
  Value scalarBegin = vectorEnd;
  if (tailLimit) {
    Value left = b.create<arith::SubIOp>(loc, rowEnd, vectorEnd);
    Value tailFits = b.create<arith::AndIOp>(
        loc,
        b.create<arith::CmpIOp>(loc, arith::CmpIPredicate::sgt, left,
                                code.i64(0)),
        b.create<arith::CmpIOp>(
            loc, arith::CmpIPredicate::sle,
            b.create<arith::AddIOp>(loc, vectorEnd, code.i64(lanes)),
            tailLimit));
    auto tail = b.create<scf::IfOp>(
        loc, tailFits,
        [&](OpBuilder &tb, Location tl) {
          KernelCodeBuilder local(tb, tl);
          SmallVector<int32_t> positions;
          for (int64_t l = 0; l < lanes; ++l)
            positions.push_back(l);
          Value inSegment = tb.create<arith::CmpIOp>(
              tl, arith::CmpIPredicate::slt,
              tb.create<arith::ConstantOp>(tl, tb.getI32VectorAttr(positions)),
              local.splat(tb.create<arith::TruncIOp>(tl, tb.getI32Type(), left),
                          lanes));
          tb.create<scf::YieldOp>(
              tl, body(tb, tl, vectorEnd, lanes, inSegment, partials));
        },
        [&](OpBuilder &eb, Location el) {
          eb.create<scf::YieldOp>(el, partials);
        });
    partials.assign(tail.getResults().begin(), tail.getResults().end());
    scalarBegin = b.create<arith::SelectOp>(loc, tailFits, rowEnd, vectorEnd);
  }
  llvm::append_range(partials, interleaved.getResults().drop_front(width));
  SmallVector<Value> sums = sumVectorGroups(b, loc, partials, kinds);
  return emitScalarRowLoop(b, loc, scalarBegin, rowEnd, sums, body);
}

// A segment of at most kShortSegmentRows rows whose block of
// kShortSegmentRows rows lies within N: the body runs on the whole block as
// vectors with the rows past the segment's end masked off (they belong to
// later segments: their terms are 0 and their row outputs are read and
// stored back unchanged, then overwritten when their own segment runs), and
// the vectors are added pairwise, then their lanes. No branch depends on the
// segment's length, where the general loop's trip counts do (a mispredicted
// branch or two per segment, which dominate ~10-row segments).
static SmallVector<Value>
emitShortSegmentBlock(OpBuilder &b, Location loc, Value rowBegin, Value count,
                      ValueRange init, ArrayRef<arith::AtomicRMWKind> kinds,
                      SegmentProgramEmitter::RowBody body, int64_t lanes) {
  KernelCodeBuilder code(b, loc);
  int64_t numVectors = kShortSegmentRows / lanes;
  SmallVector<Value> identities = splatInit(code, init, lanes);
  Value counts =
      code.splat(b.create<arith::TruncIOp>(loc, b.getI32Type(), count), lanes);
  SmallVector<Value> terms;
  for (int64_t j = 0; j < numVectors; ++j) {
    Value row =
        j == 0 ? rowBegin
               : b.create<arith::AddIOp>(loc, rowBegin, code.i64(j * lanes));
    SmallVector<int32_t> positions;
    for (int64_t l = 0; l < lanes; ++l)
      positions.push_back(j * lanes + l);
    Value inSegment = b.create<arith::CmpIOp>(
        loc, arith::CmpIPredicate::slt,
        b.create<arith::ConstantOp>(loc, b.getI32VectorAttr(positions)),
        counts);
    llvm::append_range(terms,
                       body(b, loc, row, lanes, inSegment, identities));
  }
  return sumVectorGroups(b, loc, terms, kinds);
}

/// Row-output vectors a short-segment block may store (each a load, a
/// select and a store, for 16 rows whatever the segment's length): past
/// four, the stores cost more than the general loop saves
/// (docs/benchmarks.md, "Host code-generation choices").
static constexpr int64_t kMaxShortBlockStoreVectors = 4;

/// The components of the program's row outputs, per row, all outputs
/// together.
static int64_t rowOutputComponents(const SegmentProgram &program) {
  int64_t total = 0;
  for (Value result :
       program.func.getBody().front().getTerminator()->getOperands())
    if (program.info(result).space == ValueSpace::Row)
      total += program.info(result).numComponents();
  return total;
}

/// A segment's row loop: the short-segment block where it applies (a
/// segment of at most kShortSegmentRows rows whose block ends within
/// `numRows`, and, for a body storing rows, only if it stores few vectors),
/// else the vector loop. Masked lanes are not stored (masked stores), so
/// the block and the masked tail never write rows of other segments, and
/// whether they run depends on the segment and N alone, never on which
/// rows a thread's call covers: results do not depend on the thread split.
static SmallVector<Value>
emitSegmentRowLoop(OpBuilder &b, Location loc, Value rowBegin, Value rowEnd,
                   Value numRows, ValueRange init,
                   ArrayRef<arith::AtomicRMWKind> kinds,
                   SegmentProgramEmitter::RowBody body, bool storesRows,
                   const SegmentProgram &program, int64_t lanes,
                   int64_t interleave) {
  if (lanes == 1)
    return emitScalarRowLoop(b, loc, rowBegin, rowEnd, init, body);
  int64_t storeVectors =
      rowOutputComponents(program) * (kShortSegmentRows / lanes);
  // Masked vectors (the short-segment block, the tail) read rows past the
  // segment: all below N.
  Value maskedRowsEnd = numRows;
  if (storesRows && storeVectors > kMaxShortBlockStoreVectors)
    return emitVectorRowLoop(b, loc, rowBegin, rowEnd, init, kinds, body,
                             lanes, interleave, maskedRowsEnd);
  KernelCodeBuilder code(b, loc);
  Value count = b.create<arith::SubIOp>(loc, rowEnd, rowBegin);
  Value isShort = b.create<arith::CmpIOp>(loc, arith::CmpIPredicate::sle, count,
                                          code.i64(kShortSegmentRows));
  Value blockFits = b.create<arith::CmpIOp>(
      loc, arith::CmpIPredicate::sle,
      b.create<arith::AddIOp>(loc, rowBegin, code.i64(kShortSegmentRows)),
      maskedRowsEnd);
  auto ifShort = b.create<scf::IfOp>(
      loc, b.create<arith::AndIOp>(loc, isShort, blockFits),
      [&](OpBuilder &tb, Location tl) {
        tb.create<scf::YieldOp>(
            tl,
            emitShortSegmentBlock(tb, tl, rowBegin, count, init, kinds, body,
                                  lanes));
      },
      [&](OpBuilder &eb, Location el) {
        eb.create<scf::YieldOp>(
            el, emitVectorRowLoop(eb, el, rowBegin, rowEnd, init, kinds, body,
                                  lanes, interleave, maskedRowsEnd));
      });
  return SmallVector<Value>(ifShort.getResults());
}

static constexpr int64_t kCacheLineBytes = 64;
/// Cache lines of row inputs per scanned block of idx up to which a segment
/// kernel prefetches them during the scan (see emitHostKernel).
static constexpr int64_t kMaxPrefetchLinesPerBlock = 3;

/// Segments whose outputs are computed together, after their row loops.
static constexpr int64_t kFinishBatch = 16;

/// Whether a program's segment outputs are computed in batches (see
/// emitHostKernel): programs of one pass with no row outputs (their outputs
/// depend only on their segment's totals and row count) whose epilogue takes
/// a square root (SegmentOpInterface::hasCostlyEpilogue, or a square root
/// of segment values); docs/benchmarks.md has the measurement.
static bool hasBatchedFinish(const SegmentProgram &program) {
  if (program.numPasses != 1 || program.hasRowOutputs)
    return false;
  return llvm::any_of(program.func.getOps(), [&](Operation &op) {
    if (auto segmentOp = dyn_cast<SegmentOpInterface>(op))
      return segmentOp.hasCostlyEpilogue();
    return isa<math::SqrtOp, math::RsqrtOp>(op) &&
           program.info(op.getResult(0)).space == ValueSpace::Segment;
  });
}

namespace {
/// Prefetching a reduction's row inputs while its scan reads idx: while
/// the scan reads a block of idx, the next block's row inputs are fetched,
/// so the row loop after the scan reads the cache instead of restarting the
/// hardware prefetcher's stream for every segment. Only reductions reading
/// up to three cache lines of inputs per block use it; kernels storing rows
/// keep the plain scan (docs/benchmarks.md, "Host code-generation
/// choices").
struct ScanPrefetch {
  ScanPrefetch(const SegmentProgram &program, ArrayRef<Value> buffers)
      : program(program) {
    for (auto [buffer, value] : llvm::zip(program.buffers, buffers)) {
      if (buffer.isOutput || !buffer.isRead || buffer.shape.empty() ||
          buffer.shape[0] != "N" || buffer.elementType.isInteger(32))
        continue;
      int64_t components = 1;
      for (const std::string &extent : ArrayRef(buffer.shape).drop_front())
        components *= std::stoll(extent);
      inputs.push_back({value, components});
      linesPerBlock +=
          llvm::divideCeil(blockBytes(components), kCacheLineBytes);
    }
  }

  /// Whether the kernel's scan prefetches (see above).
  bool pays() const {
    return !program.hasRowOutputs && linesPerBlock <= kMaxPrefetchLinesPerBlock;
  }

  /// Prefetches the inputs of the block after the one at `row`: a short
  /// segment's own rows are read right after the scan, the next segment's
  /// not yet (prefetches past a buffer's end are harmless: they never
  /// fault).
  void emit(OpBuilder &b, Location loc, Value row) const {
    KernelCodeBuilder code(b, loc);
    auto ptrType = LLVM::LLVMPointerType::get(b.getContext());
    Value next = b.create<arith::AddIOp>(
        loc, row, code.i64(KernelCodeBuilder::kCountingBlock));
    for (auto [buffer, components] : inputs) {
      int64_t bytes = blockBytes(components);
      Value element = b.create<arith::MulIOp>(loc, next, code.i64(components));
      Value address = b.create<LLVM::GEPOp>(loc, ptrType, program.elementType,
                                            buffer, ValueRange{element});
      for (int64_t offset = 0; offset < bytes; offset += kCacheLineBytes) {
        Value line = b.create<LLVM::GEPOp>(loc, ptrType, b.getI8Type(), address,
                                           ValueRange{code.i64(offset)});
        b.create<LLVM::Prefetch>(loc, line, /*rw=*/0, /*hint=*/3,
                                 /*cache=*/1);
      }
    }
  }

private:
  /// Bytes of one block of rows of `components` elements each.
  int64_t blockBytes(int64_t components) const {
    return KernelCodeBuilder::kCountingBlock * components *
           program.elementType.getIntOrFloatBitWidth() / 8;
  }

  const SegmentProgram &program;
  /// The row inputs' buffers and their elements per row.
  SmallVector<std::pair<Value, int64_t>> inputs;
  int64_t linesPerBlock = 0;
};
} // namespace

/// Walks one segment of a host kernel, from its first row; see
/// emitHostKernel.
using SegmentStep =
    function_ref<void(OpBuilder &, Location, Value segment, Value rowBegin,
                      Value rowEnd, Value count)>;
/// Walks segments [from, to) from the state's row (state: that row and the
/// scan problem so far); returns the loop, whose results are the final
/// state.
using SegmentWalk =
    function_ref<scf::ForOp(OpBuilder &, Location, Value from, Value to,
                            ValueRange state, SegmentStep)>;
/// The row loop of the segment whose rows are [rowBegin, rowEnd).
using SegmentRowLoop = function_ref<SegmentProgramEmitter::RowLoopBuilder(
    Value rowBegin, Value rowEnd)>;

/// Segments [begin, end) in batches of kFinishBatch (programs with
/// hasBatchedFinish): each segment's row loop leaves its totals and row
/// count on the stack, then a second loop computes and stores the batch's
/// outputs. Returns the loop over batches (results as SegmentWalk's).
static scf::ForOp
emitBatchedSegments(OpBuilder &b, Location loc, const SegmentProgram &program,
                    SegmentProgramEmitter &emitter, Value begin, Value end,
                    ValueRange initialState, SegmentWalk walkSegments,
                    SegmentRowLoop rowLoopOf) {
  KernelCodeBuilder code(b, loc);
  // Batches of kFinishBatch segments: their totals and row counts go to
  // the stack (total t of batch slot j at t * kFinishBatch + j), then a
  // second loop computes and stores their outputs. The epilogues (a
  // division, a square root) then run back to back, independent of one
  // another, instead of each waiting behind its segment's row loop and
  // the mispredicted branches of the next segment's scan.
  int64_t numTotals = program.numReductionComponents();
  auto ptrType = LLVM::LLVMPointerType::get(b.getContext());
  Value totalSlots = b.create<LLVM::AllocaOp>(
      loc, ptrType, program.elementType, code.i64(numTotals * kFinishBatch));
  Value countSlots = b.create<LLVM::AllocaOp>(loc, ptrType, b.getI64Type(),
                                              code.i64(kFinishBatch));
  return b.create<scf::ForOp>(
      loc, begin, end, code.i64(kFinishBatch), initialState,
      [&](OpBuilder &bb, Location bl, Value batch, ValueRange state) {
        Value batchEnd = bb.create<arith::MinSIOp>(
            bl, bb.create<arith::AddIOp>(bl, batch, code.i64(kFinishBatch)),
            end);
        auto slot = [&](OpBuilder &ob, Location ol, Value segment,
                        int64_t total) {
          Value j = ob.create<arith::SubIOp>(ol, segment, batch);
          return ob.create<arith::AddIOp>(
              ol, j, KernelCodeBuilder(ob, ol).i64(total * kFinishBatch));
        };
        auto walk = walkSegments(
            bb, bl, batch, batchEnd, state,
            [&](OpBuilder &sb, Location sl, Value segment, Value rowBegin,
                Value rowEnd, Value count) {
              KernelCodeBuilder(sb, sl).store(count, countSlots,
                                              slot(sb, sl, segment, 0));
              auto keepTotals = [&](OpBuilder &rb, Location rl, ValueRange init,
                                    SegmentProgramEmitter::RowBody body,
                                    bool storesRows) {
                SmallVector<Value> totals =
                    rowLoopOf(rowBegin, rowEnd)(rb, rl, init, body, storesRows);
                for (auto [t, total] : llvm::enumerate(totals))
                  KernelCodeBuilder(rb, rl).store(total, totalSlots,
                                                  slot(rb, rl, segment, t));
                return totals;
              };
              Value never = sb.create<arith::ConstantIntOp>(sl, 0, 1);
              emitter.emitSegment(sb, sl, segment, count, keepTotals,
                                  combineNothing, never);
            });
        bb.create<scf::ForOp>(
            bl, batch, batchEnd, code.i64(1), ValueRange{},
            [&](OpBuilder &fb, Location fl, Value segment, ValueRange) {
              KernelCodeBuilder load(fb, fl);
              Value count = load.load(countSlots, fb.getI64Type(),
                                      slot(fb, fl, segment, 0));
              auto readTotals = [&](OpBuilder &rb, Location rl, ValueRange init,
                                    SegmentProgramEmitter::RowBody, bool) {
                SmallVector<Value> totals;
                for (size_t t = 0; t < init.size(); ++t)
                  totals.push_back(KernelCodeBuilder(rb, rl).load(
                      totalSlots, program.elementType,
                      slot(rb, rl, segment, t)));
                return totals;
              };
              emitter.emitSegment(fb, fl, segment, count, readTotals,
                                  combineNothing, Value());
              fb.create<scf::YieldOp>(fl);
            });
        bb.create<scf::YieldOp>(bl, walk.getResults());
      });
}

// Segments [begin, end) are walked in order from the caller's first row (or
// a binary search's); each one's rows end where the next segment's begin,
// counted forward from the previous boundary 16 rows of idx at a time
// (sequential reads, which the hardware prefetches), checking the rows it
// counts (KernelCodeBuilder::scanSegment). The kernel returns the row after
// its rows, or -1 if a scan saw idx out of order. Rows whose segment is
// outside [0, S) get zero row outputs, from the calls that cover the first
// and the last segment.
static void emitHostKernel(const SegmentProgram &program, func::FuncOp kernel,
                           int64_t vectorBits, int64_t interleave) {
  OpBuilder b = OpBuilder::atBlockBegin(&kernel.getBody().front());
  Location loc = program.func.getLoc();
  KernelCodeBuilder code(b, loc);
  HostKernelArguments args(program, kernel, code, /*rowRange=*/false);
  Value numRows = args.numRows, numSegments = args.numSegments;
  Value begin = args.begin, end = args.end, idx = args.idx;
  SegmentProgramEmitter emitter(program, args.buffers, numRows, numSegments);

  // The first row: the caller's (the end of its previous call's rows), or
  // a binary search.
  Value hinted = b.create<arith::CmpIOp>(loc, arith::CmpIPredicate::sge,
                                         args.firstRow, code.i64(0));
  auto ifHinted = b.create<scf::IfOp>(
      loc, hinted,
      [&](OpBuilder &tb, Location tl) {
        tb.create<scf::YieldOp>(tl, ValueRange{tb.create<arith::MinSIOp>(
                                        tl, args.firstRow, numRows)});
      },
      [&](OpBuilder &eb, Location el) {
        eb.create<scf::YieldOp>(el, KernelCodeBuilder(eb, el).lowerBound(
                                        idx, code.i64(0), numRows, begin));
      });
  Value firstRow = ifHinted.getResult(0);
  if (program.hasRowOutputs) {
    Value isFirst = b.create<arith::CmpIOp>(loc, arith::CmpIPredicate::eq,
                                            begin, code.i64(0));
    auto ifFirst = b.create<scf::IfOp>(loc, isFirst, /*withElse=*/false);
    OpBuilder fb = ifFirst.getThenBodyBuilder();
    zeroRows(fb, loc, emitter, KernelCodeBuilder(fb, loc).i64(0), firstRow);
    Value isLast = b.create<arith::CmpIOp>(loc, arith::CmpIPredicate::eq, end,
                                           numSegments);
    auto ifLast = b.create<scf::IfOp>(loc, isLast, /*withElse=*/false);
    OpBuilder lb = ifLast.getThenBodyBuilder();
    KernelCodeBuilder last(lb, loc);
    Value pastValid = last.lowerBound(idx, firstRow, numRows, numSegments);
    zeroRows(lb, loc, emitter, pastValid, numRows);
  }

  ScanPrefetch prefetch(program, args.buffers);
  auto prefetchRows = [&](OpBuilder &pb, Location pl, Value row) {
    prefetch.emit(pb, pl, row);
  };
  KernelCodeBuilder::BlockHook scanHook = nullptr;
  if (prefetch.pays())
    scanHook = prefetchRows;
  // Walks segments [from, to) from row `rowBegin` (state: that row and the
  // scan problem so far), running `emitOne(builder, segment, rowBegin,
  // rowEnd, count)` on each; returns the final state.
  auto walkSegments = [&](OpBuilder &wb, Location wl, Value from, Value to,
                          ValueRange state, SegmentStep emitOne) {
    return wb.create<scf::ForOp>(
        wl, from, to, KernelCodeBuilder(wb, wl).i64(1), state,
        [&](OpBuilder &sb, Location sl, Value segment, ValueRange state) {
          KernelCodeBuilder local(sb, sl);
          Value rowBegin = state[0];
          auto [rowEnd, scanProblem] =
              local.scanSegment(idx, rowBegin, numRows, segment, scanHook);
          Value problem = sb.create<arith::OrIOp>(sl, state[1], scanProblem);
          Value count = sb.create<arith::SubIOp>(sl, rowEnd, rowBegin);
          emitOne(sb, sl, segment, rowBegin, rowEnd, count);
          sb.create<scf::YieldOp>(sl, ValueRange{rowEnd, problem});
        });
  };
  auto rowLoopOf = [&](Value rowBegin, Value rowEnd) {
    return [&, rowBegin, rowEnd](OpBuilder &rb, Location rl, ValueRange init,
                                 SegmentProgramEmitter::RowBody body,
                                 bool storesRows) {
      return emitSegmentRowLoop(
          rb, rl, rowBegin, rowEnd, numRows, init,
          program.combiningKinds(emitter.currentPass()), body, storesRows,
          program, rowLanes(program, vectorBits), interleave);
    };
  };
  SmallVector<Value> initialState{firstRow,
                                  b.create<arith::ConstantIntOp>(loc, 0, 1)};
  scf::ForOp segments;
  if (!hasBatchedFinish(program)) {
    segments = walkSegments(b, loc, begin, end, initialState,
                            [&](OpBuilder &sb, Location sl, Value segment,
                                Value rowBegin, Value rowEnd, Value count) {
                              emitter.emitSegment(
                                  sb, sl, segment, count,
                                  rowLoopOf(rowBegin, rowEnd), combineNothing,
                                  /*writeSegmentOutputs=*/Value());
                            });
  } else {
    segments = emitBatchedSegments(b, loc, program, emitter, begin, end,
                                   initialState, walkSegments, rowLoopOf);
  }
  // The row after the last segment's rows, or -1 if the rows scanned broke
  // sortedness (see KernelCodeBuilder::scanSegment; the caller checks that
  // consecutive calls' rows meet and cover [0, N)).
  b.create<func::ReturnOp>(loc, ValueRange{b.create<arith::SelectOp>(
                                    loc, segments.getResult(1), code.i64(-1),
                                    segments.getResult(0))});
}

/// Segment components (per segment, summed over the segment-indexed inputs
/// the program reads) from which a row map loads its segment values once
/// per vector when all lanes share a segment.
static constexpr int64_t kUniformMinSegmentComponents = 9;

/// The number of components of every segment-indexed input the program
/// reads, per segment (seg.mul's y: 1, seg.matvec's m: 9).
static int64_t segmentComponentsRead(const SegmentProgram &program) {
  int64_t total = 0;
  for (BlockArgument argument : program.func.getArguments()) {
    int position = program.argumentBuffer[argument.getArgNumber()];
    if (position < 0 || !program.buffers[position].isRead ||
        !program.hasInfo(argument) ||
        program.info(argument).space != ValueSpace::Segment)
      continue;
    total += program.info(argument).numComponents();
  }
  return total;
}

// Row maps: a call computes rows [begin, end) (its range is rows, not
// segments: any split of the rows is as good, so threads split them evenly
// however skewed the segments are). Each row reads its own segment's
// values; rows whose segment is outside [0, S) get 0. Rows go a vector at a
// time (a vector of idx; segment values loaded lane by lane, or, for
// programs reading matrices, once if every lane has the same segment;
// invalid lanes masked); then single rows.
static void emitHostRowMapKernel(const SegmentProgram &program,
                                 func::FuncOp kernel, int64_t vectorBits) {
  OpBuilder b = OpBuilder::atBlockBegin(&kernel.getBody().front());
  Location loc = program.func.getLoc();
  KernelCodeBuilder code(b, loc);
  HostKernelArguments args(program, kernel, code, /*rowRange=*/true);
  Value numRows = args.numRows, numSegments = args.numSegments;
  Value idx = args.idx;
  SegmentProgramEmitter emitter(program, args.buffers, numRows, numSegments);

  // Whole vectors of rows first, when there is a segment to read (S > 0:
  // lanes outside [0, S) read segment 0 and store 0); then single rows.
  int64_t lanes = rowLanes(program, vectorBits);
  // Programs reading whole matrices per segment (9 components) load them
  // once when a vector's lanes share a segment, at the price of a branch
  // that mispredicts at segment boundaries; for a few components per
  // segment, loading lane by lane costs less (docs/benchmarks.md, "Host
  // code-generation choices").
  bool loadsOnceIfUniform =
      segmentComponentsRead(program) >= kUniformMinSegmentComponents;
  Type i32Type = b.getI32Type();
  Value vectorEnd = args.begin;
  Value vectorProblems = b.create<arith::ConstantIntOp>(loc, 0, 1);
  if (lanes > 1) {
    Value count = b.create<arith::SubIOp>(loc, args.end, args.begin);
    Value vectorRows = b.create<arith::MulIOp>(
        loc, b.create<arith::DivUIOp>(loc, count, code.i64(lanes)),
        code.i64(lanes));
    Value hasSegments = b.create<arith::CmpIOp>(loc, arith::CmpIPredicate::sgt,
                                                numSegments, code.i64(0));
    vectorEnd = b.create<arith::AddIOp>(
        loc, args.begin,
        b.create<arith::SelectOp>(loc, hasSegments, vectorRows, code.i64(0)));
    Value zeros = code.zero(VectorType::get({lanes}, b.getI64Type()));
    // The index check of the rows computed (a row map's contract: values in
    // [0, S), in any order), in i32 as idx is, as loop state: the problems
    // seen so far. One unsigned compare against min(S, 2^31) finds values
    // outside [0, S) (negative ones are >= 2^31 unsigned).
    Value limit = b.create<arith::TruncIOp>(
        loc, i32Type,
        b.create<arith::MinSIOp>(loc, numSegments, code.i64(int64_t(1) << 31)));
    Value limits = code.splat(limit, lanes);
    Value noProblems = code.zero(VectorType::get({lanes}, b.getI1Type()));
    auto vectorLoop = b.create<scf::ForOp>(
        loc, args.begin, vectorEnd, code.i64(lanes), ValueRange{noProblems},
        [&](OpBuilder &rb, Location rl, Value row, ValueRange state) {
          KernelCodeBuilder local(rb, rl);
          Value values = local.loadVector(idx, i32Type, row, lanes);
          Value valid = rb.create<arith::CmpIOp>(rl, arith::CmpIPredicate::ult,
                                                 values, limits);
          Value problems =
              rb.create<arith::OrIOp>(rl, state[0], local.logicalNot(valid));
          Value segments = rb.create<arith::ExtSIOp>(
              rl, VectorType::get({lanes}, rb.getI64Type()), values);
          Value readable =
              rb.create<arith::SelectOp>(rl, valid, segments, zeros);
          auto vectorRow = [&](OpBuilder &lb, Location ll, ValueRange init,
                               SegmentProgramEmitter::RowBody body, bool) {
            return body(lb, ll, row, lanes, /*laneMask=*/Value(), init);
          };
          if (!loadsOnceIfUniform) {
            emitter.emitSegment(rb, rl, readable, local.i64(1), vectorRow,
                                combineNothing, Value(), valid);
            rb.create<scf::YieldOp>(rl, ValueRange{problems});
            return;
          }
          Value first = rb.create<LLVM::ExtractElementOp>(
              rl, readable, rb.create<arith::ConstantIntOp>(rl, 0, 32));
          Value same = rb.create<arith::CmpIOp>(
              rl, arith::CmpIPredicate::eq, readable,
              local.splat(first, lanes));
          Value sameBits =
              rb.create<LLVM::BitcastOp>(rl, rb.getIntegerType(lanes), same);
          Value uniform = rb.create<arith::CmpIOp>(
              rl, arith::CmpIPredicate::eq, sameBits,
              rb.create<arith::ConstantIntOp>(rl, -1, lanes));
          auto ifUniform = rb.create<scf::IfOp>(rl, uniform, /*withElse=*/true);
          OpBuilder ub = ifUniform.getThenBodyBuilder();
          emitter.emitSegment(ub, rl, first, KernelCodeBuilder(ub, rl).i64(1),
                              vectorRow, combineNothing, Value(), valid);
          OpBuilder gb = ifUniform.getElseBodyBuilder();
          emitter.emitSegment(gb, rl, readable,
                              KernelCodeBuilder(gb, rl).i64(1),
                              vectorRow, combineNothing, Value(), valid);
          rb.create<scf::YieldOp>(rl, ValueRange{problems});
        });
    vectorProblems = b.create<arith::CmpIOp>(
        loc, arith::CmpIPredicate::ne,
        b.create<LLVM::BitcastOp>(loc, b.getIntegerType(lanes),
                                  vectorLoop.getResult(0)),
        b.create<arith::ConstantIntOp>(loc, 0, lanes));
  }
  auto singleLoop = b.create<scf::ForOp>(
      loc, vectorEnd, args.end, code.i64(1), ValueRange{vectorProblems},
      [&](OpBuilder &rb, Location rl, Value row, ValueRange state) {
        KernelCodeBuilder local(rb, rl);
        Value value = local.load(idx, i32Type, row);
        Value segment = rb.create<arith::ExtSIOp>(rl, rb.getI64Type(), value);
        Value isValid = local.isValidSegment(segment, numSegments);
        Value problems =
            rb.create<arith::OrIOp>(rl, state[0], local.logicalNot(isValid));
        auto ifValid = rb.create<scf::IfOp>(rl, isValid, /*withElse=*/true);
        OpBuilder vb = ifValid.getThenBodyBuilder();
        auto oneRow = [&](OpBuilder &lb, Location ll, ValueRange init,
                          SegmentProgramEmitter::RowBody body, bool) {
          return body(lb, ll, row, /*lanes=*/1, /*laneMask=*/Value(), init);
        };
        emitter.emitSegment(vb, rl, segment, KernelCodeBuilder(vb, rl).i64(1),
                            oneRow, combineNothing, Value());
        OpBuilder eb = ifValid.getElseBodyBuilder();
        emitter.emitZeroRowOutputs(eb, rl, row);
        rb.create<scf::YieldOp>(rl, ValueRange{problems});
      });
  b.create<func::ReturnOp>(
      loc, ValueRange{b.create<arith::SelectOp>(loc, singleLoop.getResult(0),
                                                code.i64(-1), code.i64(0))});
}

// Long segments: a segment too long for one thread is cut into tiles of
// rows, run pass by pass. `<name>__rows(buffers..., N, S, rowBegin, rowEnd,
// pass, count, totals, partials)` runs pass `pass` of the segment of row
// rowBegin (`count` rows, earlier passes' totals in `totals`) on the tile's
// rows: its raw totals into `partials` (at the pass's offset, zeros
// elsewhere), its row outputs stored. `<name>__finish(buffers..., N, S,
// segment, count, totals)` computes the segment's outputs from the totals of
// all passes, each added over the tiles in tile order by the caller.
namespace {
/// The parameters of a tile kernel (segrt::abi::Entry::HostTile): the
/// buffers, N, S, the tile's rows, the pass, the segment's row count, the
/// segment's totals and the tile's partials.
struct TileKernelArguments {
  TileKernelArguments(const SegmentProgram &program, func::FuncOp kernel) {
    using segrt::abi::Param;
    KernelArguments arguments(kernel.getBody().front(),
                              program.buffers.size(),
                              segrt::abi::Entry::HostTile);
    buffers.assign(arguments.buffers().begin(), arguments.buffers().end());
    numRows = arguments.get(Param::NumRows);
    numSegments = arguments.get(Param::NumSegments);
    rowBegin = arguments.get(Param::RowBegin);
    rowEnd = arguments.get(Param::RowEnd);
    pass = arguments.get(Param::Pass);
    count = arguments.get(Param::Count);
    totals = arguments.get(Param::Totals);
    partials = arguments.get(Param::Partials);
  }

  SmallVector<Value> buffers;
  Value numRows, numSegments, rowBegin, rowEnd, pass, count, totals, partials;
};
} // namespace

/// The `count` totals of pass `pass` from a segment's `totals` (all
/// passes' raw totals, in pass order).
static SmallVector<Value> loadPassTotals(OpBuilder &b, Location loc,
                                         const SegmentProgram &program,
                                         unsigned pass, Value totals,
                                         int64_t count) {
  KernelCodeBuilder load(b, loc);
  int64_t offset = program.reductionOffset(pass);
  SmallVector<Value> values;
  for (int64_t i = 0; i < count; ++i)
    values.push_back(
        load.load(totals, program.elementType, load.i64(offset + i)));
  return values;
}

static void emitHostTileKernel(const SegmentProgram &program,
                               func::FuncOp kernel, int64_t vectorBits,
                               int64_t interleave) {
  OpBuilder b = OpBuilder::atBlockBegin(&kernel.getBody().front());
  Location loc = program.func.getLoc();
  KernelCodeBuilder code(b, loc);
  TileKernelArguments args(program, kernel);
  SmallVector<Value> &buffers = args.buffers;
  Value numRows = args.numRows, numSegments = args.numSegments;
  auto clampRow = [&](Value row) {
    return b.create<arith::MinSIOp>(
        loc, b.create<arith::MaxSIOp>(loc, row, code.i64(0)), numRows);
  };
  Value rowBegin = clampRow(args.rowBegin);
  Value rowEnd = clampRow(args.rowEnd);
  Value idx = buffers
      [program.argumentBuffer[cast<BlockArgument>(program.idx).getArgNumber()]];
  SegmentProgramEmitter emitter(program, buffers, numRows, numSegments);

  // An empty tile, or one whose segment is not valid, contributes zeros;
  // so do the passes the call does not run.
  Type elementType = program.elementType;
  int64_t numTotals = program.numReductionComponents();
  for (int64_t i = 0; i < numTotals; ++i)
    code.store(code.zero(elementType), args.partials, code.i64(i));
  Value nonEmpty =
      b.create<arith::CmpIOp>(loc, arith::CmpIPredicate::slt, rowBegin, rowEnd);
  // Passes before `pass`: the segment's totals; pass `pass`: the tile's
  // rows (row outputs stored on the way), totals into the partials; later
  // passes: nothing.
  auto rowLoop = [&](OpBuilder &rb, Location rl, ValueRange init,
                     SegmentProgramEmitter::RowBody body,
                     bool) -> SmallVector<Value> {
    unsigned pass = emitter.currentPass();
    int64_t offset = program.reductionOffset(pass);
    return KernelCodeBuilder(rb, rl).selectByRunningPass(
        args.pass, pass, init,
        [&](OpBuilder &eb, Location el) {
          return loadPassTotals(eb, el, program, pass, args.totals,
                                init.size());
        },
        [&](OpBuilder &tb, Location tl) {
          // Tiles are long: no short-segment block, and no masked tail
          // (its rows past the tile may be another thread's).
          int64_t lanes = rowLanes(program, vectorBits);
          SmallVector<Value> totals =
              lanes == 1
                  ? emitScalarRowLoop(tb, tl, rowBegin, rowEnd, init, body)
                  : emitVectorRowLoop(tb, tl, rowBegin, rowEnd, init,
                                      program.combiningKinds(pass), body,
                                      lanes, interleave, /*tailLimit=*/Value());
          KernelCodeBuilder store(tb, tl);
          for (auto [i, total] : llvm::enumerate(totals))
            store.store(total, args.partials, store.i64(offset + i));
          return totals;
        });
  };
  // The tile's rows must all hold the segment of its first row (a valid
  // one): the result is 1 if not (the runtime checks the rows around).
  auto ifNonEmpty = b.create<scf::IfOp>(
      loc, nonEmpty,
      [&](OpBuilder &nb, Location nl) {
        KernelCodeBuilder nonEmptyCode(nb, nl);
        Value segment = nonEmptyCode.loadSegment(idx, rowBegin);
        Value isValid = nonEmptyCode.isValidSegment(segment, numSegments);
        Value problem = nb.create<arith::OrIOp>(
            nl, nonEmptyCode.anyRowOutside(idx, rowBegin, rowEnd, segment),
            nonEmptyCode.logicalNot(isValid));
        auto ifValid = nb.create<scf::IfOp>(nl, isValid, /*withElse=*/false);
        OpBuilder vb = ifValid.getThenBodyBuilder();
        // The segment's row count, as the caller found it (at least the
        // tile's rows).
        Value count = vb.create<arith::MaxSIOp>(
            nl, args.count, vb.create<arith::SubIOp>(nl, rowEnd, rowBegin));
        Value never = vb.create<arith::ConstantIntOp>(nl, 0, 1);
        emitter.emitSegment(vb, nl, segment, count, rowLoop, combineNothing,
                            never);
        nb.create<scf::YieldOp>(nl, ValueRange{problem});
      },
      [&](OpBuilder &eb, Location el) {
        eb.create<scf::YieldOp>(
            el, ValueRange{eb.create<arith::ConstantIntOp>(el, 0, 1)});
      });
  b.create<func::ReturnOp>(
      loc, ValueRange{b.create<arith::ExtUIOp>(loc, b.getI32Type(),
                                               ifNonEmpty.getResult(0))});
}

static void emitHostFinishKernel(const SegmentProgram &program,
                                 func::FuncOp kernel) {
  OpBuilder b = OpBuilder::atBlockBegin(&kernel.getBody().front());
  Location loc = program.func.getLoc();
  KernelCodeBuilder code(b, loc);
  using segrt::abi::Param;
  KernelArguments arguments(kernel.getBody().front(), program.buffers.size(),
                            segrt::abi::Entry::HostFinish);
  SmallVector<Value> buffers(arguments.buffers());
  Value numRows = arguments.get(Param::NumRows);
  Value numSegments = arguments.get(Param::NumSegments);
  Value segment = arguments.get(Param::Segment);
  Value count = arguments.get(Param::Count);
  Value totals = arguments.get(Param::Totals);
  SegmentProgramEmitter emitter(program, buffers, numRows, numSegments);
  auto ifValid = b.create<scf::IfOp>(
      loc, code.isValidSegment(segment, numSegments), /*withElse=*/false);
  OpBuilder vb = ifValid.getThenBodyBuilder();
  // The rows were visited by the tile kernels (row outputs stored): the
  // "row loop" of each pass reads its totals.
  auto readTotals = [&](OpBuilder &rb, Location rl, ValueRange init,
                        SegmentProgramEmitter::RowBody, bool) {
    return loadPassTotals(rb, rl, program, emitter.currentPass(), totals,
                          init.size());
  };
  emitter.emitSegment(vb, loc, segment, count, readTotals, combineNothing,
                      Value());
  b.create<func::ReturnOp>(loc);
}

namespace {
struct ConvertSegToHostPass
    : public seg::impl::ConvertSegToHostBase<ConvertSegToHostPass> {
  using ConvertSegToHostBase::ConvertSegToHostBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    MLIRContext *ctx = &getContext();
    // Vectors from 128 bits (SSE) to 512 (AVX-512): a short-segment block
    // of 16 rows is a whole number of them for f32 and f64.
    if (vectorBits < 128 || vectorBits > 512 ||
        !llvm::isPowerOf2_64(vectorBits)) {
      module.emitError() << "vector-bits must be 128, 256 or 512, got "
                         << vectorBits.getValue();
      return signalPassFailure();
    }
    if (interleave < 1 || interleave > 8 || !llvm::isPowerOf2_64(interleave)) {
      module.emitError() << "interleave must be 1, 2, 4 or 8, got "
                         << interleave.getValue();
      return signalPassFailure();
    }
    SmallVector<func::FuncOp> candidates;
    for (auto func : module.getOps<func::FuncOp>())
      if (SegmentProgram::isCandidate(func))
        candidates.push_back(func);

    OpBuilder builder(ctx);
    for (func::FuncOp func : candidates) {
      FailureOr<SegmentProgram> program = SegmentProgram::analyze(func);
      if (failed(program))
        return signalPassFailure();
      builder.setInsertionPoint(func);
      auto addKernel = [&](StringRef name, segrt::abi::Entry entry) {
        auto kernel = builder.create<func::FuncOp>(
            func.getLoc(), name,
            builder.getFunctionType(
                kernelParameterTypes(ctx, program->buffers.size(), entry),
                kernelResultTypes(ctx, entry)));
        kernel.addEntryBlock();
        nameTrailingArguments(kernel, program->buffers.size(), entry);
        return kernel;
      };
      // Returns -1 if the kernel saw idx break the op library's contract in
      // the rows it looked at; else the row after its last segment's rows
      // (segment kernels) or 0 (row maps).
      func::FuncOp kernel =
          addKernel(func.getSymName(), segrt::abi::Entry::HostKernel);
      if (program->mapsRowsOnly())
        emitHostRowMapKernel(*program, kernel, vectorBits);
      else
        emitHostKernel(*program, kernel, vectorBits, interleave);
      if (!program->mapsRowsOnly()) {
        // The tile kernel returns an i32: 1 if its rows are not all of one
        // valid segment.
        std::string name = func.getSymName().str();
        emitHostTileKernel(
            *program,
            addKernel(name + std::string(segrt::abi::kHostTileSuffix),
                      segrt::abi::Entry::HostTile),
            vectorBits, interleave);
        emitHostFinishKernel(
            *program,
            addKernel(name + std::string(segrt::abi::kHostFinishSuffix),
                      segrt::abi::Entry::HostFinish));
      }
      func.erase();
    }
  }
};
} // namespace
