//===- IndexCheck.cpp - validating a segment index on the host ------------===//

#include "segrt/IndexCheck.h"

using namespace segrt;

template <typename T>
static IndexCheck check(const T *idx, int64_t numRows, int64_t numSegments) {
  int64_t previous = 0;
  for (int64_t row = 0; row < numRows; ++row) {
    int64_t value = idx[row];
    if (value < 0 || value >= numSegments)
      return {IndexProblem::OutOfRange, row};
    if (value < previous)
      return {IndexProblem::Unsorted, row};
    previous = value;
  }
  return {};
}

IndexCheck segrt::checkIndex(const void *idx, bool is64Bit, int64_t numRows,
                             int64_t numSegments) {
  if (is64Bit)
    return check(static_cast<const int64_t *>(idx), numRows, numSegments);
  return check(static_cast<const int32_t *>(idx), numRows, numSegments);
}
