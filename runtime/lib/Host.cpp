//===- Host.cpp - loading and calling host kernels ------------------------===//

#include "segrt/Host.h"
#include "segrt/Error.h"
#include "segrt/Parallel.h"

#include <algorithm>
#include <dlfcn.h>
#include <utility>

using namespace segrt;

HostLibrary::HostLibrary(const std::string &path) : path(path) {
  handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle)
    throw Error("segrt: cannot load host kernel library '" + path +
                "': " + dlerror());
}

HostLibrary::~HostLibrary() {
  if (handle)
    dlclose(handle);
}

void *HostLibrary::lookup(const std::string &name) {
  std::lock_guard<std::mutex> lock(symbolsMutex);
  auto it = symbols.find(name);
  if (it != symbols.end())
    return it->second;
  void *symbol = dlsym(handle, name.c_str());
  if (!symbol)
    throw Error("segrt: host kernel '" + name + "' is not in '" + path + "'");
  symbols.emplace(name, symbol);
  return symbol;
}

namespace {
using I64 = int64_t;
using P = void *;
// Kernels are plain C functions of their pointer parameters followed by four
// i64s, returning an i32 (1: idx broke the contract in the rows computed);
// the pointer count picks the function type to call through.
template <size_t... Is>
int32_t callWithPointers(void *symbol, const std::vector<uintptr_t> &pointers,
                         I64 n, I64 s, I64 begin, I64 end,
                         std::index_sequence<Is...>) {
  using Fn = int32_t (*)(decltype((void)Is, P())..., I64, I64, I64, I64);
  return reinterpret_cast<Fn>(symbol)(reinterpret_cast<P>(pointers[Is])..., n,
                                      s, begin, end);
}

template <size_t Count>
bool callIfCount(void *symbol, const std::vector<uintptr_t> &pointers, I64 n,
                 I64 s, I64 begin, I64 end, int32_t &result) {
  if (pointers.size() != Count)
    return false;
  result = callWithPointers(symbol, pointers, n, s, begin, end,
                            std::make_index_sequence<Count>());
  return true;
}

// Split kernels take one more pointer after the four i64s.
template <size_t... Is>
void callWithPointersAndTotals(void *symbol,
                               const std::vector<uintptr_t> &pointers, I64 n,
                               I64 s, I64 a, I64 b, void *totals,
                               std::index_sequence<Is...>) {
  using Fn = void (*)(decltype((void)Is, P())..., I64, I64, I64, I64, P);
  reinterpret_cast<Fn>(symbol)(reinterpret_cast<P>(pointers[Is])..., n, s, a, b,
                               totals);
}

template <size_t Count>
bool callSplitIfCount(void *symbol, const std::vector<uintptr_t> &pointers,
                      I64 n, I64 s, I64 a, I64 b, void *totals) {
  if (pointers.size() != Count)
    return false;
  callWithPointersAndTotals(symbol, pointers, n, s, a, b, totals,
                            std::make_index_sequence<Count>());
  return true;
}

template <size_t... Counts>
bool dispatchSplit(void *symbol, const std::vector<uintptr_t> &pointers, I64 n,
                   I64 s, I64 a, I64 b, void *totals,
                   std::index_sequence<Counts...>) {
  return (callSplitIfCount<Counts + 1>(symbol, pointers, n, s, a, b, totals) ||
          ...);
}

template <size_t... Counts>
int32_t dispatch(void *symbol, const std::vector<uintptr_t> &pointers, I64 n,
                 I64 s, I64 begin, I64 end, std::index_sequence<Counts...>) {
  int32_t result = 0;
  (callIfCount<Counts + 1>(symbol, pointers, n, s, begin, end, result) || ...);
  return result;
}
} // namespace

bool segrt::callHostKernel(void *symbol, const std::vector<uintptr_t> &pointers,
                           int64_t numRows, int64_t numSegments, int64_t begin,
                           int64_t end) {
  if (pointers.empty() || pointers.size() > HostLibrary::kMaxPointers)
    throw Error("segrt: host kernels take 1 to " +
                std::to_string(HostLibrary::kMaxPointers) + " pointers, got " +
                std::to_string(pointers.size()));
  return dispatch(symbol, pointers, numRows, numSegments, begin, end,
                  std::make_index_sequence<HostLibrary::kMaxPointers>()) != 0;
}

void HostLibrary::call(const std::string &name,
                       const std::vector<uintptr_t> &pointers, int64_t numRows,
                       int64_t numSegments, int64_t begin, int64_t end) {
  callHostKernel(lookup(name), pointers, numRows, numSegments, begin, end);
}

/// The segment holding row `row` of a sorted index, clamped to [0, S].
static int64_t segmentAtRow(const int32_t *idx, int64_t row,
                            int64_t numSegments) {
  return std::clamp<int64_t>(idx[row], 0, numSegments);
}

namespace {
/// A segment long enough to be split into tiles.
struct HeavySegment {
  int64_t segment, rowBegin, rowEnd;
};

/// First row in [lo, hi) whose segment is >= `segment` (any idx content:
/// the answer stays in [lo, hi]).
int64_t lowerBound(const int32_t *idx, int64_t lo, int64_t hi,
                   int64_t segment) {
  while (lo < hi) {
    int64_t mid = lo + (hi - lo) / 2;
    if (idx[mid] < segment)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo;
}

/// The segments with at least kSplitMinRows rows. Each holds a row that is
/// a multiple of kSplitMinRows, so probing those rows finds them all.
std::vector<HeavySegment> findHeavySegments(const int32_t *idx, int64_t numRows,
                                            int64_t numSegments) {
  constexpr int64_t minRows = HostSplitKernel::kSplitMinRows;
  std::vector<HeavySegment> heavy;
  for (int64_t probe = 0; probe < numRows; probe += minRows) {
    int64_t segment = idx[probe];
    if (segment < 0 || segment >= numSegments ||
        (!heavy.empty() && heavy.back().segment == segment))
      continue;
    int64_t begin = lowerBound(idx, 0, numRows, segment);
    int64_t end = lowerBound(idx, begin, numRows, segment + 1);
    if (end - begin >= minRows)
      heavy.push_back({segment, begin, end});
  }
  return heavy;
}

/// Runs segments [begin, end) except the heavy ones (computed by tiles).
void callSegmentsExcept(void *symbol, const std::vector<uintptr_t> &pointers,
                        int64_t numRows, int64_t numSegments, int64_t begin,
                        int64_t end, const std::vector<HeavySegment> &heavy) {
  for (const HeavySegment &segment : heavy) {
    if (segment.segment < begin || segment.segment >= end)
      continue;
    if (begin < segment.segment)
      callHostKernel(symbol, pointers, numRows, numSegments, begin,
                     segment.segment);
    begin = segment.segment + 1;
  }
  if (begin < end)
    callHostKernel(symbol, pointers, numRows, numSegments, begin, end);
}

/// Tiles of the heavy segments over the threads, then each segment's
/// totals added in tile order and its outputs computed.
template <typename T>
void runHeavySegments(const HostSplitKernel &split,
                      const std::vector<uintptr_t> &pointers, int64_t numRows,
                      int64_t numSegments,
                      const std::vector<HeavySegment> &heavy, int numThreads) {
  struct Tile {
    size_t heavy;
    int64_t begin, end;
  };
  std::vector<Tile> tiles;
  for (size_t h = 0; h < heavy.size(); ++h)
    for (int64_t row = heavy[h].rowBegin; row < heavy[h].rowEnd;
         row += HostSplitKernel::kTileRows)
      tiles.push_back(
          {h, row,
           std::min(heavy[h].rowEnd, row + HostSplitKernel::kTileRows)});
  size_t numTotals = split.numTotals;
  std::vector<T> partials(tiles.size() * numTotals);
  runWorkers(numThreads, [&](int k) {
    for (size_t t = k; t < tiles.size(); t += numThreads)
      dispatchSplit(split.rows, pointers, numRows, numSegments, tiles[t].begin,
                    tiles[t].end, &partials[t * numTotals],
                    std::make_index_sequence<HostLibrary::kMaxPointers>());
  });
  std::vector<T> totals(numTotals);
  size_t t = 0;
  for (size_t h = 0; h < heavy.size(); ++h) {
    std::fill(totals.begin(), totals.end(), T(0));
    for (; t < tiles.size() && tiles[t].heavy == h; ++t)
      for (size_t c = 0; c < numTotals; ++c)
        totals[c] += partials[t * numTotals + c];
    dispatchSplit(split.finish, pointers, numRows, numSegments,
                  heavy[h].segment, heavy[h].rowEnd - heavy[h].rowBegin,
                  totals.data(),
                  std::make_index_sequence<HostLibrary::kMaxPointers>());
  }
}

void runHeavySegments(const HostSplitKernel &split,
                      const std::vector<uintptr_t> &pointers, int64_t numRows,
                      int64_t numSegments,
                      const std::vector<HeavySegment> &heavy, int numThreads) {
  if (split.isDouble)
    runHeavySegments<double>(split, pointers, numRows, numSegments, heavy,
                             numThreads);
  else
    runHeavySegments<float>(split, pointers, numRows, numSegments, heavy,
                            numThreads);
}
} // namespace

void segrt::callHostKernelParallel(void *symbol,
                                   const std::vector<uintptr_t> &pointers,
                                   const int32_t *idx, int64_t numRows,
                                   int64_t numSegments, int numThreads,
                                   HostRange range,
                                   const HostSplitKernel *split) {
  numThreads = numRows < kParallelMinRows ? 1 : std::max(1, numThreads);
  std::vector<HeavySegment> heavy;
  if (split && range == HostRange::Segments && numRows > 0)
    heavy = findHeavySegments(idx, numRows, numSegments);
  if (!heavy.empty()) {
    // Light segments as usual (threads by rows), then the heavy ones' tiles.
    std::vector<int64_t> bounds{0};
    for (int k = 1; k < numThreads; ++k)
      bounds.push_back(
          std::max(bounds.back(),
                   segmentAtRow(idx, numRows * k / numThreads, numSegments)));
    bounds.push_back(numSegments);
    runWorkers(numThreads, [&](int k) {
      callSegmentsExcept(symbol, pointers, numRows, numSegments, bounds[k],
                         bounds[k + 1], heavy);
    });
    runHeavySegments(*split, pointers, numRows, numSegments, heavy, numThreads);
    return;
  }
  if (range == HostRange::Rows) {
    runWorkers(numThreads, [&](int k) {
      callHostKernel(symbol, pointers, numRows, numSegments,
                     numRows * k / numThreads, numRows * (k + 1) / numThreads);
    });
    return;
  }
  if (numThreads == 1 || numRows < 2 || numSegments < 2) {
    callHostKernel(symbol, pointers, numRows, numSegments, 0, numSegments);
    return;
  }
  // Split points: the segment of rows N*k/T, so each range holds about N/T
  // rows (a segment larger than that makes one range larger).
  std::vector<int64_t> bounds{0};
  for (int k = 1; k < numThreads; ++k) {
    int64_t split = segmentAtRow(idx, numRows * k / numThreads, numSegments);
    bounds.push_back(std::max(bounds.back(), split));
  }
  bounds.push_back(numSegments);
  runWorkers(numThreads, [&](int k) {
    if (bounds[k] < bounds[k + 1])
      callHostKernel(symbol, pointers, numRows, numSegments, bounds[k],
                     bounds[k + 1]);
  });
}

void HostLibrary::callParallel(const std::string &name,
                               const std::vector<uintptr_t> &pointers,
                               const int32_t *idx, int64_t numRows,
                               int64_t numSegments, int numThreads,
                               HostRange range, const HostSplitKernel *split) {
  callHostKernelParallel(lookup(name), pointers, idx, numRows, numSegments,
                         numThreads, range, split);
}

/// Rows of idx checked at a time before the kernel runs their segments: 512
/// KiB of int32, which stays in a core's L2 or the shared L3 until read again.
static constexpr int64_t kCheckBlockRows = 1 << 17;

IndexCheck segrt::checkIndexAndCallHostKernel(
    void *symbol, const std::vector<uintptr_t> &pointers, const int32_t *idx,
    int64_t numRows, int64_t numSegments, int numThreads, HostRange range,
    const HostSplitKernel *split) {
  numThreads = numRows < kParallelMinRows ? 1 : std::max(1, numThreads);
  // Found on the unchecked index (memory-safe whatever it holds); their
  // tiles run only once the whole index has passed.
  std::vector<HeavySegment> heavy;
  if (split && range == HostRange::Segments && numRows > 0)
    heavy = findHeavySegments(idx, numRows, numSegments);
  if (numRows == 0) {
    if (range == HostRange::Segments)
      callHostKernel(symbol, pointers, numRows, numSegments, 0, numSegments);
    return {};
  }
  // Rows [rowBegin, rowEnd) of a thread or block run the segments from the
  // segment of rowBegin up to the segment of rowEnd (0 and S at the ends),
  // so every segment runs once, in the range holding its first row.
  auto segmentBound = [&](int64_t row) -> int64_t {
    if (row <= 0)
      return 0;
    if (row >= numRows)
      return numSegments;
    return segmentAtRow(idx, row, numSegments);
  };
  if (range == HostRange::Rows) {
    // Row maps check every row they compute (one pass over idx): threads
    // take rows evenly; only if one saw a problem is idx checked again, for
    // the first problem in row order.
    std::vector<char> sawProblem(numThreads, 0);
    runWorkers(numThreads, [&](int k) {
      sawProblem[k] = callHostKernel(symbol, pointers, numRows, numSegments,
                                     numRows * k / numThreads,
                                     numRows * (k + 1) / numThreads);
    });
    if (std::find(sawProblem.begin(), sawProblem.end(), 1) == sawProblem.end())
      return {};
    return checkIndex(idx, /*is64Bit=*/false, numRows, numSegments, numThreads);
  }
  std::vector<IndexCheck> problems(numThreads);
  runWorkers(numThreads, [&](int k) {
    int64_t rowBegin = numRows * k / numThreads;
    int64_t rowEnd = numRows * (k + 1) / numThreads;
    int64_t done = segmentBound(rowBegin);
    for (int64_t row = rowBegin; row < rowEnd; row += kCheckBlockRows) {
      int64_t blockEnd = std::min(rowEnd, row + kCheckBlockRows);
      IndexCheck check = checkIndexRows(idx, row, blockEnd, numSegments);
      if (check.problem != IndexProblem::None) {
        problems[k] = check;
        return;
      }
      // Bounds from a checked index never descend.
      int64_t until = segmentBound(blockEnd);
      if (!heavy.empty())
        callSegmentsExcept(symbol, pointers, numRows, numSegments, done, until,
                           heavy);
      else if (done < until || (blockEnd == numRows && done <= until))
        callHostKernel(symbol, pointers, numRows, numSegments, done, until);
      done = until;
    }
  });
  for (const IndexCheck &problem : problems)
    if (problem.problem != IndexProblem::None)
      return problem;
  if (!heavy.empty())
    runHeavySegments(*split, pointers, numRows, numSegments, heavy, numThreads);
  return {};
}
