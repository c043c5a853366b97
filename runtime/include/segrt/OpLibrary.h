//===- OpLibrary.h - facts about the op library every reader shares -*- C++ -*-===//
//
// The op library's manifest format and version (lib/Target/Manifest.cpp
// writes it, manifest_record.cpp reads it), how its derivative levels are
// named and how many it has: the compiler, the operator library and (via
// _segrt) the Python package read them here. No MLIR dependency.
//
//===----------------------------------------------------------------------===//

#ifndef SEGRT_OPLIBRARY_H
#define SEGRT_OPLIBRARY_H

namespace segrt {

/// The manifest's `format` and `version` fields.
inline constexpr const char *kManifestFormat = "segops-op-library";
inline constexpr int kManifestVersion = 11;

/// What seg-derive appends to a function's name per derivative level:
/// segmented_sum_f32_w3_grad_grad is level 2 of segmented_sum_f32_w3.
inline constexpr const char *kGradientSuffix = "_grad";

/// The highest derivative level the op library ships (oplib/CMakeLists.txt
/// reads it from here for seg-derive's order) and the Python package
/// defines hooks for.
inline constexpr int kMaxDerivativeOrder = 3;

} // namespace segrt

#endif // SEGRT_OPLIBRARY_H
