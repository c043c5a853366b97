//===- host_call.cpp - an operator call on the host kernels ---------------===//
//
// Runs a call's host kernel: idx narrowed and checked as the kernels read
// it; an unsorted index on its rows in a stable sort of them (remembered per
// index content), or, for a kernel that only sums rows, by chunks.
//
//===----------------------------------------------------------------------===//

#include "torch_ops.h"

#include "scatter_sum.h"
#include "segrt/Host.h"
#include "segrt/IndexCheck.h"

#include <ATen/Parallel.h>

#include <optional>

namespace segops_torch {

at::Tensor narrowHostIndex(const at::Tensor &idx, int64_t numSegments,
                           int numThreads) {
  int64_t numRows = idx.size(0);
  at::Tensor narrowed = emptyHostOutput({numRows}, at::kInt);
  if (numRows == 0)
    return narrowed;
  segrt::IndexCheck result = segrt::narrowIndex(
      idx.data_ptr<int64_t>(), narrowed.data_ptr<int32_t>(), numRows,
      numSegments, /*check=*/true, numThreads, /*requireSorted=*/false);
  return result.problem == segrt::IndexProblem::None ? narrowed : at::Tensor();
}

namespace {
/// Copies rows of `width` elements of type T: dst[r] = src[order[r]]
/// (gather) or dst[order[r]] = src[r] (scatter), across PyTorch's threads.
constexpr int64_t kPrefetchDistance = 64;

template <typename T, bool Scatter>
void permuteRowsOf(const T *src, T *dst, const int64_t *order, int64_t rows,
                   int64_t width) {
  at::parallel_for(0, rows, 8192, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      // The rows are random in one of the two arrays: ask for them early,
      // so that many misses are in flight at once.
      if (r + kPrefetchDistance < end)
        __builtin_prefetch(Scatter
                               ? dst + order[r + kPrefetchDistance] * width
                               : src + order[r + kPrefetchDistance] * width,
                           Scatter ? 1 : 0);
      const T *from = Scatter ? src + r * width : src + order[r] * width;
      T *to = Scatter ? dst + order[r] * width : dst + r * width;
      for (int64_t c = 0; c < width; ++c)
        to[c] = from[c];
    }
  });
}

/// `input`'s rows in `order` (Scatter: put back from it). A row of a few
/// floats is a few loads, where aten's index_select and index_copy_ make a
/// generic copy per row.
template <bool Scatter>
at::Tensor permuteRows(const at::Tensor &input, const at::Tensor &order) {
  if (!input.is_cpu() || input.dim() == 0 ||
      (input.element_size() != 4 && input.element_size() != 8))
    return Scatter ? at::empty_like(input).index_copy_(0, order, input)
                   : input.index_select(0, order);
  at::Tensor src = contiguousInput(input);
  at::DimVector shape(src.sizes().begin(), src.sizes().end());
  shape[0] = order.size(0);
  at::Tensor out = emptyHostOutput(shape, src.scalar_type());
  int64_t width = shape[0] ? out.numel() / shape[0] : 0;
  if (src.element_size() == 4)
    permuteRowsOf<uint32_t, Scatter>(
        static_cast<const uint32_t *>(src.const_data_ptr()),
        static_cast<uint32_t *>(out.data_ptr()), order.data_ptr<int64_t>(),
        shape[0], width);
  else
    permuteRowsOf<uint64_t, Scatter>(
        static_cast<const uint64_t *>(src.const_data_ptr()),
        static_cast<uint64_t *>(out.data_ptr()), order.data_ptr<int64_t>(),
        shape[0], width);
  return out;
}
} // namespace

segrt::IndexCheck runOnSortedRows(const OperatorCall &call,
                                  const SortedRows &rows, BoundBuffers &bound,
                                  const KernelRun &run) {
  OperatorCall sorted = call;
  size_t next = 0;
  for (const Buffer &buffer : call.variant->buffers) {
    if (buffer.isOutput || buffer.isIndex)
      continue;
    at::Tensor &input = sorted.floats[next++];
    if (buffer.isRead && buffer.shape.front() == kRows)
      input = permuteRows</*Scatter=*/false>(input, rows.order);
  }
  bound = bindBuffers(sorted, rows.sortedIdx);
  const Variant &variant = *call.variant;
  segrt::IndexCheck check = run(bound);
  size_t output = 0;
  for (const Buffer &buffer : variant.buffers) {
    if (!buffer.isOutput)
      continue;
    at::Tensor &result = bound.outputs[output++];
    if (buffer.shape.front() == kRows)
      result = permuteRows</*Scatter=*/true>(result, rows.order);
  }
  return check;
}

at::Tensor narrowedIndex(const at::Tensor &idx, int64_t numSegments,
                         int numThreads) {
  if (at::Tensor cached = cachedNarrowing(idx, numSegments); cached.defined())
    return cached;
  at::Tensor narrowed =
      narrowHostIndex(contiguousInput(idx), numSegments, numThreads);
  if (narrowed.defined())
    rememberNarrowing(idx, numSegments, narrowed);
  return narrowed;
}

/// Runs a kernel that only sums one input's rows (Variant::summedFloatArgument)
/// on the unsorted int32 `kernelIdx` by chunks (scatter_sum.h), if the sizes
/// suit that: true, with its result in `outputs`; false, having done
/// nothing, if they do not.
static bool sumRowsByChunksIfSuited(const OperatorLevel &level,
                                    const OperatorCall &call,
                                    const at::Tensor &kernelIdx,
                                    c10::SmallVector<at::Tensor, 4> &outputs) {
  const Variant &variant = *call.variant;
  if (variant.summedFloatArgument < 0)
    return false;
  const Buffer *output = &variant.buffers.back(); // the one result
  const at::Tensor &rows = call.floats[variant.summedFloatArgument];
  int64_t numRows = call.idx.size(0), numSegments = call.numSegments;
  at::DimVector shape{numSegments};
  int64_t width = 1;
  for (size_t d = 1; d < output->shape.size(); ++d) {
    shape.push_back(output->shape[d]);
    width *= output->shape[d];
  }
  if (!sumsByChunks(numRows, numSegments, width, rows.element_size()))
    return false;
  at::Tensor sums = emptyHostOutput(shape, output->dtype);
  if (!sumRowsByChunks(contiguousInput(rows), kernelIdx.data_ptr<int32_t>(),
                       numSegments, sums))
    reportInvalid(level, call.floats, call.idx, numSegments,
                  "idx is out of range");
  outputs = {sums};
  return true;
}

c10::SmallVector<at::Tensor, 4> runHostCall(const OperatorLevel &level,
                                            const OperatorCall &call) {
  const Variant &variant = *call.variant;
  TORCH_CHECK(variant.symbol, "segops: ", variant.kernel,
              " has no host code here (a program from a compiler bundle, "
              "where there is no compiler, runs on CUDA only)");
  const at::Tensor &idx = call.idx;
  int64_t numRows = idx.size(0), numSegments = call.numSegments;
  int threads = at::get_num_threads();
  // idx is checked as the kernels read it (one pass over idx), at every
  // level: values in [0, S), in any order. An int64 index is checked for
  // range as it is narrowed to the int32 the kernels read (one pass too).
  auto run = [&](BoundBuffers &buffers) {
    return segrt::checkIndexAndCallHostKernel(
        variant.symbol, buffers.pointers,
        buffers.kernelIdx.data_ptr<int32_t>(), numRows, numSegments, threads,
        variant.range, variant.split.rows ? &variant.split : nullptr);
  };
  // An index whose sorted rows are known (an unsorted one seen before, with
  // the same content) runs on them at once: no narrowing, no sort.
  std::optional<SortedRows> known;
  c10::SmallVector<at::Tensor, 4> sums;
  if (variant.range == segrt::HostRange::Segments) {
    known = cachedSortedRows(idx);
    // A sum by an index known to be unsorted (remembered as such, or with
    // a transposed order) runs by chunks, on the index as it is.
    if (variant.summedFloatArgument >= 0) {
      at::Tensor unsorted = cachedUnsortedIndex(idx, numSegments);
      if (!unsorted.defined() && known)
        unsorted = idx.scalar_type() == at::kLong
                       ? narrowedIndex(idx, numSegments, threads)
                       : contiguousInput(idx);
      if (unsorted.defined() &&
          sumRowsByChunksIfSuited(level, call, unsorted, sums))
        return sums;
    }
  }
  BoundBuffers bound;
  if (known) {
    if (numRows > 0 || numSegments > 0) {
      if (runOnSortedRows(call, *known, bound, run).problem !=
          segrt::IndexProblem::None)
        reportInvalid(level, call.floats, idx, numSegments,
                      "idx is out of range");
    } else {
      bound = bindBuffers(call, known->sortedIdx);
    }
    return std::move(bound.outputs);
  }
  at::Tensor kernelIdx = contiguousInput(idx);
  if (idx.scalar_type() == at::kLong) {
    kernelIdx = narrowedIndex(idx, numSegments, threads);
    if (!kernelIdx.defined())
      reportInvalid(level, call.floats, idx, numSegments,
                    "idx is out of range");
  }
  bound = bindBuffers(call, kernelIdx);
  if (numRows > 0 || numSegments > 0) {
    segrt::IndexCheck check = run(bound);
    // Segment kernels walk sorted rows: an unsorted index runs again on
    // its rows in sorted order (sorted ones cost nothing more), which are
    // remembered for the next call with this index.
    if (check.problem == segrt::IndexProblem::Unsorted) {
      rememberUnsortedIndex(idx, numSegments, bound.kernelIdx);
      if (sumRowsByChunksIfSuited(level, call, bound.kernelIdx, sums))
        return sums;
      check = runOnSortedRows(call, sortRows(idx, bound.kernelIdx), bound, run);
    }
    if (check.problem != segrt::IndexProblem::None)
      reportInvalid(level, call.floats, idx, numSegments,
                    "idx is out of range");
  }
  return std::move(bound.outputs);
}

} // namespace segops_torch
