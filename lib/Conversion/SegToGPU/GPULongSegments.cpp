//===- GPULongSegments.cpp - long segments on the GPU ---------------------===//
//
// The long-segment kernels (`__tiles`, `__super_tiles`; `__bounds`,
// `__tiles`, `__super_tiles`, `__pass_totals`) and the segment kernel's paths
// for long segments: from tile or super-tile partials (one-pass programs) or
// from their totals (pass by pass).
//
//===----------------------------------------------------------------------===//

#include "GPUKernelEmitter.h"

#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/TypeUtilities.h"
#include "segops/Conversion/LongSegmentKernels.h"

using namespace mlir;
using namespace mlir::seg;

Value GPUKernelEmitter::alignedSpanAfter(OpBuilder &b, Value row) {
  return b.create<arith::MulIOp>(
      loc,
      b.create<arith::DivUIOp>(
          loc, b.create<arith::AddIOp>(loc, row, i64(b, longAlignment - 1)),
          i64(b, longAlignment)),
      i64(b, longAlignment));
}

Value GPUKernelEmitter::coversLongSpan(OpBuilder &b, Value start,
                                       Value segment, Value mayCover) {
  // The first span starting at or after start; the segment covers it if
  // its last row is below N and holds the segment (idx sorted). The row's
  // -1 when it is not read must not match a segment of -1.
  Value spanLast = b.create<arith::AddIOp>(loc, alignedSpanAfter(b, start),
                                           i64(b, tileRows - 1));
  Value inRange = b.create<arith::CmpIOp>(loc, arith::CmpIPredicate::slt,
                                          spanLast, numRows);
  if (mayCover)
    inRange = b.create<arith::AndIOp>(loc, inRange, mayCover);
  return b.create<arith::AndIOp>(
      loc, inRange,
      b.create<arith::CmpIOp>(loc, arith::CmpIPredicate::eq,
                              segmentOr(b, inRange, spanLast), segment));
}

SmallVector<SmallVector<int64_t, 2>>
GPUKernelEmitter::longSpanEnds(int64_t spans, int64_t knownOffset) const {
  // Holding the known row, a segment holds a span (idx sorted) if it holds
  // the span's ends on the far sides of that row.
  SmallVector<SmallVector<int64_t, 2>> ends;
  for (int64_t i = 0; i < spans; ++i) {
    int64_t lo = i * longAlignment, hi = lo + tileRows - 1;
    SmallVector<int64_t, 2> far;
    if (lo < knownOffset)
      far.push_back(lo);
    if (hi > knownOffset)
      far.push_back(hi);
    ends.push_back(far);
  }
  return ends;
}

Value GPUKernelEmitter::holdsLongSpan(
    OpBuilder &b, Value first, ArrayRef<SmallVector<int64_t, 2>> ends,
    Value segment, function_ref<Value(int64_t offset)> segmentAt) {
  auto cmp = [&](arith::CmpIPredicate predicate, Value x, Value y) {
    return b.create<arith::CmpIOp>(loc, predicate, x, y);
  };
  Value holds = b.create<arith::ConstantIntOp>(loc, 0, 1);
  for (auto [i, far] : llvm::enumerate(ends)) {
    int64_t lo = i * longAlignment;
    Value inRange = b.create<arith::AndIOp>(
        loc,
        cmp(arith::CmpIPredicate::sge,
            b.create<arith::AddIOp>(loc, first, i64(b, lo)), i64(b, 0)),
        cmp(arith::CmpIPredicate::slt,
            b.create<arith::AddIOp>(loc, first, i64(b, lo + tileRows - 1)),
            numRows));
    Value spanHolds = inRange;
    for (int64_t offset : far)
      spanHolds = b.create<arith::AndIOp>(
          loc, spanHolds,
          cmp(arith::CmpIPredicate::eq, segmentAt(offset), segment));
    holds = b.create<arith::OrIOp>(loc, holds, spanHolds);
  }
  return holds;
}

Value GPUKernelEmitter::probeSegment(OpBuilder &b, Value base,
                                     ArrayRef<int64_t> offsets, Value last) {
  // Lane j < offsets.size() loads idx at base + offsets[j] (or `last`, for
  // j = 1 where given): one load instruction for every probe.
  assert(offsets.size() <= static_cast<size_t>(kWarpSize) && "a lane a row");
  Value offset = i64(b, offsets.front());
  for (int64_t j = 1, e = offsets.size(); j < e; ++j)
    offset = b.create<arith::SelectOp>(
        loc,
        b.create<arith::CmpIOp>(loc, arith::CmpIPredicate::eq, lane,
                                i64(b, j)),
        i64(b, offsets[j]), offset);
  Value row = b.create<arith::AddIOp>(loc, base, offset);
  if (last)
    row = b.create<arith::SelectOp>(
        loc,
        b.create<arith::CmpIOp>(loc, arith::CmpIPredicate::eq, lane,
                                i64(b, 1)),
        last, row);
  Value inRange = b.create<arith::AndIOp>(
      loc,
      b.create<arith::AndIOp>(
          loc,
          b.create<arith::CmpIOp>(loc, arith::CmpIPredicate::slt, lane,
                                  i64(b, offsets.size())),
          b.create<arith::CmpIOp>(loc, arith::CmpIPredicate::sge, row,
                                  i64(b, 0))),
      b.create<arith::CmpIOp>(loc, arith::CmpIPredicate::slt, row, numRows));
  return b.create<arith::TruncIOp>(loc, b.getI32Type(),
                                   segmentOr(b, inRange, row));
}

Value GPUKernelEmitter::probedSegment(OpBuilder &b, Value probes, int64_t j) {
  return b.create<arith::ExtSIOp>(
      loc, b.getI64Type(),
      b.create<gpu::ShuffleOp>(loc, probes, i32(b, j), i32(b, kWarpSize),
                               gpu::ShuffleMode::IDX)
          .getShuffleResult());
}

Value GPUKernelEmitter::searchLongSegmentEnd(OpBuilder &b, Value start,
                                             Value segment) {
  // It reaches at least the end of the span it covers; search from there.
  Value covered = b.create<arith::AddIOp>(loc, alignedSpanAfter(b, start),
                                          i64(b, tileRows));
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

Value GPUKernelEmitter::numTiles(OpBuilder &b) {
  return b.create<arith::DivUIOp>(
      loc, b.create<arith::AddIOp>(loc, numRows, i64(b, tileRows - 1)),
      i64(b, tileRows));
}

GPUKernelEmitter::SegmentTiles
GPUKernelEmitter::segmentTiles(OpBuilder &b, Value start, Value end) {
  // A segment within one super-tile is added from its tiles' slots, one
  // spanning several from its super-tiles' (the same scheme a level up).
  // The first unit holds the segment's rows in its tail slot, unless the
  // segment starts the unit (then they are its head); every later unit's
  // head slot holds the segment's rows in it.
  static_assert(llvm::isPowerOf2_64(SegmentProgram::kGPUTileRows) &&
                    llvm::isPowerOf2_64(SegmentProgram::kGPUSplitRowTileRows) &&
                    llvm::isPowerOf2_64(kSuperTileRows),
                "units are found by shifts");
  Value last = b.create<arith::SubIOp>(loc, end, i64(b, 1));
  Value superShift = i64(b, llvm::Log2_64(kSuperTileRows));
  Value spansSuperTiles = b.create<arith::CmpIOp>(
      loc, arith::CmpIPredicate::ne,
      b.create<arith::ShRUIOp>(loc, start, superShift),
      b.create<arith::ShRUIOp>(loc, last, superShift));
  auto pick = [&](Value ifSuper, Value ifTile) -> Value {
    return b.create<arith::SelectOp>(loc, spansSuperTiles, ifSuper, ifTile);
  };
  Value shift = pick(superShift, i64(b, llvm::Log2_64(tileRows)));
  Value unitMask = pick(i64(b, kSuperTileRows - 1), i64(b, tileRows - 1));
  // Super-tile s's slots follow the tiles' as those of tile numTiles + s,
  // so one index runs over either.
  Value unitOffset = pick(numTiles(b), i64(b, 0));
  Value firstUnit = b.create<arith::AddIOp>(
      loc, b.create<arith::ShRUIOp>(loc, start, shift), unitOffset);
  Value lastUnit = b.create<arith::AddIOp>(
      loc, b.create<arith::ShRUIOp>(loc, last, shift), unitOffset);
  Value firstSlot = b.create<arith::SelectOp>(
      loc,
      b.create<arith::CmpIOp>(loc, arith::CmpIPredicate::eq,
                              b.create<arith::AndIOp>(loc, start, unitMask),
                              i64(b, 0)),
      i64(b, 0), i64(b, 1));
  return {firstUnit, lastUnit, firstSlot};
}

SmallVector<Value> GPUKernelEmitter::loadTileSlot(OpBuilder &b, Value tile,
                                                 SegmentTiles tiles,
                                                 ValueRange components,
                                                 ArrayRef<Value> identities) {
  KernelCodeBuilder code(b, loc);
  Value inRange =
      b.create<arith::CmpIOp>(loc, arith::CmpIPredicate::ule, tile, tiles.last);
  Value readTile = b.create<arith::MinUIOp>(loc, tile, tiles.last);
  Value slot = b.create<arith::SelectOp>(
      loc,
      b.create<arith::CmpIOp>(loc, arith::CmpIPredicate::eq, readTile,
                              tiles.first),
      tiles.firstSlot, i64(b, 0));
  Value base = partials(b);
  SmallVector<Value> values;
  for (auto [component, identity] : llvm::zip_equal(components, identities))
    values.push_back(b.create<arith::SelectOp>(
        loc, inRange,
        code.load(base, program.elementType,
                  partialIndex(b, readTile, slot, component)),
        identity));
  return values;
}

SmallVector<Value> GPUKernelEmitter::combineTilePartials(
    OpBuilder &b, SegmentTiles tiles, ValueRange components,
    ArrayRef<arith::AtomicRMWKind> kinds) {
  // Up to kMaxComponentsPerTileLoop components in one loop over the tiles;
  // more (a 3x3 matrix), a loop per component: all 9 of matvec's backward
  // at once kept 36 slot loads in flight (f64: 128 registers, 80 a
  // component a loop; f32: 60, 48).
  if (components.size() > static_cast<size_t>(kMaxComponentsPerTileLoop)) {
    SmallVector<Value> totals;
    for (auto [component, kind] : llvm::zip_equal(components, kinds))
      llvm::append_range(totals,
                         combineTilePartials(b, tiles, component, kind));
    return totals;
  }
  Type elementType = program.elementType;
  auto [firstTile, lastTile, firstSlot] = tiles;
  // kTilesPerLane * 32 units (tiles or super-tiles) at a time: each lane
  // combines its units in order (independent loads, in flight together: a
  // segment of 1e7 rows has ~300 super-tiles, and one load at a time would
  // make this loop the kernel's latency), then the butterfly, in order: the
  // order depends on the segment only. (The shuffles in the loop also keep
  // LLVM from unrolling it.) Units past the segment count as the combine's
  // identity (0 for sums, -inf for maxima, +inf for minima).
  SmallVector<Value> identities;
  for (arith::AtomicRMWKind kind : kinds)
    identities.push_back(arith::getIdentityValue(kind, elementType, b, loc));
  auto loop = b.create<scf::ForOp>(
      loc, firstTile, b.create<arith::AddIOp>(loc, lastTile, i64(b, 1)),
      i64(b, kWarpSize * kTilesPerLane), identities,
      [&](OpBuilder &ib, Location il, Value chunk, ValueRange totals) {
        SmallVector<Value> laneTotals(components.size(), Value());
        for (int64_t k = 0; k < kTilesPerLane; ++k) {
          Value tile = ib.create<arith::AddIOp>(
              il, chunk,
              ib.create<arith::AddIOp>(il, lane, i64(ib, k * kWarpSize)));
          SmallVector<Value> values =
              loadTileSlot(ib, tile, tiles, components, identities);
          for (auto [i, value] : llvm::enumerate(values)) {
            laneTotals[i] = k == 0 ? value
                                   : arith::getReductionOp(kinds[i], ib, il,
                                                           laneTotals[i], value);
          }
        }
        SmallVector<Value> next;
        for (auto [i, total] : llvm::enumerate(totals))
          next.push_back(arith::getReductionOp(
              kinds[i], ib, il, total,
              warpCombine(ib, laneTotals[i], kinds[i])));
        ib.create<scf::YieldOp>(il, next);
      });
  return SmallVector<Value>(loop.getResults());
}

SmallVector<Value> GPUKernelEmitter::combineSplitTilePartials(OpBuilder &b,
                                                             Value start,
                                                             Value end) {
  // Each lane reads its features' slots (coalesced: a slot's features are
  // contiguous), each group of lanes every (32 / G)-th tile, kTilesPerLane
  // tiles' loads in flight at a time, combined in tile order, then the
  // groups by a butterfly: the order depends on the segment only. A
  // segment of 1e7 rows has ~300 super-tiles, ceil(F / 32) loads each a
  // lane: this chain is long at F = 256; units past the segment count as
  // the combine's identity.
  Type elementType = program.elementType;
  SegmentTiles tiles = segmentTiles(b, start, end);
  auto [firstTile, lastTile, firstSlot] = tiles;
  SmallVector<Value> components;
  for (const SegmentProgramEmitter::HeldAccumulator &held :
       emitter.heldAccumulators(b, loc, /*pass=*/0))
    components.push_back(held.component);
  SmallVector<arith::AtomicRMWKind> kinds = emitter.heldCombiningKinds(0);
  SmallVector<Value> identities;
  for (arith::AtomicRMWKind kind : kinds)
    identities.push_back(arith::getIdentityValue(kind, elementType, b, loc));
  // Groups of lanes (32 / G of them) take every (32 / G)-th tile.
  int64_t groups = groupRows();
  auto loop = b.create<scf::ForOp>(
      loc, firstTile, b.create<arith::AddIOp>(loc, lastTile, i64(b, 1)),
      i64(b, kTilesPerLane * groups), identities,
      [&](OpBuilder &ib, Location il, Value chunk, ValueRange totals) {
        SmallVector<Value> next(totals);
        SmallVector<SmallVector<Value>> loaded;
        for (int64_t k = 0; k < kTilesPerLane; ++k) {
          Value tile = ib.create<arith::AddIOp>(
              il, chunk, i64(ib, k * groups));
          if (groups > 1)
            tile = ib.create<arith::AddIOp>(il, tile, rowInGroup);
          loaded.push_back(
              loadTileSlot(ib, tile, tiles, components, identities));
        }
        // All loads first, then the combines in tile order.
        for (const SmallVector<Value> &values : loaded)
          for (auto [i, value] : llvm::enumerate(values))
            next[i] = arith::getReductionOp(kinds[i], ib, il, next[i], value);
        ib.create<scf::YieldOp>(il, next);
      });
  SmallVector<Value> totals(loop.getResults());
  for (auto [total, kind] : llvm::zip_equal(totals, kinds))
    total = combineGroups(b, total, kind);
  return totals;
}

void GPUKernelEmitter::emitLongSegment(OpBuilder &b, Value start,
                                       Value segment) {
  KernelCodeBuilder code(b, loc);
  Value end = searchLongSegmentEnd(b, start, segment);
  auto ifValid = b.create<scf::IfOp>(
      loc, code.isValidSegment(segment, numSegments), /*withElse=*/false);
  OpBuilder vb = ifValid.getThenBodyBuilder();
  auto readPartials = [&](OpBuilder &rb, Location, ValueRange init,
                          SegmentProgramEmitter::RowBody, bool) {
    int64_t numComponents = program.numReductionComponents(0);
    // Split rows with many components: lane by lane (see
    // combineSplitTilePartials); with up to 8, lanes over tiles as below,
    // each lane then picking its own (16 components took the kernel from
    // 40 registers to 64, and a spill, in every layout).
    if (splitsFeatures() && numComponents > kMaxPickedComponents)
      return combineSplitTilePartials(rb, start, end);
    SmallVector<Value> components;
    for (int64_t i = 0; i < numComponents; ++i)
      components.push_back(i64(rb, i));
    SmallVector<Value> totals =
        combineTilePartials(rb, segmentTiles(rb, start, end), components,
                            program.combiningKinds(0));
    if (!splitsFeatures())
      return totals;
    SmallVector<Value> held;
    for (const SegmentProgramEmitter::HeldAccumulator &accumulator :
         emitter.heldAccumulators(rb, loc, /*pass=*/0)) {
      Value picked = totals.front();
      for (auto [i, total] : llvm::enumerate(totals))
        picked = rb.create<arith::SelectOp>(
            loc,
            rb.create<arith::CmpIOp>(loc, arith::CmpIPredicate::eq,
                                     accumulator.component, i64(rb, i)),
            total, picked);
      held.push_back(picked);
    }
    return held;
  };
  emitter.emitSegment(vb, loc, segment,
                      vb.create<arith::SubIOp>(loc, end, start), readPartials,
                      combineNothing, segmentOutputWriter(vb));
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
                                                       unsigned pass) {
  KernelCodeBuilder code(b, loc);
  Value base = segmentTotals(b);
  Value passTotals = b.create<arith::AddIOp>(
      loc,
      b.create<arith::MulIOp>(loc, segment,
                              i64(b, program.numReductionComponents())),
      i64(b, program.reductionOffset(pass)));
  SmallVector<Value> totals;
  for (const SegmentProgramEmitter::HeldAccumulator &held :
       emitter.heldAccumulators(b, loc, pass))
    totals.push_back(
        code.load(base, program.elementType,
                  b.create<arith::AddIOp>(loc, passTotals, held.component)));
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
  auto readTotals = [&](OpBuilder &rb, Location, ValueRange,
                        SegmentProgramEmitter::RowBody, bool) {
    return loadSegmentTotals(rb, segment, emitter.currentPass());
  };
  emitter.emitSegment(vb, loc, segment,
                      vb.create<arith::SubIOp>(loc, end, start), readTotals,
                      combineNothing, segmentOutputWriter(vb));
}

void GPUKernelEmitter::emitTileLoop(OpBuilder &b, TileBody body) {
  emitWarpIds(b);
  b.create<scf::ForOp>(
      loc, globalWarp, numTiles(b), totalWarps, ValueRange{},
      [&](OpBuilder &tb, Location, Value tile, ValueRange) {
        Value tileStart =
            tb.create<arith::MulIOp>(loc, tile, i64(tb, tileRows));
        Value tileEnd = tb.create<arith::MinSIOp>(
            loc, tb.create<arith::AddIOp>(loc, tileStart, i64(tb, tileRows)),
            numRows);
        body(tb, tile, tileStart, tileEnd);
        tb.create<scf::YieldOp>(loc);
      });
  emitKernelEnd(b);
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
  Value fullEnd = tb.create<arith::AddIOp>(loc, tileStart, i64(tb, tileRows));
  // A long segment covers a whole span of tileRows rows starting at a
  // multiple of longAlignment. The head covers one if it covers the tile
  // before, or a span holding this tile's first row (a long segment
  // covering a span before one of those covers the tile before). A
  // different tail, one holding this tile's last row (it cannot cover a
  // span inside the tile without holding the tile's first row).
  int64_t spansPerTile = tileRows / longAlignment;
  Value headFirst = tb.create<arith::SubIOp>(loc, tileStart, i64(tb, tileRows));
  Value tailFirst = tb.create<arith::SubIOp>(
      loc, fullEnd, i64(tb, tileRows - longAlignment));
  auto headEnds = longSpanEnds(spansPerTile + 1, /*knownOffset=*/tileRows);
  auto tailEnds =
      longSpanEnds(spansPerTile, /*knownOffset=*/tileRows - longAlignment - 1);
  // The segments of the tile's first and last rows and of the spans' ends.
  // Split rows probe 9 rows: loaded a lane each, then shuffled (one load
  // instruction, not three rounds of them). Rows held a row per lane probe
  // 5, each loaded by every lane: the lane-dependent row of probes, hoisted
  // from the tile loop, cost their tile kernels 6 to 37 registers.
  SmallVector<int64_t> offsets = {0, 0};
  for (auto [first, ends] :
       {std::pair{-tileRows, ArrayRef(headEnds)},
        std::pair{longAlignment, ArrayRef(tailEnds)}})
    for (const auto &far : ends)
      for (int64_t offset : far)
        offsets.push_back(first + offset);
  Value lastRow = tb.create<arith::SubIOp>(loc, tileEnd, i64(tb, 1));
  Value head, tail;
  int64_t next = 2;
  std::function<Value(int64_t)> nextProbe;
  if (splitsFeatures()) {
    Value probes = probeSegment(tb, tileStart, offsets, lastRow);
    head = probedSegment(tb, probes, 0);
    tail = probedSegment(tb, probes, 1);
    nextProbe = [&, probes](int64_t) {
      return probedSegment(tb, probes, next++);
    };
  } else {
    head = code.loadSegment(idx, tileStart);
    tail = code.loadSegment(idx, lastRow);
    // Clamped into [0, N): where the row is outside, so is its span, which
    // then holds nothing whatever the load gives.
    nextProbe = [&](int64_t) {
      Value row = tb.create<arith::AddIOp>(loc, tileStart,
                                           i64(tb, offsets[next++]));
      Value clamped = tb.create<arith::MaxSIOp>(
          loc,
          tb.create<arith::MinSIOp>(
              loc, row, tb.create<arith::SubIOp>(loc, numRows, i64(tb, 1))),
          i64(tb, 0));
      return code.loadSegment(idx, clamped);
    };
  }
  Value headIsLong = holdsLongSpan(tb, headFirst, headEnds, head, nextProbe);
  Value tailDiffers = cmp(arith::CmpIPredicate::ne, tail, head);
  Value tailIsLong = tb.create<arith::AndIOp>(
      loc, tailDiffers,
      holdsLongSpan(tb, tailFirst, tailEnds, tail, nextProbe));
  // Where the head ends, where the tail starts: one 32-way search each.
  // A head that is also the tail ends at the tile's end (for sorted idx it
  // holds every row between): no search, whose 32 probes would each read
  // a sector of idx for 4 bytes.
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
  Value headEnd =
      searchIf(tb.create<arith::AndIOp>(loc, headIsLong, tailDiffers), tileEnd,
               tb.create<arith::AddIOp>(loc, tileStart, i64(tb, 1)), head,
               arith::CmpIPredicate::eq);
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
      coversLongSpan(tb, tileStart, head));
  Value tailDiffers =
      tb.create<arith::CmpIOp>(loc, arith::CmpIPredicate::ne, tail, head);
  // A tail covering a span holds the last row of the first span after the
  // tile's first row (it starts after that row, and later spans end later:
  // idx sorted). One load of that row spares the search (a round a step, a
  // sector a lane) of every tail that ends before it: all short segments'.
  Value tailMayCover = coversLongSpan(
      tb, tb.create<arith::AddIOp>(loc, tileStart, i64(tb, 1)), tail,
      tailDiffers);
  auto ifTail = tb.create<scf::IfOp>(
      loc, tailMayCover,
      [&](OpBuilder &db, Location) {
        db.create<scf::YieldOp>(loc, tailStartIn(db, tileStart, tileEnd, tail));
      },
      [&](OpBuilder &ob, Location) { ob.create<scf::YieldOp>(loc, tileEnd); });
  Value tailStart = ifTail.getResult(0);
  Value tailStarts = coversLongSpan(tb, tailStart, tail, tailMayCover);
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

void GPUKernelEmitter::emitLongPieceLoop(TilePieceBody valid,
                                         TilePieceBody invalidRows) {
  // Only rows stored need anything for an invalid segment.
  bool visitsInvalid = program.hasRowOutputs && invalidRows;
  emitTileLoop(builder, [&](OpBuilder &tb, Value tile, Value tileStart,
                            Value tileEnd) {
    forEachLongPiece(
        tb, tile, tileStart, tileEnd,
        [&](OpBuilder &b, Value which, Value segment, Value lo, Value hi) {
          auto ifValid = b.create<scf::IfOp>(
              loc,
              KernelCodeBuilder(b, loc).isValidSegment(segment, numSegments),
              /*withElse=*/visitsInvalid);
          OpBuilder vb = ifValid.getThenBodyBuilder();
          valid(vb, tile, which, segment, lo, hi);
          if (visitsInvalid) {
            OpBuilder eb = ifValid.getElseBodyBuilder();
            invalidRows(eb, tile, which, segment, lo, hi);
          }
        });
  });
}

void GPUKernelEmitter::emitTiles() {
  // One-pass programs: one pass; each long piece's raw totals into its
  // slot, its row outputs stored on the way (zero for an invalid segment).
  auto valid = [&](OpBuilder &vb, Value tile, Value which, Value segment,
                   Value lo, Value hi) {
    auto rowLoop = [&](OpBuilder &rb, Location, ValueRange init,
                       SegmentProgramEmitter::RowBody body, bool) {
      SmallVector<Value> totals =
          reduceRows(rb, lo, hi, init, body, program.combiningKinds(0));
      storeAccumulators(rb, totals, /*pass=*/0, partials(rb),
                        [&](OpBuilder &ib, Value component) {
                          return partialIndex(ib, tile, which, component);
                        });
      return totals;
    };
    Value never = vb.create<arith::ConstantIntOp>(loc, 0, 1);
    emitter.emitSegment(vb, loc, segment, vb.create<arith::SubIOp>(loc, hi, lo),
                        rowLoop, combineNothing, never);
  };
  emitLongPieceLoop(valid, [&](OpBuilder &eb, Value, Value, Value, Value lo,
                               Value hi) { emitZeroRows(eb, lo, hi); });
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
            return loadSegmentTotals(eb, segment, pass);
          },
          [&](OpBuilder &hb, Location) {
            SmallVector<Value> totals = reduceRows(
                hb, lo, hi, init, body, program.combiningKinds(pass));
            storeAccumulators(
                hb, totals, pass, partials(hb),
                [&](OpBuilder &ib, Value component) {
                  return partialIndex(
                      ib, tile, which,
                      ib.create<arith::AddIOp>(
                          loc, component,
                          i64(ib, program.reductionOffset(pass))));
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
    Value firstPass = eb.create<arith::CmpIOp>(loc, arith::CmpIPredicate::eq,
                                               runningPass, i64(eb, 0));
    auto ifFirst = eb.create<scf::IfOp>(loc, firstPass, /*withElse=*/false);
    OpBuilder fb = ifFirst.getThenBodyBuilder();
    emitZeroRows(fb, lo, hi);
  };
  emitLongPieceLoop(valid, invalid);
}

void GPUKernelEmitter::emitPassTotals() {
  // Under `.maxntid` alone ptxas aims for full occupancy (32 registers at
  // 256 threads) and spills; one block per SM let it take 71. Blocks
  // filling half an SM's 2,048 threads cap it at 64 registers (256
  // threads: 50% occupancy) without a spill, as it combines one component
  // at a time, however many the program has (docs/benchmarks.md, GPU
  // kernels by ptxas).
  kernel->setAttr(NVVM::NVVMDialect::getMinctasmAttrName(),
                  builder.getI32IntegerAttr(
                      std::max<int64_t>(1, kHalfSMThreads / blockSize)));
  auto [first, last] = runningPassComponents(builder);
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
          SegmentTiles tiles = segmentTiles(vb, start, end);
          forEachRunningComponent(
              vb, first, last,
              [&](OpBuilder &cb, Value component, arith::AtomicRMWKind kind) {
                Value total =
                    combineTilePartials(cb, tiles, component, kind)[0];
                storeFromLaneZero(
                    cb, total, totals, [&](OpBuilder &ib, int64_t) {
                      return ib.create<arith::AddIOp>(loc, row, component);
                    });
              });
        });
  });
}

std::pair<Value, Value> GPUKernelEmitter::runningPassComponents(OpBuilder &b) {
  // Picked from constants by the pass.
  Value first = i64(b, 0), count = i64(b, 0);
  for (unsigned pass = 0; pass < program.numPasses; ++pass) {
    Value isPass = b.create<arith::CmpIOp>(loc, arith::CmpIPredicate::eq,
                                           runningPass, i64(b, pass));
    first = b.create<arith::SelectOp>(
        loc, isPass, i64(b, program.reductionOffset(pass)), first);
    count = b.create<arith::SelectOp>(
        loc, isPass, i64(b, program.numReductionComponents(pass)), count);
  }
  return {first, b.create<arith::AddIOp>(loc, first, count)};
}

void GPUKernelEmitter::forEachRunningComponent(
    OpBuilder &b, Value first, Value last,
    function_ref<void(OpBuilder &, Value, arith::AtomicRMWKind)> body) {
  // A loop per run of components that combine alike (all of a sum-only
  // program's: one loop), over its part of [first, last).
  for (auto [runBegin, runEnd, kind] : combiningRuns()) {
    Value lo = b.create<arith::MaxSIOp>(loc, first, i64(b, runBegin));
    Value hi = b.create<arith::MinSIOp>(loc, last, i64(b, runEnd));
    b.create<scf::ForOp>(
        loc, lo, hi, i64(b, 1), ValueRange{},
        [&](OpBuilder &cb, Location, Value component, ValueRange) {
          body(cb, component, kind);
          cb.create<scf::YieldOp>(loc);
        });
  }
}

void GPUKernelEmitter::emitSuperTiles() {
  // W warps per super-tile (SegmentProgram::gpuSuperTileWarps), warp p
  // combining components [4p, 4p + 4) of the running pass's totals, its
  // lanes over those components and the super-tile's tiles (32 or, for
  // split rows' smaller tiles, 128), 32 tiles at a time. The super-tile's
  // head is the segment of its first row, its tail that of its last; a
  // tile adds to the head its head slot if it holds the same segment, to
  // the tail its head slot or else its tail slot if one holds the tail's
  // segment. Each lane combines its tiles in order, the lanes of a
  // component by the butterfly (a fixed order), and the first lane of
  // each component stores. Read only for valid long segments spanning two
  // super-tiles or more, whose every tile slot the tile kernels wrote; for
  // any idx every index stays in the scratch.
  auto [first, last] = runningPassComponents(builder);
  emitWarpIds(builder);
  Value tiles = numTiles(builder);
  Value numSuperTiles = builder.create<arith::DivUIOp>(
      loc,
      builder.create<arith::AddIOp>(loc, tiles,
                                    i64(builder, tilesPerSuperTile - 1)),
      i64(builder, tilesPerSuperTile));
  int64_t warpsPerSuperTile = program.gpuSuperTileWarps();
  constexpr int64_t componentsPerWarp =
      SegmentProgram::kGPUSuperTileComponentsPerWarp;
  builder.create<scf::ForOp>(
      loc, globalWarp,
      builder.create<arith::MulIOp>(loc, numSuperTiles,
                                    i64(builder, warpsPerSuperTile)),
      totalWarps, ValueRange{},
      [&](OpBuilder &ob, Location, Value unit, ValueRange) {
        KernelCodeBuilder code(ob, loc);
        auto ocmp = [&](arith::CmpIPredicate predicate, Value x, Value y) {
          return ob.create<arith::CmpIOp>(loc, predicate, x, y);
        };
        Value superTile = ob.create<arith::DivUIOp>(
            loc, unit, i64(ob, warpsPerSuperTile));
        Value partFirst = ob.create<arith::AddIOp>(
            loc, first,
            ob.create<arith::MulIOp>(
                loc,
                ob.create<arith::RemUIOp>(loc, unit,
                                          i64(ob, warpsPerSuperTile)),
                i64(ob, componentsPerWarp)));
        Value partLast = ob.create<arith::MinSIOp>(
            loc, last,
            ob.create<arith::AddIOp>(loc, partFirst,
                                     i64(ob, componentsPerWarp)));
        Value superStart =
            ob.create<arith::MulIOp>(loc, superTile, i64(ob, kSuperTileRows));
        Value superEnd = ob.create<arith::MinSIOp>(
            loc,
            ob.create<arith::AddIOp>(loc, superStart, i64(ob, kSuperTileRows)),
            numRows);
        Value head = code.loadSegment(idx, superStart);
        Value tail = code.loadSegment(
            idx, ob.create<arith::SubIOp>(loc, superEnd, i64(ob, 1)));
        // Its slots are read only for a long segment spanning it and
        // another super-tile: a head that began before it or a tail that
        // goes on after, long if it covers a long span holding or ending
        // at that boundary (the tile before or after it, or, for split
        // rows, the span across it). Where neither (short segments across
        // its boundaries), skip its F loads a tile.
        auto segmentAt = [&](Value row) {
          Value inRange = ob.create<arith::AndIOp>(
              loc, ocmp(arith::CmpIPredicate::sge, row, i64(ob, 0)),
              ocmp(arith::CmpIPredicate::slt, row, numRows));
          return segmentOr(ob, inRange, row);
        };
        auto longAcross = [&](Value boundary, Value segment, Value crosses) {
          Value first =
              ob.create<arith::SubIOp>(loc, boundary, i64(ob, tileRows));
          Value covers = holdsLongSpan(
              ob, first,
              longSpanEnds(tileRows / longAlignment + 1,
                           /*knownOffset=*/tileRows),
              segment, [&](int64_t offset) {
                return segmentAt(
                    ob.create<arith::AddIOp>(loc, first, i64(ob, offset)));
              });
          return ob.create<arith::AndIOp>(loc, crosses, covers);
        };
        Value before =
            segmentAt(ob.create<arith::SubIOp>(loc, superStart, i64(ob, 1)));
        Value after = segmentAt(superEnd);
        Value headSpans = longAcross(
            superStart, head, ocmp(arith::CmpIPredicate::eq, before, head));
        Value tailSpans = longAcross(
            superEnd, tail, ocmp(arith::CmpIPredicate::eq, after, tail));
        Value spans = ob.create<arith::OrIOp>(loc, headSpans, tailSpans);
        // A pass with fewer components than the widest leaves some warps
        // none.
        if (warpsPerSuperTile > 1)
          spans = ob.create<arith::AndIOp>(
              loc, spans, ocmp(arith::CmpIPredicate::slt, partFirst, last));
        auto ifSpans = ob.create<scf::IfOp>(loc, spans, /*withElse=*/false);
        OpBuilder b = ifSpans.getThenBodyBuilder();
        combineSuperTileSlots(b, superTile, tiles, head, tail, partFirst,
                              partLast);
        ob.create<scf::YieldOp>(loc);
      });
  emitKernelEnd(builder);
}

void GPUKernelEmitter::combineSuperTileSlots(OpBuilder &b, Value superTile,
                                             Value tiles, Value head,
                                             Value tail, Value partFirst,
                                             Value partLast) {
  auto cmp = [&](arith::CmpIPredicate predicate, Value x, Value y) {
    return b.create<arith::CmpIOp>(loc, predicate, x, y);
  };
  // The slots, lanes over components: lane l takes component
  // partFirst + l % C (C = gpuSuperTileComponentLanes, 1 to 4) of
  // tiles l / C, l / C + 32 / C, ... in order, so that C lanes read C
  // consecutive values of a slot (4 f32: 16 bytes, 4 f64: a sector)
  // where a lane over tiles read one; then a butterfly over the lanes
  // of a component, and lanes 0 to C - 1 store. Only the slots that
  // add to the head or the tail are read: in a super-tile of short
  // segments but at its ends, most tiles add to neither.
  int64_t componentLanes = program.gpuSuperTileComponentLanes();
  int64_t tileLanes = kWarpSize / componentLanes;
  Value tileLane = b.create<arith::ShRUIOp>(
      loc, lane, i64(b, llvm::Log2_64(componentLanes)));
  Value component = b.create<arith::AddIOp>(
      loc, partFirst,
      b.create<arith::AndIOp>(loc, lane, i64(b, componentLanes - 1)));
  Value hasComponent = cmp(arith::CmpIPredicate::slt, component, partLast);
  // A pass's components may combine differently (runs of kinds): the
  // lane's kind is its component's. Per kind but the last run's, whether
  // the lane's component is in one of its runs (computed once).
  auto runs = combiningRuns();
  arith::AtomicRMWKind laneDefault = std::get<2>(runs.back());
  SmallVector<std::pair<arith::AtomicRMWKind, Value>> otherKinds;
  for (auto [runBegin, runEnd, kind] : runs) {
    if (kind == laneDefault)
      continue;
    Value inRun = b.create<arith::AndIOp>(
        loc, cmp(arith::CmpIPredicate::sge, component, i64(b, runBegin)),
        cmp(arith::CmpIPredicate::slt, component, i64(b, runEnd)));
    auto *found = llvm::find_if(
        otherKinds, [&](const auto &entry) { return entry.first == kind; });
    if (found == otherKinds.end())
      otherKinds.push_back({kind, inRun});
    else
      found->second = b.create<arith::OrIOp>(loc, found->second, inRun);
  }
  auto byKind = [&](OpBuilder &kb,
                    function_ref<Value(arith::AtomicRMWKind)> make) {
    Value result = make(laneDefault);
    for (auto [kind, isKind] : otherKinds)
      result = kb.create<arith::SelectOp>(loc, isKind, make(kind), result);
    return result;
  };
  Type type = program.elementType;
  Value identity = byKind(b, [&](arith::AtomicRMWKind kind) {
    return arith::getIdentityValue(kind, type, b, loc);
  });
  Value slots = partials(b);
  Value firstTile = b.create<arith::MulIOp>(loc, superTile,
                                            i64(b, tilesPerSuperTile));
  // 32 tiles at a time (C a lane).
  auto groups = b.create<scf::ForOp>(
      loc, i64(b, 0), i64(b, tilesPerSuperTile / kWarpSize), i64(b, 1),
      ValueRange{identity, identity},
      [&](OpBuilder &gb, Location, Value group, ValueRange totals) {
        auto gcmp = [&](arith::CmpIPredicate predicate, Value x,
                        Value y) {
          return gb.create<arith::CmpIOp>(loc, predicate, x, y);
        };
        // One component a lane (C = 1): each lane reads its own tile's
        // slots and needs no other lane's bits (a ballot would end the
        // idx loads' round before the slots' loads).
        auto ballot = [&](Value predicate) -> Value {
          if (componentLanes == 1)
            return predicate;
          return gb.create<NVVM::VoteBallotOp>(
              loc, gb.getI32Type(),
              gb.create<arith::ConstantIntOp>(loc, -1, 32), predicate);
        };
        Value groupTile = gb.create<arith::AddIOp>(
            loc, firstTile,
            gb.create<arith::MulIOp>(loc, group, i64(gb, kWarpSize)));
        // Where the group's tile `lane` adds (lanes over tiles): its
        // head slot to the head, and its head or else its tail slot
        // to the tail; ballots give every lane each tile's bit.
        Value tile = gb.create<arith::AddIOp>(loc, groupTile, lane);
        Value inRange = gcmp(arith::CmpIPredicate::ult, tile, tiles);
        Value tileStart =
            gb.create<arith::MulIOp>(loc, tile, i64(gb, tileRows));
        Value tileLast = gb.create<arith::SubIOp>(
            loc,
            gb.create<arith::MinSIOp>(
                loc,
                gb.create<arith::AddIOp>(loc, tileStart,
                                         i64(gb, tileRows)),
                numRows),
            i64(gb, 1));
        Value tileHead = segmentOr(gb, inRange, tileStart);
        Value tileTail = segmentOr(gb, inRange, tileLast);
        Value headHoldsTail =
            gcmp(arith::CmpIPredicate::eq, tileHead, tail);
        Value toHeadBits = ballot(gb.create<arith::AndIOp>(
            loc, inRange,
            gcmp(arith::CmpIPredicate::eq, tileHead, head)));
        Value toTailBits = ballot(gb.create<arith::AndIOp>(
            loc, inRange,
            gb.create<arith::OrIOp>(
                loc, headHoldsTail,
                gcmp(arith::CmpIPredicate::eq, tileTail, tail))));
        Value tailSlotBits = ballot(gb.create<arith::XOrIOp>(
            loc, headHoldsTail,
            gb.create<arith::ConstantIntOp>(loc, 1, 1)));
        auto part = [&](Value readTile, Value adds, Value slot) {
          auto ifAdds = gb.create<scf::IfOp>(
              loc, adds,
              [&](OpBuilder &tb, Location tl) {
                tb.create<scf::YieldOp>(
                    tl, KernelCodeBuilder(tb, tl).load(
                            slots, type,
                            partialIndex(tb, readTile, slot, component)));
              },
              [&](OpBuilder &eb, Location el) {
                eb.create<scf::YieldOp>(el, identity);
              });
          return ifAdds.getResult(0);
        };
        // Every load, then the combines in tile order.
        SmallVector<Value> headParts, tailParts;
        for (int64_t k = 0; k < componentLanes; ++k) {
          Value inGroup = gb.create<arith::AddIOp>(
              loc, tileLane, i64(gb, k * tileLanes));
          Value position =
              gb.create<arith::TruncIOp>(loc, gb.getI32Type(), inGroup);
          auto bit = [&](Value bits) -> Value {
            if (componentLanes == 1)
              return bits;
            return gb.create<arith::TruncIOp>(
                loc, gb.getI1Type(),
                gb.create<arith::ShRUIOp>(loc, bits, position));
          };
          Value readTile =
              gb.create<arith::AddIOp>(loc, groupTile, inGroup);
          headParts.push_back(part(
              readTile,
              gb.create<arith::AndIOp>(loc, hasComponent,
                                       bit(toHeadBits)),
              i64(gb, 0)));
          tailParts.push_back(part(
              readTile,
              gb.create<arith::AndIOp>(loc, hasComponent,
                                       bit(toTailBits)),
              gb.create<arith::ExtUIOp>(loc, gb.getI64Type(),
                                        bit(tailSlotBits))));
        }
        auto inOrder = [&](Value total, ArrayRef<Value> parts) {
          for (Value value : parts)
            total = byKind(gb, [&](arith::AtomicRMWKind kind) {
              return arith::getReductionOp(kind, gb, loc, total, value);
            });
          return total;
        };
        gb.create<scf::YieldOp>(
            loc, ValueRange{inOrder(totals[0], headParts),
                            inOrder(totals[1], tailParts)});
      });
  Value headTotal = groups.getResult(0), tailTotal = groups.getResult(1);
  auto overComponentLanes = [&](Value value) {
    return byKind(b, [&](arith::AtomicRMWKind kind) {
      return warpCombine(b, value, kind, /*fromOffset=*/componentLanes,
                         /*toOffset=*/kWarpSize);
    });
  };
  headTotal = overComponentLanes(headTotal);
  tailTotal = overComponentLanes(tailTotal);
  // Stored as the slots of tile numTiles + superTile (segmentTiles).
  Value superSlot = b.create<arith::AddIOp>(loc, tiles, superTile);
  auto ifStores = b.create<scf::IfOp>(
      loc,
      b.create<arith::AndIOp>(
          loc, hasComponent,
          cmp(arith::CmpIPredicate::eq, tileLane, i64(b, 0))),
      /*withElse=*/false);
  OpBuilder sb = ifStores.getThenBodyBuilder();
  SmallVector<Value, 2> totals = {headTotal, tailTotal};
  for (auto [which, total] : llvm::enumerate(totals))
    KernelCodeBuilder(sb, loc).store(
        total, slots,
        partialIndex(sb, superSlot, i64(sb, which), component));
}

SmallVector<std::tuple<int64_t, int64_t, arith::AtomicRMWKind>>
GPUKernelEmitter::combiningRuns() const {
  SmallVector<std::tuple<int64_t, int64_t, arith::AtomicRMWKind>> runs;
  int64_t component = 0;
  for (unsigned pass = 0; pass < program.numPasses; ++pass)
    for (arith::AtomicRMWKind kind : program.combiningKinds(pass)) {
      if (!runs.empty() && std::get<2>(runs.back()) == kind)
        std::get<1>(runs.back()) = component + 1;
      else
        runs.push_back({component, component + 1, kind});
      ++component;
    }
  return runs;
}
