//===- LongSegmentKernels.cpp - GPU kernels for long segments -------------===//

#include "segops/Conversion/LongSegmentKernels.h"

#include "llvm/ADT/STLExtras.h"

using namespace mlir;
using namespace mlir::seg;

int64_t
LongSegmentKernel::rowsPerUnit(const SegmentProgram &program) const {
  return kind == SuperTiles ? SegmentProgram::kGPUSuperTileRows
                            : program.gpuTileRows();
}

int64_t
LongSegmentKernel::warpsPerUnit(const SegmentProgram &program) const {
  return kind == SuperTiles ? program.gpuSuperTileWarps() : 1;
}

int64_t
LongSegmentKernel::columnBlocks(const SegmentProgram &program) const {
  return kind == Tiles || kind == PassTiles ? program.gpuColumnBlocks() : 1;
}

int64_t LongSegmentKernel::minRows(const SegmentProgram &program) const {
  return kind == SuperTiles ? SegmentProgram::kGPUSuperTileRows + 1
                            : program.gpuTileRows();
}

SmallVector<LongSegmentLaunch>
mlir::seg::longSegmentLaunches(const SegmentProgram &program) {
  if (!program.hasLongSegmentKernels())
    return {};
  const LongSegmentKernel superTiles{LongSegmentKernel::SuperTiles,
                                     "__super_tiles"};
  // One-pass programs' kernel adds each long segment's slots itself.
  if (program.isOnePass())
    return {{{LongSegmentKernel::Tiles, "__tiles"}, 0}, {superTiles, 0}};
  const LongSegmentKernel bounds{LongSegmentKernel::Bounds, "__bounds"};
  const LongSegmentKernel tiles{LongSegmentKernel::PassTiles, "__tiles"};
  const LongSegmentKernel totals{LongSegmentKernel::PassTotals,
                                 "__pass_totals"};
  SmallVector<LongSegmentLaunch> launches{{bounds, 0}};
  for (unsigned pass = 0; pass < program.numPasses; ++pass) {
    bool reduces = program.numReductionComponents(pass) > 0;
    // Pass 0's tiles also zero the rows of invalid long segments.
    bool visitsRows = reduces || program.storesRowsInPass(pass) ||
                      (pass == 0 && program.hasRowOutputs);
    if (visitsRows)
      launches.push_back({tiles, pass});
    if (reduces) {
      launches.push_back({superTiles, pass});
      launches.push_back({totals, pass});
    }
  }
  return launches;
}

SmallVector<LongSegmentKernel>
mlir::seg::longSegmentKernels(const SegmentProgram &program) {
  // Only kernels some launch runs: a program none of whose passes reduces
  // (the gradient of a sum, which broadcasts) has no __pass_totals.
  SmallVector<LongSegmentKernel> kernels;
  for (const LongSegmentLaunch &launch : longSegmentLaunches(program))
    if (llvm::none_of(kernels, [&](const LongSegmentKernel &kernel) {
          return kernel.kind == launch.kernel.kind;
        }))
      kernels.push_back(launch.kernel);
  return kernels;
}

LongSegmentScratch
mlir::seg::longSegmentScratch(const SegmentProgram &program) {
  if (!program.hasLongSegmentKernels())
    return {};
  int64_t elementBytes = program.elementType.getIntOrFloatBitWidth() / 8;
  int64_t totalsBytes = program.numReductionComponents() * elementBytes;
  // Two slots (head, tail) of every pass's totals per tile and per
  // super-tile; pass-by-pass programs also keep each segment's bounds (two
  // i64) and totals.
  LongSegmentScratch scratch;
  scratch.perTile = 2 * totalsBytes;
  scratch.perSuperTile = 2 * totalsBytes;
  if (!program.isOnePass())
    scratch.perSegment = 16 + totalsBytes;
  return scratch;
}
