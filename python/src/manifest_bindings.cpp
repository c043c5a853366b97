//===- manifest_bindings.cpp - manifest records in Python -----------------===//

#include "manifest_bindings.h"

#include "manifest_record.h"
#include "segrt/GpuLauncher.h"

#include <pybind11/stl.h>

#include <stdexcept>

namespace py = pybind11;

namespace segops_python {
namespace {

/// Kernels by name, in manifest order.
py::dict kernelsByName(const ManifestRecord &manifest) {
  py::dict kernels;
  for (const KernelRecord &kernel : manifest.kernels)
    kernels[py::str(kernel.name)] = py::cast(kernel);
  return kernels;
}

} // namespace

void bindManifestRecords(py::module_ &m) {
  py::class_<BufferRecord>(m, "BufferRecord",
                           "One pointer parameter of a kernel.")
      .def_readonly("name", &BufferRecord::name)
      .def_property_readonly(
          "role",
          [](const BufferRecord &b) { return b.isOutput ? "output" : "input"; })
      .def_readonly("is_output", &BufferRecord::isOutput)
      .def_readonly("is_index", &BufferRecord::isIndex)
      .def_readonly("read", &BufferRecord::isRead)
      .def_readonly("saved_result", &BufferRecord::savedResult,
                    "The output of the level below this input is, saved by "
                    "its caller; -1 for other buffers.")
      .def_readonly("dtype", &BufferRecord::dtype, "'f32', 'f64' or 'i32'")
      .def_property_readonly("shape", &BufferRecord::symbols,
                             "Per dimension 'N', 'S', '?' (any rows) or the "
                             "extent's digits.")
      .def_readonly("sums_by", &BufferRecord::sumsBy,
                    "A scatter output: the buffer position of the index its "
                    "rows are summed by (-1: none)...")
      .def_readonly("into_rows_of", &BufferRecord::intoRowsOf,
                    "...into as many rows as this buffer has.")
      .def("extents", &BufferRecord::extents, py::arg("num_rows"),
           py::arg("num_segments"),
           "The shape for a call of num_rows rows and num_segments "
           "segments.")
      .def("__repr__", [](const BufferRecord &b) {
        return "<BufferRecord " + b.name + " " + b.dtype + ">";
      });

  py::class_<HostSplitRecord>(
      m, "HostSplit",
      "A segment program's host entry points for long segments: tile and "
      "finish kernels, the totals of each pass and how they combine.")
      .def_readonly("rows_symbol", &HostSplitRecord::rowsSymbol)
      .def_readonly("finish_symbol", &HostSplitRecord::finishSymbol)
      .def_readonly("pass_totals", &HostSplitRecord::passTotals)
      .def_readonly("combine", &HostSplitRecord::combine)
      .def_readonly("totals_double", &HostSplitRecord::totalsDouble);

  py::class_<KernelRecord>(m, "KernelRecord",
                           "One kernel of a manifest, read once in C++.")
      .def_readonly("name", &KernelRecord::name)
      .def_readonly("dtype", &KernelRecord::dtype)
      .def_readonly("buffers", &KernelRecord::buffers)
      .def_readonly("ops", &KernelRecord::ops, "The seg ops it computes.")
      .def_readonly("passes", &KernelRecord::passes,
                    "Its passes over each segment's rows.")
      .def_readonly("host_symbol", &KernelRecord::hostSymbol)
      .def_readonly("host_rows", &KernelRecord::hostRows,
                    "A host call computes rows [begin, end), not segments.")
      .def_readonly("split", &KernelRecord::split,
                    "Long-segment host entry points, or None.")
      .def_property_readonly("num_inputs", &KernelRecord::numInputs)
      .def_property_readonly("num_outputs", &KernelRecord::numOutputs)
      .def_property_readonly("idx_position", &KernelRecord::idxPosition)
      .def_property_readonly(
          "block", [](const KernelRecord &k) { return k.gpu.block; },
          "GPU threads per block.")
      .def_property_readonly("gpu_symbols", &KernelRecord::gpuSymbols)
      .def(
          "gpu_launches",
          [](const KernelRecord &kernel, int64_t numRows, int64_t numSegments) {
            std::vector<std::pair<std::string, uint32_t>> launches;
            for (const segrt::GpuLaunch &launch : segrt::planGpuLaunches(
                     kernel.gpu, numRows, numSegments, /*scratch=*/0))
              launches.emplace_back(*launch.kernel, launch.grid);
            return launches;
          },
          py::arg("num_rows"), py::arg("num_segments"),
          "The GPU launches of a run over N rows and S segments, in order: "
          "(kernel symbol, blocks), as segrt's launcher plans them.")
      .def_property_readonly(
          "gpu_block",
          [](const KernelRecord &kernel) { return kernel.gpu.block; },
          "Threads per block of its GPU launches.")
      .def_property_readonly(
          "tile_rows",
          [](const KernelRecord &kernel) { return kernel.gpu.tileRows; },
          "Rows of a GPU tile (its long-segment kernels' unit; 0 without "
          "them).")
      .def_property_readonly(
          "super_tile_rows",
          [](const KernelRecord &kernel) { return kernel.gpu.superTileRows; },
          "Rows of a GPU super-tile (0 without long-segment kernels).")
      .def_readonly("text", &KernelRecord::text,
                    "The entry's JSON text: how the kernel crosses to the "
                    "operator library (_torchops.CompiledKernel).")
      .def("__repr__", [](const KernelRecord &k) {
        return "<KernelRecord " + k.name + ">";
      });

  py::class_<HostBuildRecord>(m, "HostBuild")
      .def_readonly("cpu", &HostBuildRecord::cpu)
      .def_readonly("library", &HostBuildRecord::library)
      .def_readonly("vector_bits", &HostBuildRecord::vectorBits);

  py::class_<ManifestRecord>(m, "Manifest", "An op library manifest.")
      .def_readonly("host_builds", &ManifestRecord::hostBuilds, "Best first.")
      .def_readonly("ptx", &ManifestRecord::ptx)
      .def_property_readonly("kernels", &kernelsByName)
      .def("host_build", &chooseHostBuild, py::return_value_policy::copy,
           "The host build this process runs (SEGOPS_HOST_CPU's, else the "
           "best this CPU supports).");

  m.def(
      "read_manifest",
      [](const std::string &path) {
        return readManifest(path);
      },
      py::arg("path"),
      "The manifest at `path` (RuntimeError if missing or stale).");
  m.def(
      "parse_manifest",
      [](const std::string &text) { return parseManifest(text); },
      py::arg("text"), "A manifest from its text (ValueError if malformed).");
  m.def(
      "package_manifest",
      [](const std::string &compiled,
         const std::vector<std::tuple<std::string, std::string, int64_t>>
             &hostBuilds,
         const std::map<std::string, std::string> &ptx) {
        std::vector<HostBuildRecord> builds;
        for (const auto &[cpu, library, vectorBits] : hostBuilds)
          builds.push_back({cpu, library, vectorBits});
        return packageManifest(compiled, builds, ptx);
      },
      py::arg("compiled"), py::arg("host_builds"), py::arg("ptx"),
      "The manifest text of a shipped program level: the compiler's "
      "manifest `compiled` with its host builds [(cpu, library file, vector "
      "bits)], best first, and PTX files {chip: file} (ValueError if "
      "`compiled` is not a manifest).");
  m.def(
      "parse_kernel",
      [](const std::string &text) { return parseKernelRecord(text); },
      py::arg("text"), "A kernel from its entry's text (KernelRecord.text).");
}

} // namespace segops_python
