//===- torch_ops_bindings.h - the Python side of the operator kernels -*- C++ -*-===//
//
// What the _torchops module adds to the operator library for the Python
// package: Python hooks as the levels' std::function hooks, and run-time
// compiled kernels (segops.jit programs, row widths the library lacks)
// described by their manifest entries and addresses.
//
//===----------------------------------------------------------------------===//

#ifndef SEGOPS_PYTHON_TORCH_OPS_BINDINGS_H
#define SEGOPS_PYTHON_TORCH_OPS_BINDINGS_H

#include "torch_ops.h"

#include <pybind11/pybind11.h>

#include <map>
#include <string>

namespace segops_torch {

/// A kernel compiled at run time as the Python package hands it over
/// (_torchops.CompiledKernel): its manifest record, read from the record's
/// text (KernelRecord.text) by the one reader, the addresses of its host
/// symbols, and its GPU code: PTX per device from `ptxSource(device)`, and,
/// simulated, an image of its simulated kernels.
struct CompiledKernel {
  segops_python::KernelRecord record;
  std::map<std::string, uintptr_t> addresses;
  pybind11::object ptxSource; // None: no CUDA code
  std::string simulatorImage; // "": not simulated
};

/// The operator variant of a kernel compiled at run time.
Variant variantOf(const CompiledKernel &kernel);

/// `validator(floats, idx, num_segments)` (floats a list) as a level's
/// validator hook (the callable is kept until exit).
OperatorLevel::Validator pythonValidator(pybind11::object validator);

void registerJitBindings(pybind11::module_ &m);

} // namespace segops_torch

#endif // SEGOPS_PYTHON_TORCH_OPS_BINDINGS_H
