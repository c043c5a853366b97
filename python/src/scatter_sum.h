//===- scatter_sum.h - sums of rows by an unsorted index --------*- C++ -*-===//
//
// A per-segment sum of rows whose index is unsorted (a scatter by the
// senders of a neighbour list: the adjoint of a gather by them), without
// sorting the rows. The rows are cut into a fixed number of chunks, chosen
// from the sizes alone; each chunk adds its rows, in row order, into a
// table of its own, and the tables are added in chunk order. The grouping
// never depends on the thread count, so results are bitwise the same on
// any number of threads. It pays where the table stays in cache: the rows
// are read once, in order, where the transposed order reads them at random.
//
//===----------------------------------------------------------------------===//

#ifndef SEGOPS_PYTHON_SCATTER_SUM_H
#define SEGOPS_PYTHON_SCATTER_SUM_H

#include <ATen/ATen.h>

#include <cstdint>

namespace segops_torch {

/// Whether sums of `numRows` rows of `width` elements of `elementSize`
/// bytes into `numSegments` segments run by chunks (else on the sorted
/// rows): the tables fit in a core's cache and the rows outnumber them.
bool sumsByChunks(int64_t numRows, int64_t numSegments, int64_t width,
                  int64_t elementSize);

/// out[s] = sum of rows[r] with idx[r] == s, rows (N, *) float or double,
/// contiguous; out (S, *) of the same dtype, contiguous, overwritten. Returns
/// false, leaving out unspecified, if a value of idx is outside [0, S).
bool sumRowsByChunks(const at::Tensor &rows, const int32_t *idx,
                     int64_t numSegments, at::Tensor &out);

} // namespace segops_torch

#endif // SEGOPS_PYTHON_SCATTER_SUM_H
