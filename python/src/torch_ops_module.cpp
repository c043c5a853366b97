//===- torch_ops_module.cpp - segops._native._torchops ---------------------===//
//
// The Python side of the operator library (libsegops_ops.so, which defines
// and registers the operators itself): the Python package's hooks on the
// library levels (error wording, row widths compiled at run time), PTX per
// device, the simulator, caches, and segops.jit's programs (jit_ops.cpp).
//
//===----------------------------------------------------------------------===//

#include "torch_ops_bindings.h"

#include "segrt/BufferCache.h"
#include "segrt/IndexCheck.h"

#include <torch/csrc/autograd/python_variable.h>
#include <torch/csrc/utils/pybind.h>

#include <pybind11/functional.h>
#include <pybind11/stl.h>

#include <map>

namespace py = pybind11;
using namespace segops_torch;

namespace {

/// A Python callable kept until exit: hooks may run during interpreter
/// finalization, and levels are never destroyed.
py::handle keptForever(py::object callable) {
  return callable.release();
}

GpuModules::PtxSource pythonPtxSource(py::object source) {
  py::handle kept = keptForever(std::move(source));
  return [kept](int device) {
    py::gil_scoped_acquire gil;
    return kept(device).cast<std::string>();
  };
}

} // namespace

OperatorLevel::Validator segops_torch::pythonValidator(py::object validator) {
  py::handle kept = keptForever(std::move(validator));
  return [kept](at::TensorList floats, const at::Tensor &idx,
                const c10::SymInt &numSegments) {
    py::gil_scoped_acquire gil;
    py::list floatList(floats.size());
    for (size_t i = 0; i < floats.size(); ++i)
      floatList[i] =
          py::reinterpret_steal<py::object>(THPVariable_Wrap(floats[i]));
    kept(floatList, py::reinterpret_steal<py::object>(THPVariable_Wrap(idx)),
         py::cast(numSegments));
  };
}

Variant segops_torch::variantOf(const CompiledKernel &kernel) {
  Variant variant =
      variantOf(kernel.record, [&kernel](const std::string &symbol) -> void * {
        auto it = kernel.addresses.find(symbol);
        return it == kernel.addresses.end() || !it->second
                   ? nullptr
                   : reinterpret_cast<void *>(it->second);
      });
  // Run-time compiled kernels bring their own GPU code.
  variant.gpuModules = std::make_shared<GpuModules>();
  if (kernel.ptxSource && !kernel.ptxSource.is_none())
    variant.gpuModules->setPtxSource(
        pythonPtxSource(py::reinterpret_borrow<py::object>(kernel.ptxSource)));
  if (!kernel.simulatorImage.empty())
    variant.gpuModules->setSimulatorImage(kernel.simulatorImage);
  return variant;
}

PYBIND11_MODULE(_torchops, m) {
  m.doc() = "The Python side of segops' operator library (libsegops_ops.so)";
  py::class_<CompiledKernel>(m, "CompiledKernel")
      .def(py::init([](const std::string &entry,
                       std::map<std::string, uintptr_t> addresses,
                       py::object ptxSource, std::string simulatorImage) {
             try {
               return CompiledKernel{segops_python::parseKernelRecord(entry),
                                     std::move(addresses), std::move(ptxSource),
                                     std::move(simulatorImage)};
             } catch (const std::invalid_argument &error) {
               throw py::value_error(error.what());
             }
           }),
           py::arg("entry"), py::arg("addresses"),
           py::arg("ptx_source") = py::none(),
           py::arg("simulator_image") = std::string(),
           "A kernel compiled at run time: its manifest record's text "
           "(segrt KernelRecord.text), the addresses of its host symbols "
           "(none: no host code), ptx_source(device) giving its PTX, and "
           "its simulated kernels' image ('': none).");
  registerJitBindings(m);
  m.def("index_rechecks", &segrt::indexRechecks,
        "How many times these kernels checked idx again after running (they "
        "saw a problem, or their rows did not meet): never for a valid "
        "index.");
  m.def(
      "sorted_rows",
      [](const at::Tensor &idx) {
        std::optional<SortedRows> known = cachedSortedRows(idx);
        SortedRows rows = known ? *known : sortRows(idx, kernelIndex(idx));
        return std::make_pair(rows.sortedIdx, rows.order);
      },
      py::arg("idx"),
      "idx's rows in a stable sort (int32 sorted values, int64 order), "
      "remembered for idx's current content: the kernels reducing by idx "
      "then run on them without sorting. The caller checks idx first.");
  m.def("index_sorts", &indexSorts,
        "How many times the kernels sorted an index (no remembered order).");
  m.def("clear_index_cache", &clearIndexCache,
        "Forgets every remembered narrowing and sorted order.");
  m.def("has_cuda_kernels", &cudaKernelsBuilt,
        "Whether the operator library has CUDA kernels (built against a "
        "PyTorch with CUDA and the CUDA headers).");
  m.def(
      "set_ptx_source",
      [](py::object source) {
        libraryGpuModules()->setPtxSource(pythonPtxSource(std::move(source)));
      },
      py::arg("source"),
      "source(device) returns the PTX text for a CUDA device (called once per "
      "device).");
  m.def(
      "output_cache_info",
      [] {
        segrt::HostBufferCache::Stats stats = segrt::hostOutputCache().stats();
        py::dict info;
        info["cached_bytes"] = stats.cachedBytes;
        info["cached_buffers"] = stats.cachedBuffers;
        info["live_bytes"] = stats.liveBytes;
        info["limit_bytes"] = stats.limitBytes;
        info["hits"] = stats.hits;
        info["misses"] = stats.misses;
        return info;
      },
      "The host output cache: bytes held for reuse and handed out, its "
      "limit, allocations served from it (hits) and mapped afresh.");
  m.def(
      "empty_output_cache", [] { segrt::hostOutputCache().empty(); },
      "Returns every cached host output buffer to the system.");
  m.def(
      "set_output_cache_limit",
      [](size_t bytes) { segrt::hostOutputCache().setLimit(bytes); },
      py::arg("bytes"),
      "Caps the bytes the host output cache holds (0: none).");
  m.def(
      "set_gpu_simulator",
      [](const std::string &path) {
        libraryGpuModules()->setSimulatorImage(
            path.empty() ? std::string() : segrt::simulatorImage(path));
      },
      py::arg("path"),
        "Run CPU calls through the GPU kernels of the simulated library at "
        "`path` (segrt's GPU launcher over the simulated driver); '' runs "
        "the host kernels.");
  m.def("set_debug_checks", &setDebugChecks, py::arg("enabled"),
        "Check idx's content on CUDA too (a host sync per call).");
  m.def("load_error", &libraryLoadError,
        "Why the operator library defined no operators as it loaded (its "
        "manifest or host kernels missing or stale); '' where it did.");
  m.def(
      "library_levels",
      [] {
        std::vector<std::string> names;
        for (const auto &[name, level] : libraryLevels())
          names.push_back(name);
        return names;
      },
      "The operator levels libsegops_ops.so registered (segmented_sum, "
      "segmented_sum_grad, ...).");
  py::class_<OperatorSignature>(m, "OperatorSignature",
                                "Where a library op level's arguments lie.")
      .def_readonly("num_arguments", &OperatorSignature::numArguments)
      .def_readonly("num_level_inputs", &OperatorSignature::numLevelInputs)
      .def_readonly("idx_position", &OperatorSignature::idxPosition)
      .def_readonly("num_segments_position",
                    &OperatorSignature::numSegmentsPosition)
      .def_readonly("num_outputs", &OperatorSignature::numOutputs)
      .def_readonly("derivative_order", &OperatorSignature::derivativeOrder)
      .def_readonly("backward", &OperatorSignature::backward)
      .def_readonly("saved_results", &OperatorSignature::savedResults,
                    "The outputs the backward takes after this level's "
                    "float arguments (autograd saves them).");
  m.def(
      "operator_signature",
      [](const std::string &name) {
        std::shared_ptr<OperatorLevel> level = libraryLevel(name);
        TORCH_CHECK(level, "segops: no library operator level ", name);
        return signatureOf(*level);
      },
      py::arg("name"),
      "Where the arguments of library operator level `name` "
      "(segmented_sum_grad) lie in its schema: the op's float arguments, "
      "the cotangents, idx and num_segments.");
  m.def(
      "set_level_hooks",
      [](const std::string &name, py::object validator, py::object provider) {
        std::shared_ptr<OperatorLevel> level = libraryLevel(name);
        TORCH_CHECK(level, "segops: no library operator level ", name);
        OperatorLevel::VariantProvider makeVariant;
        if (!provider.is_none()) {
          py::handle kept = keptForever(std::move(provider));
          makeVariant = [kept](const std::string &key) -> std::optional<Variant> {
            py::gil_scoped_acquire gil;
            py::object compiled = kept(key);
            if (compiled.is_none())
              return std::nullopt;
            return variantOf(compiled.cast<const CompiledKernel &>());
          };
        }
        level->setHooks(pythonValidator(std::move(validator)),
                        std::move(makeVariant));
      },
      py::arg("name"), py::arg("validator"), py::arg("provider") = py::none(),
      "Attaches the Python package's hooks to a library operator level: "
      "validator(floats, idx, num_segments) raises the error for arguments "
      "the kernel rejects; provider(key), if given, describes the variant "
      "for a key the op library lacks ('f32_w64': a row width compiled at "
      "run time) as a CompiledKernel, or returns None.");
}
