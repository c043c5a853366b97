//===- GPUKernelEmitter.cpp - segment and row kernels on the GPU ----------===//
//
// The segment kernel (warps own the segments starting in their rows) and
// the row kernel; GPUKernelEmitter.h has the scheme.
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

Value mlir::seg::combineNothing(OpBuilder &, Location, Value total,
                                arith::AtomicRMWKind) {
  return total;
}
void GPUKernelEmitter::emitWarpIds(OpBuilder &b) {
  threadId = indexToI64(b, b.create<gpu::ThreadIdOp>(loc, gpu::Dimension::x));
  blockId = indexToI64(b, b.create<gpu::BlockIdOp>(loc, gpu::Dimension::x));
  gridDim = indexToI64(b, b.create<gpu::GridDimOp>(loc, gpu::Dimension::x));
  Value columnBase;
  if (columnBlocks > 1) {
    // Of a grid of G blocks, block b runs block b / C' of a grid of G / C'
    // on column blocks b % C', b % C' + C', ... (C' = min(C, G)), the rest
    // of the kernel in a loop over them: on the launcher's grid (C times
    // the rule's) each block one column block, and any grid is correct.
    // Blocks past C' (G / C') idle. Values every lane holds whole are
    // computed, and stored, the same by every column block.
    Value blocks = i64(b, columnBlocks);
    Value step = b.create<arith::MinUIOp>(loc, gridDim, blocks);
    Value rowGrid = b.create<arith::DivUIOp>(loc, gridDim, step);
    Value rowBlock = b.create<arith::DivUIOp>(loc, blockId, step);
    Value idle = b.create<arith::CmpIOp>(loc, arith::CmpIPredicate::uge,
                                         rowBlock, rowGrid);
    Value first = b.create<arith::SelectOp>(
        loc, idle, blocks, b.create<arith::RemUIOp>(loc, blockId, step));
    columnLoop = b.create<scf::ForOp>(loc, first, blocks, step);
    b.setInsertionPointToStart(columnLoop.getBody());
    columnBase = b.create<arith::MulIOp>(
        loc, columnLoop.getInductionVar(),
        i64(b, program.widestRowFeatures() / columnBlocks));
    blockId = rowBlock;
    gridDim = rowGrid;
  }
  lane = b.create<arith::AndIOp>(loc, threadId, i64(b, kWarpSize - 1));
  Value warpsPerBlock = i64(b, blockSize / kWarpSize);
  globalWarp = b.create<arith::AddIOp>(
      loc, b.create<arith::MulIOp>(loc, blockId, warpsPerBlock),
      b.create<arith::ShRUIOp>(loc, threadId, i64(b, 5)));
  totalWarps = b.create<arith::MulIOp>(loc, gridDim, warpsPerBlock);
  if (!splitsFeatures())
    return;
  // Split rows: groups of G lanes, lane l of the warp the feature lane
  // l % G of row group l / G. A segment's values are stored by the first
  // group; a row map's groups each store their own rows.
  int64_t groupLanes = featureLanes;
  groupLane = b.create<arith::AndIOp>(loc, lane, i64(b, groupLanes - 1));
  rowInGroup = b.create<arith::DivUIOp>(loc, lane, i64(b, groupLanes));
  if (groupRows() > 1 && !program.mapsRowsOnly())
    firstGroup = b.create<arith::CmpIOp>(loc, arith::CmpIPredicate::ult, lane,
                                         i64(b, groupLanes));
  emitter.splitFeaturesOver(
      groupLane, groupLanes, firstGroup,
      [this, groupLanes](OpBuilder &cb, Location, Value part,
                         arith::AtomicRMWKind kind) {
        return warpCombine(cb, part, kind, /*fromOffset=*/1,
                           /*toOffset=*/groupLanes);
      },
      columnBlocks, columnBase);
}

void GPUKernelEmitter::emitKernelEnd(OpBuilder &b) {
  if (columnLoop)
    b.setInsertionPointAfter(columnLoop);
  b.create<gpu::ReturnOp>(loc);
}

int64_t GPUKernelEmitter::groupRows() const {
  return splitsFeatures() ? kWarpSize / featureLanes : 1;
}

Value GPUKernelEmitter::combineGroups(OpBuilder &b, Value value,
                                      arith::AtomicRMWKind kind) {
  if (groupRows() == 1)
    return value;
  return warpCombine(b, value, kind,
                     /*fromOffset=*/featureLanes,
                     /*toOffset=*/kWarpSize);
}

SmallVector<Value>
GPUKernelEmitter::splitRowLoop(OpBuilder &b, Value lo, Value hi,
                               ValueRange init,
                               SegmentProgramEmitter::RowBody body) {
  // Group g takes rows lo + g, lo + g + R, ... (R groups); a group past hi
  // runs row hi - 1 masked: its terms are the identity and it stores
  // nothing. The loop is the warp's (its collectives convergent).
  int64_t rows = groupRows();
  auto loop = b.create<scf::ForOp>(
      loc, lo, hi, i64(b, rows), init,
      [&](OpBuilder &ib, Location il, Value base, ValueRange acc) {
        if (rows == 1) {
          ib.create<scf::YieldOp>(
              il, body(ib, il, base, /*lanes=*/1, /*laneMask=*/Value(), acc));
          return;
        }
        Value row = ib.create<arith::AddIOp>(il, base, rowInGroup);
        Value inside =
            ib.create<arith::CmpIOp>(il, arith::CmpIPredicate::slt, row, hi);
        Value safeRow = ib.create<arith::MinSIOp>(
            il, row, ib.create<arith::SubIOp>(il, hi, i64(ib, 1)));
        ib.create<scf::YieldOp>(
            il, body(ib, il, safeRow, /*lanes=*/1, inside, acc));
      });
  SmallVector<Value> totals =
      emitter.combineLaneParts(b, loc, loop.getResults());
  for (auto [total, kind] : llvm::zip_equal(
           totals, emitter.heldCombiningKinds(emitter.currentPass())))
    total = combineGroups(b, total, kind);
  return totals;
}

SmallVector<Value>
GPUKernelEmitter::laneRowLoop(OpBuilder &b, Value lo, Value hi, ValueRange init,
                              SegmentProgramEmitter::RowBody body,
                              bool fromChunks) {
  // With `fromChunks`, steps from lo's chunk, not from lo, where that takes
  // no more rounds of loads (a step more may: the short walks of tails into
  // the next chunk): a warp's step then reads whole sectors, where 32 rows
  // from anywhere touch a sector more of each buffer (5 of f32 for 4 of
  // data). The first step is peeled, its lanes outside [lo, hi) masked
  // (they read row lo or hi - 1, sectors read anyway), so that the loop
  // holds no mask.
  Value step = i64(b, kWarpSize);
  if (!fromChunks) {
    auto loop = b.create<scf::ForOp>(
        loc, b.create<arith::AddIOp>(loc, lo, lane), hi, step, init,
        [&](OpBuilder &ib, Location il, Value row, ValueRange acc) {
          ib.create<scf::YieldOp>(
              il, body(ib, il, row, /*lanes=*/1, /*laneMask=*/Value(), acc));
        });
    return SmallVector<Value>(loop.getResults());
  }
  // Rounds of kGPULoadsPerRound steps from `from` to hi.
  constexpr int64_t roundRows = kWarpSize * SegmentProgram::kGPULoadsPerRound;
  auto rounds = [&](Value from) {
    return b.create<arith::DivSIOp>(
        loc,
        b.create<arith::AddIOp>(loc, b.create<arith::SubIOp>(loc, hi, from),
                                i64(b, roundRows - 1)),
        i64(b, roundRows));
  };
  Value chunkStart = b.create<arith::AndIOp>(loc, lo, i64(b, -kWarpSize));
  Value fromChunk = b.create<arith::CmpIOp>(loc, arith::CmpIPredicate::eq,
                                            rounds(chunkStart), rounds(lo));
  Value base = b.create<arith::SelectOp>(loc, fromChunk, chunkStart, lo);
  Value any = b.create<arith::CmpIOp>(loc, arith::CmpIPredicate::slt, lo, hi);
  auto head = b.create<scf::IfOp>(
      loc, any,
      [&](OpBuilder &hb, Location hl) {
        Value row = hb.create<arith::AddIOp>(hl, base, lane);
        Value inside = hb.create<arith::AndIOp>(
            hl,
            hb.create<arith::CmpIOp>(hl, arith::CmpIPredicate::sge, row, lo),
            hb.create<arith::CmpIOp>(hl, arith::CmpIPredicate::slt, row, hi));
        Value safeRow = hb.create<arith::MinSIOp>(
            hl, hb.create<arith::MaxSIOp>(hl, row, lo),
            hb.create<arith::SubIOp>(hl, hi, i64(hb, 1)));
        hb.create<scf::YieldOp>(
            hl, body(hb, hl, safeRow, /*lanes=*/1, inside, init));
      },
      [&](OpBuilder &eb, Location el) { eb.create<scf::YieldOp>(el, init); });
  auto loop = b.create<scf::ForOp>(
      loc,
      b.create<arith::AddIOp>(loc, b.create<arith::AddIOp>(loc, base, step),
                              lane),
      hi, step, head.getResults(),
      [&](OpBuilder &ib, Location il, Value row, ValueRange acc) {
        ib.create<scf::YieldOp>(
            il, body(ib, il, row, /*lanes=*/1, /*laneMask=*/Value(), acc));
      });
  return SmallVector<Value>(loop.getResults());
}

void GPUKernelEmitter::emitZeroRows(OpBuilder &b, Value lo, Value hi) {
  if (!splitsFeatures()) {
    b.create<scf::ForOp>(
        loc, b.create<arith::AddIOp>(loc, lo, lane), hi, i64(b, kWarpSize),
        ValueRange{}, [&](OpBuilder &ib, Location il, Value row, ValueRange) {
          emitter.emitZeroRowOutputs(ib, il, row);
          ib.create<scf::YieldOp>(il);
        });
    return;
  }
  b.create<scf::ForOp>(
      loc, lo, hi, i64(b, groupRows()), ValueRange{},
      [&](OpBuilder &ib, Location il, Value base, ValueRange) {
        Value row = ib.create<arith::AddIOp>(il, base, rowInGroup);
        emitter.emitZeroRowOutputs(
            ib, il, row,
            ib.create<arith::CmpIOp>(il, arith::CmpIPredicate::slt, row, hi));
        ib.create<scf::YieldOp>(il);
      });
}

void GPUKernelEmitter::emitWarpEmptySegments(OpBuilder &b, Value lo,
                                             Value hi) {
  // Split rows: the warp evaluates each, all lanes together.
  if (splitsFeatures())
    emitEmptySegments(b, lo, hi, i64(b, 0), i64(b, 1));
  else
    emitEmptySegments(b, lo, hi, lane, i64(b, kWarpSize));
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
                                    arith::AtomicRMWKind kind,
                                    int64_t fromOffset, int64_t toOffset) {
  Value width = b.create<arith::ConstantIntOp>(loc, kWarpSize, 32);
  for (int64_t offset = toOffset / 2; offset >= fromOffset; offset /= 2) {
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

Value GPUKernelEmitter::firstRowLeaving(OpBuilder &b, Value lo, Value from,
                                        Value lastRow, Value segment32) {
  // Rows clamped below N and loaded unconditionally, compared in 32 bits
  // (idx is i32), the first found in 32 bits: the loads stay independent
  // and few registers live.
  KernelCodeBuilder code(b, loc);
  Type i32Type = b.getI32Type();
  SmallVector<Value> pastLast, loaded;
  for (int64_t k = 0; k < kWalkChunksPerRound; ++k) {
    Value row = b.create<arith::AddIOp>(
        loc, lo, b.create<arith::AddIOp>(loc, lane, i64(b, k * kWarpSize)));
    pastLast.push_back(
        b.create<arith::CmpIOp>(loc, arith::CmpIPredicate::sgt, row, lastRow));
    loaded.push_back(code.load(idx, i32Type,
                               b.create<arith::MinSIOp>(loc, row, lastRow)));
  }
  // The first chunk with a row leaving, from the last back; the rows
  // before `from` (the first chunk's first lanes) are masked out of its
  // ballot: one shift, no compare a lane.
  Value first = i32(b, kWalkChunksPerRound * kWarpSize);
  for (int64_t k = kWalkChunksPerRound - 1; k >= 0; --k) {
    Value leaves = b.create<arith::OrIOp>(
        loc, pastLast[k],
        b.create<arith::CmpIOp>(loc, arith::CmpIPredicate::ne, loaded[k],
                                segment32));
    Value ballot =
        b.create<NVVM::VoteBallotOp>(loc, i32Type, i32(b, -1), leaves);
    if (k == 0) {
      Value skipped = b.create<arith::MaxSIOp>(
          loc, b.create<arith::SubIOp>(loc, from, lo), i64(b, 0));
      ballot = b.create<arith::AndIOp>(
          loc, ballot,
          b.create<arith::ShLIOp>(
              loc, i32(b, -1),
              b.create<arith::TruncIOp>(loc, i32Type, skipped)));
    }
    Value position = b.create<arith::AddIOp>(
        loc, i32(b, k * kWarpSize),
        b.create<LLVM::CountTrailingZerosOp>(loc, i32Type, ballot,
                                             /*is_zero_poison=*/false));
    first = b.create<arith::SelectOp>(
        loc,
        b.create<arith::CmpIOp>(loc, arith::CmpIPredicate::ne, ballot,
                                i32(b, 0)),
        position, first);
  }
  return b.create<arith::AddIOp>(
      loc, lo, b.create<arith::ExtUIOp>(loc, b.getI64Type(), first));
}

Value GPUKernelEmitter::walkSegmentEnd(OpBuilder &b, Value start,
                                       Value segment) {
  // Rounds of 128 rows from start until one holds a row leaving the
  // segment: each a few loads a lane in flight together, then ballots (a
  // lane walking a row at a time would be a chain of ~length / 32
  // dependent loads). Probing further ahead cost the segment kernels
  // registers (docs/benchmarks.md, "Walks in rounds of 128 rows").
  constexpr int64_t roundRows = kWalkChunksPerRound * kWarpSize;
  // Rows of idx a 32-byte sector holds.
  constexpr int64_t sectorRows = 8;
  Type i64Type = b.getI64Type();
  Value lastRow = b.create<arith::SubIOp>(loc, numRows, i64(b, 1));
  Value segment32 = b.create<arith::TruncIOp>(loc, b.getI32Type(), segment);
  Value alignedStart =
      b.create<arith::AndIOp>(loc, start, i64(b, -sectorRows));
  auto walk = b.create<scf::WhileOp>(
      loc, TypeRange{i64Type, i64Type}, ValueRange{alignedStart},
      [&](OpBuilder &cb, Location cl, ValueRange base) {
        Value firstLeaving =
            firstRowLeaving(cb, base[0], start, lastRow, segment32);
        Value notFound = cb.create<arith::CmpIOp>(
            cl, arith::CmpIPredicate::sge, firstLeaving,
            cb.create<arith::AddIOp>(cl, base[0], i64(cb, roundRows)));
        cb.create<scf::ConditionOp>(cl, notFound,
                                    ValueRange{base[0], firstLeaving});
      },
      [&](OpBuilder &nb, Location nl, ValueRange state) {
        nb.create<scf::YieldOp>(
            nl, ValueRange{nb.create<arith::AddIOp>(nl, state[0],
                                                    i64(nb, roundRows))});
      });
  return walk.getResult(1);
}

void GPUKernelEmitter::emitWalkedSegment(OpBuilder &b, Value start,
                                         Value segment, Value endKnown,
                                         Value knownEnd) {
  KernelCodeBuilder code(b, loc);
  auto ifKnown = b.create<scf::IfOp>(
      loc, endKnown,
      [&](OpBuilder &kb, Location kl) {
        kb.create<scf::YieldOp>(kl, knownEnd);
      },
      [&](OpBuilder &wb, Location wl) {
        wb.create<scf::YieldOp>(wl, walkSegmentEnd(wb, start, segment));
      });
  Value end = ifKnown.getResult(0);

  auto ifValid = b.create<scf::IfOp>(
      loc, code.isValidSegment(segment, numSegments), /*withElse=*/true);
  {
    OpBuilder vb = ifValid.getThenBodyBuilder();
    Value count = vb.create<arith::SubIOp>(loc, end, start);
    auto rowLoop = [&](OpBuilder &rb, Location rl, ValueRange init,
                       SegmentProgramEmitter::RowBody body,
                       bool /*storesRows*/) -> SmallVector<Value> {
      if (splitsFeatures())
        return splitRowLoop(rb, start, end, init, body);
      return laneRowLoop(rb, start, end, init, body,
                         program.gpuSavesNarrowRowSectors());
    };
    auto combine = [&](OpBuilder &cb, Location, Value partial,
                       arith::AtomicRMWKind kind) {
      // Split rows: splitRowLoop combined them.
      return splitsFeatures() ? partial : warpCombine(cb, partial, kind);
    };
    emitter.emitSegment(vb, loc, segment, count, rowLoop, combine,
                        segmentOutputWriter(vb));
  }
  if (program.hasRowOutputs) {
    // Rows of an invalid segment: zero row outputs.
    OpBuilder eb = ifValid.getElseBodyBuilder();
    emitZeroRows(eb, start, end);
  }
}

void GPUKernelEmitter::emitOwnedSegment(OpBuilder &b, Value rowBase,
                                        Value starts, Value mask) {
  KernelCodeBuilder code(b, loc);
  Type i32Type = b.getI32Type();
  Value leader = b.create<LLVM::CountTrailingZerosOp>(loc, i32Type, mask,
                                                      /*is_zero_poison=*/false);
  Value start = b.create<arith::AddIOp>(
      loc, rowBase, b.create<arith::ExtUIOp>(loc, b.getI64Type(), leader));
  // Its idx and the row before's, loaded again: the chunk's lanes hold
  // them, but keeping them live across this code cost the kernels an
  // occupancy step (4-5 registers).
  Value segment = code.loadSegment(idx, start);
  Value hasPrevious = b.create<arith::CmpIOp>(loc, arith::CmpIPredicate::sgt,
                                              start, code.i64(0));
  Value previous = segmentOr(b, hasPrevious,
                             b.create<arith::SubIOp>(loc, start, code.i64(1)));
  emitWarpEmptySegments(b, b.create<arith::AddIOp>(loc, previous, code.i64(1)),
                        segment);
  // It ends in the chunk at the next start, or at N if the chunk holds the
  // last row: then its end needs no walk, and (under 32 rows) it is not
  // long.
  Value startsAfter = splitStarts(b, starts, leader).second;
  Value startAfter = b.create<arith::CmpIOp>(loc, arith::CmpIPredicate::ne,
                                             startsAfter, i32(b, 0));
  Value holdsLast = b.create<arith::CmpIOp>(
      loc, arith::CmpIPredicate::sge,
      b.create<arith::AddIOp>(loc, rowBase, code.i64(kWarpSize)),
      numRows);
  Value endKnown = b.create<arith::OrIOp>(loc, startAfter, holdsLast);
  Value knownEnd = b.create<arith::SelectOp>(
      loc, startAfter,
      b.create<arith::AddIOp>(
          loc, rowBase,
          b.create<arith::ExtUIOp>(
              loc, b.getI64Type(),
              b.create<LLVM::CountTrailingZerosOp>(loc, i32Type, startsAfter,
                                                   /*is_zero_poison=*/false))),
      numRows);
  if (!scratch) {
    emitWalkedSegment(b, start, segment, endKnown, knownEnd);
    return;
  }
  Value mayBeLong = b.create<arith::XOrIOp>(
      loc, endKnown, b.create<arith::ConstantIntOp>(loc, 1, 1));
  auto ifLong = b.create<scf::IfOp>(
      loc, coversLongSpan(b, start, segment, mayBeLong), /*withElse=*/true);
  OpBuilder lb = ifLong.getThenBodyBuilder();
  if (isPassByPass())
    emitPassByPassLongSegment(lb, segment);
  else
    emitLongSegment(lb, start, segment);
  OpBuilder sb = ifLong.getElseBodyBuilder();
  emitWalkedSegment(sb, start, segment, endKnown, knownEnd);
}

std::pair<Value, Value> GPUKernelEmitter::splitStarts(OpBuilder &b,
                                                      Value starts,
                                                      Value lane32) {
  Value upToLane = b.create<arith::SubIOp>(
      loc, b.create<arith::ShLIOp>(loc, i32(b, 2), lane32), i32(b, 1));
  return {b.create<arith::AndIOp>(loc, starts, upToLane),
          b.create<arith::AndIOp>(
              loc, starts, b.create<arith::XOrIOp>(loc, upToLane, i32(b, -1)))};
}

Value GPUKernelEmitter::segmentedCombine(OpBuilder &b, Value value,
                                         arith::AtomicRMWKind kind,
                                         Value endLane, Value headLane) {
  Value width = b.create<arith::ConstantIntOp>(loc, kWarpSize, 32);
  Value lane32 = b.create<arith::TruncIOp>(loc, b.getI32Type(), lane);
  for (int64_t offset = 1; offset < kWarpSize; offset *= 2) {
    Value offsetValue = b.create<arith::ConstantIntOp>(loc, offset, 32);
    Value after = b.create<gpu::ShuffleOp>(loc, value, offsetValue, width,
                                           gpu::ShuffleMode::DOWN)
                      .getShuffleResult();
    Value inSegment = b.create<arith::CmpIOp>(
        loc, arith::CmpIPredicate::sle,
        b.create<arith::AddIOp>(loc, lane32, offsetValue), endLane);
    value = b.create<arith::SelectOp>(
        loc, inSegment, arith::getReductionOp(kind, b, loc, value, after),
        value);
  }
  return b.create<gpu::ShuffleOp>(loc, value, headLane, width,
                                  gpu::ShuffleMode::IDX)
      .getShuffleResult();
}

Value GPUKernelEmitter::tailEndInNextChunk(OpBuilder &b, Value nextInRange,
                                           Value nextSegment32,
                                           Value segment32) {
  // Lane l: whether row l of the next chunk (its row + 32) holds another
  // segment than the chunk's last row, or is past N; the first such lane.
  // idx values are i32: one shuffle, one register.
  Type i32Type = b.getI32Type();
  Value lastSegment =
      b.create<gpu::ShuffleOp>(loc, segment32, i32(b, kWarpSize - 1),
                               i32(b, kWarpSize), gpu::ShuffleMode::IDX)
          .getShuffleResult();
  Value pastN = b.create<arith::XOrIOp>(
      loc, nextInRange, b.create<arith::ConstantIntOp>(loc, 1, 1));
  Value leaves = b.create<arith::OrIOp>(
      loc, pastN,
      b.create<arith::CmpIOp>(loc, arith::CmpIPredicate::ne, nextSegment32,
                              lastSegment));
  return b.create<LLVM::CountTrailingZerosOp>(
      loc, i32Type,
      b.create<NVVM::VoteBallotOp>(loc, i32Type, i32(b, -1), leaves),
      /*is_zero_poison=*/false);
}

GPUKernelEmitter::ChunkStarts
GPUKernelEmitter::findStarts(OpBuilder &b, const ChunkIdx &loaded) {
  Type i32Type = b.getI32Type();
  Value segment32 = b.create<arith::TruncIOp>(loc, i32Type, loaded.segment);
  ChunkStarts found;
  if (loaded.nextSegment32)
    found.tailEnd = tailEndInNextChunk(b, loaded.nextInRange,
                                       loaded.nextSegment32, segment32);
  found.previous = loaded.previous;
  if (!found.previous) {
    // Lane l - 1's row, and for lane 0 the row lane 31 loaded: one
    // shuffle.
    Value lane32 = b.create<arith::TruncIOp>(loc, i32Type, lane);
    Value isLastLane = b.create<arith::CmpIOp>(
        loc, arith::CmpIPredicate::eq, lane32, i32(b, kWarpSize - 1));
    Value sent = b.create<arith::SelectOp>(loc, isLastLane,
                                           loaded.rowBefore32, segment32);
    Value laneBefore = b.create<arith::AndIOp>(
        loc, b.create<arith::AddIOp>(loc, lane32, i32(b, kWarpSize - 1)),
        i32(b, kWarpSize - 1));
    found.previous = b.create<arith::ExtSIOp>(
        loc, b.getI64Type(),
        b.create<gpu::ShuffleOp>(loc, sent, laneBefore, i32(b, kWarpSize),
                                 gpu::ShuffleMode::IDX)
            .getShuffleResult());
  }
  Value isFirstRow = b.create<arith::CmpIOp>(loc, arith::CmpIPredicate::eq,
                                             loaded.row, i64(b, 0));
  Value changes = b.create<arith::CmpIOp>(loc, arith::CmpIPredicate::ne,
                                          found.previous, loaded.segment);
  Value isStart = b.create<arith::AndIOp>(
      loc, loaded.inRange, b.create<arith::OrIOp>(loc, isFirstRow, changes));
  found.starts =
      b.create<NVVM::VoteBallotOp>(loc, i32Type, i32(b, -1), isStart);
  return found;
}

GPUKernelEmitter::ChunkPacking
GPUKernelEmitter::planPacking(OpBuilder &b, const ChunkIdx &loaded,
                              const ChunkStarts &found) {
  KernelCodeBuilder code(b, loc);
  Type i32Type = b.getI32Type();
  auto ballot = [&](Value predicate) {
    return b.create<NVVM::VoteBallotOp>(loc, i32Type, i32(b, -1), predicate);
  };
  auto negate = [&](Value predicate) {
    return b.create<arith::XOrIOp>(
        loc, predicate, b.create<arith::ConstantIntOp>(loc, 1, 1));
  };
  Value starts = found.starts, tailEnd = found.tailEnd;
  Value lane32 = b.create<arith::TruncIOp>(loc, i32Type, lane);
  auto [startsUpTo, startsAfter] = splitStarts(b, starts, lane32);
  Value hasHead = b.create<arith::CmpIOp>(loc, arith::CmpIPredicate::ne,
                                          startsUpTo, i32(b, 0));
  ChunkPacking plan;
  plan.headLane = b.create<arith::SubIOp>(
      loc, i32(b, kWarpSize - 1),
      b.create<LLVM::CountLeadingZerosOp>(loc, i32Type, startsUpTo,
                                          /*is_zero_poison=*/false));
  Value endsInside = b.create<arith::CmpIOp>(loc, arith::CmpIPredicate::ne,
                                             startsAfter, i32(b, 0));
  Value nextStart = b.create<LLVM::CountTrailingZerosOp>(
      loc, i32Type, startsAfter, /*is_zero_poison=*/false);
  // Without a start after it, a segment ends at the chunk's end or N.
  Value lastLane = b.create<arith::TruncIOp>(
      loc, i32Type,
      b.create<arith::MinSIOp>(
          loc, i64(b, kWarpSize - 1),
          b.create<arith::SubIOp>(
              loc, b.create<arith::SubIOp>(loc, numRows, loaded.rowBase),
              i64(b, 1))));
  plan.endLane = b.create<arith::SelectOp>(
      loc, endsInside, b.create<arith::SubIOp>(loc, nextStart, i32(b, 1)),
      lastLane);
  // Whether the chunk's last row ends its segment: the next chunk's first
  // row leaves it (or is past N).
  Value chunkEndsSegment = b.create<arith::CmpIOp>(
      loc, arith::CmpIPredicate::eq, tailEnd, i32(b, 0));
  // The tail, the segment of the chunk's last start running into the next
  // chunk, ends at lane `tailEnd` e there. Taking its rows there a lane
  // each, it packs wherever it ends in that chunk (e < 32). Else its a
  // lanes here (from the last start to lane 31: one more than the starts'
  // leading zeros) take its rows start + j, + a, + 2a, ...: it is packed
  // where that is at most kGPUPackedTailRowsPerLane rows a lane
  // (e <= (that - 1) a). idx alone decides, not the grid.
  plan.tailLanes = b.create<arith::AddIOp>(
      loc,
      b.create<LLVM::CountLeadingZerosOp>(loc, i32Type, starts,
                                          /*is_zero_poison=*/false),
      i32(b, 1));
  Value tailFits = b.create<arith::CmpIOp>(loc, arith::CmpIPredicate::ult,
                                           tailEnd, i32(b, kWarpSize));
  if (!program.gpuPacksTailsFromNextChunk()) {
    constexpr int64_t tailRows = SegmentProgram::kGPUPackedTailRowsPerLane;
    tailFits = b.create<arith::AndIOp>(
        loc, tailFits,
        b.create<arith::CmpIOp>(
            loc, arith::CmpIPredicate::ule, tailEnd,
            b.create<arith::MulIOp>(loc, plan.tailLanes,
                                    i32(b, tailRows - 1))));
  }
  // The tail's lanes: after the last start, in a chunk whose last row does
  // not end its segment (so the chunk is full and the next one has rows).
  plan.tailPacks = b.create<arith::AndIOp>(
      loc,
      b.create<arith::CmpIOp>(loc, arith::CmpIPredicate::ne, starts, i32(b, 0)),
      b.create<arith::AndIOp>(loc, negate(chunkEndsSegment), tailFits));
  plan.inTail = b.create<arith::AndIOp>(
      loc, b.create<arith::AndIOp>(loc, hasHead, negate(endsInside)),
      plan.tailPacks);
  plan.member = b.create<arith::OrIOp>(
      loc,
      b.create<arith::AndIOp>(
          loc, b.create<arith::AndIOp>(loc, loaded.inRange, hasHead),
          b.create<arith::OrIOp>(loc, endsInside, chunkEndsSegment)),
      plan.inTail);
  plan.isHead = b.create<arith::AndIOp>(
      loc, plan.member,
      b.create<arith::CmpIOp>(loc, arith::CmpIPredicate::eq, lane32,
                              plan.headLane));
  Value invalid = b.create<arith::AndIOp>(
      loc, plan.member,
      negate(code.isValidSegment(loaded.segment, numSegments)));
  plan.heads = ballot(plan.isHead);
  plan.packs = b.create<arith::AndIOp>(
      loc,
      b.create<arith::CmpIOp>(loc, arith::CmpIPredicate::ne, plan.heads,
                              i32(b, 0)),
      b.create<arith::CmpIOp>(loc, arith::CmpIPredicate::eq, ballot(invalid),
                              i32(b, 0)));
  return plan;
}

Value GPUKernelEmitter::packedRowCount(OpBuilder &b, const ChunkPacking &plan,
                                       Value tailEnd) {
  return b.create<arith::ExtUIOp>(
      loc, b.getI64Type(),
      b.create<arith::AddIOp>(
          loc,
          b.create<arith::AddIOp>(
              loc, b.create<arith::SubIOp>(loc, plan.endLane, plan.headLane),
              i32(b, 1)),
          b.create<arith::SelectOp>(loc, plan.inTail, tailEnd, i32(b, 0))));
}

Value GPUKernelEmitter::packedCombine(OpBuilder &b, const ChunkPacking &plan,
                                      Value value, arith::AtomicRMWKind kind) {
  // Lanes outside packed segments combine alone.
  Value lane32 = b.create<arith::TruncIOp>(loc, b.getI32Type(), lane);
  return segmentedCombine(
      b, value, kind,
      b.create<arith::SelectOp>(loc, plan.member, plan.endLane, lane32),
      b.create<arith::SelectOp>(loc, plan.member, plan.headLane, lane32));
}

void GPUKernelEmitter::emitHeadEmptySegments(OpBuilder &b, Value isHead,
                                             Value previous, Value segment) {
  // Empty segments before a packed one: its head lane's, alone.
  auto ifHead = b.create<scf::IfOp>(loc, isHead, /*withElse=*/false);
  OpBuilder hb = ifHead.getThenBodyBuilder();
  emitEmptySegments(hb, hb.create<arith::AddIOp>(loc, previous, i64(hb, 1)),
                    segment, i64(hb, 0), i64(hb, 1));
}

Value GPUKernelEmitter::emitPackedSegments(OpBuilder &b,
                                           const ChunkIdx &loaded,
                                           const ChunkStarts &found) {
  // Split rows run a row per warp, never a row per lane.
  if (splitsFeatures())
    return b.create<arith::ConstantIntOp>(loc, 0, 32);
  Type i32Type = b.getI32Type();
  ChunkPacking plan = planPacking(b, loaded, found);
  Value rowBase = loaded.rowBase, tailEnd = found.tailEnd;
  auto ifPacks = b.create<scf::IfOp>(
      loc, plan.packs,
      [&](OpBuilder &pb, Location pl) {
        // Lanes outside packed segments run the first packed segment's
        // program on a row in range, masked: no loads out of bounds.
        Value firstHead = pb.create<LLVM::CountTrailingZerosOp>(
            pl, i32Type, plan.heads, /*is_zero_poison=*/false);
        Value width = pb.create<arith::ConstantIntOp>(pl, kWarpSize, 32);
        Value firstSegment =
            pb.create<gpu::ShuffleOp>(pl, loaded.segment, firstHead, width,
                                      gpu::ShuffleMode::IDX)
                .getShuffleResult();
        Value laneSegment = pb.create<arith::SelectOp>(
            pl, plan.member, loaded.segment, firstSegment);
        Value safeRow = pb.create<arith::MinSIOp>(
            pl, loaded.row, pb.create<arith::SubIOp>(pl, numRows, i64(pb, 1)));
        Value count = packedRowCount(pb, plan, tailEnd);
        // A lane's rows: its own, and on the tail's lanes every a-th row
        // after it below the tail's end (lane h + j: rows start + j, + a,
        // ...). What each pass needs of that, in one register (it stays live
        // across the passes): the end's offset from rowBase | the step << 8.
        Value ownOffset = pb.create<arith::TruncIOp>(
            pl, i32Type, pb.create<arith::SubIOp>(pl, safeRow, rowBase));
        Value endOffset = pb.create<arith::SelectOp>(
            pl, plan.inTail,
            pb.create<arith::AddIOp>(pl, tailEnd, i32(b, kWarpSize)),
            pb.create<arith::AddIOp>(pl, ownOffset, i32(b, 1)));
        Value laneRows = pb.create<arith::OrIOp>(
            pl, endOffset,
            pb.create<arith::ShLIOp>(
                pl,
                pb.create<arith::SelectOp>(pl, plan.inTail, plan.tailLanes,
                                           i32(b, 1)),
                i32(b, 8)));
        emitHeadEmptySegments(pb, plan.isHead, found.previous,
                              loaded.segment);
        // Several passes: each lane's own row inputs, loaded once.
        DenseMap<Value, SegmentProgramEmitter::Components> ownRowInputs;
        if (program.gpuCachesOwnRowInputs())
          for (Value input : program.rowInputs())
            ownRowInputs[input] = emitter.loadRowInput(pb, pl, input, safeRow);
        auto rowLoop = [&](OpBuilder &rb, Location rl, ValueRange init,
                           SegmentProgramEmitter::RowBody body,
                           bool /*storesRows*/) -> SmallVector<Value> {
          auto i32At = [&](int64_t value) {
            return rb.create<arith::ConstantIntOp>(rl, value, 32);
          };
          // The lane's own row first, from its inputs loaded once for
          // every pass (gpuCachesOwnRowInputs); the loop runs a tail's
          // other rows (none on the other lanes).
          Value first = ownOffset;
          SmallVector<Value> ownTerms(init);
          if (!ownRowInputs.empty()) {
            emitter.stageValues(ownRowInputs, nullptr);
            ownTerms = body(rb, rl, safeRow, /*lanes=*/1, plan.member, init);
            emitter.stageValues({}, nullptr);
            first = rb.create<arith::AddIOp>(
                rl, ownOffset,
                rb.create<arith::ShRUIOp>(rl, laneRows, i32At(8)));
          }
          // Offsets from rowBase in 32 bits (fewer registers in the loop).
          auto rows = rb.create<scf::ForOp>(
              rl, first, rb.create<arith::AndIOp>(rl, laneRows, i32At(255)),
              rb.create<arith::ShRUIOp>(rl, laneRows, i32At(8)), ownTerms,
              [&](OpBuilder &ib, Location il, Value offset, ValueRange acc) {
                Value laneRow = ib.create<arith::AddIOp>(
                    il, rowBase,
                    ib.create<arith::ExtUIOp>(il, ib.getI64Type(), offset));
                ib.create<scf::YieldOp>(
                    il, body(ib, il, laneRow, /*lanes=*/1, plan.member, acc));
              });
          return SmallVector<Value>(rows.getResults());
        };
        auto combine = [&](OpBuilder &cb, Location, Value partial,
                           arith::AtomicRMWKind kind) {
          return packedCombine(cb, plan, partial, kind);
        };
        emitter.emitSegment(pb, pl, laneSegment, count, rowLoop, combine,
                            plan.isHead);
        pb.create<scf::YieldOp>(pl, plan.heads);
      },
      [&](OpBuilder &eb, Location el) {
        eb.create<scf::YieldOp>(el, ValueRange{
            eb.create<arith::ConstantIntOp>(el, 0, 32).getResult()});
      });
  return ifPacks.getResult(0);
}

Value GPUKernelEmitter::emitPackedChunkWithNextRows(OpBuilder &b,
                                                    const ChunkIdx &loaded,
                                                    ChunkStarts &found) {
  // Every lane runs the program on its row and on the row 32 after it
  // (lane 31 excepted: a tail ends before lane 31 of the next chunk) before
  // the chunk's first shuffle, so those loads share the idx loads' round.
  // The packing then decides which lanes' terms count: the tail's rows in
  // the next chunk (lanes below its end there) are combined over the warp
  // and added to lane 31's (the tail's) before the packed segments'
  // suffix scan. The row count and which lanes store are known only after
  // the rows: the program is emitted with placeholders for them.
  Type i32Type = b.getI32Type();
  auto placeholder = [&](Type type) {
    return b.create<UnrealizedConversionCastOp>(loc, type, ValueRange{})
        .getResult(0);
  };
  Value countPlaceholder = placeholder(b.getI64Type());
  Value writesPlaceholder = placeholder(b.getI1Type());
  Value lane32 = b.create<arith::TruncIOp>(loc, i32Type, lane);
  Value isLastLane = b.create<arith::CmpIOp>(loc, arith::CmpIPredicate::eq,
                                             lane, i64(b, kWarpSize - 1));
  Value nextRow = b.create<arith::AddIOp>(loc, loaded.row, i64(b, kWarpSize));
  Value takesNext = b.create<arith::AndIOp>(
      loc, loaded.nextInRange,
      b.create<arith::XOrIOp>(loc, isLastLane,
                              b.create<arith::ConstantIntOp>(loc, 1, 1)));
  ChunkPacking plan;
  Value count, writes;
  auto rowLoop = [&](OpBuilder &rb, Location rl, ValueRange init,
                     SegmentProgramEmitter::RowBody body,
                     bool /*storesRows*/) -> SmallVector<Value> {
    auto termsOf = [&](Value runs, Value row) {
      auto ifRuns = rb.create<scf::IfOp>(
          rl, runs,
          [&](OpBuilder &tb, Location tl) {
            tb.create<scf::YieldOp>(
                tl, body(tb, tl, row, /*lanes=*/1, /*laneMask=*/Value(),
                         init));
          },
          [&](OpBuilder &eb, Location el) {
            eb.create<scf::YieldOp>(el, init);
          });
      return SmallVector<Value>(ifRuns.getResults());
    };
    SmallVector<Value> own = termsOf(loaded.inRange, loaded.row);
    SmallVector<Value> next = termsOf(takesNext, nextRow);
    found = findStarts(rb, loaded);
    plan = planPacking(rb, loaded, found);
    // The tail's rows in the next chunk: lanes below its end there, where
    // the tail packs (lane 31 is in it then).
    Value inTailNext = rb.create<arith::AndIOp>(
        rl, plan.tailPacks,
        rb.create<arith::CmpIOp>(rl, arith::CmpIPredicate::ult, lane32,
                                 found.tailEnd));
    Value addsTail =
        rb.create<arith::AndIOp>(rl, isLastLane, plan.tailPacks);
    for (auto [i, kind] :
         llvm::enumerate(emitter.heldCombiningKinds(/*pass=*/0))) {
      Value tailPart = warpCombine(
          rb, rb.create<arith::SelectOp>(rl, inTailNext, next[i], init[i]),
          kind);
      own[i] = rb.create<arith::SelectOp>(
          rl, addsTail, arith::getReductionOp(kind, rb, rl, own[i], tailPart),
          own[i]);
    }
    count = packedRowCount(rb, plan, found.tailEnd);
    writes = rb.create<arith::AndIOp>(rl, plan.isHead, plan.packs);
    return own;
  };
  auto combine = [&](OpBuilder &cb, Location, Value partial,
                     arith::AtomicRMWKind kind) {
    return packedCombine(cb, plan, partial, kind);
  };
  emitter.emitSegment(b, loc, loaded.segment, countPlaceholder, rowLoop,
                      combine, writesPlaceholder);
  countPlaceholder.replaceAllUsesWith(count);
  writesPlaceholder.replaceAllUsesWith(writes);
  countPlaceholder.getDefiningOp()->erase();
  writesPlaceholder.getDefiningOp()->erase();
  emitHeadEmptySegments(b, writes, found.previous, loaded.segment);
  return b.create<arith::SelectOp>(
      loc, plan.packs, plan.heads,
      b.create<arith::ConstantIntOp>(loc, 0, 32));
}

void GPUKernelEmitter::emitMappedRow(OpBuilder &b, const MappedRow &mapped) {
  auto ifRow = b.create<scf::IfOp>(loc, mapped.inRange, /*withElse=*/false);
  OpBuilder ib = ifRow.getThenBodyBuilder();
  auto ifValid = ib.create<scf::IfOp>(
      loc,
      KernelCodeBuilder(ib, loc).isValidSegment(mapped.segment, numSegments),
      /*withElse=*/true);
  OpBuilder vb = ifValid.getThenBodyBuilder();
  auto oneRow = [&](OpBuilder &ob, Location ol, ValueRange init,
                    SegmentProgramEmitter::RowBody body, bool) {
    return body(ob, ol, mapped.row, /*lanes=*/1, /*laneMask=*/Value(), init);
  };
  emitter.emitSegment(vb, loc, mapped.segment, i64(vb, 1), oneRow,
                      combineNothing, Value());
  OpBuilder eb = ifValid.getElseBodyBuilder();
  emitter.emitZeroRowOutputs(eb, loc, mapped.row);
}

void GPUKernelEmitter::emitRowMap(OpBuilder &b) {
  if (program.gpuStripesRowMap()) {
    emitStripedRowMap(b);
    return;
  }
  if (splitsFeatures() && groupRows() > 1) {
    emitGroupRowMap(b);
    return;
  }
  // Units (a thread, or for rows split over a warp a warp) of a block take
  // its tile of U x K rows, unit u rows u, u + U, ... (coalesced),
  // grid-stride. Every idx of a unit's K rows is loaded before its first
  // row runs, so those loads, and then the rows', are in flight together:
  // one row per thread would leave a thread a chain of two dependent loads
  // and nothing else (PyTorch's elementwise kernels give a thread 4
  // elements for this).
  int64_t rowsPerUnit = program.gpuRowMapRowsPerUnit();
  int64_t unitsPerBlock = splitsFeatures() ? blockSize / kWarpSize : blockSize;
  Value unit = splitsFeatures()
                   ? b.create<arith::ShRUIOp>(loc, threadId, i64(b, 5))
                   : threadId;
  Value tileRows = i64(b, program.gpuRowMapBlockRows(blockSize));
  Value first = b.create<arith::AddIOp>(
      loc, b.create<arith::MulIOp>(loc, blockId, tileRows), unit);
  Value stride = b.create<arith::MulIOp>(loc, gridDim, tileRows);
  emitRowMapSteps(b, first, stride, [&](OpBuilder &rb, Value base) {
    SmallVector<MappedRow> rows;
    for (int64_t k = 0; k < rowsPerUnit; ++k) {
      Value row =
          rb.create<arith::AddIOp>(loc, base, i64(rb, k * unitsPerBlock));
      // The loop's row (k = 0) is in range.
      Value inRange =
          k == 0 ? rb.create<arith::ConstantIntOp>(loc, 1, 1).getResult()
                 : rb.create<arith::CmpIOp>(loc, arith::CmpIPredicate::slt,
                                            row, numRows)
                       .getResult();
      rows.push_back({row, inRange, segmentOr(rb, inRange, row)});
    }
    return rows;
  });
}

void GPUKernelEmitter::emitGroupRowMap(OpBuilder &b) {
  // A warp takes 32 consecutive rows a step, grid-stride (the loop is the
  // warp's). Lane l loads the idx of row l, one coalesced load for the
  // step; group g (of R = 32 / G) then runs rows g, g + R, ..., g + (G - 1)R
  // of it, so at every k the groups read consecutive rows, each row's
  // segment shuffled from the lane that loaded it. The shuffles all come
  // before the rows, whose branches part the groups (rows past N, invalid
  // segments): the rows hold no collective (gpuFeatureLanes).
  int64_t groups = groupRows();
  Type i32Type = b.getI32Type();
  Value stepRows = i64(b, kWarpSize);
  Value first = b.create<arith::MulIOp>(loc, globalWarp, stepRows);
  Value stride = b.create<arith::MulIOp>(loc, totalWarps, stepRows);
  emitRowMapSteps(b, first, stride, [&](OpBuilder &rb, Value base) {
    Value ownRow = rb.create<arith::AddIOp>(loc, base, lane);
    Value ownInRange = rb.create<arith::CmpIOp>(
        loc, arith::CmpIPredicate::slt, ownRow, numRows);
    Value ownSegment32 = rb.create<arith::TruncIOp>(
        loc, i32Type, segmentOr(rb, ownInRange, ownRow));
    SmallVector<MappedRow> rows;
    for (int64_t k = 0; k < featureLanes; ++k) {
      Value source =
          rb.create<arith::AddIOp>(loc, rowInGroup, i64(rb, k * groups));
      Value segment32 =
          rb.create<gpu::ShuffleOp>(
                loc, ownSegment32,
                rb.create<arith::TruncIOp>(loc, i32Type, source),
                i32(rb, kWarpSize), gpu::ShuffleMode::IDX)
              .getShuffleResult();
      Value row = rb.create<arith::AddIOp>(loc, base, source);
      rows.push_back(
          {row,
           rb.create<arith::CmpIOp>(loc, arith::CmpIPredicate::slt, row,
                                    numRows),
           rb.create<arith::ExtSIOp>(loc, rb.getI64Type(), segment32)});
    }
    return rows;
  });
}

void GPUKernelEmitter::emitRowMapSteps(
    OpBuilder &b, Value first, Value stride,
    function_ref<SmallVector<MappedRow>(OpBuilder &, Value base)> rowsOf) {
  b.create<scf::ForOp>(
      loc, first, numRows, stride, ValueRange{},
      [&](OpBuilder &rb, Location rl, Value base, ValueRange) {
        for (const MappedRow &mapped : rowsOf(rb, base))
          emitMappedRow(rb, mapped);
        rb.create<scf::YieldOp>(rl);
      });
}

void GPUKernelEmitter::emit() {
  OpBuilder &b = builder;
  emitWarpIds(b);
  if (program.mapsRowsOnly()) {
    emitRowMap(b);
    emitKernelEnd(b);
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
    if (splitsFeatures()) {
      emitEmptySegments(eb, i64(eb, 0), numSegments, globalWarp, totalWarps);
    } else {
      Value globalThread = eb.create<arith::AddIOp>(
          loc, eb.create<arith::MulIOp>(loc, blockId, i64(eb, blockSize)),
          threadId);
      Value totalThreads =
          eb.create<arith::MulIOp>(loc, gridDim, i64(eb, blockSize));
      emitEmptySegments(eb, i64(eb, 0), numSegments, globalThread,
                        totalThreads);
    }
  }

  // Warps take windows of chunks (grid-stride): lane k tells whether chunk
  // k of the window has work (a segment start, or the last row), from two
  // idx loads, and the warp runs only those chunks. A chunk inside a
  // segment (a long one's rows, a walked one's) then costs its window a
  // fraction of a round, not a round of its own; which chunks run depends
  // on idx only, so the window's size (from the grid) changes no result.
  // The loop runs over each window's first chunk, so that only it, the
  // chunk count and the step stay live across the chunks' code.
  // Only a predicate (whether the lane has a chunk of each window) and the
  // step stay live across the loop, not the window's size.
  Value chunks = windowChunks(b, numChunks);
  Value laneHasChunk =
      b.create<arith::CmpIOp>(loc, arith::CmpIPredicate::slt, lane, chunks);
  Value largeWindows;
  if (program.gpuSavesNarrowRowSectors())
    largeWindows =
        b.create<arith::CmpIOp>(loc, arith::CmpIPredicate::sgt, chunks,
                                i64(b, SegmentProgram::kGPUMinChunksPerWindow));
  b.create<scf::ForOp>(
      loc, b.create<arith::MulIOp>(loc, globalWarp, chunks), numChunks,
      b.create<arith::MulIOp>(loc, totalWarps, chunks), ValueRange{},
      [&](OpBuilder &wb, Location, Value firstChunk, ValueRange) {
        WindowProbes probes =
            probeWindow(wb, firstChunk, laneHasChunk, numChunks, largeWindows);
        // The busy chunks in order, a bit at a time (few values live across
        // the chunk's code: its registers bound the kernel's occupancy).
        Value zero32 = wb.create<arith::ConstantIntOp>(loc, 0, 32);
        wb.create<scf::WhileOp>(
            loc, TypeRange{wb.getI32Type()}, ValueRange{probes.busy},
            [&](OpBuilder &cb, Location, ValueRange mask) {
              Value more = cb.create<arith::CmpIOp>(
                  loc, arith::CmpIPredicate::ne, mask[0], zero32);
              cb.create<scf::ConditionOp>(loc, more, mask);
            },
            [&](OpBuilder &cb, Location, ValueRange mask) {
              Value k = cb.create<LLVM::CountTrailingZerosOp>(
                  loc, cb.getI32Type(), mask[0], /*is_zero_poison=*/false);
              // Where the probes hold the row before each chunk, the
              // chunk takes its own by a shuffle, before any load.
              Value rowBefore;
              if (probes.rowsBefore)
                rowBefore =
                    cb.create<gpu::ShuffleOp>(loc, probes.rowsBefore, k,
                                              i32(cb, kWarpSize),
                                              gpu::ShuffleMode::IDX)
                        .getShuffleResult();
              emitChunk(cb,
                        cb.create<arith::AddIOp>(
                            loc, firstChunk,
                            cb.create<arith::ExtUIOp>(loc, cb.getI64Type(), k)),
                        rowBefore);
              Value rest = cb.create<arith::AndIOp>(
                  loc, mask[0],
                  cb.create<arith::SubIOp>(
                      loc, mask[0],
                      cb.create<arith::ConstantIntOp>(loc, 1, 32)));
              cb.create<scf::YieldOp>(loc, rest);
            });
        wb.create<scf::YieldOp>(loc);
      });
  emitKernelEnd(b);
}

Value GPUKernelEmitter::windowChunks(OpBuilder &b, Value numChunks) {
  // In 32 bits (a 64-bit division is a long routine on the GPU): the grid
  // has fewer than 2^31 warps, and from 2^31 chunks every grid takes the
  // largest windows.
  Type i32Type = b.getI32Type();
  int64_t most = SegmentProgram::kGPUMaxChunksPerWindow;
  Value many = b.create<arith::CmpIOp>(loc, arith::CmpIPredicate::sge,
                                       numChunks, i64(b, int64_t{1} << 31));
  Value chunks32 = b.create<arith::TruncIOp>(loc, i32Type, numChunks);
  Value warps32 = b.create<arith::TruncIOp>(loc, i32Type, totalWarps);
  Value perWarp = b.create<arith::DivUIOp>(
      loc,
      b.create<arith::AddIOp>(loc, chunks32,
                              b.create<arith::SubIOp>(loc, warps32, i32(b, 1))),
      warps32);
  Value clamped = b.create<arith::MinUIOp>(
      loc,
      b.create<arith::MaxUIOp>(
          loc, perWarp, i32(b, SegmentProgram::kGPUMinChunksPerWindow)),
      i32(b, most));
  return b.create<arith::ExtUIOp>(
      loc, b.getI64Type(),
      b.create<arith::SelectOp>(loc, many, i32(b, most), clamped));
}

std::pair<Value, Value>
GPUKernelEmitter::windowLaneChunk(OpBuilder &b, Value firstChunk,
                                  Value laneHasChunk, Value numChunks) {
  Value chunk = b.create<arith::AddIOp>(loc, firstChunk, lane);
  Value isChunk = b.create<arith::AndIOp>(
      loc, laneHasChunk,
      b.create<arith::CmpIOp>(loc, arith::CmpIPredicate::slt, chunk,
                              numChunks));
  return {chunk, isChunk};
}

GPUKernelEmitter::WindowProbes
GPUKernelEmitter::probeWindow(OpBuilder &b, Value firstChunk,
                              Value laneHasChunk, Value numChunks,
                              Value largeWindows) {
  if (!largeWindows)
    return probeChunks(b, firstChunk, laneHasChunk, numChunks);
  bool rowsOnce = program.gpuProbesWindowRowsOnce();
  SmallVector<Type> types(rowsOnce ? 2 : 1, b.getI32Type());
  auto ifWork = b.create<scf::IfOp>(
      loc,
      windowMayHaveWork(b, firstChunk, laneHasChunk, numChunks, largeWindows),
      [&](OpBuilder &tb, Location tl) {
        WindowProbes probes =
            probeChunks(tb, firstChunk, laneHasChunk, numChunks);
        SmallVector<Value> found{probes.busy};
        if (rowsOnce)
          found.push_back(probes.rowsBefore);
        tb.create<scf::YieldOp>(tl, found);
      },
      [&](OpBuilder &eb, Location el) {
        // No chunk has work; no chunk runs, so no row before one is read.
        SmallVector<Value> none(types.size(), i32(eb, 0));
        eb.create<scf::YieldOp>(el, none);
      });
  return {ifWork.getResult(0), rowsOnce ? ifWork.getResult(1) : Value()};
}

Value GPUKernelEmitter::windowMayHaveWork(OpBuilder &b, Value firstChunk,
                                          Value laneHasChunk, Value numChunks,
                                          Value largeWindows) {
  // Windows of more chunks than kGPUMinChunksPerWindow (grids capped where
  // segments average a tile or more) mostly lie inside one segment: the
  // idx of the row before the window and of its last row, equal, tell that
  // no chunk of it has work (idx sorted; the window holds neither row 0 nor
  // the last row), in two sectors instead of a sector a chunk. Smaller
  // windows (shorter segments) mostly have work, and the check would cost
  // them a round of loads before their probes.
  Type i32Type = b.getI32Type();
  auto ifLarge = b.create<scf::IfOp>(
      loc, largeWindows,
      [&](OpBuilder &lb, Location ll) {
        // The window's chunks (the last window's may be fewer).
        Value isChunk =
            windowLaneChunk(lb, firstChunk, laneHasChunk, numChunks).second;
        Value chunks = lb.create<LLVM::CtPopOp>(
            ll, i32Type,
            lb.create<NVVM::VoteBallotOp>(ll, i32Type, i32(lb, -1), isChunk));
        Value windowStart =
            lb.create<arith::MulIOp>(ll, firstChunk, i64(lb, kWarpSize));
        Value windowEnd = lb.create<arith::MinSIOp>(
            ll,
            lb.create<arith::MulIOp>(
                ll,
                lb.create<arith::AddIOp>(
                    ll, firstChunk,
                    lb.create<arith::ExtUIOp>(ll, lb.getI64Type(), chunks)),
                i64(lb, kWarpSize)),
            numRows);
        Value interior = lb.create<arith::AndIOp>(
            ll,
            lb.create<arith::CmpIOp>(ll, arith::CmpIPredicate::sgt, windowStart,
                                     i64(lb, 0)),
            lb.create<arith::CmpIOp>(ll, arith::CmpIPredicate::slt, windowEnd,
                                     numRows));
        // Lane 0 loads the row before the window, lane 1 its last row.
        Value isLaneZero = lb.create<arith::CmpIOp>(
            ll, arith::CmpIPredicate::eq, lane, i64(lb, 0));
        Value loads = lb.create<arith::AndIOp>(
            ll, interior,
            lb.create<arith::CmpIOp>(ll, arith::CmpIPredicate::ult, lane,
                                     i64(lb, 2)));
        Value row = lb.create<arith::SubIOp>(
            ll,
            lb.create<arith::SelectOp>(ll, isLaneZero, windowStart, windowEnd),
            i64(lb, 1));
        Value segment =
            lb.create<arith::TruncIOp>(ll, i32Type, segmentOr(lb, loads, row));
        auto fromLane = [&](int64_t source) {
          return lb
              .create<gpu::ShuffleOp>(ll, segment, i32(lb, source),
                                      i32(lb, kWarpSize), gpu::ShuffleMode::IDX)
              .getShuffleResult();
        };
        Value oneSegment = lb.create<arith::AndIOp>(
            ll, interior,
            lb.create<arith::CmpIOp>(ll, arith::CmpIPredicate::eq, fromLane(0),
                                     fromLane(1)));
        lb.create<scf::YieldOp>(
            ll,
            ValueRange{lb.create<arith::XOrIOp>(
                ll, oneSegment, lb.create<arith::ConstantIntOp>(ll, 1, 1))});
      },
      [&](OpBuilder &sb, Location sl) {
        sb.create<scf::YieldOp>(
            sl, ValueRange{sb.create<arith::ConstantIntOp>(sl, 1, 1)});
      });
  return ifLarge.getResult(0);
}

GPUKernelEmitter::WindowProbes GPUKernelEmitter::probeChunks(OpBuilder &b,
                                                             Value firstChunk,
                                                             Value laneHasChunk,
                                                             Value numChunks) {
  // Lane k of the window: chunk firstChunk + k starts a segment if it is
  // the first, or if the row before it and its last row differ (idx
  // sorted); it holds the last row if it is the last chunk.
  auto [chunk, isChunk] =
      windowLaneChunk(b, firstChunk, laneHasChunk, numChunks);
  Value rowBase = b.create<arith::MulIOp>(loc, chunk, i64(b, kWarpSize));
  Value lastRow = b.create<arith::SubIOp>(
      loc,
      b.create<arith::MinSIOp>(
          loc, b.create<arith::AddIOp>(loc, rowBase, i64(b, kWarpSize)),
          numRows),
      i64(b, 1));
  Value isFirst = b.create<arith::CmpIOp>(loc, arith::CmpIPredicate::eq,
                                          rowBase, i64(b, 0));
  Value notFirst = b.create<arith::XOrIOp>(
      loc, isFirst, b.create<arith::ConstantIntOp>(loc, 1, 1));
  Value rowBefore = b.create<arith::SubIOp>(loc, rowBase, i64(b, 1));
  Value before, last, rowsBefore;
  if (program.gpuProbesWindowRowsOnce()) {
    // The row before chunk k is chunk k - 1's last: lane k takes it from
    // lane k - 1, lane 0 loads its own (one sector, not a lane's each).
    Value isLaneZero = b.create<arith::CmpIOp>(loc, arith::CmpIPredicate::eq,
                                               lane, i64(b, 0));
    last = segmentOr(b, isChunk, lastRow);
    Value own = segmentOr(
        b,
        b.create<arith::AndIOp>(
            loc, isLaneZero, b.create<arith::AndIOp>(loc, isChunk, notFirst)),
        rowBefore);
    Type i32Type = b.getI32Type();
    Value fromLaneBefore =
        b.create<gpu::ShuffleOp>(
             loc, b.create<arith::TruncIOp>(loc, i32Type, last), i32(b, 1),
             i32(b, kWarpSize), gpu::ShuffleMode::UP)
            .getShuffleResult();
    rowsBefore = b.create<arith::SelectOp>(
        loc, isLaneZero, b.create<arith::TruncIOp>(loc, i32Type, own),
        fromLaneBefore);
    before = b.create<arith::ExtSIOp>(loc, b.getI64Type(), rowsBefore);
  } else {
    before = segmentOr(b, b.create<arith::AndIOp>(loc, isChunk, notFirst),
                       rowBefore);
    last = segmentOr(b, isChunk, lastRow);
  }
  Value hasWork = b.create<arith::AndIOp>(
      loc, isChunk,
      b.create<arith::OrIOp>(
          loc,
          b.create<arith::OrIOp>(
              loc, isFirst,
              b.create<arith::CmpIOp>(loc, arith::CmpIPredicate::ne, before,
                                      last)),
          b.create<arith::CmpIOp>(
              loc, arith::CmpIPredicate::eq, lastRow,
              b.create<arith::SubIOp>(loc, numRows, i64(b, 1)))));
  Value busy = b.create<NVVM::VoteBallotOp>(
      loc, b.getI32Type(), b.create<arith::ConstantIntOp>(loc, -1, 32),
      hasWork);
  return {busy, rowsBefore};
}

void GPUKernelEmitter::emitChunk(OpBuilder &cb, Value chunk,
                                 Value rowBefore) {
  // The chunk's idx loads, in one round: each lane's row, the row before
  // it (or, where the lanes' rows load in this round too, only lane 31's
  // before the chunk), and the row 32 after it (where the segment of the
  // chunk's last row ends in the next chunk: packed tails).
  Type i32Type = cb.getI32Type();
  ChunkIdx loaded;
  loaded.rowBase = cb.create<arith::MulIOp>(loc, chunk, i64(cb, kWarpSize));
  loaded.row = cb.create<arith::AddIOp>(loc, loaded.rowBase, lane);
  loaded.inRange = cb.create<arith::CmpIOp>(loc, arith::CmpIPredicate::slt,
                                            loaded.row, numRows);
  loaded.segment = segmentOr(cb, loaded.inRange, loaded.row);
  bool nextRowsPack = program.gpuPacksTailsFromNextChunk();
  if (!nextRowsPack) {
    // The row before each lane's, loaded: one register less across the
    // chunk's ballots than lane 31's load and a shuffle (ptxas, sm_90).
    Value hasPrevious = cb.create<arith::AndIOp>(
        loc, loaded.inRange,
        cb.create<arith::CmpIOp>(loc, arith::CmpIPredicate::sgt, loaded.row,
                                 i64(cb, 0)));
    loaded.previous = segmentOr(
        cb, hasPrevious,
        cb.create<arith::SubIOp>(loc, loaded.row, i64(cb, 1)));
  }
  if (!splitsFeatures()) {
    Value nextRow =
        cb.create<arith::AddIOp>(loc, loaded.row, i64(cb, kWarpSize));
    loaded.nextInRange = cb.create<arith::CmpIOp>(
        loc, arith::CmpIPredicate::slt, nextRow, numRows);
    loaded.nextSegment32 = cb.create<arith::TruncIOp>(
        loc, i32Type, segmentOr(cb, loaded.nextInRange, nextRow));
  }
  if (nextRowsPack && rowBefore) {
    loaded.rowBefore32 = rowBefore;
  } else if (nextRowsPack) {
    Value loadsRowBefore = cb.create<arith::AndIOp>(
        loc,
        cb.create<arith::CmpIOp>(loc, arith::CmpIPredicate::eq, lane,
                                 i64(cb, kWarpSize - 1)),
        cb.create<arith::CmpIOp>(loc, arith::CmpIPredicate::sgt,
                                 loaded.rowBase, i64(cb, 0)));
    loaded.rowBefore32 = cb.create<arith::TruncIOp>(
        loc, i32Type,
        segmentOr(cb, loadsRowBefore,
                  cb.create<arith::SubIOp>(loc, loaded.rowBase, i64(cb, 1))));
  }
  ChunkStarts found;
  Value packed;
  if (nextRowsPack) {
    packed = emitPackedChunkWithNextRows(cb, loaded, found);
  } else {
    found = findStarts(cb, loaded);
    packed = emitPackedSegments(cb, loaded, found);
  }
  Value rowBase = loaded.rowBase, starts = found.starts;
  Value zero32 = cb.create<arith::ConstantIntOp>(loc, 0, 32);
  Value unpacked = cb.create<arith::AndIOp>(
      loc, starts,
      cb.create<arith::XOrIOp>(
          loc, packed, cb.create<arith::ConstantIntOp>(loc, -1, 32)));
  cb.create<scf::WhileOp>(
      loc, TypeRange{cb.getI32Type()}, ValueRange{unpacked},
      [&](OpBuilder &wb, Location wl, ValueRange mask) {
        Value more = wb.create<arith::CmpIOp>(
            wl, arith::CmpIPredicate::ne, mask[0], zero32);
        wb.create<scf::ConditionOp>(wl, more, mask);
      },
      [&](OpBuilder &wb, Location wl, ValueRange mask) {
        emitOwnedSegment(wb, rowBase, starts, mask[0]);
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
  emitWarpEmptySegments(
      lb, lb.create<arith::AddIOp>(loc, lastSegment, i64(lb, 1)),
      numSegments);
}

Value GPUKernelEmitter::segmentOutputWriter(OpBuilder &b) {
  // Split rows: the emitter picks the lanes that store.
  if (splitsFeatures())
    return Value();
  return b.create<arith::CmpIOp>(loc, arith::CmpIPredicate::eq, lane,
                                 i64(b, 0));
}

void GPUKernelEmitter::storeAccumulators(
    OpBuilder &b, ValueRange totals, unsigned pass, Value base,
    function_ref<Value(OpBuilder &, Value component)> index) {
  if (!splitsFeatures()) {
    storeFromLaneZero(b, totals, base, [&](OpBuilder &ib, int64_t i) {
      return index(ib, i64(ib, i));
    });
    return;
  }
  // Split rows: each lane of the first group its features (not their
  // padding); lane 0 the accumulators every lane holds.
  Value isLaneZero =
      b.create<arith::CmpIOp>(loc, arith::CmpIPredicate::eq, lane, i64(b, 0));
  for (auto [total, held] :
       llvm::zip_equal(totals, emitter.heldAccumulators(b, loc, pass))) {
    Value stores = held.split ? held.valid : isLaneZero;
    if (held.split && firstGroup)
      stores = stores ? b.create<arith::AndIOp>(loc, stores, firstGroup)
                      : firstGroup;
    if (!stores) {
      KernelCodeBuilder(b, loc).store(total, base, index(b, held.component));
      continue;
    }
    auto ifStore = b.create<scf::IfOp>(loc, stores, /*withElse=*/false);
    OpBuilder sb = ifStore.getThenBodyBuilder();
    KernelCodeBuilder(sb, loc).store(total, base, index(sb, held.component));
  }
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
                             SegmentProgramEmitter::RowBody body,
                             ArrayRef<arith::AtomicRMWKind> kinds) {
  // Lane-strided rows, then the butterfly: every lane holds the totals
  // (split rows: each group its rows, each lane its features).
  if (splitsFeatures())
    return splitRowLoop(b, lo, hi, init, body);
  // From lo, also for narrow rows: stepping the tile kernels' pieces from
  // their chunks cost max and min f32 w1 backward's `__tiles` an occupancy
  // step (docs/benchmarks.md, "Narrow rows: walks from whole chunks").
  SmallVector<Value> partials =
      program.gpuStripesReductions()
          ? stripedReductionLoop(b, lo, hi, init)
          : laneRowLoop(b, lo, hi, init, body, /*fromChunks=*/false);
  SmallVector<Value> totals;
  for (auto [partial, kind] : llvm::zip_equal(partials, kinds))
    totals.push_back(warpCombine(b, partial, kind));
  return totals;
}
