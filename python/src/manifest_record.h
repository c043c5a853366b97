//===- manifest_record.h - the op library manifest as typed records -*- C++ -*-===//
//
// The one reader of the manifest lib/Target/Manifest.cpp writes: the op
// library's manifest.json and the manifests of kernels compiled at run time
// (segops.jit programs, row widths the library lacks) alike. Both
// extensions read through it: _segrt binds these records for Python, and
// the operator library (libsegops_ops.so) makes its variants from them.
// Nothing here needs PyTorch or Python.
//
//===----------------------------------------------------------------------===//

#ifndef SEGOPS_PYTHON_MANIFEST_RECORD_H
#define SEGOPS_PYTHON_MANIFEST_RECORD_H

#include "segrt/GpuLauncher.h"

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace segops_python {

/// A buffer extent that is not a number: N rows, S segments, or any number
/// of rows (a table read at random rows).
constexpr int64_t kRows = -1, kSegments = -2, kAnyRows = -3;

/// One pointer parameter of a kernel.
struct BufferRecord {
  std::string name;
  bool isOutput = false;
  bool isIndex = false; // the segment index, "idx"
  bool isRead = true;   // whether the kernel reads it (inputs)
  std::string dtype;    // "f32", "f64" or "i32"
  /// Per dimension: an extent, or kRows, kSegments or kAnyRows.
  std::vector<int64_t> shape;
  /// A seg.scatter_sum output: its N rows are summed by the second index at
  /// buffer `sumsBy` into as many rows as buffer `intoRowsOf` has; -1 else.
  int sumsBy = -1;
  int intoRowsOf = -1;
  /// An input that is the level below's output #savedResult, which the
  /// caller saved (a level derived on saved results); -1 else.
  int savedResult = -1;

  /// The shape for a call of `numRows` rows and `numSegments` segments
  /// (kAnyRows: unknown, an error).
  std::vector<int64_t> extents(int64_t numRows, int64_t numSegments) const;
  /// The manifest's symbols: "N", "S", "?" or the number.
  std::vector<std::string> symbols() const;
};

/// A segment program's host entry points for long segments: the tile and
/// finish kernels, the totals of each pass, how each total combines over
/// tiles ("add", "max", "min") and whether totals are doubles.
struct HostSplitRecord {
  std::string rowsSymbol;
  std::string finishSymbol;
  std::vector<int64_t> passTotals;
  std::vector<std::string> combine;
  bool totalsDouble = false;
};

/// One kernel: its buffers, host entry points and GPU launch rule.
struct KernelRecord {
  std::string name;
  std::string dtype;
  std::vector<BufferRecord> buffers;
  /// The seg ops it computes, and its passes over each segment's rows.
  std::vector<std::string> ops;
  int64_t passes = 1;
  std::string hostSymbol;
  /// A host call computes rows [begin, end), not segments.
  bool hostRows = false;
  std::optional<HostSplitRecord> split;
  /// The buffer whose rows the kernel only sums by idx, or -1.
  int sumsRowsOf = -1;
  /// seg.gather_rows: (second index, table) buffer positions.
  std::vector<std::pair<int, int>> gathers;
  segrt::GpuProgram gpu;
  /// This entry's JSON text: how a kernel compiled at run time crosses to
  /// the operator library (which reads it with parseKernelRecord).
  std::string text;

  size_t numInputs() const;
  size_t numOutputs() const;
  /// The position of idx among the buffers.
  int idxPosition() const;
  /// The float arguments (inputs other than idx) before buffer `position`.
  int floatArgumentsBefore(size_t position) const;
  /// The GPU symbols: the kernel's and its long-segment kernels'.
  std::vector<std::string> gpuSymbols() const;
};

/// One host build of the op library: the LLVM CPU it targets and its
/// shared library (a file name beside the manifest).
struct HostBuildRecord {
  std::string cpu;
  std::string library;
  int64_t vectorBits = 0; // the widest vectors it uses
};

/// A whole manifest.
struct ManifestRecord {
  std::vector<HostBuildRecord> hostBuilds; // best first
  std::map<std::string, std::string> ptx;  // "sm_90" -> file name
  std::vector<KernelRecord> kernels;

  /// The kernel named `name`, or null.
  const KernelRecord *kernel(std::string_view name) const;
};

/// The host build this process runs: the one SEGOPS_HOST_CPU names (an LLVM
/// CPU such as x86-64-v2, e.g. to compare builds), else the first (best) one
/// this CPU supports. Builds differ in vector width, so float sums may
/// differ in their last bits between them. Throws std::invalid_argument for
/// a SEGOPS_HOST_CPU it cannot honour, std::runtime_error if this CPU runs
/// no build.
const HostBuildRecord &chooseHostBuild(const ManifestRecord &manifest);

/// Parses a manifest's text; throws std::invalid_argument if it is not a
/// manifest of this version (segrt/OpLibrary.h) or is malformed.
ManifestRecord parseManifest(std::string_view text);
/// Reads the manifest at `path` (std::runtime_error if it cannot).
ManifestRecord readManifest(const std::string &path);
/// Parses one kernel entry's JSON text (KernelRecord::text).
KernelRecord parseKernelRecord(std::string_view text);

/// `compiled` (a manifest the compiler returned for kernels compiled at run
/// time) with the host builds and PTX files that hold its kernels (files in
/// the manifest's directory): a manifest like the op library's, for one
/// program level that segops.export ships. Throws std::invalid_argument if
/// `compiled` is not a manifest of this version.
std::string packageManifest(std::string_view compiled,
                            const std::vector<HostBuildRecord> &hostBuilds,
                            const std::map<std::string, std::string> &ptx);

} // namespace segops_python

#endif // SEGOPS_PYTHON_MANIFEST_RECORD_H
