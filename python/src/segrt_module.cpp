//===- segrt_module.cpp - Python bindings of segrt ------------------------===//
//
// segops._native._segrt: segrt for Python (index checks, host and GPU
// launches for tests and tools) and the manifest records
// (manifest_bindings.cpp). Tensors cross as raw addresses; the caller owns
// allocation and streams. The operators themselves run in the operator
// library (libsegops_ops.so).
//
//===----------------------------------------------------------------------===//

#include "manifest_bindings.h"
#include "manifest_record.h"
#include "segrt/CpuLevel.h"
#include "segrt/Cuda.h"
#include "segrt/Error.h"
#include "segrt/Host.h"
#include "segrt/IndexCheck.h"
#include "segrt/Memory.h"
#include "segrt/OpLibrary.h"

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

/// A kernel's long-segment entry points, resolved by `address` (none if it
/// has none).
template <typename Resolve>
static segrt::HostSplitKernel hostSplit(const segops_python::KernelRecord &kernel,
                                        Resolve address) {
  segrt::HostSplitKernel split;
  if (!kernel.split)
    return split;
  split.rows = address(kernel.split->rowsSymbol);
  split.finish = address(kernel.split->finishSymbol);
  split.passTotals = kernel.split->passTotals;
  split.combine = segrt::parseTotalCombines(kernel.split->combine);
  split.isDouble = kernel.split->totalsDouble;
  return split;
}

static segrt::HostRange hostRange(const segops_python::KernelRecord &kernel) {
  return kernel.hostRows ? segrt::HostRange::Rows : segrt::HostRange::Segments;
}

/// The index among a call's pointers.
static const int32_t *indexOf(const segops_python::KernelRecord &kernel,
                              const std::vector<uintptr_t> &pointers) {
  size_t position = kernel.idxPosition();
  if (position >= pointers.size())
    throw std::invalid_argument("kernel " + kernel.name + " takes " +
                                std::to_string(kernel.buffers.size()) +
                                " pointers, got " +
                                std::to_string(pointers.size()));
  return reinterpret_cast<const int32_t *>(pointers[position]);
}

PYBIND11_MODULE(_segrt, m) {
  m.doc() = "segops runtime: host and CUDA kernel loading and launching";
  segops_python::bindManifestRecords(m);
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
  // How derivative levels are named and how many the op library has
  // (segrt/OpLibrary.h, which the compiler reads too).
  m.attr("gradient_suffix") = segrt::kGradientSuffix;
  m.attr("max_derivative_order") = segrt::kMaxDerivativeOrder;
  m.def(
      "check_index_and_call",
      [](const segops_python::KernelRecord &kernel,
         const std::map<std::string, uintptr_t> &addresses,
         const std::vector<uintptr_t> &pointers, int64_t numRows,
         int64_t numSegments, int numThreads) {
        auto address = [&addresses](const std::string &symbol) {
          auto it = addresses.find(symbol);
          if (it == addresses.end())
            throw py::key_error("no address for host symbol " + symbol);
          return reinterpret_cast<void *>(it->second);
        };
        segrt::HostSplitKernel split = hostSplit(kernel, address);
        void *symbol = address(kernel.hostSymbol);
        segrt::IndexCheck result;
        {
          py::gil_scoped_release release;
          result = segrt::checkIndexAndCallHostKernel(
              symbol, pointers, indexOf(kernel, pointers), numRows,
              numSegments, numThreads, hostRange(kernel),
              split.rows ? &split : nullptr);
        }
        return asTuple(result);
      },
      py::arg("kernel"), py::arg("addresses"), py::arg("pointers"),
      py::arg("num_rows"), py::arg("num_segments"), py::arg("num_threads"),
      "Run every segment (or row) of a host kernel compiled at run time, "
      "its symbols at `addresses` (segrt::checkIndexAndCallHostKernel: idx, "
      "contiguous int32, checked as the kernel runs): ('', -1), or ('range' "
      "or 'order', row) when idx broke the contract there (the outputs are "
      "then unspecified).");

  py::class_<segrt::HostLibrary>(m, "HostLibrary")
      .def(py::init<const std::string &>(), py::arg("path"))
      .def("call", &segrt::HostLibrary::call, py::arg("name"),
           py::arg("pointers"), py::arg("num_rows"), py::arg("num_segments"),
           py::arg("begin"), py::arg("end"),
           py::call_guard<py::gil_scoped_release>(),
           "Run segments [begin, end) of a host kernel.")
      .def(
          "call_parallel",
          [](segrt::HostLibrary &library,
             const segops_python::KernelRecord &kernel,
             const std::vector<uintptr_t> &pointers, int64_t numRows,
             int64_t numSegments, int numThreads, bool tiles) {
            segrt::HostSplitKernel split;
            if (tiles)
              split = hostSplit(kernel, [&library](const std::string &symbol) {
                return library.lookup(symbol);
              });
            library.callParallel(kernel.hostSymbol, pointers,
                                 indexOf(kernel, pointers), numRows,
                                 numSegments, numThreads, hostRange(kernel),
                                 split.rows ? &split : nullptr);
          },
          py::arg("kernel"), py::arg("pointers"), py::arg("num_rows"),
          py::arg("num_segments"), py::arg("num_threads"),
          py::arg("tiles") = true, py::call_guard<py::gil_scoped_release>(),
          "Run every segment (every row, for kernels whose host_rows is "
          "set) of a kernel of this library, split by rows across threads "
          "(sorted int32 idx); with `tiles` and the kernel's split entry "
          "points (tile and finish kernels), long segments are cut into "
          "tiles.");

  // The GPU launcher (segrt/GpuLauncher.h), for a kernel's record.
  m.def(
      "gpu_scratch_bytes",
      [](const segops_python::KernelRecord &kernel, int64_t numRows,
         int64_t numSegments) {
        return kernel.gpu.scratchBytes(numRows, numSegments);
      },
      py::arg("kernel"), py::arg("num_rows"), py::arg("num_segments"),
      "Bytes of the scratch buffer a GPU run of the kernel takes (0: none).");
  m.def(
      "plan_gpu_launches",
      [](const segops_python::KernelRecord &kernel, int64_t numRows,
         int64_t numSegments, uintptr_t scratch) {
        py::list launches;
        for (const segrt::GpuLaunch &launch : segrt::planGpuLaunches(
                 kernel.gpu, numRows, numSegments, scratch))
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
          [](segrt::CudaModule &module,
             const segops_python::KernelRecord &kernel, uintptr_t stream,
             const std::vector<uintptr_t> &pointers, int64_t numRows,
             int64_t numSegments, uintptr_t scratch) {
            py::gil_scoped_release release;
            segrt::launchGpuProgram(module, kernel.gpu, stream, pointers,
                                    numRows, numSegments, scratch);
          },
          py::arg("kernel"), py::arg("stream"), py::arg("pointers"),
          py::arg("num_rows"), py::arg("num_segments"), py::arg("scratch"),
          "Queue one run of a kernel (its long-segment kernels first) on a "
          "stream without synchronizing; `scratch`: the address of "
          "gpu_scratch_bytes(kernel, N, S) bytes.")
      .def_property_readonly("device", &segrt::CudaModule::device);
}
