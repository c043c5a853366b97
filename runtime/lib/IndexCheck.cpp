//===- IndexCheck.cpp - validating a segment index on the host ------------===//

#include "segrt/IndexCheck.h"
#include "segrt/Parallel.h"

#include <algorithm>
#include <vector>

using namespace segrt;

/// Rows per block: each block is tested branch-free (so the compiler
/// vectorizes it) and rescanned row by row only if it holds a problem.
static constexpr int64_t kBlockRows = 2048;

/// Below this many rows a second thread costs more than it saves.
static constexpr int64_t kParallelMinRows = 1 << 18;

/// The first problem in rows [begin, end), where rows [begin, end) follow
/// `previous` (the value of row begin - 1, or 0).
template <typename T>
static IndexCheck scanRows(const T *idx, int64_t begin, int64_t end,
                           int64_t previous, int64_t numSegments) {
  for (int64_t row = begin; row < end; ++row) {
    int64_t value = idx[row];
    if (value < 0 || value >= numSegments)
      return {IndexProblem::OutOfRange, row};
    if (value < previous)
      return {IndexProblem::Unsorted, row};
    previous = value;
  }
  return {};
}

template <typename T>
static IndexCheck checkRange(const T *idx, int64_t begin, int64_t end,
                             int64_t numSegments) {
  // Comparisons in T: an int64 value beyond int32 must not be truncated.
  const T limit = static_cast<T>(numSegments);
  for (int64_t blockBegin = begin; blockBegin < end; blockBegin += kBlockRows) {
    int64_t blockEnd = std::min(end, blockBegin + kBlockRows);
    T previous = blockBegin > 0 ? idx[blockBegin - 1] : T(0);
    int bad = idx[blockBegin] < previous;
    for (int64_t row = blockBegin; row < blockEnd; ++row)
      bad |= (idx[row] < 0) | (idx[row] >= limit);
    for (int64_t row = blockBegin + 1; row < blockEnd; ++row)
      bad |= idx[row] < idx[row - 1];
    if (bad)
      return scanRows(idx, blockBegin, blockEnd,
                      blockBegin > 0 ? std::clamp<int64_t>(idx[blockBegin - 1],
                                                           0, numSegments)
                                     : 0,
                      numSegments);
  }
  return {};
}

template <typename T>
static IndexCheck check(const T *idx, int64_t numRows, int64_t numSegments,
                        int numThreads) {
  numThreads = numRows >= kParallelMinRows ? std::max(1, numThreads) : 1;
  std::vector<IndexCheck> results(numThreads);
  runWorkers(numThreads, [&](int k) {
    results[k] = checkRange(idx, numRows * k / numThreads,
                            numRows * (k + 1) / numThreads, numSegments);
  });
  // The first problem in row order.
  for (const IndexCheck &result : results)
    if (result.problem != IndexProblem::None)
      return result;
  return {};
}

IndexCheck segrt::checkIndexRows(const int32_t *idx, int64_t begin, int64_t end,
                                 int64_t numSegments) {
  return checkRange(idx, begin, end, numSegments);
}

IndexCheck segrt::checkIndex(const void *idx, bool is64Bit, int64_t numRows,
                             int64_t numSegments, int numThreads) {
  if (is64Bit)
    return check(static_cast<const int64_t *>(idx), numRows, numSegments,
                 numThreads);
  return check(static_cast<const int32_t *>(idx), numRows, numSegments,
               numThreads);
}
