//===- manifest_bindings.h - manifest records in Python -------*- C++ -*-===//
//
// _segrt's classes for the manifest records (manifest_record.h): how the
// Python package reads the op library's manifest and run-time compiled
// kernels' manifests, with no parser of its own.
//
//===----------------------------------------------------------------------===//

#ifndef SEGOPS_PYTHON_MANIFEST_BINDINGS_H
#define SEGOPS_PYTHON_MANIFEST_BINDINGS_H

#include <pybind11/pybind11.h>

namespace segops_python {

/// Adds Manifest, KernelRecord, BufferRecord, HostBuild and HostSplit, and
/// read_manifest, parse_manifest and parse_kernel, to module `m`.
void bindManifestRecords(pybind11::module_ &m);

} // namespace segops_python

#endif // SEGOPS_PYTHON_MANIFEST_BINDINGS_H
