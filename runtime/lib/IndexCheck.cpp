//===- IndexCheck.cpp - validating a segment index on the host ------------===//

#include "segrt/IndexCheck.h"
#include "segrt/Parallel.h"

#include <algorithm>
#include <limits>
#include <type_traits>
#include <vector>

using namespace segrt;

/// Rows per block: each block is tested branch-free (so the compiler
/// vectorizes it) and rescanned row by row only if it holds a problem.
static constexpr int64_t kBlockRows = 2048;

/// Below this many rows a second worker costs more than it saves (fewer
/// when the workers' threads run already, as in Host.cpp; the crossover is
/// docs/benchmarks.md, "Parallel calls").
static int64_t checkParallelMinRows() {
  return hasWorkerLauncher() ? int64_t(1) << 16 : int64_t(1) << 18;
}

/// The first problem in rows [begin, end), where rows [begin, end) follow
/// `previous` (the value of row begin - 1, or 0).
template <bool Sorted, typename T>
static IndexCheck scanRows(const T *idx, int64_t begin, int64_t end,
                           int64_t previous, int64_t numSegments) {
  for (int64_t row = begin; row < end; ++row) {
    int64_t value = idx[row];
    if (value < 0 || value >= numSegments)
      return {IndexProblem::OutOfRange, row};
    if (Sorted && value < previous)
      return {IndexProblem::Unsorted, row};
    previous = value;
  }
  return {};
}

/// The first problem in a block the branch-free pass found bad, row by row.
template <bool Sorted, typename T>
static IndexCheck rescanBlock(const T *idx, int64_t blockBegin,
                              int64_t blockEnd, int64_t numSegments) {
  int64_t previous =
      blockBegin > 0 ? std::clamp<int64_t>(idx[blockBegin - 1], 0, numSegments)
                     : 0;
  return scanRows<Sorted>(idx, blockBegin, blockEnd, previous, numSegments);
}

/// The body of checkRange: one branch-free pass per block (an unsigned
/// compare catches both v < 0 and v >= S; each row is compared with the row
/// before it), which the compiler vectorizes.
template <bool Sorted, typename T>
static inline __attribute__((always_inline)) IndexCheck
checkRangeBody(const T *idx, int64_t begin, int64_t end, int64_t numSegments) {
  using Unsigned = std::make_unsigned_t<T>;
  // Comparisons in T's width: an int64 value beyond int32 must not be
  // truncated. Negative values are >= 2^(bits-1) unsigned, so a limit of at
  // most that catches them whatever S is.
  const Unsigned limit = static_cast<Unsigned>(std::min<uint64_t>(
      static_cast<uint64_t>(numSegments),
      static_cast<uint64_t>(std::numeric_limits<T>::max()) + 1));
  for (int64_t blockBegin = begin; blockBegin < end; blockBegin += kBlockRows) {
    int64_t blockEnd = std::min(end, blockBegin + kBlockRows);
    T previous = blockBegin > 0 ? idx[blockBegin - 1] : T(0);
    int bad = (Sorted && idx[blockBegin] < previous) |
              (static_cast<Unsigned>(idx[blockBegin]) >= limit);
    for (int64_t row = blockBegin + 1; row < blockEnd; ++row)
      bad |= (static_cast<Unsigned>(idx[row]) >= limit) |
             (Sorted && idx[row] < idx[row - 1]);
    if (bad)
      return rescanBlock<Sorted>(idx, blockBegin, blockEnd, numSegments);
  }
  return {};
}

// The check reads idx from memory once per call and is as costly as a
// kernel: built for AVX2 as well where the compiler can dispatch on the
// running CPU (docs/benchmarks.md, "Host code-generation choices").
#if defined(__x86_64__) && defined(__has_attribute)
#if __has_attribute(target_clones)
#define SEGRT_CPU_CLONES __attribute__((target_clones("avx2", "default")))
#endif
#endif
#ifndef SEGRT_CPU_CLONES
#define SEGRT_CPU_CLONES
#endif

SEGRT_CPU_CLONES
static IndexCheck checkRange(const int32_t *idx, int64_t begin, int64_t end,
                             int64_t numSegments, bool sorted) {
  return sorted ? checkRangeBody<true>(idx, begin, end, numSegments)
                : checkRangeBody<false>(idx, begin, end, numSegments);
}

SEGRT_CPU_CLONES
static IndexCheck checkRange(const int64_t *idx, int64_t begin, int64_t end,
                             int64_t numSegments, bool sorted) {
  return sorted ? checkRangeBody<true>(idx, begin, end, numSegments)
                : checkRangeBody<false>(idx, begin, end, numSegments);
}

/// The body of narrowRange: each int64 value clamped to [-1, INT32_MAX] into
/// `out` (order kept; no value wraps into a valid segment) and, with Check,
/// the checks of checkRangeBody, in the same branch-free pass per block.
template <bool Check, bool Sorted>
static inline __attribute__((always_inline)) IndexCheck
narrowRangeBody(const int64_t *idx, int32_t *out, int64_t begin, int64_t end,
                int64_t numSegments) {
  const auto limit = static_cast<uint64_t>(numSegments);
  for (int64_t blockBegin = begin; blockBegin < end; blockBegin += kBlockRows) {
    int64_t blockEnd = std::min(end, blockBegin + kBlockRows);
    auto narrow = [](int64_t value) {
      return static_cast<int32_t>(
          std::clamp<int64_t>(value, -1, std::numeric_limits<int32_t>::max()));
    };
    int64_t previous = blockBegin > 0 ? idx[blockBegin - 1] : 0;
    int bad = Check && ((Sorted && idx[blockBegin] < previous) |
                        (static_cast<uint64_t>(idx[blockBegin]) >= limit));
    out[blockBegin] = narrow(idx[blockBegin]);
    for (int64_t row = blockBegin + 1; row < blockEnd; ++row) {
      out[row] = narrow(idx[row]);
      if (Check)
        bad |= (static_cast<uint64_t>(idx[row]) >= limit) |
               (Sorted && idx[row] < idx[row - 1]);
    }
    if (Check && bad)
      return rescanBlock<Sorted>(idx, blockBegin, blockEnd, numSegments);
  }
  return {};
}

SEGRT_CPU_CLONES
static IndexCheck narrowRange(const int64_t *idx, int32_t *out, int64_t begin,
                              int64_t end, int64_t numSegments, bool check,
                              bool sorted) {
  if (!check)
    return narrowRangeBody<false, false>(idx, out, begin, end, numSegments);
  return sorted
             ? narrowRangeBody<true, true>(idx, out, begin, end, numSegments)
             : narrowRangeBody<true, false>(idx, out, begin, end, numSegments);
}

/// Runs `checkRows(begin, end)` on equal row ranges over up to numThreads
/// threads (one below checkParallelMinRows() rows); the first problem in row
/// order.
template <typename CheckRows>
static IndexCheck firstProblem(int64_t numRows, int numThreads,
                               CheckRows checkRows) {
  numThreads = numRows >= checkParallelMinRows() ? std::max(1, numThreads) : 1;
  if (numThreads == 1) // no results to gather (nor to allocate, per call)
    return checkRows(0, numRows);
  std::vector<IndexCheck> results(numThreads);
  runWorkers(numThreads, [&](int k) {
    results[k] =
        checkRows(numRows * k / numThreads, numRows * (k + 1) / numThreads);
  });
  for (const IndexCheck &result : results)
    if (result.problem != IndexProblem::None)
      return result;
  return {};
}

IndexCheck segrt::checkIndex(const void *idx, bool is64Bit, int64_t numRows,
                             int64_t numSegments, int numThreads,
                             bool requireSorted) {
  return firstProblem(numRows, numThreads, [&](int64_t begin, int64_t end) {
    return is64Bit ? checkRange(static_cast<const int64_t *>(idx), begin, end,
                                numSegments, requireSorted)
                   : checkRange(static_cast<const int32_t *>(idx), begin, end,
                                numSegments, requireSorted);
  });
}

IndexCheck segrt::narrowIndex(const int64_t *idx, int32_t *out, int64_t numRows,
                              int64_t numSegments, bool check, int numThreads,
                              bool requireSorted) {
  return firstProblem(numRows, numThreads, [&](int64_t begin, int64_t end) {
    return narrowRange(idx, out, begin, end, numSegments, check,
                       requireSorted);
  });
}
