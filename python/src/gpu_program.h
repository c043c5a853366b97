//===- gpu_program.h - a kernel's GPU launch rule from its manifest entry -*- C++ -*-===//
//
// The one reader of the manifest's `gpu` entry (lib/Target/Manifest.cpp writes
// it), for both extensions: _segrt (Python's launches) and the operator
// library (the operators' CUDA and simulated kernels).
//
//===----------------------------------------------------------------------===//

#ifndef SEGOPS_PYTHON_GPU_PROGRAM_H
#define SEGOPS_PYTHON_GPU_PROGRAM_H

#include "segrt/GpuLauncher.h"

#include <nlohmann/json.hpp>

#include <stdexcept>
#include <string>
#include <vector>

namespace segops_python {

/// The entry point the manifest names ("gpu_kernel", ...).
inline segrt::abi::Entry parseEntry(const std::string &name) {
  for (segrt::abi::Entry entry : segrt::abi::kEntries)
    if (segrt::abi::entryName(entry) == name)
      return entry;
  throw std::invalid_argument("unknown kernel entry point " + name);
}

/// Kernel `kernel`'s launch rule from its manifest `gpu` entry.
inline segrt::GpuProgram gpuProgram(const std::string &kernel,
                                    const nlohmann::json &gpu) {
  segrt::GpuProgram program;
  program.kernel = kernel;
  program.entry = parseEntry(gpu.at("entry").get<std::string>());
  program.block = gpu.at("block").at(0).get<uint32_t>();
  const nlohmann::json &grid = gpu.at("grid");
  program.gridPerBlock = grid.at("per_block").get<int64_t>();
  program.gridMin = grid.at("min").get<int64_t>();
  if (gpu.contains("long_segments")) {
    const nlohmann::json &longSegments = gpu["long_segments"];
    for (const nlohmann::json &launch : longSegments.at("launches"))
      program.longSegmentLaunches.push_back(
          {launch.at("kernel").get<std::string>(),
           launch.at("pass").get<int64_t>()});
    program.tileRows = longSegments.at("tile_rows").get<int64_t>();
    program.scratchPerSegment =
        longSegments.at("scratch_bytes_per_segment").get<int64_t>();
    program.scratchPerTile =
        longSegments.at("scratch_bytes_per_tile").get<int64_t>();
  }
  return program;
}

} // namespace segops_python

#endif // SEGOPS_PYTHON_GPU_PROGRAM_H
