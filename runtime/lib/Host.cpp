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
// i64s; the pointer count picks the function type to call through.
template <size_t... Is>
void callWithPointers(void *symbol, const std::vector<uintptr_t> &pointers,
                      I64 n, I64 s, I64 begin, I64 end,
                      std::index_sequence<Is...>) {
  using Fn = void (*)(decltype((void)Is, P())..., I64, I64, I64, I64);
  reinterpret_cast<Fn>(symbol)(reinterpret_cast<P>(pointers[Is])..., n, s,
                               begin, end);
}

template <size_t Count>
bool callIfCount(void *symbol, const std::vector<uintptr_t> &pointers, I64 n,
                 I64 s, I64 begin, I64 end) {
  if (pointers.size() != Count)
    return false;
  callWithPointers(symbol, pointers, n, s, begin, end,
                   std::make_index_sequence<Count>());
  return true;
}

template <size_t... Counts>
bool dispatch(void *symbol, const std::vector<uintptr_t> &pointers, I64 n,
              I64 s, I64 begin, I64 end, std::index_sequence<Counts...>) {
  return (callIfCount<Counts + 1>(symbol, pointers, n, s, begin, end) || ...);
}
} // namespace

void segrt::callHostKernel(void *symbol, const std::vector<uintptr_t> &pointers,
                           int64_t numRows, int64_t numSegments,
                           int64_t begin, int64_t end) {
  if (pointers.empty() || pointers.size() > HostLibrary::kMaxPointers)
    throw Error("segrt: host kernels take 1 to " +
                std::to_string(HostLibrary::kMaxPointers) +
                " pointers, got " + std::to_string(pointers.size()));
  dispatch(symbol, pointers, numRows, numSegments, begin, end,
           std::make_index_sequence<HostLibrary::kMaxPointers>());
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

void segrt::callHostKernelParallel(void *symbol,
                                   const std::vector<uintptr_t> &pointers,
                                   const int32_t *idx, int64_t numRows,
                                   int64_t numSegments, int numThreads,
                                   HostRange range) {
  numThreads = std::max(1, numThreads);
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
                               HostRange range) {
  callHostKernelParallel(lookup(name), pointers, idx, numRows, numSegments,
                         numThreads, range);
}

/// Rows of idx checked at a time before the kernel runs their segments: 512
/// KiB of int32, which stays in a core's L2 or the shared L3 until read again.
static constexpr int64_t kCheckBlockRows = 1 << 17;

IndexCheck segrt::checkIndexAndCallHostKernel(
    void *symbol, const std::vector<uintptr_t> &pointers, const int32_t *idx,
    int64_t numRows, int64_t numSegments, int numThreads, HostRange range) {
  numThreads = std::max(1, numThreads);
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
  std::vector<IndexCheck> problems(numThreads);
  runWorkers(numThreads, [&](int k) {
    int64_t rowBegin = numRows * k / numThreads;
    int64_t rowEnd = numRows * (k + 1) / numThreads;
    int64_t done = range == HostRange::Rows ? 0 : segmentBound(rowBegin);
    for (int64_t row = rowBegin; row < rowEnd; row += kCheckBlockRows) {
      int64_t blockEnd = std::min(rowEnd, row + kCheckBlockRows);
      IndexCheck check = checkIndexRows(idx, row, blockEnd, numSegments);
      if (check.problem != IndexProblem::None) {
        problems[k] = check;
        return;
      }
      if (range == HostRange::Rows) {
        callHostKernel(symbol, pointers, numRows, numSegments, row, blockEnd);
        continue;
      }
      // Bounds from a checked index never descend.
      int64_t until = segmentBound(blockEnd);
      if (done < until || (blockEnd == numRows && done <= until))
        callHostKernel(symbol, pointers, numRows, numSegments, done, until);
      done = until;
    }
  });
  for (const IndexCheck &problem : problems)
    if (problem.problem != IndexProblem::None)
      return problem;
  return {};
}
