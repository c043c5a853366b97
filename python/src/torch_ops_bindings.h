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

namespace segops_torch {

/// A run-time compiled kernel's variant: `description` holds its manifest
/// `entry`, the `addresses` of its host symbols, optionally
/// `saved_for_backward` (per float argument) and, for its GPU code,
/// `ptx_source` (device -> PTX text) and `simulator_image`.
Variant parseVariantDescription(const pybind11::dict &description);

/// `validator(*floats, idx, num_segments)` as a level's validator hook (the
/// callable is kept until exit).
OperatorLevel::Validator pythonValidator(pybind11::object validator);

void registerJitBindings(pybind11::module_ &m);

} // namespace segops_torch

#endif // SEGOPS_PYTHON_TORCH_OPS_BINDINGS_H
