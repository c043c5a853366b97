//===- index_cache.h - facts derived once per index tensor ------*- C++ -*-===//
//
// What the kernels derive from an index's content and may reuse while the
// content stays the same: an int64 index's int32 narrowing, the transposed
// order of an index (its rows in a stable sort by segment: what a reduction
// by an unsorted sender index, the adjoint of a gather by it, walks), and
// that an index is unsorted (a sum by it runs by chunks). A neighbour list
// is built once and used by every forward and backward of a training run:
// each fact is computed once for it.
//
//===----------------------------------------------------------------------===//

#ifndef SEGOPS_PYTHON_INDEX_CACHE_H
#define SEGOPS_PYTHON_INDEX_CACHE_H

#include <ATen/ATen.h>

#include <optional>

namespace segops_torch {

/// An index's rows in a stable sort by value: `sortedIdx` (int32, what the
/// segment kernels walk) and `order` (int64: row k of the sorted rows is row
/// order[k] of the index). Stable, so each segment keeps its rows' order and
/// sums over it are deterministic.
struct SortedRows {
  at::Tensor sortedIdx;
  at::Tensor order;
};

/// The sorted rows of `kernelIdx` (an int32 index, values in any order),
/// computed, and remembered for `idx` (the tensor the caller was given:
/// kernelIdx itself or the int64 index it narrows). A host index with the
/// content of one sorted before (a tensor made anew each call) reuses that
/// sort: found by a hash and a comparison of the values.
SortedRows sortRows(const at::Tensor &idx, const at::Tensor &kernelIdx);

/// The sorted rows remembered for `idx`, if its content has not changed
/// since (same storage, offset, length, dtype and version counter).
std::optional<SortedRows> cachedSortedRows(const at::Tensor &idx);

/// `idx`'s int32 narrowing checked against `numSegments`, if remembered for
/// its current content; else an undefined tensor.
at::Tensor cachedNarrowing(const at::Tensor &idx, int64_t numSegments);
/// Remembers `narrowed` as `idx`'s narrowing checked against `numSegments`.
void rememberNarrowing(const at::Tensor &idx, int64_t numSegments,
                       const at::Tensor &narrowed);

/// `idx`'s int32 kernel index, if remembered as unsorted with every value in
/// [0, numSegments) for its current content; else an undefined tensor.
at::Tensor cachedUnsortedIndex(const at::Tensor &idx, int64_t numSegments);
/// Remembers that `idx` (as the int32 `kernelIdx`) is unsorted, with every
/// value in [0, numSegments).
void rememberUnsortedIndex(const at::Tensor &idx, int64_t numSegments,
                           const at::Tensor &kernelIdx);

/// How many times an index was sorted (a cache miss), for tests.
int64_t indexSorts();
/// Forgets every entry (tests; segops.clear_index_cache()).
void clearIndexCache();

} // namespace segops_torch

#endif // SEGOPS_PYTHON_INDEX_CACHE_H
