//===- SegmentProgram.h - kernel functions as fused segment programs -*- C++
//-*-===//
//
// A *kernel function* is a `func.func` built from seg ops and elementwise
// arith/math/tensor ops that all share one segment index. Every value in it
// lives in one of two spaces: per row (N rows, as in x or a gradient w.r.t.
// x) or per segment (S segments, as in a reduction's result or y in
// seg.mul), with a per-element shape: scalar, F features (3-vectors, or wide
// feature rows with any static F, unrolled into F components) or 3x3 matrix.
// Such a function compiles to ONE kernel: for each segment, a few passes
// over the segment's rows (a reduction's result is usable only after the pass
// that computes it), with per-segment arithmetic between passes and row
// outputs written during the last pass that needs them.
//
// This header holds the analysis (spaces, shapes, passes, the kernel ABI)
// and the emitter shared by the GPU and host lowerings; the lowerings only
// decide how rows are walked and how partial reductions combine.
//
//===----------------------------------------------------------------------===//

#ifndef SEGOPS_CONVERSION_SEGMENTPROGRAM_H
#define SEGOPS_CONVERSION_SEGMENTPROGRAM_H

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "segops/Dialect/Seg/Analysis/ValueSpaces.h"
#include "segrt/KernelABI.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/SmallVector.h"

#include <functional>
#include <optional>
#include <string>

namespace mlir {
namespace seg {

class KernelCodeBuilder;

/// Whether `op` is a seg reduction (SegmentOpInterface::isReduction).
bool isReductionOp(Operation *op);

/// One pointer parameter of a kernel.
struct KernelBuffer {
  std::string name;
  bool isOutput = false;
  /// False for an input the kernel never reads (only its length, if
  /// anything, matters): callers may pass any pointer for it.
  bool isRead = true;
  /// f32, f64 or i32.
  Type elementType;
  /// Symbolic shape: "N" or "S", then the element shape ("3").
  SmallVector<std::string, 3> shape;
  /// Outputs of seg.scatter_sum: the kernel writes the N rows to sum, and
  /// the runtime sums them by the index in buffer `sumsBy` into as many
  /// rows as buffer `sumsIntoRowsOf` has. -1 for other buffers.
  int sumsBy = -1;
  int sumsIntoRowsOf = -1;
  /// An input that is the level below's result #k, saved by the caller (a
  /// gradient derived on saved results: seg.saved_result); -1 for others.
  int savedResult = -1;
};

/// A table read by a second index (seg.gather_rows): the runtime checks
/// that the index buffer's values are rows of the table buffer.
struct TableGather {
  unsigned indexBuffer;
  unsigned tableBuffer;
  bool operator==(const TableGather &other) const {
    return indexBuffer == other.indexBuffer && tableBuffer == other.tableBuffer;
  }
};

/// The analysis of one kernel function.
class SegmentProgram {
public:
  /// Analyzes `func`, or emits an error on it saying why it is not a kernel
  /// function. Erases the ops of `func` whose results nothing uses: they are
  /// no part of the kernel (their seg ops still tell idx and spaces).
  static FailureOr<SegmentProgram> analyze(func::FuncOp func);

  /// Returns true if `func` is meant as a kernel function: it has seg
  /// operations or tensors in its signature.
  static bool isCandidate(func::FuncOp func);

  struct Info {
    ValueSpace space = ValueSpace::Row;
    /// Per-element shape: {} scalar, {F} features, {3, 3} matrix.
    SmallVector<int64_t, 2> shape;
    /// Row values: the first pass in which they can be computed. Segment
    /// values: the number of passes that must finish before they are known.
    unsigned pass = 0;

    int64_t numComponents() const {
      int64_t n = 1;
      for (int64_t d : shape)
        n *= d;
      return n;
    }
  };

  StringRef getName() const { return name; }

  /// True for programs that only map rows (seg.mul, seg.matvec, seg.gather
  /// and arithmetic): no reduction, no row count, no per-segment output.
  /// Their rows can be computed in any grouping: no segment boundaries.
  bool mapsRowsOnly() const;

  /// True for one-pass programs: one pass whose rows read nothing known
  /// from the segment's row count (seg.count), and, where it stores rows,
  /// a reduction. Each tile of a long segment then runs on its own (its
  /// rows, their outputs stored on the way, and its raw totals) and the
  /// segment's result follows from its tiles' totals, combined in tile
  /// order as each reduction combines: the GPU's `__tiles` kernel runs it
  /// in one launch, with no segment bounds. Other programs with
  /// long-segment kernels run pass by pass (a row reading the count needs
  /// the whole segment's).
  bool isOnePass() const {
    return numPasses == 1 && !rowsReadRowCount &&
           (!hasRowOutputs || numReductionComponents() > 0);
  }

  /// Whether the GPU kernels handle long segments in tile kernels (see
  /// LongSegmentKernels.h): every segment program. Tiles' totals combine as
  /// their reduction does (add, max, min: combiningKinds), in an order
  /// that depends on the segment only.
  bool hasLongSegmentKernels() const { return !mapsRowsOnly(); }

  /// The buffer whose rows the program only sums by idx, if it is exactly
  /// that (one result, `seg.sum` of a float argument: segmented_sum, and
  /// segmented_gather's adjoint). The runtime may then add the rows of an
  /// unsorted index in any fixed grouping, without sorting them.
  std::optional<unsigned> summedRowBuffer() const;

  /// How each accumulator of pass `pass` combines, in accumulator order.
  SmallVector<arith::AtomicRMWKind> combiningKinds(unsigned pass) const;

  /// Rows per tile when the GPU kernels split long segments (the `__tiles`
  /// kernel): a segment covering a whole aligned tile is long. Rows held a
  /// row per lane take tiles of kGPUTileRows; split rows (gpuFeatureLanes)
  /// of kGPUSplitRowTileRows, as a warp runs one to four of their rows at a
  /// time: at 1,024 rows a ~1,000-row segment (not long) or a tile is a
  /// chain of 256 to 4,096 load rounds on one warp, as long as the whole
  /// op at bandwidth (docs/benchmarks.md, "Smaller tiles for split rows").
  /// gpuTileRows() picks; written to the manifest.
  static constexpr int64_t kGPUTileRows = 1024;
  static constexpr int64_t kGPUSplitRowTileRows = 256;
  int64_t gpuTileRows() const {
    return splitsFeatures() ? kGPUSplitRowTileRows : kGPUTileRows;
  }
  /// A segment is long (its rows reduced by the tile kernels) if it covers
  /// a whole span of a tile's rows starting at a multiple of this many
  /// rows: half a tile for split rows, a tile for rows held a row per lane.
  /// A segment covering none, walked by one warp, has at most a tile and a
  /// half less two rows (at whole tiles, two tiles less two: a ~1,000-row
  /// layout of split rows left one warp walking up to 510 rows, two a
  /// step). Spans of a tile keep every long segment the head or the tail
  /// of each tile it crosses (one in a tile's middle covers none), so a
  /// tile's warp finds its pieces as before, and segments shorter than a
  /// tile stay walked (long segments covering half a tile took ~100-row
  /// layouts' 128- to 199-row segments to the tile kernels, for more than
  /// they saved). Rows held a row per lane walk 32 a step (a 2,046-row
  /// walk is 64 loads a lane at one feature); their spans were left at a
  /// tile. Written to the manifest (docs/benchmarks.md, "Split rows: long
  /// segments from half a tile").
  int64_t gpuLongSpanAlignment() const {
    return splitsFeatures() ? gpuTileRows() / 2 : gpuTileRows();
  }
  /// Rows per super-tile, whatever the tile: the `__super_tiles` kernel
  /// combines the tile partials of each long segment crossing a super-tile
  /// into two slots, so that a segment spanning several super-tiles is
  /// added from theirs (a segment of 1e7 rows: ~300 slots, not ~10^4).
  /// Written to the manifest.
  static constexpr int64_t kGPUSuperTileRows = 32 * kGPUTileRows;
  int64_t gpuTilesPerSuperTile() const {
    return kGPUSuperTileRows / gpuTileRows();
  }
  /// Components of a super-tile's slots each warp of `__super_tiles`
  /// combines: its lanes load F values a tile, so one warp for all F made a
  /// chain of ~F / 2 load rounds (split rows: 4 tiles a lane), longer than
  /// the launch's memory traffic from F = 16 (docs/benchmarks.md, "Warps
  /// over a super-tile's components").
  static constexpr int64_t kGPUSuperTileComponentsPerWarp = 4;
  /// Warps per super-tile in `__super_tiles`: one per
  /// kGPUSuperTileComponentsPerWarp components of the widest pass's totals.
  /// The manifest records it as the launch's warps per unit.
  int64_t gpuSuperTileWarps() const;
  /// Lanes over a warp's components in `__super_tiles` (the others over
  /// tiles): the fewest powers of two holding them, up to
  /// kGPUSuperTileComponentsPerWarp, so that consecutive lanes read a
  /// slot's consecutive values and a program of one total keeps a lane per
  /// tile.
  int64_t gpuSuperTileComponentLanes() const;
  /// Rows of the chunks the GPU segment kernel gives each warp: a segment
  /// that starts and ends in one chunk is packed (run with the chunk's
  /// other such segments, a lane per row); a longer one is walked by the
  /// warp (or, covering a whole tile, reduced by tile kernels). Written to
  /// the manifest.
  static constexpr int64_t kGPUChunkRows = 32;
  /// A segment starting in a chunk and ending in the next one (its tail)
  /// is packed too where its rows come to at most this many a lane of its
  /// lanes in the chunk (one row there, the rest from the next chunk);
  /// else it is walked. Written to the manifest.
  static constexpr int64_t kGPUPackedTailRowsPerLane = 4;
  /// Loads a lane issues before it needs the first of them, as the GPU
  /// kernels plan a round of loads (a walk's rows, a chunk's): what ptxas
  /// keeps in flight unrolling a loop, and the traffic model's round.
  static constexpr int64_t kGPULoadsPerRound = 4;
  /// Whether a packed tail takes its rows in the next chunk a lane each
  /// instead (lane l the row 32 after its own), so that any tail ending in
  /// the next chunk packs: one-pass programs (no row outputs) held a row
  /// per lane whose rows read no segment values and no tables, and whose
  /// two rows a lane (its own and the one 32 after) load with the chunk's
  /// two idx loads in one round (kGPULoadsPerRound): rows of one
  /// component. More components cost the chunks that do not pack (mid-
  /// length segments) a round and the kernels registers
  /// (docs/benchmarks.md, "Tails from the next chunk"). Written to the
  /// manifest.
  bool gpuPacksTailsFromNextChunk() const;
  /// The program's row inputs: its block arguments of float rows that row
  /// code loads at the row (not tables gathered by second indices).
  SmallVector<Value> rowInputs() const;
  /// Whether a lane of the GPU segment kernel's packed chunks loads its own
  /// row's inputs once for every pass, not once a pass (a round of loads a
  /// pass saved; a packed tail's other rows still load each pass):
  /// programs of several passes held a row per lane whose row inputs come
  /// to at least kGPUMinCachedRowComponents components and at most
  /// kGPUMostCachedRowWords 32-bit words, which stay in registers through
  /// every pass. Fewer components (a scalar row) cost the max's and min's
  /// backward an occupancy step for a pass's single reload, more words
  /// the f64 3-vector rms_norm's higher levels two (ptxas, sm_90;
  /// docs/benchmarks.md, "Own rows loaded once"). Written to the manifest.
  static constexpr int64_t kGPUMinCachedRowComponents = 2;
  static constexpr int64_t kGPUMostCachedRowWords = 6;
  bool gpuCachesOwnRowInputs() const;
  /// Whether the GPU kernels spend instructions (and maybe registers) to
  /// save the sectors that rows held a row per lane of at most
  /// kGPUNarrowRowBytes bytes waste, an eighth of their loads or more:
  /// walks step from the first row's chunk where that takes no more load
  /// rounds, since 32 rows from anywhere touch a sector more of each buffer
  /// (GPUKernelEmitter::laneRowLoop); and windows of more than
  /// kGPUMinChunksPerWindow chunks check their ends before probing a
  /// sector a chunk (GPUKernelEmitter::windowMayHaveWork). Wider rows waste
  /// less, and their kernels took an occupancy step for the code
  /// (docs/benchmarks.md, "Narrow rows: walks from whole chunks").
  static constexpr int64_t kGPUNarrowRowBytes = 8;
  bool gpuSavesNarrowRowSectors() const;
  /// Whether the segment kernel's window probes load each chunk's last
  /// row only, a lane each, the row before chunk k coming from lane k - 1
  /// by a shuffle (lane 0 loading its own): one idx sector a chunk instead
  /// of two, for a shuffle and its registers. For the programs of
  /// gpuPacksTailsFromNextChunk, whose kernels have registers to spare
  /// below their occupancy step; the 3-vector sum's went from 40 to 48
  /// (docs/benchmarks.md, "`__super_tiles` lanes over components").
  bool gpuProbesWindowRowsOnce() const {
    return gpuPacksTailsFromNextChunk();
  }
  /// Chunks of the windows a warp of the segment kernel takes: it finds
  /// those where a segment starts (or the last row is) with two idx loads a
  /// lane, and runs only them, so a chunk inside a segment costs a fraction
  /// of a load round. A window has ceil(chunks / warps of the grid) chunks,
  /// from kGPUMinChunksPerWindow to kGPUMaxChunksPerWindow (a lane each):
  /// on a grid capped at kGPUSegmentKernelMaxWarps, a warp checks its rows
  /// in one round. Written to the manifest.
  static constexpr int64_t kGPUMinChunksPerWindow = 4;
  static constexpr int64_t kGPUMaxChunksPerWindow = 32;
  /// The segment kernel's grid, at most, where segments hold at least
  /// kGPUSegmentKernelCapFromMeanRows rows on average: about two waves of
  /// a 132-SM sm_90 GPU at full occupancy (64 warps an SM). There most
  /// chunks hold no start, so more warps would only add window checks.
  /// Shorter segments keep a warp per 4 chunks: a warp walks each segment
  /// starting in its window, so larger windows of mid-length segments
  /// leave some warps several walks (the slowest warp bounds the launch).
  /// Written to the manifest.
  static constexpr int64_t kGPUSegmentKernelMaxWarps = 16384;
  static constexpr int64_t kGPUSegmentKernelCapFromMeanRows = 1024;
  /// Rows each unit of a row map's kernel takes (a thread, or for rows of
  /// 32 features or more a warp): their idx loads are issued together,
  /// then their rows.
  static constexpr int64_t kGPURowMapRowsPerUnit = 4;
  /// Striped row maps (gpuStripesRowMap) take fewer, 2, or 1 where their
  /// striped rows (inputs and outputs) take more than
  /// kGPUStripedRowBytesForTwoRows bytes a row: the step's rows after the
  /// first keep their idx values live across its shuffles, which took the
  /// f64 dot's backward (four 3-vectors) to 74 registers at 2 rows.
  static constexpr int64_t kGPUStripedRowBytesForTwoRows = 48;
  /// Rows a thread of a row map (not split) takes a step.
  int64_t gpuRowMapRowsPerUnit() const;
  /// Rows a block of `blockSize` threads of a row map's kernel takes a
  /// step of its grid-stride loop (the manifest's grid `per_block`):
  /// kGPURowMapRowsPerUnit a thread, or a warp for rows split over 32
  /// lanes; 32 a warp for rows split over groups of 8 or 16 lanes (each
  /// group G of them).
  int64_t gpuRowMapBlockRows(int64_t blockSize) const;
  /// Whether a row map's kernel moves rows of an odd number of components
  /// from 3 to 31 (3-vectors held a row per lane) a warp at a time: load k
  /// of lane l reads value 32k + l of the warp's 32 rows (whole sectors),
  /// and shuffles hand each lane its row (and the reverse for row outputs),
  /// where a row per lane would read 3 sectors for each one it uses. Odd
  /// widths only: 32 is then invertible modulo the width, so every lane
  /// sends each component from one of its loads (GPUKernelEmitter::
  /// emitStripedRowMap). Its segment inputs are then read the same way,
  /// once for the warp's few consecutive segments.
  bool gpuStripesRowMap() const;
  /// The row inputs (read ones) and outputs of odd widths it stripes
  /// (isGPUStripedWidth).
  SmallVector<Value> gpuStripedRows() const;
  static bool isGPUStripedWidth(int64_t components) {
    return components % 2 == 1 && components > 1 && components < kGPUChunkRows;
  }
  /// Segments a warp of a striped row map reads together (at least this
  /// many, in as many loads of 32 values as that takes); warps whose rows'
  /// segments span more load them a lane each.
  static constexpr int64_t kGPUStripedSegments = 4;
  /// A reduction that GPU kernels run on a row input's values as loaded
  /// (gpuStripedReductions): the input (a block argument), its components
  /// and how they combine.
  struct StripedReduction {
    Value input;
    int64_t components;
    arith::AtomicRMWKind kind;
  };
  /// The reductions, in accumulator order, of a one-pass program that
  /// stores no rows and whose every reduction reduces a row input as it
  /// is (SegmentOpInterface::reducesOperandAsIs: sum, mean, max, min, and
  /// gather's adjoint, a sum), each of 1 or an odd number of components,
  /// at least one from 3 to 31 (isGPUStripedWidth); empty for every other
  /// program. A row per lane would read 3 sectors of a 3-vector input for
  /// each one it uses; the tile kernel's pieces instead load 32 rows of
  /// each input as F loads of 32 consecutive values (load k of lane l:
  /// value 32k + l, of component (32k + l) mod F whatever the first row)
  /// and reduce them as they are, each lane F accumulators of F different
  /// components, put in component order after the rows. No shuffles in the
  /// loop, so a lane's loads stay in flight as before. The segment
  /// kernel's walks keep a row per lane: striped, they cost its registers
  /// an occupancy step (docs/benchmarks.md, "Striped reductions").
  SmallVector<StripedReduction> gpuStripedReductions() const;
  bool gpuStripesReductions() const { return !gpuStripedReductions().empty(); }

  /// Rows of at least this many features split them over a group of a
  /// warp's lanes in the GPU kernels (gpuFeatureLanes): lane l of a group
  /// of G holds features l, l + G, ..., a warp runs 32 / G rows at a time,
  /// and every load of a row is coalesced. Narrower rows (scalars,
  /// 3-vectors) run a row per lane, each lane holding its row's features
  /// unrolled. Written to the manifest.
  static constexpr int64_t kGPUFeatureLanesFrom = 8;
  /// The lanes G a row's features are split over in the GPU kernels, from
  /// the program's widest row F: 32 from 32 features, 16 from 16, 8 from
  /// 8 (at most ceil(F / G) features a lane: 2 below 32 features); 0 (no
  /// split) below kGPUFeatureLanesFrom. Rows of exactly 16 or 32 features
  /// take half that, in pairs, where a pair fits kGPUNarrowRowPairBytes and
  /// no op folds the row (foldsSplitRows). Programs that only map rows and
  /// combine a row's features (combinesRowFeatures) split from 32
  /// features, a warp per row. Written to the manifest.
  int64_t gpuFeatureLanes() const;
  /// The most bytes a lane loads or stores of a split row at once: one
  /// 16-byte vector access, which the kernel ABI's buffer alignment allows.
  static constexpr int64_t kGPUFeatureVectorBytes =
      segrt::abi::kBufferAlignment;
  /// Consecutive features a lane of a split row loads and stores at once,
  /// where it can: ld.global.v2.f32 and .v2.f64. Vectors of 4 f32 cost
  /// registers (ptxas allocates them as aligned quads): max f32 F = 256
  /// backward's tile kernel went from 64 to 80 with them and kept 64 with
  /// pairs, for the same estimate (docs/benchmarks.md, "Split rows in
  /// pairs of features").
  static constexpr int64_t kGPUFeatureVectorWidth = 2;
  /// The widest pair of features that rows of exactly G features (16 or
  /// 32, one a lane) are split into over half the lanes (gpuFeatureLanes):
  /// a pair of f32 (or of 16-bit features). A lane then holds twice the
  /// features, so its registers grow; with pairs of f64 max's backward
  /// lost an occupancy step below 50% (docs/benchmarks.md, "Rows of 16
  /// features in pairs").
  static constexpr int64_t kGPUNarrowRowPairBytes = 8;
  /// Consecutive features a lane holds of a split row of `features`
  /// features (gpuFeatureLanes G), loaded and stored as one vector: V =
  /// kGPUFeatureVectorWidth where that fits kGPUFeatureVectorBytes and
  /// divides the row into whole vectors of the G lanes (features a multiple
  /// of G x V: no vector is partly padding), else 1. Lane l then holds
  /// features (q G + l) V + v for v < V, q = 0, 1, ...: every access of the
  /// warp still covers consecutive bytes, in V times fewer instructions.
  /// Programs that fold split rows into whole values (foldsSplitRows: dot,
  /// rms_norm) keep V = 1: with pairs, ptxas took 78 to 128 registers for
  /// their f64 F = 256 segment kernels (48 without), and their rows are
  /// bound by DRAM, not by load rounds. The kernels' row buffers must be
  /// aligned to V elements (the runtime gives them inputs aligned to
  /// kGPUFeatureVectorBytes). Written to the manifest for the program's
  /// widest row.
  int64_t gpuFeatureVectorWidth(int64_t features) const;
  /// The most features a lane holds of each split row: 8, as at F = 256
  /// over 32 lanes; wider rows run as column blocks (gpuColumnBlocks).
  static constexpr int64_t kGPUMostFeaturesPerLane = 8;
  /// Blocks of columns C the kernels that hold split rows (the segment or
  /// row kernel, `__tiles`) run a program's rows in: 1, or for rows of more
  /// than kGPUMostFeaturesPerLane a lane the fewest (a power of two) that
  /// bring each block within it, where every split row has the widest
  /// row's F features, F splits into C blocks of whole vectors of the
  /// lanes and no op folds the rows (dot, rms_norm: a fold needs every
  /// feature). Their grids are C times the rule's: block b runs the rule's
  /// block b / C on features [(b % C) F / C, (b % C + 1) F / C) (any grid
  /// is correct: GPUKernelEmitter loops over the column blocks). Rows of
  /// 1,024 features held 32 a lane, and max f64's backward spilled. Not
  /// below 8 a lane: the loop costs registers, and at F = 256 f64 more
  /// than the smaller blocks saved (docs/benchmarks.md, "Column blocks").
  /// Written to the manifest.
  int64_t gpuColumnBlocks() const;
  /// Whether an op combines a value's components into one (a component
  /// sum, max or min: ComponentOpInterface::getComponentCombiningKind).
  bool combinesRowFeatures() const;
  bool splitsFeatures() const { return gpuFeatureLanes() > 0; }
  /// Whether an op makes a whole value (held the same by every lane) of
  /// split rows' features: a dot's or a norm's reduction, a component sum.
  bool foldsSplitRows() const;
  /// Whether the GPU kernels hold `value` split over lanes (a row of at
  /// least kGPUFeatureLanesFrom features; scalars, 3-vectors, matrices and
  /// narrower rows are held whole by every lane).
  bool isFeatureSplit(Value value) const;

  /// Number of scalar accumulators of the program's reductions (a vec3 sum
  /// counts 3, a dot 1, an outer sum 9): the raw totals of one tile.
  int64_t numReductionComponents() const;
  /// The same for the reductions computed in pass `pass` (the emitter's
  /// accumulators of that pass, in the same order).
  int64_t numReductionComponents(unsigned pass) const;
  /// The most of any pass (at least 1).
  int64_t widestPassComponents() const;
  /// Where pass `pass`'s accumulators start among all of them: the
  /// components of the passes before it.
  int64_t reductionOffset(unsigned pass) const;
  /// Components of the program's widest value (1 for scalars, 3 for
  /// 3-vectors, 9 for matrices, F for rows of F features).
  int64_t maxComponents() const;
  /// Features of the program's widest row value (0 without rows of
  /// features: scalars, 3-vectors and matrices are not rows of features).
  int64_t widestRowFeatures() const;
  /// Whether pass `pass` stores row outputs.
  bool storesRowsInPass(unsigned pass) const;
  const Info &info(Value value) const {
    auto it = infos.find(value);
    assert(it != infos.end() && "value outside the segment program");
    return it->second;
  }
  bool hasInfo(Value value) const { return infos.count(value); }

  std::string name;
  // Op handles are cheap value types whose accessors are not const.
  mutable func::FuncOp func;
  /// The segment index shared by every seg op (a function argument).
  Value idx;
  /// Floating-point element type of the program's data (one per program).
  Type elementType;
  /// Pointer parameters in ABI order: the tensor arguments, then the results.
  SmallVector<KernelBuffer, 6> buffers;
  /// For each function argument, its buffer position (-1 for index args).
  SmallVector<int, 6> argumentBuffer;
  /// Number of passes over each segment's rows.
  unsigned numPasses = 1;
  /// True if the program has row outputs (so rows outside every valid
  /// segment must be zeroed).
  bool hasRowOutputs = false;
  /// True if a row value (a row output, a reduction's row term) reads a
  /// value known from the segment's row count alone (seg.count and what is
  /// computed from it).
  bool rowsReadRowCount = false;
  /// The tables the program reads by second indices, once each.
  SmallVector<TableGather, 2> gathers;

private:
  DenseMap<Value, Info> infos;
  friend class SegmentProgramAnalysis;
};

/// Emits the scalar code of a segment program. The lowering supplies how a
/// pass walks the rows of a segment and how per-thread partial sums are
/// combined; everything else (loads, arithmetic, reductions, epilogues,
/// stores) is shared.
class SegmentProgramEmitter {
public:
  /// The code of `lanes` consecutive rows from `row` (lanes > 1: each
  /// scalar becomes a vector of `lanes`, one lane per row, accumulators
  /// included), given the loop-carried accumulators; returns the next ones.
  /// With `laneMask` (a vector of i1, or null for all lanes), rows whose
  /// lane is false add nothing and their row outputs are not written
  /// (masked stores).
  using RowBody = function_ref<SmallVector<Value>(
      OpBuilder &, Location, Value row, int64_t lanes, Value laneMask,
      ValueRange acc)>;
  /// Builds a loop over the rows of the current segment, calling the body
  /// for the rows the current thread owns, and returns the final scalar
  /// accumulators (`init` holds scalar zeros; a loop running the body with
  /// lanes > 1 makes its own vector accumulators and adds their lanes up).
  /// `storesRows` says whether the body stores row outputs (a loop running
  /// it on rows past the segment's end must then mask them).
  using RowLoopBuilder = std::function<SmallVector<Value>(
      OpBuilder &, Location, ValueRange init, RowBody, bool storesRows)>;
  /// Combines one thread's partial accumulator into the total over the
  /// segment, by the accumulator's combining kind (nothing on the host, a
  /// warp butterfly on GPUs).
  using CombineBuilder = std::function<Value(OpBuilder &, Location, Value,
                                             arith::AtomicRMWKind)>;

  SegmentProgramEmitter(const SegmentProgram &program, ValueRange buffers,
                        Value numRows, Value numSegments)
      : program(program), buffers(buffers.begin(), buffers.end()),
        numRows(numRows), numSegments(numSegments) {}

  /// Emits the whole program for segment `segment` (which must be valid),
  /// whose rows number `count` (i64). Segment outputs are stored when
  /// `writeSegmentOutputs` holds (an i1; null means always). With
  /// `rowLoop` null, the segment is known to be empty: no row loops are
  /// emitted and reductions are 0.
  ///
  /// For programs that only map rows, `segment` may be a vector of i64, one
  /// valid segment per lane for a row loop whose body runs that many lanes
  /// (a lane's row reads its own segment's values, loaded lane by lane);
  /// `rowOutputMask` (a vector of i1, or null) then says which lanes store
  /// their row outputs (the others store 0).
  void emitSegment(OpBuilder &b, Location loc, Value segment, Value count,
                   const RowLoopBuilder &rowLoop, const CombineBuilder &combine,
                   Value writeSegmentOutputs, Value rowOutputMask = Value());

  /// GPU kernels of programs that splitsFeatures(): from now on every
  /// split value (SegmentProgram::isFeatureSplit) is held over a group of
  /// `groupLanes` lanes as its features `lane`, `lane` + `groupLanes`, ...
  /// (`lane` an i64, the thread's lane in its group), the padding past the
  /// last feature as 0; a group runs each of its rows with all its lanes.
  /// Values held whole are the same in every lane of a group. A part of a
  /// row combined into one value (a component sum) is combined across the
  /// group by `combineLanes` (every lane of the group gets the result).
  /// Stores: a row's by its group (under the row body's lane mask), a
  /// segment's by the group where `firstGroup` (an i1; null: the warp is
  /// one group), whole values by the group's lane 0. With `columnBlocks`
  /// C > 1 (SegmentProgram::gpuColumnBlocks) the thread holds only the
  /// features of its block of F / C columns, from `columnBase` (an i64).
  void splitFeaturesOver(Value lane, int64_t groupLanes, Value firstGroup,
                         CombineBuilder combineLanes,
                         int64_t columnBlocks = 1,
                         Value columnBase = Value());
  bool splitsFeatures() const { return static_cast<bool>(featureLane); }

  /// An accumulator of a pass as this thread holds it: its component among
  /// the pass's totals (an i64 in [0, numReductionComponents(pass))), and
  /// whether it is one (an i1; false for a split row's padding past its
  /// last feature, whose component is then the row's last; null for
  /// always).
  struct HeldAccumulator {
    Value component;
    Value valid;
    /// Held by this lane alone (a split row's feature), not by every lane.
    bool split = false;
  };
  /// Pass `pass`'s accumulators, in the row loop's order.
  SmallVector<HeldAccumulator> heldAccumulators(OpBuilder &b, Location loc,
                                                unsigned pass);
  /// How each of them combines.
  SmallVector<arith::AtomicRMWKind> heldCombiningKinds(unsigned pass) const;
  /// A row loop's totals of the current pass, from a group that walked
  /// its rows with its lanes: the accumulators of a dot or a norm of split
  /// rows hold each lane's part of the sum over its features (one
  /// butterfly after the rows, not one per row); combines them across the
  /// group. Row loops over split rows call it on their totals.
  SmallVector<Value> combineLaneParts(OpBuilder &b, Location loc,
                                      ValueRange totals);

  /// While a RowLoopBuilder runs: the pass it builds the loop for (lowerings
  /// that run passes in separate kernels read earlier passes' totals).
  unsigned currentPass() const { return pass; }

  /// Stores 0 to every component of every row output at `row` (where
  /// `laneMask`, an i1, holds, if given).
  void emitZeroRowOutputs(OpBuilder &b, Location loc, Value row,
                          Value laneMask = Value());

  /// A value's components as a thread holds them.
  using Components = SmallVector<Value, 9>;
  /// From now on (until called with an empty map) the program's block
  /// arguments in `staged` are read as those components (at the current
  /// row, or segment) instead of loaded, and the row outputs are handed to
  /// `sink` (if set; result index, components) instead of stored. GPU row
  /// maps that move rows a warp at a time (SegmentProgram::
  /// gpuStripesRowMap) stage their rows and sink their outputs; a packed
  /// lane of several passes (SegmentProgram::gpuCachesOwnRowInputs) stages
  /// its own row's inputs, loaded once, for its own row's body.
  using RowOutputSink = std::function<void(unsigned, ArrayRef<Value>)>;
  void stageValues(DenseMap<Value, Components> values, RowOutputSink sink);
  /// `argument`'s components at `row`, loaded as a row body loads them
  /// (one thread, whole rows).
  Components loadRowInput(OpBuilder &b, Location loc, Value argument,
                          Value row);
  /// The buffer of a program's block argument, and of its result `i`.
  Value argumentBuffer(Value argument) const { return bufferOf(argument); }
  Value resultBuffer(unsigned i) const { return outputBuffer(i); }

private:
  Components segmentValue(OpBuilder &b, Location loc, Value value);
  Components rowValue(OpBuilder &b, Location loc, Value value, Value row,
                      int64_t lanes, DenseMap<Value, Components> &memo);
  Components elementwise(OpBuilder &b, Location loc, Operation *op,
                         ArrayRef<Components> operands);
  Value bufferOf(Value argument) const;
  Value outputBuffer(unsigned resultIndex) const;
  /// Whether `value` is held split over lanes (see splitFeaturesOver).
  bool isHeldSplit(Value value) const;
  /// The components this thread holds of `value`.
  int64_t heldComponents(Value value) const;
  /// The parts a lane holds of a split row of `features` (its column
  /// block's).
  int64_t heldFeatures(int64_t features) const;
  /// Split rows of `features`: where this lane's part `part` lies in the
  /// row (clamped to the row's last feature), and whether it is a feature
  /// (null: always).
  std::pair<Value, Value> splitFeature(KernelCodeBuilder &code, int64_t part,
                                       int64_t features);
  Components loadSplit(KernelCodeBuilder &code, Value buffer, Value element,
                       int64_t features);
  /// Stores `value`'s components at `element` of `buffer` as held: split
  /// values by every lane, whole ones by lane 0 when features are split.
  void storeHeld(KernelCodeBuilder &code, Value value, Value buffer,
                 Value element, ArrayRef<Value> components, int64_t lanes,
                 Value laneMask);
  /// The row code of a seg op (a reduction's row term, a row map's value):
  /// its float operands' components, read per row or per segment as the op
  /// says, handed to the op's buildRowComponents.
  /// `combinePartsLater`: a reduction's lanes' parts of a split row stay
  /// apart (see combineLaneParts).
  Components buildRowCode(OpBuilder &b, Location loc, Operation *segmentOp,
                          function_ref<Components(Value)> rowValue,
                          function_ref<Components(Value)> segmentValue,
                          bool combinePartsLater = false);
  /// Whether reduction `op` combines one value from split rows (a dot, a
  /// norm): its row terms are the lanes' parts, combined after the rows.
  bool combinesLanesAfterRows(Operation *op) const;
  /// The components of `op`'s result from `operands` (as held) by `build`:
  /// with split operands and a whole result, the lanes' parts (padding set
  /// to `kind`'s identity) combined across lanes; with a whole operand and
  /// a split result (a broadcast), the operand's copies.
  Components buildHeld(OpBuilder &b, Location loc, Operation *op,
                       ArrayRef<Value> operandValues,
                       ArrayRef<Components> operands,
                       std::optional<arith::AtomicRMWKind> kind,
                       function_ref<Components(ArrayRef<Components>)> build,
                       bool combineParts = true);

  const SegmentProgram &program;
  SmallVector<Value> buffers;
  Value numRows, numSegments;
  // Per emitted segment.
  Value segment, count, rowOutputMask;
  /// Lanes of `segment` (1 for a scalar).
  int64_t segmentLanes = 1;
  DenseMap<Value, Components> segmentValues;
  /// See stageValues.
  DenseMap<Value, Components> staged;
  RowOutputSink rowOutputSink;
  unsigned pass = 0;
  /// With features split over lanes: the thread's lane, and how values
  /// combine across lanes.
  Value featureLane;
  int64_t groupLanes = 0;
  Value firstGroup;
  int64_t columnBlocks = 1;
  Value columnBase;
  CombineBuilder combineLanes;
};

} // namespace seg
} // namespace mlir

#endif // SEGOPS_CONVERSION_SEGMENTPROGRAM_H
