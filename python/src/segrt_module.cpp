//===- segrt_module.cpp - Python bindings of segrt ------------------------===//
//
// segops._native._segrt: the thin layer between the torch.library op
// implementations (Python) and segrt. Tensors cross as raw addresses; the
// Python side owns allocation, validation and streams.
//
//===----------------------------------------------------------------------===//

#include "segrt/Cuda.h"
#include "segrt/Error.h"
#include "segrt/Host.h"

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

namespace py = pybind11;

PYBIND11_MODULE(_segrt, m) {
  m.doc() = "segops runtime: host and CUDA kernel loading and launching";
  py::register_exception<segrt::Error>(m, "SegrtError", PyExc_RuntimeError);

  m.def("cuda_available", &segrt::cudaAvailable,
        "True if the CUDA driver could be loaded and initialized.");
  m.def("cuda_unavailable_reason", &segrt::cudaUnavailableReason,
        "Why CUDA is unavailable (empty if it is available).");

  py::class_<segrt::HostLibrary>(m, "HostLibrary")
      .def(py::init<const std::string &>(), py::arg("path"))
      .def("call", &segrt::HostLibrary::call, py::arg("name"),
           py::arg("pointers"), py::arg("num_rows"), py::arg("num_segments"),
           py::arg("begin"), py::arg("end"),
           py::call_guard<py::gil_scoped_release>(),
           "Run work items [begin, end) of a host kernel.");

  py::class_<segrt::CudaModule>(m, "CudaModule")
      .def(py::init<int, const std::string &>(), py::arg("device"),
           py::arg("ptx"))
      .def("launch", &segrt::CudaModule::launch, py::arg("name"),
           py::arg("grid"), py::arg("block"), py::arg("stream"),
           py::arg("pointers"), py::arg("sizes"),
           "Launch a kernel on a stream without synchronizing.")
      .def_property_readonly("device", &segrt::CudaModule::device);
}
