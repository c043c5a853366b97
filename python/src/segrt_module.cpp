//===- segrt_module.cpp - Python bindings of segrt ------------------------===//
//
// segops._native._segrt: the thin layer between the torch.library op
// implementations (Python) and segrt. Tensors cross as raw addresses; the
// Python side owns allocation, validation and streams.
//
//===----------------------------------------------------------------------===//

#include "gpu_program.h"
#include "py_json.h"
#include "segrt/CpuLevel.h"
#include "segrt/Cuda.h"
#include "segrt/Error.h"
#include "segrt/Host.h"
#include "segrt/IndexCheck.h"
#include "segrt/Memory.h"

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <map>

namespace py = pybind11;

/// An index check as Python sees it: ('', -1), or ('range' or 'order', row).
static py::tuple asTuple(const segrt::IndexCheck &check) {
  const char *problem =
      check.problem == segrt::IndexProblem::None         ? ""
      : check.problem == segrt::IndexProblem::OutOfRange ? "range"
                                                         : "order";
  return py::make_tuple(problem, check.row);
}

PYBIND11_MODULE(_segrt, m) {
  m.doc() = "segops runtime: host and CUDA kernel loading and launching";
  py::register_exception<segrt::Error>(m, "SegrtError", PyExc_RuntimeError);

  m.def("cpu_supports", &segrt::cpuSupports, py::arg("level"),
        "Whether this CPU runs code built for the LLVM CPU `level` "
        "('x86-64', 'x86-64-v2', 'x86-64-v3' or 'x86-64-v4').");
  m.def("cuda_available", &segrt::cudaAvailable,
        "True if the CUDA driver could be loaded and initialized.");
  m.def("cuda_unavailable_reason", &segrt::cudaUnavailableReason,
        "Why CUDA is unavailable (empty if it is available).");

  m.def(
      "check_index",
      [](uintptr_t idx, bool is64Bit, int64_t numRows, int64_t numSegments,
         int numThreads, bool requireSorted) {
        segrt::IndexCheck result;
        {
          // Python objects are built below, with the GIL held again.
          py::gil_scoped_release release;
          result = segrt::checkIndex(reinterpret_cast<const void *>(idx),
                                     is64Bit, numRows, numSegments, numThreads,
                                     requireSorted);
        }
        return asTuple(result);
      },
      py::arg("idx"), py::arg("is_64_bit"), py::arg("num_rows"),
      py::arg("num_segments"), py::arg("num_threads") = 1,
      py::arg("require_sorted") = true,
      "One pass over a contiguous host index (on up to num_threads threads): "
      "('', -1) if every value is in [0, num_segments) and (with "
      "require_sorted) non-decreasing, else ('range' or 'order', row).");

  m.def(
      "advise_huge_pages",
      [](uintptr_t data, size_t bytes) {
        segrt::adviseHugePages(reinterpret_cast<void *>(data), bytes);
      },
      py::arg("data"), py::arg("bytes"),
      "Hint that a fresh host buffer be backed by transparent huge pages "
      "(fewer page faults on first touch).");

  m.attr("max_kernel_pointers") = segrt::HostLibrary::kMaxPointers;
  m.def(
      "check_index_and_call",
      [](uintptr_t symbol, const std::vector<uintptr_t> &pointers,
         uintptr_t idx, int64_t numRows, int64_t numSegments, int numThreads,
         bool rowRange, uintptr_t splitRows, uintptr_t splitFinish,
         const std::vector<int64_t> &splitPassTotals,
         const std::vector<std::string> &splitCombine, bool splitDouble) {
        segrt::HostSplitKernel split;
        split.rows = reinterpret_cast<void *>(splitRows);
        split.finish = reinterpret_cast<void *>(splitFinish);
        split.passTotals = splitPassTotals;
        split.combine = segrt::parseTotalCombines(splitCombine);
        split.isDouble = splitDouble;
        segrt::IndexCheck result;
        {
          py::gil_scoped_release release;
          result = segrt::checkIndexAndCallHostKernel(
              reinterpret_cast<void *>(symbol), pointers,
              reinterpret_cast<const int32_t *>(idx), numRows, numSegments,
              numThreads,
              rowRange ? segrt::HostRange::Rows : segrt::HostRange::Segments,
              split.rows ? &split : nullptr);
        }
        return asTuple(result);
      },
      py::arg("symbol"), py::arg("pointers"), py::arg("idx"),
      py::arg("num_rows"), py::arg("num_segments"), py::arg("num_threads"),
      py::arg("row_range") = false, py::arg("split_rows") = 0,
      py::arg("split_finish") = 0,
      py::arg("split_pass_totals") = std::vector<int64_t>(),
      py::arg("split_combine") = std::vector<std::string>(),
      py::arg("split_double") = false,
      "Run every segment (or row) of the host kernel at address `symbol` "
      "(segrt::checkIndexAndCallHostKernel: idx, contiguous int32, checked "
      "as the kernel runs): ('', -1), or ('range' or 'order', row) when idx "
      "broke the contract there (the outputs are then unspecified).");

  py::class_<segrt::HostLibrary>(m, "HostLibrary")
      .def(py::init<const std::string &>(), py::arg("path"))
      .def("call", &segrt::HostLibrary::call, py::arg("name"),
           py::arg("pointers"), py::arg("num_rows"), py::arg("num_segments"),
           py::arg("begin"), py::arg("end"),
           py::call_guard<py::gil_scoped_release>(),
           "Run segments [begin, end) of a host kernel.")
      .def(
          "call_parallel",
          [](segrt::HostLibrary &library, const std::string &name,
             const std::vector<uintptr_t> &pointers, uintptr_t idx,
             int64_t numRows, int64_t numSegments, int numThreads,
             bool rowRange, const std::string &splitRows,
             const std::string &splitFinish,
             const std::vector<int64_t> &splitPassTotals,
             const std::vector<std::string> &splitCombine, bool splitDouble) {
            segrt::HostSplitKernel split;
            if (!splitRows.empty()) {
              split.rows = library.lookup(splitRows);
              split.finish = library.lookup(splitFinish);
              split.passTotals = splitPassTotals;
              split.combine = segrt::parseTotalCombines(splitCombine);
              split.isDouble = splitDouble;
            }
            library.callParallel(
                name, pointers, reinterpret_cast<const int32_t *>(idx), numRows,
                numSegments, numThreads,
                rowRange ? segrt::HostRange::Rows : segrt::HostRange::Segments,
                split.rows ? &split : nullptr);
          },
          py::arg("name"), py::arg("pointers"), py::arg("idx"),
          py::arg("num_rows"), py::arg("num_segments"), py::arg("num_threads"),
          py::arg("row_range") = false, py::arg("split_rows") = "",
          py::arg("split_finish") = "",
          py::arg("split_pass_totals") = std::vector<int64_t>(),
          py::arg("split_combine") = std::vector<std::string>(),
          py::arg("split_double") = false,
          py::call_guard<py::gil_scoped_release>(),
          "Run every segment (every row with row_range, for kernels whose "
          "manifest host.range is 'rows'), split by rows across threads "
          "(sorted int32 idx); with the kernel's host.split entry points "
          "(tile and finish kernels, totals per pass), long segments are cut "
          "into tiles.");

  // The GPU launcher (segrt/GpuLauncher.h). `kernel` is a manifest kernel
  // entry (its name and `gpu`).
  auto programOf = [](const py::dict &kernel) {
    return segops_python::gpuProgram(kernel["name"].cast<std::string>(),
                                     segops_python::toJson(kernel["gpu"]));
  };
  m.def(
      "gpu_scratch_bytes",
      [programOf](const py::dict &kernel, int64_t numRows,
                  int64_t numSegments) {
        return programOf(kernel).scratchBytes(numRows, numSegments);
      },
      py::arg("kernel"), py::arg("num_rows"), py::arg("num_segments"),
      "Bytes of the scratch buffer a GPU run of the kernel takes (0: none).");
  m.def(
      "plan_gpu_launches",
      [programOf](const py::dict &kernel, int64_t numRows, int64_t numSegments,
                  uintptr_t scratch) {
        segrt::GpuProgram program = programOf(kernel);
        py::list launches;
        for (const segrt::GpuLaunch &launch :
             segrt::planGpuLaunches(program, numRows, numSegments, scratch))
          launches.append(py::make_tuple(
              *launch.kernel, launch.grid,
              std::vector<int64_t>(launch.trailing.data(),
                                   launch.trailing.data() +
                                       launch.trailing.size())));
        return launches;
      },
      py::arg("kernel"), py::arg("num_rows"), py::arg("num_segments"),
      py::arg("scratch"),
      "The launches of one GPU run, in order: (kernel, grid, trailing "
      "arguments in the call contract's order).");
  m.def("simulator_image", &segrt::simulatorImage, py::arg("library"),
        py::arg("addresses") = std::map<std::string, uintptr_t>(),
        "A module image for the simulated CUDA driver.");

  py::class_<segrt::CudaModule>(m, "CudaModule")
      .def(py::init([](int device, const std::string &image, bool simulated) {
             return std::make_unique<segrt::CudaModule>(
                 device, image,
                 simulated ? segrt::CudaBackend::Simulator
                           : segrt::CudaBackend::Driver);
           }),
           py::arg("device"), py::arg("image"), py::arg("simulated") = false,
           "PTX loaded on a device (or, simulated, a simulator_image).")
      .def(
          "run",
          [programOf](segrt::CudaModule &module, const py::dict &kernel,
                      uintptr_t stream, const std::vector<uintptr_t> &pointers,
                      int64_t numRows, int64_t numSegments, uintptr_t scratch) {
            segrt::GpuProgram program = programOf(kernel);
            py::gil_scoped_release release;
            segrt::launchGpuProgram(module, program, stream, pointers,
                                    numRows, numSegments, scratch);
          },
          py::arg("kernel"), py::arg("stream"), py::arg("pointers"),
          py::arg("num_rows"), py::arg("num_segments"), py::arg("scratch"),
          "Queue one run of a kernel (its long-segment kernels first) on a "
          "stream without synchronizing; `scratch`: the address of "
          "gpu_scratch_bytes(kernel, N, S) bytes.")
      .def_property_readonly("device", &segrt::CudaModule::device);
}
