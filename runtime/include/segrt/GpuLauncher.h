//===- GpuLauncher.h - launching a program's GPU kernels --------*- C++ -*-===//
//
// The one GPU launcher: from a kernel's manifest `gpu` entry and the call
// contract (segrt/KernelABI.h) it derives the launches of one run (the
// long-segment kernels first, when there is a whole tile of rows, then the
// kernel), their grids and their trailing arguments, and the scratch buffer
// they share. The library ops' and jit_call's CUDA kernels run it over the
// CUDA driver; tests run the same code over the simulated driver
// (CudaBackend::Simulator).
//
//===----------------------------------------------------------------------===//

#ifndef SEGRT_GPULAUNCHER_H
#define SEGRT_GPULAUNCHER_H

#include "segrt/KernelABI.h"

#include <cstdint>
#include <string>
#include <vector>

namespace segrt {

class CudaModule;

/// Large enough to fill any GPU; kernels grid-stride over the rest.
constexpr int64_t kMaxGrid = 1 << 18;

/// How a kernel launches on a GPU: the manifest's `gpu` entry.
struct GpuProgram {
  /// The kernel's symbol, and its entry point (GpuSegmentKernel for segment
  /// programs with long-segment kernels, else GpuKernel).
  std::string kernel;
  abi::Entry entry = abi::Entry::GpuKernel;
  uint32_t block = 256;
  /// The kernel's grid: ceil(N / gridPerBlock) blocks, at least gridMin,
  /// and at most gridMax where N >= gridMaxFromMeanSegmentRows * S.
  int64_t gridPerBlock = 256;
  int64_t gridMin = 1;
  int64_t gridMax = kMaxGrid;
  int64_t gridMaxFromMeanSegmentRows = 0;
  /// Blocks of columns the kernel runs rows in: its grid is this many
  /// times the rule's (the manifest's `column_blocks`).
  int64_t columnBlocks = 1;
  /// Segment programs: the kernels launched first, each with the pass it
  /// runs, `warpsPerUnit` warps per unit of `rowsPerUnit` rows (a tile or a
  /// super-tile), when there are at least `minRows` rows, on a grid
  /// `columnBlocks` times that.
  struct LongSegmentLaunch {
    std::string kernel;
    int64_t pass = 0;
    int64_t rowsPerUnit = 0;
    int64_t warpsPerUnit = 1;
    int64_t minRows = 0;
    int64_t columnBlocks = 1;
  };
  std::vector<LongSegmentLaunch> longSegmentLaunches;
  int64_t tileRows = 0;
  int64_t superTileRows = 0;
  int64_t scratchPerSegment = 0;
  int64_t scratchPerTile = 0;
  int64_t scratchPerSuperTile = 0;

  /// Bytes of the scratch buffer a run needs: 0 for kernels without
  /// long-segment kernels, else at least 1.
  int64_t scratchBytes(int64_t numRows, int64_t numSegments) const;
};


/// One kernel launch of a run.
struct GpuLaunch {
  const std::string *kernel;
  uint32_t grid;
  abi::TrailingArguments trailing;
};

/// The launches of one run over N rows and S segments, in order (none if
/// both are 0); `scratch` is the device address of a buffer of
/// scratchBytes(N, S) bytes.
std::vector<GpuLaunch> planGpuLaunches(const GpuProgram &program,
                                       int64_t numRows, int64_t numSegments,
                                       uintptr_t scratch);

/// Queues the launches of one run on `stream` of `module` (never
/// synchronizing): `pointers` are the buffers' device addresses in manifest
/// order.
void launchGpuProgram(CudaModule &module, const GpuProgram &program,
                      uintptr_t stream, const std::vector<uintptr_t> &pointers,
                      int64_t numRows, int64_t numSegments, uintptr_t scratch);

} // namespace segrt

#endif // SEGRT_GPULAUNCHER_H
