//===- LongSegmentKernels.cpp - GPU kernels for long segments -------------===//

#include "segops/Conversion/LongSegmentKernels.h"

using namespace mlir;
using namespace mlir::seg;

SmallVector<LongSegmentKernel>
mlir::seg::longSegmentKernels(const SegmentProgram &program) {
  SmallVector<LongSegmentKernel> kernels;
  if (program.mapsRowsOnly())
    return kernels;
  if (program.isSplittable()) {
    // The program's kernel adds each long segment's slots itself.
    kernels.push_back({LongSegmentKernel::Tiles, 0, "__tiles"});
    return kernels;
  }
  kernels.push_back({LongSegmentKernel::Bounds, 0, "__bounds"});
  for (unsigned pass = 0; pass < program.numPasses; ++pass) {
    bool reduces = program.numReductionComponents(pass) > 0;
    // Pass 0's tile kernel also zeroes the rows of invalid long segments.
    bool visitsRows = reduces || program.storesRowsInPass(pass) ||
                      (pass == 0 && program.hasRowOutputs);
    std::string number = std::to_string(pass);
    if (visitsRows)
      kernels.push_back(
          {LongSegmentKernel::StagedTiles, pass, "__tiles" + number});
    if (reduces)
      kernels.push_back({LongSegmentKernel::Finish, pass, "__finish" + number});
  }
  return kernels;
}

LongSegmentScratch
mlir::seg::longSegmentScratch(const SegmentProgram &program) {
  if (program.mapsRowsOnly())
    return {};
  int64_t elementBytes = program.elementType.getIntOrFloatBitWidth() / 8;
  int64_t totalsBytes = program.numReductionComponents() * elementBytes;
  // Two slots (head, tail) of every pass's totals per tile; staged programs
  // also keep each segment's bounds (two i64) and totals.
  LongSegmentScratch scratch;
  scratch.perTile = 2 * totalsBytes;
  if (!program.isSplittable())
    scratch.perSegment = 16 + totalsBytes;
  return scratch;
}
