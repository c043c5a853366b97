//===- Host.h - loading and calling host kernels ----------------*- C++ -*-===//
#ifndef SEGRT_HOST_H
#define SEGRT_HOST_H

#include "segrt/IndexCheck.h"

#include <cstdint>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

namespace segrt {

/// What the range [begin, end) of a host kernel call counts: segments, or
/// rows (kernels that only map rows; see the manifest's host.range).
enum class HostRange { Segments, Rows };

/// Below this many rows, a parallel call runs on the calling thread:
/// launching workers costs more than it saves (docs/benchmarks.md, "Host
/// code-generation choices").
int64_t parallelMinRows();

/// How two tiles' partial totals of one accumulator combine (manifest
/// `host.split.combine`): a sum adds, a max or min keeps the larger or
/// smaller, NaN winning (as the kernels' `maximumf`/`minimumf` do).
enum class TotalCombine : uint8_t { Add, Max, Min };

/// Reads the manifest's names, "add", "max" or "min" (throws on others).
std::vector<TotalCombine>
parseTotalCombines(const std::vector<std::string> &names);

/// The entry points of a segment kernel for long segments (manifest
/// `host.split`): a tile kernel running one pass of one segment on a range
/// of its rows (raw totals out, row outputs stored), a finish kernel
/// computing a segment's outputs from the totals of all passes, the number
/// of totals of each pass, how each total combines, and their element type.
/// With them, segments of at least kSplitMinRows rows are cut into tiles of
/// kTileRows rows spread over the threads, pass by pass, and each pass's
/// totals combined in tile order: the same work and order whatever the
/// thread count, so results still do not depend on it.
struct HostSplitKernel {
  void *rows = nullptr;
  void *finish = nullptr;
  std::vector<int64_t> passTotals;
  /// One per total, in total order (all passes).
  std::vector<TotalCombine> combine;
  /// Totals are f64 (else f32): the manifest's `host.split.totals_dtype`.
  bool isDouble = false;

  int64_t numTotals() const {
    int64_t total = 0;
    for (int64_t count : passTotals)
      total += count;
    return total;
  }

  static constexpr int64_t kSplitMinRows = 1 << 17;
  static constexpr int64_t kTileRows = 1 << 15;
};

/// The host half of the op library: a shared object whose kernels take the
/// segops host ABI, `(ptr..., i64 N, i64 S, i64 begin, i64 end)`, computing
/// segments [begin, end).
class HostLibrary {
public:
  explicit HostLibrary(const std::string &path);
  ~HostLibrary();
  HostLibrary(const HostLibrary &) = delete;
  HostLibrary &operator=(const HostLibrary &) = delete;

  /// Runs segments [begin, end) of kernel `name` on the calling thread.
  void call(const std::string &name, const std::vector<uintptr_t> &pointers,
            int64_t numRows, int64_t numSegments, int64_t begin, int64_t end);

  /// Runs every segment of kernel `name` on up to `numThreads` threads, each
  /// taking a contiguous range of segments holding about the same number of
  /// rows (found from the sorted int32 index `idx`). Each segment is computed
  /// by one thread, so results do not depend on the split.
  void callParallel(const std::string &name,
                    const std::vector<uintptr_t> &pointers, const int32_t *idx,
                    int64_t numRows, int64_t numSegments, int numThreads,
                    HostRange range = HostRange::Segments,
                    const HostSplitKernel *split = nullptr);

  /// Largest number of pointer parameters a host kernel may take.
  static constexpr size_t kMaxPointers = 64;

  /// The address of kernel `name` (throws if absent).
  void *lookup(const std::string &name);

private:
  void *handle = nullptr;
  std::string path;
  std::mutex symbolsMutex;
  std::unordered_map<std::string, void *> symbols;
};

/// Runs segments [begin, end) of the host kernel at `symbol` (see
/// HostLibrary::lookup) on the calling thread, from row `firstRow` (the
/// first row of segment `begin`, if known; -1: the kernel searches for it).
/// Returns the kernel's result: -1 if it saw idx break the contract (values
/// in [0, S), never descending) in the rows it looked at; otherwise, for
/// segment kernels, the row after the rows of its segments (row maps,
/// HostRange::Rows, compute rows [begin, end) in any order, check that
/// every value is in [0, S), and return 0).
int64_t callHostKernel(void *symbol, const std::vector<uintptr_t> &pointers,
                       int64_t numRows, int64_t numSegments, int64_t begin,
                       int64_t end, int64_t firstRow = -1);

/// Runs every segment (or row) of the host kernel at `symbol` on up to
/// `numThreads` threads (see HostLibrary::callParallel); row ranges are
/// split evenly.
void callHostKernelParallel(void *symbol,
                            const std::vector<uintptr_t> &pointers,
                            const int32_t *idx, int64_t numRows,
                            int64_t numSegments, int numThreads,
                            HostRange range = HostRange::Segments,
                            const HostSplitKernel *split = nullptr);

/// Checks an int32 index (every value in [0, numSegments); for segment
/// kernels also no descent) and runs every segment (or row) of the host
/// kernel at `symbol`, in one pass over idx: the kernels check the rows they
/// compute, and the runtime that consecutive calls' rows meet and cover
/// [0, N) (and, for long segments split into tiles, that every tile's rows
/// hold its segment). Only if something was amiss is idx checked again:
/// the first row out of range is returned if there is one, else (segment
/// kernels) the first row that descends; the kernel's outputs are then
/// unspecified (but every access stayed in bounds: kernels clamp whatever
/// idx holds). Row maps accept any order.
IndexCheck checkIndexAndCallHostKernel(void *symbol,
                                       const std::vector<uintptr_t> &pointers,
                                       const int32_t *idx, int64_t numRows,
                                       int64_t numSegments, int numThreads,
                                       HostRange range = HostRange::Segments,
                                       const HostSplitKernel *split = nullptr);

/// How many times checkIndexAndCallHostKernel had to check idx again after
/// its kernels (a problem seen, or calls whose rows did not meet) since the
/// process started. Valid indices never should: tests watch this count.
int64_t indexRechecks();

} // namespace segrt

#endif // SEGRT_HOST_H
