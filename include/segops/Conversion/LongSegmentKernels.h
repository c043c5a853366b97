//===- LongSegmentKernels.h - GPU kernels for long segments -----*- C++ -*-===//
//
// The GPU lowering gives a segment program's long segments (those covering a
// whole span of SegmentProgram::gpuTileRows() rows from a multiple of
// gpuLongSpanAlignment()) to extra kernels,
// launched before the program's kernel on the same stream, which share a
// scratch buffer with it. This header names them in launch order and sizes
// the scratch, for the lowering and for the op library's manifest.
//
//===----------------------------------------------------------------------===//

#ifndef SEGOPS_CONVERSION_LONGSEGMENTKERNELS_H
#define SEGOPS_CONVERSION_LONGSEGMENTKERNELS_H

#include "segops/Conversion/SegmentProgram.h"

#include <string>

namespace mlir {
namespace seg {

/// One kernel for long segments. All take the program kernel's parameters
/// (buffers, N, S, scratch) and then an i64: the pass they run.
struct LongSegmentKernel {
  enum Kind {
    /// One-pass programs: the raw totals of each tile's long pieces (and
    /// their row outputs).
    Tiles,
    /// Pass-by-pass programs: each long segment's first and last row.
    Bounds,
    /// Pass-by-pass programs: the tiles' rows of long segments in one pass (row
    /// outputs; totals into the tile slots).
    PassTiles,
    /// Pass-by-pass programs: each long segment's totals of one pass from its
    /// tiles' slots.
    PassTotals,
    /// Every program with tiles, after the tiles of a pass that reduces:
    /// the tile slots of each super-tile's long pieces combined into its two
    /// slots.
    SuperTiles,
  };
  Kind kind;
  /// Appended to the program's name: `__tiles`, `__bounds`, `__pass_totals`,
  /// `__super_tiles`.
  std::string suffix;

  /// Rows of the kernel's units of work: a tile of `program`, or a
  /// super-tile.
  int64_t rowsPerUnit(const SegmentProgram &program) const;
  /// Warps sharing a unit: one, or `__super_tiles`' warps over components
  /// (SegmentProgram::gpuSuperTileWarps).
  int64_t warpsPerUnit(const SegmentProgram &program) const;
  /// Column blocks of split rows its grid runs (the tile kernels, which
  /// hold rows: SegmentProgram::gpuColumnBlocks; the others 1).
  int64_t columnBlocks(const SegmentProgram &program) const;
  /// The fewest rows for which the kernel runs: a whole tile, or (super
  /// tiles) more than one super-tile, as no segment spans two before.
  int64_t minRows(const SegmentProgram &program) const;
};

/// One launch of a long-segment kernel: the kernel and the pass it runs.
struct LongSegmentLaunch {
  LongSegmentKernel kernel;
  unsigned pass = 0;
};

/// The launches before the program's kernel, in order: for one-pass programs
/// `__tiles` and `__super_tiles`; for pass-by-pass programs `__bounds`, then
/// per pass `__tiles` (if the pass visits rows), `__super_tiles` and
/// `__pass_totals` (if it reduces).
SmallVector<LongSegmentLaunch>
longSegmentLaunches(const SegmentProgram &program);

/// The long-segment kernels of `program`: those its launches run, once each
/// (none for programs that only map rows).
SmallVector<LongSegmentKernel>
longSegmentKernels(const SegmentProgram &program);

/// Bytes of the scratch buffer the kernels share: `perSegment * S +
/// perTile * ceil(N / gpuTileRows()) + perSuperTile * ceil(N /
/// kGPUSuperTileRows)`.
struct LongSegmentScratch {
  int64_t perSegment = 0;
  int64_t perTile = 0;
  int64_t perSuperTile = 0;
};
LongSegmentScratch longSegmentScratch(const SegmentProgram &program);

} // namespace seg
} // namespace mlir

#endif // SEGOPS_CONVERSION_LONGSEGMENTKERNELS_H
