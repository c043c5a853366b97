//===- GpuLauncher.cpp - launching a program's GPU kernels ----------------===//

#include "segrt/GpuLauncher.h"
#include "segrt/Cuda.h"

#include <algorithm>

using namespace segrt;

static int64_t ceilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

static uint32_t gridFor(int64_t items, int64_t perBlock, int64_t minimum,
                        int64_t maximum = kMaxGrid) {
  return static_cast<uint32_t>(std::min(
      {std::max(ceilDiv(items, perBlock), minimum), maximum, kMaxGrid}));
}

int64_t GpuProgram::scratchBytes(int64_t numRows, int64_t numSegments) const {
  if (entry != abi::Entry::GpuSegmentKernel)
    return 0;
  int64_t tiles = ceilDiv(numRows, tileRows);
  int64_t superTiles = ceilDiv(numRows, superTileRows);
  return std::max<int64_t>(1, scratchPerSegment * numSegments +
                                  scratchPerTile * tiles +
                                  scratchPerSuperTile * superTiles);
}

std::vector<GpuLaunch> segrt::planGpuLaunches(const GpuProgram &program,
                                              int64_t numRows,
                                              int64_t numSegments,
                                              uintptr_t scratch) {
  std::vector<GpuLaunch> launches;
  if (numRows == 0 && numSegments == 0)
    return launches;
  auto trailing = [&](abi::Entry entry) {
    abi::TrailingArguments arguments(entry);
    arguments.set(abi::Param::NumRows, numRows)
        .set(abi::Param::NumSegments, numSegments)
        .set(abi::Param::Scratch, static_cast<int64_t>(scratch));
    return arguments;
  };
  if (program.entry == abi::Entry::GpuSegmentKernel)
    for (const GpuProgram::LongSegmentLaunch &launch :
         program.longSegmentLaunches) {
      if (numRows < launch.minRows)
        continue;
      uint32_t grid =
          gridFor(ceilDiv(numRows, launch.rowsPerUnit) * launch.warpsPerUnit,
                  program.block / 32, 1) *
          static_cast<uint32_t>(launch.columnBlocks);
      GpuLaunch planned{&launch.kernel, grid,
                        trailing(abi::Entry::GpuLongSegment)};
      planned.trailing.set(abi::Param::Pass, launch.pass);
      launches.push_back(planned);
    }
  // N >= rows * S, without overflow.
  bool longOnAverage =
      numSegments <= 0 ||
      numRows / numSegments >= program.gridMaxFromMeanSegmentRows;
  launches.push_back(
      {&program.kernel,
       gridFor(numRows, program.gridPerBlock, program.gridMin,
               longOnAverage ? program.gridMax : kMaxGrid) *
           static_cast<uint32_t>(program.columnBlocks),
       trailing(program.entry)});
  return launches;
}

void segrt::launchGpuProgram(CudaModule &module, const GpuProgram &program,
                             uintptr_t stream,
                             const std::vector<uintptr_t> &pointers,
                             int64_t numRows, int64_t numSegments,
                             uintptr_t scratch) {
  for (const GpuLaunch &launch :
       planGpuLaunches(program, numRows, numSegments, scratch))
    module.launch(*launch.kernel, launch.grid, program.block, stream, pointers,
                  launch.trailing);
}
