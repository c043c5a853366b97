//===- scatter_sum.cpp - sums of rows by an unsorted index ----------------===//

#include "scatter_sum.h"

#include <ATen/Parallel.h>

#include <algorithm>
#include <atomic>
#include <memory>

namespace segops_torch {
namespace {

// A chunk's table is at most this large (measured in docs/benchmarks.md:
// up to 8 MiB, adding rows into it beats reading them in sender order).
constexpr int64_t kMaxTableBytes = int64_t(1) << 23;
// At most this many chunks (tables to clear and add), so at most this many
// threads work on one sum.
constexpr int64_t kMaxChunks = 16;
// A chunk has at least this many rows, and four times as many as the table
// has: adding the rows, not clearing and adding the tables, is the work.
constexpr int64_t kMinChunkRows = 16384;

int64_t numChunks(int64_t numRows, int64_t numSegments) {
  int64_t chunkRows = std::max(kMinChunkRows, 4 * numSegments);
  return std::clamp<int64_t>(numRows / chunkRows, 1, kMaxChunks);
}

/// Adds rows [begin, end) into `table` (S rows of Width, or of `width`
/// elements when Width is 0); false at a value of idx outside [0, S).
template <typename T, int64_t Width>
bool addRows(const T *rows, const int32_t *idx, int64_t begin, int64_t end,
             int64_t numSegments, int64_t width, T *table) {
  if constexpr (Width != 0)
    width = Width;
  for (int64_t r = begin; r < end; ++r) {
    int64_t segment = idx[r];
    if (segment < 0 || segment >= numSegments)
      return false;
    T *to = table + segment * width;
    const T *from = rows + r * width;
    for (int64_t c = 0; c < width; ++c)
      to[c] += from[c];
  }
  return true;
}

template <typename T>
bool sumByChunks(const T *rows, const int32_t *idx, int64_t numRows,
                 int64_t numSegments, int64_t width, T *out) {
  int64_t chunks = numChunks(numRows, numSegments);
  int64_t tableSize = numSegments * width;
  // Chunk 0 adds into out itself; the others into tables of their own,
  // each cleared by the thread that fills it.
  std::unique_ptr<T[]> tables(new T[(chunks - 1) * tableSize]);
  std::atomic<bool> inRange{true};
  at::parallel_for(0, chunks, 1, [&](int64_t first, int64_t last) {
    for (int64_t chunk = first; chunk < last; ++chunk) {
      int64_t begin = numRows * chunk / chunks;
      int64_t end = numRows * (chunk + 1) / chunks;
      T *table = chunk == 0 ? out : tables.get() + (chunk - 1) * tableSize;
      std::fill(table, table + tableSize, T(0));
      bool ok = width == 1   ? addRows<T, 1>(rows, idx, begin, end,
                                             numSegments, width, table)
                : width == 3 ? addRows<T, 3>(rows, idx, begin, end,
                                             numSegments, width, table)
                             : addRows<T, 0>(rows, idx, begin, end,
                                             numSegments, width, table);
      if (!ok)
        inRange.store(false, std::memory_order_relaxed);
    }
  });
  if (!inRange.load())
    return false;
  // The tables in chunk order, element by element: the same grouping
  // whichever thread adds which elements.
  at::parallel_for(0, tableSize, 4096, [&](int64_t begin, int64_t end) {
    for (int64_t chunk = 1; chunk < chunks; ++chunk) {
      const T *table = tables.get() + (chunk - 1) * tableSize;
      for (int64_t e = begin; e < end; ++e)
        out[e] += table[e];
    }
  });
  return true;
}

} // namespace

bool sumsByChunks(int64_t numRows, int64_t numSegments, int64_t width,
                  int64_t elementSize) {
  // Divided, not multiplied: a huge S must not wrap around.
  return numRows > 0 && width > 0 &&
         numSegments <= kMaxTableBytes / (width * elementSize);
}

bool sumRowsByChunks(const at::Tensor &rows, const int32_t *idx,
                     int64_t numSegments, at::Tensor &out) {
  int64_t numRows = rows.size(0);
  int64_t width = numRows ? rows.numel() / numRows : 0;
  if (rows.scalar_type() == at::kDouble)
    return sumByChunks(rows.const_data_ptr<double>(), idx, numRows,
                       numSegments, width, out.data_ptr<double>());
  return sumByChunks(rows.const_data_ptr<float>(), idx, numRows, numSegments,
                     width, out.data_ptr<float>());
}

} // namespace segops_torch
