//===- SegToGPU.cpp - kernel functions to gpu.func kernels ----------------===//

#include "segops/Conversion/Passes.h"
#include "mlir/IR/TypeUtilities.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/SymbolTable.h"
#include "segops/Conversion/KernelCodeBuilder.h"
#include "segops/Conversion/KernelSignature.h"
#include "segops/Conversion/LongSegmentKernels.h"
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
static constexpr int64_t kTileRows = SegmentProgram::kGPUTileRows;
/// Tile slots each lane loads per step when adding a long segment's tiles.
static constexpr int64_t kTilesPerLane = 4;

namespace {
/// Emits the gpu.func kernels of a segment program.
//
// Segment kernels: warps own chunks of 32 rows (grid-stride) and the
// segments that *start* in them (row 0, or where idx changes), found with a
// ballot. For each such segment the warp finds where it ends (a lane-strided
// walk over idx and a warp minimum), runs the program's passes over its rows
// lane-strided (so loads coalesce), and combines partial sums with a fixed
// xor butterfly, so every lane holds the totals and results are bitwise
// reproducible; lane 0 stores the segment outputs. Empty segments (between
// two starts, before the first or after the last) are evaluated one per lane
// with no rows. Rows whose segment is outside [0, S) get zero row outputs.
//
// Long segments of splittable programs (one pass, no row outputs): a
// segment covering a whole aligned tile of kTileRows rows is *long*. The
// `__tiles` kernel, launched first, gives each tile to a warp, which reduces
// the rows of the long segments that cross it: the segment of its first row
// (the head) and that of its last (the tail), each into a slot of
// `partials` (2 per tile). The segment kernel then finds a long segment's
// end with a 32-way search and adds its tiles' partials in tile order
// instead of walking its rows, so one segment of 1e7 rows costs one warp a
// few hundred loads while 1e4 warps reduce its rows.
//
// Row maps (programs that only map rows): one thread per row, grid-stride,
// whatever the segments.
//
// No atomics, and every access is checked against N and S (and the tile
// count) whatever idx holds.
class GPUKernelEmitter {
public:
  GPUKernelEmitter(const SegmentProgram &program, gpu::GPUFuncOp kernel,
                   segrt::abi::Entry entry, int64_t blockSize)
      : GPUKernelEmitter(program, kernel,
                         KernelArguments(kernel.getBody().front(),
                                         program.buffers.size(), entry),
                         blockSize) {}

  GPUKernelEmitter(const SegmentProgram &program, gpu::GPUFuncOp kernel,
                   const KernelArguments &arguments, int64_t blockSize)
      : program(program), kernel(kernel), blockSize(blockSize),
        builder(OpBuilder::atBlockBegin(&kernel.getBody().front())),
        loc(program.func.getLoc()), buffers(arguments.buffers()),
        numRows(arguments.get(segrt::abi::Param::NumRows)),
        numSegments(arguments.get(segrt::abi::Param::NumSegments)),
        emitter(program, buffers, numRows, numSegments) {
    idx = buffers[program.argumentBuffer[cast<BlockArgument>(program.idx)
                                             .getArgNumber()]];
    scratch = arguments.lookup(segrt::abi::Param::Scratch);
    runningPass = arguments.lookup(segrt::abi::Param::Pass);
  }

  /// The segment kernel (or, for row maps, the row kernel).
  void emit();
  /// Split programs (one pass, no row outputs): `__tiles`, the raw totals
  /// of the long segments crossing each tile.
  void emitTiles();
  /// Pass-by-pass programs (the other segment programs), in launch order:
  /// `__bounds` (each long segment's rows), then per pass `__tiles<p>` (its
  /// rows: row outputs, and totals into the tile slots) and, if the pass
  /// reduces, `__pass_totals<p>` (the segment's totals of the pass).
  void emitBounds();
  /// `__tiles` and `__pass_totals` take the pass as their last argument.
  void emitPassTiles();
  void emitPassTotals();

  /// Splittable programs: long segments reduced by a tile kernel.
  bool isSplit() const { return program.isSplittable(); }
  /// Other segment programs: long segments run pass by pass.
  bool isPassByPass() const {
    return program.hasLongSegmentKernels() && !program.isSplittable();
  }

private:
  using TileBody = function_ref<void(OpBuilder &, Value tile, Value tileStart,
                                     Value tileEnd)>;
  using PieceBody = function_ref<void(OpBuilder &, Value which, Value segment,
                                      Value lo, Value hi)>;
  using StartBody = function_ref<void(OpBuilder &, Value segment, Value start)>;
  using TilePieceBody = function_ref<void(OpBuilder &, Value tile, Value which,
                                          Value segment, Value lo, Value hi)>;

  Value i64(OpBuilder &b, int64_t value) {
    return KernelCodeBuilder(b, loc).i64(value);
  }
  Value indexToI64(OpBuilder &b, Value value) {
    return b.create<arith::IndexCastOp>(loc, b.getI64Type(), value);
  }
  /// Sets lane, globalWarp and totalWarps.
  void emitWarpIds(OpBuilder &b);
  /// idx[row] where `inRange`, else -1, never reading outside idx.
  Value segmentOr(OpBuilder &b, Value inRange, Value row);
  /// Butterfly over the warp combining by `kind`; every lane gets the
  /// result.
  Value warpCombine(OpBuilder &b, Value value, arith::AtomicRMWKind kind);
  /// The first row r in [lo, hi) where `idx[r] <holding> segment` is
  /// false, or hi, for a comparison true on a prefix of the range (eq: the
  /// segment's end; ne: its start): 32 rows probed per step (one per lane, a
  /// ballot), so ~log32(hi - lo) steps. Warp-uniform; for any content of idx
  /// it terminates and stays in [lo, hi].
  Value searchWarp(OpBuilder &b, Value lo, Value hi, Value segment,
                   arith::CmpIPredicate holding);
  /// Each lane of a group of `groupSize` threads evaluates the empty
  /// segments [lo, hi) (clamped to [0, S)) it is given, `member` being its
  /// position in the group.
  void emitEmptySegments(OpBuilder &b, Value lo, Value hi, Value member,
                         Value groupSize);
  void emitOwnedSegment(OpBuilder &b, Value rowBase, Value mask);
  /// The rows of a (short) segment from `start`: found by a walk, reduced
  /// lane-strided.
  void emitWalkedSegment(OpBuilder &b, Value start, Value segment);
  void emitRowMap(OpBuilder &b);

  // Long segments.
  /// The first multiple of the tile size at or after `row`.
  Value alignedTileAfter(OpBuilder &b, Value row);
  /// An i1: the segment starting at `start` covers a whole aligned tile.
  Value coversWholeTile(OpBuilder &b, Value start, Value segment);
  /// The end of a long segment (a 32-way search from the tile it covers).
  Value searchLongSegmentEnd(OpBuilder &b, Value start, Value segment);
  /// Split programs: a long segment's outputs from its tiles' partials.
  void emitLongSegment(OpBuilder &b, Value start, Value segment);
  /// Pass-by-pass programs: a long segment's outputs from its totals.
  void emitPassByPassLongSegment(OpBuilder &b, Value segment);
  /// A warp per tile, grid-stride (the body of every tile kernel).
  void emitTileLoop(OpBuilder &b, TileBody body);
  /// For each long segment crossing the tile: `body(which, segment, lo,
  /// hi)`, its rows [lo, hi) in the tile, `which` 0 for the segment of the
  /// tile's first row (the head), 1 for that of its last (the tail).
  void forEachLongPiece(OpBuilder &b, Value tile, Value tileStart,
                        Value tileEnd, PieceBody body);
  /// The tile kernels' loop over every tile's long pieces (see
  /// forEachLongPiece): `valid(tile, which, segment, lo, hi)` for a piece of
  /// a valid segment, `invalid` (if given) for one of an invalid segment.
  void emitLongPieceLoop(TilePieceBody valid, TilePieceBody invalid = {});
  /// For each long segment starting in the tile: `body(segment, start)`.
  void forEachLongStart(OpBuilder &b, Value tile, Value tileStart,
                        Value tileEnd, StartBody body);
  /// The first row of `tail` (the segment of the tile's last row) in the
  /// tile.
  Value tailStartIn(OpBuilder &b, Value tileStart, Value tileEnd, Value tail);
  /// Rows [lo, hi) lane-strided through `body`, lanes combined.
  SmallVector<Value> reduceRows(OpBuilder &b, Value lo, Value hi,
                                ValueRange init,
                                SegmentProgramEmitter::RowBody body);
  /// The totals `components` of a long segment's tile slots, added in an
  /// order that depends on the segment only; every lane gets them.
  SmallVector<Value> sumTilePartials(OpBuilder &b, Value start, Value end,
                                     ValueRange components);
  void storeFromLaneZero(OpBuilder &b, ValueRange values, Value base,
                         function_ref<Value(OpBuilder &, int64_t)> index);

  // The scratch buffer: pass-by-pass programs hold each segment's bounds (start,
  // end: 2 i64) and raw totals (all passes), then the tiles' partials (2
  // slots of all passes' totals per tile); split programs the partials.
  Value byteOffset(OpBuilder &b, Value base, Value bytes);
  Value segmentTotals(OpBuilder &b);
  Value partials(OpBuilder &b);
  /// Index of component `component` of slot `which` (0 head, 1 tail) of
  /// `tile` in the partials.
  Value partialIndex(OpBuilder &b, Value tile, Value which, Value component);
  std::pair<Value, Value> loadBounds(OpBuilder &b, Value segment);
  SmallVector<Value> loadSegmentTotals(OpBuilder &b, Value segment,
                                       unsigned pass, int64_t count);

  const SegmentProgram &program;
  gpu::GPUFuncOp kernel;
  int64_t blockSize;
  OpBuilder builder;
  Location loc;
  SmallVector<Value> buffers;
  Value numRows, numSegments, idx, scratch;
  /// Long-segment kernels of pass-by-pass programs: the pass they run.
  Value runningPass;
  Value threadId, blockId, gridDim, lane, globalWarp, totalWarps;
  SegmentProgramEmitter emitter;
};
} // namespace

static Value combineNothing(OpBuilder &, Location, Value total,
                            arith::AtomicRMWKind) {
  return total;
}

void GPUKernelEmitter::emitWarpIds(OpBuilder &b) {
  threadId = indexToI64(b, b.create<gpu::ThreadIdOp>(loc, gpu::Dimension::x));
  blockId = indexToI64(b, b.create<gpu::BlockIdOp>(loc, gpu::Dimension::x));
  gridDim = indexToI64(b, b.create<gpu::GridDimOp>(loc, gpu::Dimension::x));
  lane = b.create<arith::AndIOp>(loc, threadId, i64(b, kWarpSize - 1));
  Value warpsPerBlock = i64(b, blockSize / kWarpSize);
  globalWarp = b.create<arith::AddIOp>(
      loc, b.create<arith::MulIOp>(loc, blockId, warpsPerBlock),
      b.create<arith::ShRUIOp>(loc, threadId, i64(b, 5)));
  totalWarps = b.create<arith::MulIOp>(loc, gridDim, warpsPerBlock);
}

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

Value GPUKernelEmitter::warpCombine(OpBuilder &b, Value value,
                                    arith::AtomicRMWKind kind) {
  Value width = b.create<arith::ConstantIntOp>(loc, kWarpSize, 32);
  for (int64_t offset = kWarpSize / 2; offset >= 1; offset /= 2) {
    Value offsetValue = b.create<arith::ConstantIntOp>(loc, offset, 32);
    Value other = b.create<gpu::ShuffleOp>(loc, value, offsetValue, width,
                                           gpu::ShuffleMode::XOR)
                      .getShuffleResult();
    value = arith::getReductionOp(kind, b, loc, value, other);
  }
  return value;
}

Value GPUKernelEmitter::searchWarp(OpBuilder &b, Value lo, Value hi,
                                   Value segment,
                                   arith::CmpIPredicate holding) {
  Type i64Type = b.getI64Type();
  return KernelCodeBuilder(b, loc).narrowRange(
      lo, hi,
      [&](OpBuilder &sb, Location sl, Value lo,
          Value hi) -> std::pair<Value, Value> {
        Value width = sb.create<arith::SubIOp>(sl, hi, lo);
        // Probe l of 32: lo + ceil(width * (l + 1) / 32) - 1; probe 31 is
        // hi - 1, and the probes rise with l.
        auto probe = [&](Value position) {
          Value scaled = sb.create<arith::MulIOp>(
              sl, width, sb.create<arith::AddIOp>(sl, position, i64(sb, 1)));
          Value ceil = sb.create<arith::DivUIOp>(
              sl, sb.create<arith::AddIOp>(sl, scaled, i64(sb, kWarpSize - 1)),
              i64(sb, kWarpSize));
          return sb.create<arith::SubIOp>(
              sl, sb.create<arith::AddIOp>(sl, lo, ceil), i64(sb, 1));
        };
        Value fullMask = sb.create<arith::ConstantIntOp>(sl, -1, 32);
        Value inside = sb.create<NVVM::VoteBallotOp>(
            sl, sb.getI32Type(), fullMask,
            sb.create<arith::CmpIOp>(
                sl, holding,
                KernelCodeBuilder(sb, sl).loadSegment(idx, probe(lane)),
                segment));
        // The probes holding before the first one that does not.
        Value outside = sb.create<arith::XOrIOp>(sl, inside, fullMask);
        Value holding = sb.create<arith::ExtUIOp>(
            sl, i64Type,
            sb.create<LLVM::CountTrailingZerosOp>(sl, sb.getI32Type(), outside,
                                                  /*is_zero_poison=*/false));
        Value all = sb.create<arith::CmpIOp>(sl, arith::CmpIPredicate::eq,
                                             holding, i64(sb, kWarpSize));
        Value none = sb.create<arith::CmpIOp>(sl, arith::CmpIPredicate::eq,
                                              holding, i64(sb, 0));
        // All hold: the answer is hi. Else it lies in
        // [probe(k - 1) + 1, probe(k)], probe(k) failing.
        Value lastHolding = sb.create<arith::SubIOp>(sl, holding, i64(sb, 1));
        Value afterHolding = sb.create<arith::AddIOp>(
            sl, probe(sb.create<arith::MaxSIOp>(sl, lastHolding, i64(sb, 0))),
            i64(sb, 1));
        Value newLo = sb.create<arith::SelectOp>(
            sl, all, hi,
            sb.create<arith::SelectOp>(sl, none, lo, afterHolding));
        Value firstFailing = probe(
            sb.create<arith::MinSIOp>(sl, holding, i64(sb, kWarpSize - 1)));
        Value newHi = sb.create<arith::SelectOp>(sl, all, hi, firstFailing);
        return {newLo, newHi};
      });
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

Value GPUKernelEmitter::alignedTileAfter(OpBuilder &b, Value row) {
  return b.create<arith::MulIOp>(
      loc,
      b.create<arith::DivUIOp>(
          loc, b.create<arith::AddIOp>(loc, row, i64(b, kTileRows - 1)),
          i64(b, kTileRows)),
      i64(b, kTileRows));
}

Value GPUKernelEmitter::coversWholeTile(OpBuilder &b, Value start,
                                        Value segment) {
  // The first aligned tile at or after start; the segment covers it if its
  // last row (within N) holds the segment (idx sorted).
  Value tileLast = b.create<arith::AddIOp>(loc, alignedTileAfter(b, start),
                                           i64(b, kTileRows - 1));
  Value inRange = b.create<arith::CmpIOp>(loc, arith::CmpIPredicate::slt,
                                          tileLast, numRows);
  return b.create<arith::CmpIOp>(loc, arith::CmpIPredicate::eq,
                                 segmentOr(b, inRange, tileLast), segment);
}

Value GPUKernelEmitter::searchLongSegmentEnd(OpBuilder &b, Value start,
                                             Value segment) {
  // It reaches at least the end of the tile it covers; search from there.
  Value covered = b.create<arith::AddIOp>(loc, alignedTileAfter(b, start),
                                          i64(b, kTileRows));
  covered = b.create<arith::MinSIOp>(loc, covered, numRows);
  return searchWarp(b, covered, numRows, segment, arith::CmpIPredicate::eq);
}

Value GPUKernelEmitter::byteOffset(OpBuilder &b, Value base, Value bytes) {
  return b.create<LLVM::GEPOp>(loc, LLVM::LLVMPointerType::get(b.getContext()),
                               b.getI8Type(), base, ValueRange{bytes},
                               /*inbounds=*/true);
}

Value GPUKernelEmitter::segmentTotals(OpBuilder &b) {
  // Pass-by-pass scratch: the segments' bounds (2 i64 each), then their totals.
  return byteOffset(b, scratch,
                    b.create<arith::MulIOp>(loc, numSegments, i64(b, 16)));
}

Value GPUKernelEmitter::partials(OpBuilder &b) {
  if (!isPassByPass())
    return scratch;
  int64_t elementBytes = program.elementType.getIntOrFloatBitWidth() / 8;
  Value totalsBytes = b.create<arith::MulIOp>(
      loc, numSegments,
      i64(b, program.numReductionComponents() * elementBytes));
  return byteOffset(b, segmentTotals(b), totalsBytes);
}

Value GPUKernelEmitter::partialIndex(OpBuilder &b, Value tile, Value which,
                                     Value component) {
  int64_t totals = program.numReductionComponents();
  Value slot = b.create<arith::AddIOp>(
      loc, b.create<arith::MulIOp>(loc, tile, i64(b, 2)), which);
  return b.create<arith::AddIOp>(
      loc, b.create<arith::MulIOp>(loc, slot, i64(b, totals)), component);
}

SmallVector<Value> GPUKernelEmitter::sumTilePartials(OpBuilder &b, Value start,
                                                     Value end,
                                                     ValueRange components) {
  KernelCodeBuilder code(b, loc);
  Type elementType = program.elementType;
  Value base = partials(b);
  Value firstTile = b.create<arith::DivUIOp>(loc, start, i64(b, kTileRows));
  Value lastTile = b.create<arith::DivUIOp>(
      loc, b.create<arith::SubIOp>(loc, end, i64(b, 1)), i64(b, kTileRows));
  // The first tile holds the segment's rows in its tail slot, unless the
  // segment starts the tile (then they are its head); every later tile's
  // head slot holds the segment's rows in it. kTilesPerLane * 32 tiles at a
  // time: each lane adds its tiles in order (independent loads, in flight
  // together: a segment of 1e7 rows has ~10^4 tiles, and one load at a time
  // would make this loop the kernel's latency), then the butterfly, added
  // in order: the order depends on the segment only. (The shuffles in the
  // loop also keep LLVM from unrolling it.)
  Value firstSlot = b.create<arith::SelectOp>(
      loc,
      b.create<arith::CmpIOp>(
          loc, arith::CmpIPredicate::eq,
          b.create<arith::RemUIOp>(loc, start, i64(b, kTileRows)), i64(b, 0)),
      i64(b, 0), i64(b, 1));
  SmallVector<Value> zeros(components.size(), code.zero(elementType));
  auto loop = b.create<scf::ForOp>(
      loc, firstTile, b.create<arith::AddIOp>(loc, lastTile, i64(b, 1)),
      i64(b, kWarpSize * kTilesPerLane), zeros,
      [&](OpBuilder &ib, Location il, Value chunk, ValueRange sums) {
        KernelCodeBuilder load(ib, il);
        SmallVector<Value> laneSums(components.size(), Value());
        for (int64_t k = 0; k < kTilesPerLane; ++k) {
          Value tile = ib.create<arith::AddIOp>(
              il, chunk,
              ib.create<arith::AddIOp>(il, lane, i64(ib, k * kWarpSize)));
          Value inRange = ib.create<arith::CmpIOp>(
              il, arith::CmpIPredicate::ule, tile, lastTile);
          Value readTile = ib.create<arith::MinUIOp>(il, tile, lastTile);
          Value slot = ib.create<arith::SelectOp>(
              il,
              ib.create<arith::CmpIOp>(il, arith::CmpIPredicate::eq, readTile,
                                       firstTile),
              firstSlot, i64(ib, 0));
          for (auto [i, component] : llvm::enumerate(components)) {
            Value value = load.load(
                base, elementType, partialIndex(ib, readTile, slot, component));
            value = ib.create<arith::SelectOp>(il, inRange, value,
                                               load.zero(elementType));
            laneSums[i] =
                k == 0 ? value
                       : ib.create<arith::AddFOp>(il, laneSums[i], value);
          }
        }
        SmallVector<Value> next;
        for (auto [sum, laneSum] : llvm::zip(sums, laneSums))
          next.push_back(ib.create<arith::AddFOp>(
              il, sum, warpCombine(ib, laneSum, arith::AtomicRMWKind::addf)));
        ib.create<scf::YieldOp>(il, next);
      });
  return SmallVector<Value>(loop.getResults());
}

void GPUKernelEmitter::emitLongSegment(OpBuilder &b, Value start,
                                       Value segment) {
  KernelCodeBuilder code(b, loc);
  Value end = searchLongSegmentEnd(b, start, segment);
  auto ifValid = b.create<scf::IfOp>(
      loc, code.isValidSegment(segment, numSegments), /*withElse=*/false);
  OpBuilder vb = ifValid.getThenBodyBuilder();
  Value isLaneZero =
      vb.create<arith::CmpIOp>(loc, arith::CmpIPredicate::eq, lane, i64(vb, 0));
  auto readPartials = [&](OpBuilder &rb, Location, ValueRange init,
                          SegmentProgramEmitter::RowBody, bool) {
    SmallVector<Value> components;
    for (int64_t i = 0, e = init.size(); i < e; ++i)
      components.push_back(i64(rb, i));
    return sumTilePartials(rb, start, end, components);
  };
  emitter.emitSegment(vb, loc, segment,
                      vb.create<arith::SubIOp>(loc, end, start), readPartials,
                      combineNothing, isLaneZero);
}

std::pair<Value, Value> GPUKernelEmitter::loadBounds(OpBuilder &b,
                                                     Value segment) {
  // Written by the bounds kernel for every valid long segment; clamped, so
  // that whatever they hold (idx breaking the contract) no tile index
  // derived from them leaves the partials.
  KernelCodeBuilder code(b, loc);
  Type i64Type = b.getI64Type();
  Value slot = b.create<arith::MulIOp>(loc, segment, i64(b, 2));
  Value start = code.load(scratch, i64Type, slot);
  Value end = code.load(scratch, i64Type,
                        b.create<arith::AddIOp>(loc, slot, i64(b, 1)));
  start = b.create<arith::MinSIOp>(
      loc, b.create<arith::MaxSIOp>(loc, start, i64(b, 0)),
      b.create<arith::SubIOp>(loc, numRows, i64(b, 1)));
  end = b.create<arith::MinSIOp>(
      loc,
      b.create<arith::MaxSIOp>(loc, end,
                               b.create<arith::AddIOp>(loc, start, i64(b, 1))),
      numRows);
  return {start, end};
}

SmallVector<Value> GPUKernelEmitter::loadSegmentTotals(OpBuilder &b,
                                                       Value segment,
                                                       unsigned pass,
                                                       int64_t count) {
  KernelCodeBuilder code(b, loc);
  Value base = segmentTotals(b);
  Value row = b.create<arith::MulIOp>(loc, segment,
                                      i64(b, program.numReductionComponents()));
  SmallVector<Value> totals;
  for (int64_t i = 0; i < count; ++i)
    totals.push_back(
        code.load(base, program.elementType,
                  b.create<arith::AddIOp>(
                      loc, row, i64(b, program.reductionOffset(pass) + i))));
  return totals;
}

void GPUKernelEmitter::emitPassByPassLongSegment(OpBuilder &b, Value segment) {
  // The tile kernels stored its row outputs (or zeros, for an invalid
  // segment) and the finish kernels its raw totals: what is left are the
  // segment outputs.
  KernelCodeBuilder code(b, loc);
  auto ifValid = b.create<scf::IfOp>(
      loc, code.isValidSegment(segment, numSegments), /*withElse=*/false);
  OpBuilder vb = ifValid.getThenBodyBuilder();
  auto [start, end] = loadBounds(vb, segment);
  auto readTotals = [&](OpBuilder &rb, Location, ValueRange init,
                        SegmentProgramEmitter::RowBody, bool) {
    return loadSegmentTotals(rb, segment, emitter.currentPass(), init.size());
  };
  Value isLaneZero =
      vb.create<arith::CmpIOp>(loc, arith::CmpIPredicate::eq, lane, i64(vb, 0));
  emitter.emitSegment(vb, loc, segment,
                      vb.create<arith::SubIOp>(loc, end, start), readTotals,
                      combineNothing, isLaneZero);
}

void GPUKernelEmitter::emitWalkedSegment(OpBuilder &b, Value start,
                                         Value segment) {
  KernelCodeBuilder code(b, loc);
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
  Value end = warpCombine(b, walk.getResult(0), arith::AtomicRMWKind::mins);
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
    auto combine = [&](OpBuilder &cb, Location, Value partial,
                       arith::AtomicRMWKind kind) {
      return warpCombine(cb, partial, kind);
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
  if (!scratch) {
    emitWalkedSegment(b, start, segment);
    return;
  }
  auto ifLong = b.create<scf::IfOp>(loc, coversWholeTile(b, start, segment),
                                    /*withElse=*/true);
  OpBuilder lb = ifLong.getThenBodyBuilder();
  if (isPassByPass())
    emitPassByPassLongSegment(lb, segment);
  else
    emitLongSegment(lb, start, segment);
  OpBuilder sb = ifLong.getElseBodyBuilder();
  emitWalkedSegment(sb, start, segment);
}

void GPUKernelEmitter::emitRowMap(OpBuilder &b) {
  Value globalThread = b.create<arith::AddIOp>(
      loc, b.create<arith::MulIOp>(loc, blockId, i64(b, blockSize)), threadId);
  Value totalThreads = b.create<arith::MulIOp>(loc, gridDim, i64(b, blockSize));
  b.create<scf::ForOp>(
      loc, globalThread, numRows, totalThreads, ValueRange{},
      [&](OpBuilder &rb, Location rl, Value row, ValueRange) {
        KernelCodeBuilder code(rb, rl);
        Value segment = code.loadSegment(idx, row);
        auto ifValid = rb.create<scf::IfOp>(
            rl, code.isValidSegment(segment, numSegments), /*withElse=*/true);
        OpBuilder vb = ifValid.getThenBodyBuilder();
        auto oneRow = [&](OpBuilder &ob, Location ol, ValueRange init,
                          SegmentProgramEmitter::RowBody body, bool) {
          return body(ob, ol, row, /*lanes=*/1, /*laneMask=*/Value(), init);
        };
        emitter.emitSegment(vb, rl, segment, i64(vb, 1), oneRow, combineNothing,
                            Value());
        OpBuilder eb = ifValid.getElseBodyBuilder();
        emitter.emitZeroRowOutputs(eb, rl, row);
        rb.create<scf::YieldOp>(rl);
      });
}

void GPUKernelEmitter::emit() {
  OpBuilder &b = builder;
  emitWarpIds(b);
  if (program.mapsRowsOnly()) {
    emitRowMap(b);
    b.create<gpu::ReturnOp>(loc);
    return;
  }
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

void GPUKernelEmitter::emitTileLoop(OpBuilder &b, TileBody body) {
  emitWarpIds(b);
  Value numTiles = b.create<arith::DivUIOp>(
      loc, b.create<arith::AddIOp>(loc, numRows, i64(b, kTileRows - 1)),
      i64(b, kTileRows));
  b.create<scf::ForOp>(
      loc, globalWarp, numTiles, totalWarps, ValueRange{},
      [&](OpBuilder &tb, Location, Value tile, ValueRange) {
        Value tileStart =
            tb.create<arith::MulIOp>(loc, tile, i64(tb, kTileRows));
        Value tileEnd = tb.create<arith::MinSIOp>(
            loc, tb.create<arith::AddIOp>(loc, tileStart, i64(tb, kTileRows)),
            numRows);
        body(tb, tile, tileStart, tileEnd);
        tb.create<scf::YieldOp>(loc);
      });
  b.create<gpu::ReturnOp>(loc);
}

/// Runs `body(which)` for which = 0 and 1 in a loop, so that the code of
/// the body is emitted once.
static void forEachOfTwo(OpBuilder &b, Location loc,
                         function_ref<void(OpBuilder &, Value which)> body) {
  KernelCodeBuilder code(b, loc);
  b.create<scf::ForOp>(loc, code.i64(0), code.i64(2), code.i64(1), ValueRange{},
                       [&](OpBuilder &fb, Location, Value which, ValueRange) {
                         body(fb, which);
                         fb.create<scf::YieldOp>(loc);
                       });
}

void GPUKernelEmitter::forEachLongPiece(OpBuilder &tb, Value tile,
                                        Value tileStart, Value tileEnd,
                                        PieceBody body) {
  KernelCodeBuilder code(tb, loc);
  auto cmp = [&](arith::CmpIPredicate predicate, Value x, Value y) {
    return tb.create<arith::CmpIOp>(loc, predicate, x, y);
  };
  Value fullEnd = tb.create<arith::AddIOp>(loc, tileStart, i64(tb, kTileRows));
  Value head = code.loadSegment(idx, tileStart);
  Value tail =
      code.loadSegment(idx, tb.create<arith::SubIOp>(loc, tileEnd, i64(tb, 1)));
  // The head segment is long if it covers this tile or the one before (a
  // long segment holding this tile's first row covers one of them); a
  // different tail segment, if it covers the next tile.
  Value fullLast = tb.create<arith::SubIOp>(loc, fullEnd, i64(tb, 1));
  Value coversThis =
      cmp(arith::CmpIPredicate::eq,
          segmentOr(tb, cmp(arith::CmpIPredicate::slt, fullLast, numRows),
                    fullLast),
          head);
  Value hasBefore = cmp(arith::CmpIPredicate::sgt, tile, i64(tb, 0));
  Value before = tb.create<arith::SubIOp>(
      loc, tb.create<arith::MaxSIOp>(loc, tileStart, i64(tb, kTileRows)),
      i64(tb, kTileRows));
  Value coversBefore = tb.create<arith::AndIOp>(
      loc, hasBefore,
      cmp(arith::CmpIPredicate::eq, code.loadSegment(idx, before), head));
  Value headIsLong = tb.create<arith::OrIOp>(loc, coversThis, coversBefore);
  Value nextLast =
      tb.create<arith::AddIOp>(loc, fullEnd, i64(tb, kTileRows - 1));
  Value tailIsLong = tb.create<arith::AndIOp>(
      loc, cmp(arith::CmpIPredicate::ne, tail, head),
      cmp(arith::CmpIPredicate::eq,
          segmentOr(tb, cmp(arith::CmpIPredicate::slt, nextLast, numRows),
                    nextLast),
          tail));
  // Where the head ends, where the tail starts: one 32-way search each.
  auto searchIf = [&](Value condition, Value otherwise, Value lo, Value segment,
                      arith::CmpIPredicate holding) {
    auto ifOp = tb.create<scf::IfOp>(
        loc, condition,
        [&](OpBuilder &sb, Location) {
          sb.create<scf::YieldOp>(
              loc, searchWarp(sb, lo, tileEnd, segment, holding));
        },
        [&](OpBuilder &ob, Location) {
          ob.create<scf::YieldOp>(loc, otherwise);
        });
    return ifOp.getResult(0);
  };
  Value headEnd = searchIf(headIsLong, tileStart,
                           tb.create<arith::AddIOp>(loc, tileStart, i64(tb, 1)),
                           head, arith::CmpIPredicate::eq);
  Value tailStart =
      searchIf(tailIsLong, tileEnd, tileStart, tail, arith::CmpIPredicate::ne);
  forEachOfTwo(tb, loc, [&](OpBuilder &b, Value which) {
    Value isHead = b.create<arith::CmpIOp>(loc, arith::CmpIPredicate::eq, which,
                                           i64(b, 0));
    auto pick = [&](Value ifHead, Value ifTail) {
      return b.create<arith::SelectOp>(loc, isHead, ifHead, ifTail).getResult();
    };
    Value segment = pick(head, tail);
    Value lo = pick(tileStart, tailStart), hi = pick(headEnd, tileEnd);
    auto ifLong = b.create<scf::IfOp>(loc, pick(headIsLong, tailIsLong),
                                      /*withElse=*/false);
    OpBuilder lb = ifLong.getThenBodyBuilder();
    body(lb, which, segment, lo, hi);
  });
}

void GPUKernelEmitter::forEachLongStart(OpBuilder &tb, Value tile,
                                        Value tileStart, Value tileEnd,
                                        StartBody body) {
  KernelCodeBuilder code(tb, loc);
  Value head = code.loadSegment(idx, tileStart);
  Value tail =
      code.loadSegment(idx, tb.create<arith::SubIOp>(loc, tileEnd, i64(tb, 1)));
  // The head starts here if the row before holds another segment; a
  // different tail always starts in the tile (found by a search).
  Value hasBefore = tb.create<arith::CmpIOp>(loc, arith::CmpIPredicate::sgt,
                                             tile, i64(tb, 0));
  Value previous = segmentOr(
      tb, hasBefore, tb.create<arith::SubIOp>(loc, tileStart, i64(tb, 1)));
  Value headStarts = tb.create<arith::AndIOp>(
      loc,
      tb.create<arith::CmpIOp>(loc, arith::CmpIPredicate::ne, previous, head),
      coversWholeTile(tb, tileStart, head));
  Value tailDiffers =
      tb.create<arith::CmpIOp>(loc, arith::CmpIPredicate::ne, tail, head);
  auto ifTail = tb.create<scf::IfOp>(
      loc, tailDiffers,
      [&](OpBuilder &db, Location) {
        db.create<scf::YieldOp>(loc, tailStartIn(db, tileStart, tileEnd, tail));
      },
      [&](OpBuilder &ob, Location) { ob.create<scf::YieldOp>(loc, tileEnd); });
  Value tailStart = ifTail.getResult(0);
  Value tailStarts = tb.create<arith::AndIOp>(
      loc, tailDiffers, coversWholeTile(tb, tailStart, tail));
  forEachOfTwo(tb, loc, [&](OpBuilder &b, Value which) {
    Value isHead = b.create<arith::CmpIOp>(loc, arith::CmpIPredicate::eq, which,
                                           i64(b, 0));
    auto pick = [&](Value ifHead, Value ifTail) {
      return b.create<arith::SelectOp>(loc, isHead, ifHead, ifTail).getResult();
    };
    Value segment = pick(head, tail), start = pick(tileStart, tailStart);
    auto ifLong = b.create<scf::IfOp>(loc, pick(headStarts, tailStarts),
                                      /*withElse=*/false);
    OpBuilder lb = ifLong.getThenBodyBuilder();
    body(lb, segment, start);
  });
}

Value GPUKernelEmitter::tailStartIn(OpBuilder &b, Value tileStart,
                                    Value tileEnd, Value tail) {
  return searchWarp(b, tileStart, tileEnd, tail, arith::CmpIPredicate::ne);
}

void GPUKernelEmitter::storeFromLaneZero(
    OpBuilder &b, ValueRange values, Value base,
    function_ref<Value(OpBuilder &, int64_t)> index) {
  Value isLaneZero =
      b.create<arith::CmpIOp>(loc, arith::CmpIPredicate::eq, lane, i64(b, 0));
  auto ifLaneZero = b.create<scf::IfOp>(loc, isLaneZero, /*withElse=*/false);
  OpBuilder zb = ifLaneZero.getThenBodyBuilder();
  for (auto [i, value] : llvm::enumerate(values))
    KernelCodeBuilder(zb, loc).store(value, base, index(zb, i));
}

SmallVector<Value>
GPUKernelEmitter::reduceRows(OpBuilder &b, Value lo, Value hi, ValueRange init,
                             SegmentProgramEmitter::RowBody body) {
  // Lane-strided rows, then the butterfly: every lane holds the totals.
  auto loop = b.create<scf::ForOp>(
      loc, b.create<arith::AddIOp>(loc, lo, lane), hi, i64(b, kWarpSize), init,
      [&](OpBuilder &ib, Location il, Value row, ValueRange acc) {
        ib.create<scf::YieldOp>(
            il, body(ib, il, row, /*lanes=*/1, /*laneMask=*/Value(), acc));
      });
  SmallVector<Value> totals;
  for (Value partial : loop.getResults())
    // Tile kernels exist for sum-only programs (hasLongSegmentKernels).
    totals.push_back(warpCombine(b, partial, arith::AtomicRMWKind::addf));
  return totals;
}

void GPUKernelEmitter::emitLongPieceLoop(TilePieceBody valid,
                                         TilePieceBody invalid) {
  emitTileLoop(builder, [&](OpBuilder &tb, Value tile, Value tileStart,
                            Value tileEnd) {
    forEachLongPiece(
        tb, tile, tileStart, tileEnd,
        [&](OpBuilder &b, Value which, Value segment, Value lo, Value hi) {
          auto ifValid = b.create<scf::IfOp>(
              loc,
              KernelCodeBuilder(b, loc).isValidSegment(segment, numSegments),
              /*withElse=*/static_cast<bool>(invalid));
          OpBuilder vb = ifValid.getThenBodyBuilder();
          valid(vb, tile, which, segment, lo, hi);
          if (invalid) {
            OpBuilder eb = ifValid.getElseBodyBuilder();
            invalid(eb, tile, which, segment, lo, hi);
          }
        });
  });
}

void GPUKernelEmitter::emitTiles() {
  // Split programs: one pass; each long piece's raw totals into its slot.
  emitLongPieceLoop([&](OpBuilder &vb, Value tile, Value which, Value segment,
                        Value lo, Value hi) {
    auto rowLoop = [&](OpBuilder &rb, Location, ValueRange init,
                       SegmentProgramEmitter::RowBody body, bool) {
      SmallVector<Value> totals = reduceRows(rb, lo, hi, init, body);
      storeFromLaneZero(rb, totals, partials(rb),
                        [&](OpBuilder &ib, int64_t i) {
                          return partialIndex(ib, tile, which, i64(ib, i));
                        });
      return totals;
    };
    Value never = vb.create<arith::ConstantIntOp>(loc, 0, 1);
    emitter.emitSegment(vb, loc, segment, vb.create<arith::SubIOp>(loc, hi, lo),
                        rowLoop, combineNothing, never);
  });
}

void GPUKernelEmitter::emitBounds() {
  emitTileLoop(
      builder, [&](OpBuilder &tb, Value tile, Value tileStart, Value tileEnd) {
        forEachLongStart(
            tb, tile, tileStart, tileEnd,
            [&](OpBuilder &b, Value segment, Value start) {
              KernelCodeBuilder code(b, loc);
              Value end = searchLongSegmentEnd(b, start, segment);
              auto ifValid = b.create<scf::IfOp>(
                  loc, code.isValidSegment(segment, numSegments),
                  /*withElse=*/false);
              OpBuilder vb = ifValid.getThenBodyBuilder();
              Value slot = vb.create<arith::MulIOp>(loc, segment, i64(vb, 2));
              storeFromLaneZero(
                  vb, {start, end}, scratch, [&](OpBuilder &ib, int64_t i) {
                    return ib.create<arith::AddIOp>(loc, slot, i64(ib, i));
                  });
            });
      });
}

void GPUKernelEmitter::emitPassTiles() {
  auto valid = [&](OpBuilder &vb, Value tile, Value which, Value segment,
                   Value lo, Value hi) {
    auto [start, end] = loadBounds(vb, segment);
    // Earlier passes than the running one: their totals (pass-totals
    // kernels); the running pass: the tile's rows (row outputs stored on the way, totals into
    // the slot); later passes: nothing.
    auto rowLoop = [&](OpBuilder &rb, Location, ValueRange init,
                       SegmentProgramEmitter::RowBody body,
                       bool) -> SmallVector<Value> {
      unsigned pass = emitter.currentPass();
      return KernelCodeBuilder(rb, loc).selectByRunningPass(
          runningPass, pass, init,
          [&](OpBuilder &eb, Location) {
            return loadSegmentTotals(eb, segment, pass,
                                     program.numReductionComponents(pass));
          },
          [&](OpBuilder &hb, Location) {
            SmallVector<Value> totals = reduceRows(hb, lo, hi, init, body);
            storeFromLaneZero(hb, totals, partials(hb),
                              [&](OpBuilder &ib, int64_t i) {
                                return partialIndex(
                                    ib, tile, which,
                                    i64(ib, program.reductionOffset(pass) + i));
                              });
            return totals;
          });
    };
    Value never = vb.create<arith::ConstantIntOp>(loc, 0, 1);
    emitter.emitSegment(vb, loc, segment,
                        vb.create<arith::SubIOp>(loc, end, start), rowLoop,
                        combineNothing, never);
  };
  // Rows of an invalid segment: zero row outputs (in pass 0's launch).
  auto invalid = [&](OpBuilder &eb, Value, Value, Value, Value lo, Value hi) {
    Value first = eb.create<arith::CmpIOp>(loc, arith::CmpIPredicate::eq, runningPass,
                                           i64(eb, 0));
    auto ifFirst = eb.create<scf::IfOp>(loc, first, /*withElse=*/false);
    OpBuilder fb = ifFirst.getThenBodyBuilder();
    fb.create<scf::ForOp>(
        loc, fb.create<arith::AddIOp>(loc, lo, lane), hi, i64(fb, kWarpSize),
        ValueRange{}, [&](OpBuilder &ib, Location il, Value row, ValueRange) {
          emitter.emitZeroRowOutputs(ib, il, row);
          ib.create<scf::YieldOp>(il);
        });
  };
  if (program.hasRowOutputs)
    emitLongPieceLoop(valid, invalid);
  else
    emitLongPieceLoop(valid);
}

void GPUKernelEmitter::emitPassTotals() {
  // The totals of the running pass: components [first, first + count) of every
  // pass's totals, picked from constants by the pass.
  OpBuilder &b0 = builder;
  Value first = i64(b0, 0), count = i64(b0, 0);
  for (unsigned pass = 0; pass < program.numPasses; ++pass) {
    Value isPass = b0.create<arith::CmpIOp>(loc, arith::CmpIPredicate::eq,
                                            runningPass, i64(b0, pass));
    first = b0.create<arith::SelectOp>(
        loc, isPass, i64(b0, program.reductionOffset(pass)), first);
    count = b0.create<arith::SelectOp>(
        loc, isPass, i64(b0, program.numReductionComponents(pass)), count);
  }
  emitTileLoop(builder, [&](OpBuilder &tb, Value tile, Value tileStart,
                            Value tileEnd) {
    forEachLongStart(
        tb, tile, tileStart, tileEnd, [&](OpBuilder &b, Value segment, Value) {
          KernelCodeBuilder code(b, loc);
          auto ifValid = b.create<scf::IfOp>(
              loc, code.isValidSegment(segment, numSegments),
              /*withElse=*/false);
          OpBuilder vb = ifValid.getThenBodyBuilder();
          auto [start, end] = loadBounds(vb, segment);
          Value row = vb.create<arith::MulIOp>(
              loc, segment, i64(vb, program.numReductionComponents()));
          Value totals = segmentTotals(vb);
          vb.create<scf::ForOp>(
              loc, first, vb.create<arith::AddIOp>(loc, first, count),
              i64(vb, 1), ValueRange{},
              [&](OpBuilder &cb, Location, Value component, ValueRange) {
                Value total = sumTilePartials(cb, start, end, component)[0];
                storeFromLaneZero(
                    cb, total, totals, [&](OpBuilder &ib, int64_t) {
                      return ib.create<arith::AddIOp>(loc, row, component);
                    });
                cb.create<scf::YieldOp>(loc);
              });
        });
  });
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
                [](GPUKernelEmitter &e) { e.emit(); });
      for (const LongSegmentKernel &longKernel : longSegmentKernels(*program))
        addKernel(name + longKernel.suffix, segrt::abi::Entry::GpuLongSegment,
                  [&](GPUKernelEmitter &e) {
          switch (longKernel.kind) {
          case LongSegmentKernel::Tiles:
            return e.emitTiles();
          case LongSegmentKernel::Bounds:
            return e.emitBounds();
          case LongSegmentKernel::PassTiles:
            return e.emitPassTiles();
          case LongSegmentKernel::PassTotals:
            return e.emitPassTotals();
          }
        });
      func.erase();
    }
  }
};
} // namespace
