//===- gpu_program.h - a kernel's GPU launch rule from its manifest entry -*- C++ -*-===//
//
// The one reader of the manifest's `gpu` entry (lib/Target/Manifest.cpp writes
// it), for both extensions: _segrt (Python's launches) and _torchops (the
// operators' CUDA and simulated kernels).
//
//===----------------------------------------------------------------------===//

#ifndef SEGOPS_PYTHON_GPU_PROGRAM_H
#define SEGOPS_PYTHON_GPU_PROGRAM_H

#include "segrt/GpuLauncher.h"

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

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
                                    const pybind11::dict &gpu) {
  namespace py = pybind11;
  segrt::GpuProgram program;
  program.kernel = kernel;
  program.entry = parseEntry(gpu["entry"].cast<std::string>());
  program.block = gpu["block"].cast<std::vector<uint32_t>>().at(0);
  py::dict grid = gpu["grid"].cast<py::dict>();
  program.gridPerBlock = grid["per_block"].cast<int64_t>();
  program.gridMin = grid["min"].cast<int64_t>();
  if (gpu.contains("long_segments")) {
    py::dict long_ = gpu["long_segments"].cast<py::dict>();
    for (py::handle item : long_["launches"].cast<py::list>()) {
      py::dict launch = item.cast<py::dict>();
      program.longSegmentLaunches.push_back(
          {launch["kernel"].cast<std::string>(),
           launch["pass"].cast<int64_t>()});
    }
    program.tileRows = long_["tile_rows"].cast<int64_t>();
    program.scratchPerSegment =
        long_["scratch_bytes_per_segment"].cast<int64_t>();
    program.scratchPerTile = long_["scratch_bytes_per_tile"].cast<int64_t>();
  }
  return program;
}

} // namespace segops_python

#endif // SEGOPS_PYTHON_GPU_PROGRAM_H
