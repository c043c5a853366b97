//===- GPUKernelEmitter.h - gpu.func kernels of a segment program -*- C++ -*-===//
//
// The emitter convert-seg-to-gpu runs for each kernel function: the segment
// (or row) kernel in GPUKernelEmitter.cpp, the long-segment kernels and the
// segment kernel's long-segment paths in GPULongSegments.cpp.
//
//===----------------------------------------------------------------------===//

#ifndef SEGOPS_LIB_CONVERSION_SEGTOGPU_GPUKERNELEMITTER_H
#define SEGOPS_LIB_CONVERSION_SEGTOGPU_GPUKERNELEMITTER_H

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "segops/Conversion/KernelCodeBuilder.h"
#include "segops/Conversion/KernelSignature.h"
#include "segops/Conversion/SegmentProgram.h"

namespace mlir {
namespace seg {

inline constexpr int64_t kWarpSize = 32;
inline constexpr int64_t kSuperTileRows = SegmentProgram::kGPUSuperTileRows;
static_assert(SegmentProgram::kGPUSuperTileRows %
                      (kWarpSize * SegmentProgram::kGPUTileRows) ==
                  0,
              "whole tiles for each lane of a super-tile's warp");
static_assert(SegmentProgram::kGPUChunkRows == kWarpSize,
              "a chunk is a row per lane");
static_assert(SegmentProgram::kGPUMinChunksPerWindow <=
                      SegmentProgram::kGPUMaxChunksPerWindow &&
                  SegmentProgram::kGPUMaxChunksPerWindow <= kWarpSize,
              "a lane per chunk of a window");
/// Tile slots each lane loads per step when adding a long segment's tiles.
inline constexpr int64_t kTilesPerLane = 4;
/// Chunks of rows a walk loads a lane in one round (one load each, all in
/// flight before the ballots), as ptxas unrolls a row loop.
inline constexpr int64_t kWalkChunksPerRound =
    SegmentProgram::kGPULoadsPerRound;
/// Half the threads an SM holds (2,048 from sm_50 to sm_90): the blocks of
/// a `__pass_totals` kernel ask to fit this many (50% occupancy).
inline constexpr int64_t kHalfSMThreads = 1024;
/// A long segment's totals of at most this many components are combined
/// from its tiles' slots in one loop over the tiles (kTilesPerLane slots of
/// each in flight); more, a loop per component.
inline constexpr int64_t kMaxComponentsPerTileLoop = 3;
/// Split rows: a long segment's totals of at most this many components are
/// added lanes over tiles, each lane then picking its own; more, lane by
/// lane.
inline constexpr int64_t kMaxPickedComponents = 8;

/// Emits the gpu.func kernels of a segment program.
//
// Segment kernels: warps own windows of 4 to 32 chunks of 32 rows (as many
// as spread the chunks over the grid's warps; grid-stride),
// run the chunks where a segment starts (or the last row is), and own the
// segments that *start* in them (row 0, or where idx changes), found with a
// ballot. Segments that also end in the chunk (short ones: ~10-row segments
// put ~3 in a chunk) are *packed*: one pass of the program runs them all,
// a lane per row, each lane on its own segment; partial totals combine by a
// segmented suffix scan (5 shuffles, each lane adding the lanes after it in
// its segment) and every lane takes its segment head's total; head lanes
// store. So is the chunk's tail (the segment of its last start, ending in
// the next chunk): its lanes here take its rows there a lanes apart (at
// most 4 a lane), or, for scalar one-pass programs, lanes 0 to 30 run the
// row 32 after their own in the chunk's first round
// (SegmentProgram::gpuPacksTailsFromNextChunk). For each other segment
// the warp finds where it ends (the chunk's
// next start, or N, if it ends in the chunk; else a lane-strided walk over
// idx and a warp minimum), runs the program's passes
// over its rows lane-strided (so loads coalesce), and combines partial sums
// with a fixed xor butterfly, so every lane holds the totals; lane 0 stores
// the segment outputs. Which path a segment takes depends on its rows and
// their chunk only, so results are bitwise the same at any grid size. Empty segments (between
// two starts, before the first or after the last) are evaluated one per lane
// with no rows. Rows whose segment is outside [0, S) get zero row outputs.
//
// Long segments of one-pass programs (SegmentProgram::isOnePass: one pass,
// rows reading nothing of the row count): a segment covering a whole span
// of tileRows rows from a multiple of longAlignment (a tile, or half one
// for split rows) is *long*. The `__tiles` kernel, launched
// first, gives each tile to a warp, which reduces the rows of the long
// segments that cross it (storing their row outputs on the way): the
// segment of its first row (the head) and that of its last (the tail),
// each into a slot of `partials` (2 per tile). `__super_tiles` then
// combines each super-tile's (32 or, for split rows, 128 tiles') slots into
// two of its own. The segment kernel finds a long segment's end with a
// 32-way search and adds its tiles' partials, or its super-tiles' if it
// spans several, instead of walking its rows, so one segment of 1e7 rows
// costs one warp a few steps of loads while 1e4 warps reduce its rows.
//
// Row maps (programs that only map rows): a thread per row, grid-stride,
// whatever the segments; each takes 4 rows of its block's tile, their idx
// loaded first.
//
// Split rows (SegmentProgram::gpuFeatureLanes: rows of 8 features or more):
// a row's features over a group of G lanes, a warp running 32 / G rows a
// step, one group per row; no packing, and the warp walks every segment
// (row maps: a warp per row). The groups' totals combine after the rows.
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
        featureLanes(program.gpuFeatureLanes()),
        tileRows(program.gpuTileRows()),
        tilesPerSuperTile(program.gpuTilesPerSuperTile()),
        longAlignment(program.gpuLongSpanAlignment()),
        emitter(program, buffers, numRows, numSegments) {
    idx = buffers[program.argumentBuffer[cast<BlockArgument>(program.idx)
                                             .getArgNumber()]];
    scratch = arguments.lookup(segrt::abi::Param::Scratch);
    runningPass = arguments.lookup(segrt::abi::Param::Pass);
  }

  /// The column blocks the kernel runs split rows in
  /// (SegmentProgram::gpuColumnBlocks for the kernels that hold rows; 1,
  /// the default, for the others), before any emit.
  void setColumnBlocks(int64_t blocks) { columnBlocks = blocks; }

  /// The segment kernel (or, for row maps, the row kernel).
  void emit();
  /// One-pass programs: `__tiles`, the raw totals of the long segments
  /// crossing each tile (and their rows' outputs).
  void emitTiles();
  /// Pass-by-pass programs (the other segment programs), in launch order:
  /// `__bounds` (each long segment's rows), then per pass `__tiles<p>` (its
  /// rows: row outputs, and totals into the tile slots) and, if the pass
  /// reduces, `__pass_totals<p>` (the segment's totals of the pass).
  void emitBounds();
  /// `__tiles` and `__pass_totals` take the pass as their last argument.
  void emitPassTiles();
  void emitPassTotals();
  /// Every program with tiles, after the tiles of a pass that reduces:
  /// `__super_tiles`, the running pass's slots of each super-tile's long
  /// pieces from its tiles' slots.
  void emitSuperTiles();
  /// `__super_tiles`' warp for components [partFirst, partLast) of
  /// `superTile`'s slots: its tiles' slots that add to its `head` and
  /// `tail` segments, combined and stored.
  void combineSuperTileSlots(OpBuilder &b, Value superTile, Value tiles,
                             Value head, Value tail, Value partFirst,
                             Value partLast);

  /// One-pass programs: long segments reduced by a tile kernel.
  bool isOnePass() const { return program.isOnePass(); }
  /// Other segment programs: long segments run pass by pass.
  bool isPassByPass() const {
    return program.hasLongSegmentKernels() && !program.isOnePass();
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
  Value i32(OpBuilder &b, int64_t value) {
    return b.create<arith::ConstantIntOp>(loc, value, 32);
  }
  Value indexToI64(OpBuilder &b, Value value) {
    return b.create<arith::IndexCastOp>(loc, b.getI64Type(), value);
  }
  /// Sets lane, globalWarp and totalWarps (and, for split rows, tells the
  /// emitter the lane and, with column blocks, its block's first feature);
  /// with column blocks, opens the loop over them that the rest of the
  /// kernel runs in.
  void emitWarpIds(OpBuilder &b);
  /// The kernel's return (after the column loop, if one is open).
  void emitKernelEnd(OpBuilder &b);
  /// Split rows (SegmentProgram::gpuFeatureLanes): groups of G lanes, a
  /// group running one row at a time, each lane holding its features.
  bool splitsFeatures() const { return featureLanes > 0; }
  /// Rows a warp runs at a time: 32 / G groups (1 without split rows).
  int64_t groupRows() const;
  /// Split rows: `value` combined over the groups (every lane gets it).
  Value combineGroups(OpBuilder &b, Value value, arith::AtomicRMWKind kind);
  /// Split rows: the rows [lo, hi) through `body`, each group its rows;
  /// returns the totals, combined over lanes and groups (every lane holds
  /// them).
  SmallVector<Value> splitRowLoop(OpBuilder &b, Value lo, Value hi,
                                  ValueRange init,
                                  SegmentProgramEmitter::RowBody body);
  /// Rows held a row per lane: the rows [lo, hi) through `body`, lane l
  /// taking rows lo + l, lo + l + 32, ...; or, `fromChunks`, rows c + l of
  /// the chunks c (multiples of 32) from lo's, the rows before lo masked,
  /// where that takes no more load rounds. Returns each lane's partial
  /// accumulators.
  SmallVector<Value> laneRowLoop(OpBuilder &b, Value lo, Value hi,
                                 ValueRange init,
                                 SegmentProgramEmitter::RowBody body,
                                 bool fromChunks);
  /// Programs of SegmentProgram::gpuStripedReductions (GPUStripedRows.cpp):
  /// the rows [lo, hi) of a tile piece (at most a tile) of each reduced
  /// input loaded in steps of 32 rows, F loads of 32 consecutive values a
  /// step, reduced as loaded. Returns each lane's partial accumulators in
  /// component order, as laneRowLoop.
  SmallVector<Value> stripedReductionLoop(OpBuilder &b, Value lo, Value hi,
                                          ValueRange init);
  /// Zero row outputs for the rows [lo, hi) (of an invalid segment).
  void emitZeroRows(OpBuilder &b, Value lo, Value hi);
  /// The empty segments [lo, hi) a warp evaluates: one per lane, or (split
  /// rows) one at a time.
  void emitWarpEmptySegments(OpBuilder &b, Value lo, Value hi);
  /// Which lanes store a warp's segment outputs: lane 0, or (split rows)
  /// null, the emitter's choice.
  Value segmentOutputWriter(OpBuilder &b);
  /// Stores the totals of pass `pass`'s row loop at `index(component)` of
  /// `base`: lane 0 all of them, or (split rows) each lane its features'.
  void storeAccumulators(OpBuilder &b, ValueRange totals, unsigned pass,
                         Value base,
                         function_ref<Value(OpBuilder &, Value)> index);
  /// idx[row] where `inRange`, else -1, never reading outside idx.
  Value segmentOr(OpBuilder &b, Value inRange, Value row);
  /// Butterfly over the warp combining by `kind`; every lane gets the
  /// result. With offsets [fromOffset, toOffset): over aligned groups of
  /// `toOffset` lanes (from 1), or across such groups of `fromOffset`.
  Value warpCombine(OpBuilder &b, Value value, arith::AtomicRMWKind kind,
                    int64_t fromOffset = 1, int64_t toOffset = kWarpSize);
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
  /// Chunks per window: ceil(chunks / warps of the grid), clamped to
  /// [kGPUMinChunksPerWindow, kGPUMaxChunksPerWindow].
  Value windowChunks(OpBuilder &b, Value numChunks);
  /// What a window's probes found.
  struct WindowProbes {
    /// Lane k's bit (where `laneHasChunk`: k below the window's chunks):
    /// chunk firstChunk + k has work (a segment start or the last row), for
    /// sorted idx (a ballot).
    Value busy;
    /// Where SegmentProgram::gpuProbesWindowRowsOnce, lane k's idx of the
    /// row before chunk k (an i32, -1 for none); else null.
    Value rowsBefore;
  };
  /// Lane k's chunk of the window from `firstChunk`, and whether the
  /// window has it (k below its chunks, the chunk below `numChunks`).
  std::pair<Value, Value> windowLaneChunk(OpBuilder &b, Value firstChunk,
                                          Value laneHasChunk, Value numChunks);
  /// The window's probes (probeChunks'). With `largeWindows` (an i1: the
  /// windows have more than kGPUMinChunksPerWindow chunks; null where the
  /// program does not check windows, SegmentProgram::
  /// gpuSavesNarrowRowSectors), none (no chunk busy) where
  /// windowMayHaveWork finds none may have work.
  WindowProbes probeWindow(OpBuilder &b, Value firstChunk, Value laneHasChunk,
                           Value numChunks, Value largeWindows);
  /// False (uniform) where the windows are large and this one lies inside
  /// one segment, holding neither row 0 nor the last row.
  Value windowMayHaveWork(OpBuilder &b, Value firstChunk, Value laneHasChunk,
                          Value numChunks, Value largeWindows);
  /// Each chunk of the window probed, a lane each.
  WindowProbes probeChunks(OpBuilder &b, Value firstChunk, Value laneHasChunk,
                           Value numChunks);
  /// The segments starting in a chunk of 32 rows (packed, walked or long),
  /// and if it holds the last row the empty segments after it. With
  /// `rowBefore` (an i32: idx of the row before the chunk, -1 for none),
  /// the chunk loads it no more.
  void emitChunk(OpBuilder &b, Value chunk, Value rowBefore = {});
  /// The segment starting at the lowest lane of `mask` in the chunk from
  /// `rowBase` (`starts`: the ballot of the chunk's lanes whose row starts
  /// a segment): the empty segments before it, then its rows (walked, or
  /// from its tiles if long).
  void emitOwnedSegment(OpBuilder &b, Value rowBase, Value starts,
                        Value mask);
  /// A chunk's idx, loaded in one round before its first shuffle.
  struct ChunkIdx {
    Value rowBase, row, inRange;
    /// idx of the lane's row (i64; -1 past N).
    Value segment;
    /// Rows held a row per lane: the row 32 after the lane's, whether it is
    /// below N and its idx (i32).
    Value nextInRange, nextSegment32;
    /// idx of the row before the lane's (i64; -1 for none), or, where the
    /// lanes' rows load in the same round (gpuPacksTailsFromNextChunk), on
    /// lane 31 that of the row before the chunk (i32).
    Value previous, rowBefore32;
  };
  /// What the chunk's lanes learn from it by shuffles and ballots.
  struct ChunkStarts {
    /// idx of the row before the lane's (i64).
    Value previous;
    /// The ballot of lanes whose row starts a segment.
    Value starts;
    /// tailEndInNextChunk (null for split rows).
    Value tailEnd;
  };
  ChunkStarts findStarts(OpBuilder &b, const ChunkIdx &loaded);
  /// Which lanes run packed, and how they combine (see the scheme above).
  struct ChunkPacking {
    /// Each lane's segment's first and last lane (i32).
    Value headLane, endLane;
    /// Lanes from the last start to lane 31, and whether that tail packs
    /// (warp-uniform) and the lane is in it.
    Value tailLanes, tailPacks, inTail;
    /// The lane's row is in a packed segment; its first.
    Value member, isHead;
    /// The ballot of heads, and whether the chunk packs (warp-uniform: no
    /// member's segment invalid).
    Value heads, packs;
  };
  ChunkPacking planPacking(OpBuilder &b, const ChunkIdx &loaded,
                           const ChunkStarts &found);
  /// A packed segment's rows (the tail's in the next chunk included), as
  /// the lane's head sees it (i64).
  Value packedRowCount(OpBuilder &b, const ChunkPacking &plan, Value tailEnd);
  /// segmentedCombine over the packed segments (others: each lane alone).
  Value packedCombine(OpBuilder &b, const ChunkPacking &plan, Value value,
                      arith::AtomicRMWKind kind);
  /// Where `isHead`: the empty segments between `previous` and `segment`.
  void emitHeadEmptySegments(OpBuilder &b, Value isHead, Value previous,
                             Value segment);
  /// The segments that start and end in the warp's chunk of 32 rows, all at
  /// once (see the scheme above), with the one ending in the next chunk
  /// where its rows fit kGPUPackedTailRowsPerLane a lane.
  /// Returns the mask of starts it handled (0 for none: when one of them is
  /// invalid the chunk runs its segments one at a time).
  Value emitPackedSegments(OpBuilder &b, const ChunkIdx &loaded,
                           const ChunkStarts &found);
  /// The same for programs that take a packed tail's rows in the next
  /// chunk a lane each (SegmentProgram::gpuPacksTailsFromNextChunk): every
  /// lane's two rows run before the chunk's shuffles, which it sets
  /// `found` from.
  Value emitPackedChunkWithNextRows(OpBuilder &b, const ChunkIdx &loaded,
                                    ChunkStarts &found);
  /// The first lane of the chunk whose row 32 after (`nextSegment32`, an
  /// i32, where `nextInRange`) holds another segment than the chunk's last
  /// row (`segment32`: lane 31's), or is past N (32: none), an i32.
  Value tailEndInNextChunk(OpBuilder &b, Value nextInRange,
                           Value nextSegment32, Value segment32);
  /// The bits of a chunk's ballot of `starts` at or below lane `lane32`
  /// (an i32), and those above it.
  std::pair<Value, Value> splitStarts(OpBuilder &b, Value starts,
                                      Value lane32);
  /// Packed segments' combine: lane l combines its value with those of the
  /// lanes after it up to `endLane` (its segment's last lane; itself for
  /// lanes outside packed segments) by a suffix scan, then takes the result
  /// of `headLane` (its segment's first; both i32). Fixed order, no
  /// atomics.
  Value segmentedCombine(OpBuilder &b, Value value, arith::AtomicRMWKind kind,
                         Value endLane, Value headLane);
  /// The first row in [max(lo, from), lo + 128) (from < lo + 32) whose
  /// idx is not `segment32` (an i32), rows past `lastRow` (N - 1) counting
  /// as not holding it; lo + 128 if none. One round: lane l loads rows
  /// lo + l + 32k (k < kWalkChunksPerRound), all before the ballots.
  Value firstRowLeaving(OpBuilder &b, Value lo, Value from, Value lastRow,
                        Value segment32);
  /// The end of the segment from `start` (warp-uniform): firstRowLeaving
  /// from start rounded down to a sector of idx (8 rows), then 128 rows
  /// on, until a round finds it; a round's loads each cover whole 32-byte
  /// sectors. For any idx it reads only rows below N, ends, and returns a
  /// row in (start, N].
  Value walkSegmentEnd(OpBuilder &b, Value start, Value segment);
  /// The rows of a (short) segment from `start`, reduced lane-strided: up
  /// to `knownEnd` if `endKnown` (warp-uniform), else to its walked end.
  void emitWalkedSegment(OpBuilder &b, Value start, Value segment,
                         Value endKnown, Value knownEnd);
  /// The row kernel: a thread per row, or a warp for rows split over 32
  /// lanes, each unit kGPURowMapRowsPerUnit rows a step; rows split over
  /// groups of 8 or 16 lanes by emitGroupRowMap.
  void emitRowMap(OpBuilder &b);
  /// The row kernel of rows split over groups of fewer than 32 lanes.
  void emitGroupRowMap(OpBuilder &b);
  /// A row of a row map and its segment (any idx value): the program's
  /// row outputs, zero for an invalid segment; nothing past N.
  struct MappedRow {
    Value row, inRange, segment;
  };
  void emitMappedRow(OpBuilder &b, const MappedRow &mapped);
  /// Row maps of SegmentProgram::gpuStripesRowMap (GPUStripedRows.cpp):
  /// emitRowMap's steps, in a loop the warp runs whole.
  void emitStripedRowMap(OpBuilder &b);
  /// One row of each lane, the warp's rows from `warpRow`: striped row
  /// inputs and outputs, segment inputs read together.
  void emitStripedRows(OpBuilder &b, Value warpRow, const MappedRow &mapped);
  /// For each component c of rows of F (odd) components, the load k of
  /// this lane (an i32) whose value 32k + lane of the warp's is of
  /// component c.
  SmallVector<Value> stripeOfComponents(OpBuilder &b, int64_t components);
  /// The F loads of the warp's 32 rows of F components from `warpRow`:
  /// load k of lane l is their value 32k + l (0 past N).
  SmallVector<Value> loadStripes(OpBuilder &b, Value buffer, Value warpRow,
                                 int64_t components);
  /// The lane's row from the warp's loadStripes.
  SegmentProgramEmitter::Components rowsFromStripes(OpBuilder &b,
                                                    ArrayRef<Value> stripes);
  /// Stores each lane's row (of F components, odd) as F stores of 32
  /// consecutive values, nothing past N.
  void storeStripedRows(OpBuilder &b, Value buffer, Value warpRow,
                        ArrayRef<Value> row);
  /// A segment input's values at the lane's segment where `needs` (an
  /// i1): where `together` (warp-uniform) the warp loads those of segments
  /// from `firstSegment` in loads of 32 values and shuffles them (load
  /// j > 0 only where `laterLoads[j - 1]`, warp-uniform), else each lane
  /// loads its own.
  SegmentProgramEmitter::Components
  loadWarpSegments(OpBuilder &b, Value buffer, int64_t components,
                   const MappedRow &mapped, Value needs, Value together,
                   Value firstSegment, ArrayRef<Value> laterLoads);
  /// A row map's grid-stride loop, steps from `first` by `stride` below N:
  /// `rowsOf` builds the rows of the step at `base` (their idx loads and
  /// shuffles, all before the first row runs), then each row runs.
  void emitRowMapSteps(
      OpBuilder &b, Value first, Value stride,
      function_ref<SmallVector<MappedRow>(OpBuilder &, Value base)> rowsOf);

  // Long segments.
  /// The first multiple of longAlignment at or after `row`.
  Value alignedSpanAfter(OpBuilder &b, Value row);
  /// An i1: the segment starting at `start` is long, covering a whole span
  /// of tileRows rows starting at a multiple of longAlignment. With
  /// `mayCover`, false (and no load) where it is false.
  Value coversLongSpan(OpBuilder &b, Value start, Value segment,
                       Value mayCover = {});
  /// For spans starting at first, first + longAlignment, ... (`spans` of
  /// them): the rows (offsets from first) a segment holding row
  /// first + knownOffset must hold to hold the span (idx sorted: its ends
  /// on the far sides of that row).
  SmallVector<SmallVector<int64_t, 2>> longSpanEnds(int64_t spans,
                                                    int64_t knownOffset) const;
  /// An i1: `segment` holds one of the spans from row `first` on whose
  /// `ends` longSpanEnds gave (spans outside [0, N) hold none), given the
  /// segment of each of those rows in order from `segmentAt`.
  Value holdsLongSpan(OpBuilder &b, Value first,
                      ArrayRef<SmallVector<int64_t, 2>> ends, Value segment,
                      function_ref<Value(int64_t offset)> segmentAt);
  /// Up to 32 rows' segments (-1 outside [0, N)) loaded a lane each: lane
  /// j's (an i32) of row base + offsets[j], or for j = 1 of row `last` if
  /// given. probedSegment gives every lane probe j's (an i64).
  Value probeSegment(OpBuilder &b, Value base, ArrayRef<int64_t> offsets,
                     Value last = {});
  Value probedSegment(OpBuilder &b, Value probes, int64_t j);
  /// The end of a long segment (a 32-way search from the span it covers).
  Value searchLongSegmentEnd(OpBuilder &b, Value start, Value segment);
  /// One-pass programs: a long segment's outputs from its tiles' partials.
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
  /// a valid segment; `invalidRows` for one of an invalid segment, where
  /// the program stores rows.
  void emitLongPieceLoop(TilePieceBody valid, TilePieceBody invalidRows);
  /// For each long segment starting in the tile: `body(segment, start)`.
  void forEachLongStart(OpBuilder &b, Value tile, Value tileStart,
                        Value tileEnd, StartBody body);
  /// The first row of `tail` (the segment of the tile's last row) in the
  /// tile.
  Value tailStartIn(OpBuilder &b, Value tileStart, Value tileEnd, Value tail);
  /// Rows [lo, hi) lane-strided through `body`, lanes combined, each
  /// accumulator as `kinds` says (add, max or min).
  SmallVector<Value> reduceRows(OpBuilder &b, Value lo, Value hi,
                                ValueRange init,
                                SegmentProgramEmitter::RowBody body,
                                ArrayRef<arith::AtomicRMWKind> kinds);
  /// The first and last unit of a long segment [start, end), and the slot
  /// (0 head, 1 tail) of the first unit that holds its rows: tiles for a
  /// segment within one super-tile, else super-tiles (super-tile s as tile
  /// numTiles + s, whose slots follow the tiles').
  struct SegmentTiles {
    Value first, last, firstSlot;
  };
  SegmentTiles segmentTiles(OpBuilder &b, Value start, Value end);
  /// The totals `components` of a long segment's slots (`tiles`), each
  /// combined as its entry of `kinds` says in an order that depends on the
  /// segment only; every lane gets them. More than
  /// kMaxComponentsPerTileLoop components take a loop over the tiles each.
  SmallVector<Value> combineTilePartials(OpBuilder &b, SegmentTiles tiles,
                                         ValueRange components,
                                         ArrayRef<arith::AtomicRMWKind> kinds);
  /// The same for split rows, each lane its own accumulators (pass 0's, as
  /// held), tile after tile.
  SmallVector<Value> combineSplitTilePartials(OpBuilder &b, Value start,
                                              Value end);
  /// Components `components` of a long segment's slot in `tile` (its
  /// identity, per component, for a tile past the segment's last).
  SmallVector<Value> loadTileSlot(OpBuilder &b, Value tile, SegmentTiles tiles,
                                  ValueRange components,
                                  ArrayRef<Value> identities);
  /// Long-segment kernels: the components [first, last) of the running
  /// pass's totals among all passes'.
  std::pair<Value, Value> runningPassComponents(OpBuilder &b);
  /// `body(component, kind)` for each component in [first, last), a loop
  /// per run of components that combine alike.
  void forEachRunningComponent(
      OpBuilder &b, Value first, Value last,
      function_ref<void(OpBuilder &, Value, arith::AtomicRMWKind)> body);
  /// Components of all passes' totals, in order, as runs [begin, end) that
  /// combine alike.
  SmallVector<std::tuple<int64_t, int64_t, arith::AtomicRMWKind>>
  combiningRuns() const;
  void storeFromLaneZero(OpBuilder &b, ValueRange values, Value base,
                         function_ref<Value(OpBuilder &, int64_t)> index);

  // The scratch buffer: pass-by-pass programs hold each segment's bounds (start,
  // end: 2 i64) and raw totals (all passes), then the tiles' partials (2
  // slots of all passes' totals per tile); one-pass programs the partials.
  Value byteOffset(OpBuilder &b, Value base, Value bytes);
  Value segmentTotals(OpBuilder &b);
  Value partials(OpBuilder &b);
  /// ceil(N / tileRows).
  Value numTiles(OpBuilder &b);
  /// Index of component `component` of slot `which` (0 head, 1 tail) of
  /// `tile` in the partials.
  Value partialIndex(OpBuilder &b, Value tile, Value which, Value component);
  std::pair<Value, Value> loadBounds(OpBuilder &b, Value segment);
  /// Pass `pass`'s totals of a long segment, as the thread holds them.
  SmallVector<Value> loadSegmentTotals(OpBuilder &b, Value segment,
                                       unsigned pass);

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
  /// Split rows: the lanes of a group (SegmentProgram::gpuFeatureLanes, 0
  /// without split rows), the lane's feature lane in its group, its group,
  /// and whether that is the first (null when the warp is one group).
  int64_t featureLanes;
  Value groupLane, rowInGroup, firstGroup;
  /// Blocks of columns of split rows (setColumnBlocks), and the loop over
  /// them (emitWarpIds; null for one).
  int64_t columnBlocks = 1;
  scf::ForOp columnLoop;
  /// Rows per tile (SegmentProgram::gpuTileRows), tiles per super-tile,
  /// and where the spans a long segment covers start
  /// (gpuLongSpanAlignment).
  int64_t tileRows, tilesPerSuperTile, longAlignment;
  SegmentProgramEmitter emitter;
};

/// A combine that keeps the total (for values no lane combines).
Value combineNothing(OpBuilder &, Location, Value total, arith::AtomicRMWKind);

} // namespace seg
} // namespace mlir

#endif // SEGOPS_LIB_CONVERSION_SEGTOGPU_GPUKERNELEMITTER_H
