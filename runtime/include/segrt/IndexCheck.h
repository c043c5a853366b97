//===- IndexCheck.h - validating a segment index on the host ----*- C++ -*-===//
#ifndef SEGRT_INDEXCHECK_H
#define SEGRT_INDEXCHECK_H

#include <cstdint>

namespace segrt {

/// What is wrong with a segment index, if anything.
enum class IndexProblem { None, OutOfRange, Unsorted };

struct IndexCheck {
  IndexProblem problem = IndexProblem::None;
  /// The first offending row.
  int64_t row = -1;
};

/// One pass over a host index (int32 or int64 values): every value in
/// [0, numSegments) and, if `requireSorted`, non-decreasing. Large indices
/// are split across up to `numThreads` threads; the first offending row is
/// reported either way.
IndexCheck checkIndex(const void *idx, bool is64Bit, int64_t numRows,
                      int64_t numSegments, int numThreads = 1,
                      bool requireSorted = true);

/// An int64 host index as the kernels read it: each value clamped to
/// [-1, INT32_MAX] into `out` (so none wraps into a valid segment and order
/// is kept), with checkIndex's checks in the same pass if `check`. One read
/// of idx and one write of out, split like checkIndex.
IndexCheck narrowIndex(const int64_t *idx, int32_t *out, int64_t numRows,
                       int64_t numSegments, bool check, int numThreads = 1,
                       bool requireSorted = true);

} // namespace segrt

#endif // SEGRT_INDEXCHECK_H
