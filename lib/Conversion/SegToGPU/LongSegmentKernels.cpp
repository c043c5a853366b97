//===- LongSegmentKernels.cpp - GPU kernels for long segments -------------===//

#include "segops/Conversion/LongSegmentKernels.h"

using namespace mlir;
using namespace mlir::seg;

SmallVector<LongSegmentKernel>
mlir::seg::longSegmentKernels(const SegmentProgram &program) {
  if (!program.hasLongSegmentKernels())
    return {};
  // Split programs' kernel adds each long segment's slots itself.
  if (program.isSplittable())
    return {{LongSegmentKernel::Tiles, "__tiles"}};
  return {{LongSegmentKernel::Bounds, "__bounds"},
          {LongSegmentKernel::PassTiles, "__tiles"},
          {LongSegmentKernel::PassTotals, "__pass_totals"}};
}

SmallVector<LongSegmentLaunch>
mlir::seg::longSegmentLaunches(const SegmentProgram &program) {
  if (!program.hasLongSegmentKernels())
    return {};
  if (program.isSplittable())
    return {{"__tiles", 0}};
  SmallVector<LongSegmentLaunch> launches{{"__bounds", 0}};
  for (unsigned pass = 0; pass < program.numPasses; ++pass) {
    bool reduces = program.numReductionComponents(pass) > 0;
    // Pass 0's tiles also zero the rows of invalid long segments.
    bool visitsRows = reduces || program.storesRowsInPass(pass) ||
                      (pass == 0 && program.hasRowOutputs);
    if (visitsRows)
      launches.push_back({"__tiles", pass});
    if (reduces)
      launches.push_back({"__pass_totals", pass});
  }
  return launches;
}

LongSegmentScratch
mlir::seg::longSegmentScratch(const SegmentProgram &program) {
  if (!program.hasLongSegmentKernels())
    return {};
  int64_t elementBytes = program.elementType.getIntOrFloatBitWidth() / 8;
  int64_t totalsBytes = program.numReductionComponents() * elementBytes;
  // Two slots (head, tail) of every pass's totals per tile; pass-by-pass programs
  // also keep each segment's bounds (two i64) and totals.
  LongSegmentScratch scratch;
  scratch.perTile = 2 * totalsBytes;
  if (!program.isSplittable())
    scratch.perSegment = 16 + totalsBytes;
  return scratch;
}
