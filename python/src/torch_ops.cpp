//===- torch_ops.cpp - segops operators as C++ PyTorch kernels ------------===//
//
// The CPU, autograd and Meta kernels of every segops operator level (one
// boxed implementation each, parameterized by the level), and the one
// reader of a kernel's manifest entry. op_library.cpp registers the library
// ops with them; jit_call's programs run through the same calls.
//
// The checks here are generic: every tensor must match its kernel buffer's
// dtype and symbolic shape (N rows, S segments); when one does not, the
// level's validator hook (the Python package's, where it is loaded) words
// the error the user sees, so messages stay in one place.
//
//===----------------------------------------------------------------------===//

#include "torch_ops.h"

#include "autograd.h"

#include "gpu_program.h"
#include "scatter_sum.h"
#include "segrt/BufferCache.h"
#include "segrt/Host.h"
#include "segrt/IndexCheck.h"

#include <ATen/Parallel.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <torch/csrc/autograd/function.h>
#include <torch/library.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <atomic>
#include <limits>
#include <map>
#include <mutex>
#include <memory>
#include <optional>
#include <sstream>
#include <type_traits>


namespace segops_torch {

std::string variantKey(const at::Tensor &first) {
  const char *dtype = first.scalar_type() == at::kDouble  ? "f64"
                      : first.scalar_type() == at::kFloat ? "f32"
                                                          : "?";
  if (first.dim() < 2)
    return std::string(dtype) + "_w1";
  // Not size(1): on a fake tensor of symbolic sizes that would guard its
  // sizes (torch.compile would specialize N). Widths are static anyway.
  std::optional<int64_t> width = first.sym_size(1).maybe_as_int();
  return std::string(dtype) + "_w" + (width ? std::to_string(*width) : "?");
}

int64_t extent(int64_t dimension, int64_t numRows, int64_t numSegments) {
  return dimension == kRows       ? numRows
         : dimension == kSegments ? numSegments
                                  : dimension;
}

void callValidator(const OperatorLevel &level, at::TensorList floats,
                   const at::Tensor &idx, int64_t numSegments) {
  if (OperatorLevel::Validator validate = level.validator())
    validate(floats, idx, numSegments);
}

void reportInvalid(const OperatorLevel &level, at::TensorList floats,
                   const at::Tensor &idx, int64_t numSegments,
                   const std::string &problem) {
  callValidator(level, floats, idx, numSegments);
  TORCH_CHECK_VALUE(false, "segops::", level.name, ": ", problem);
}

const Variant &selectVariant(const OperatorLevel &level, at::TensorList floats,
                             const at::Tensor &idx, int64_t numSegments) {
  if (floats.empty())
    reportInvalid(level, floats, idx, numSegments, "no float arguments");
  const Variant *variant = findVariant(level, variantKey(floats[0]));
  if (!variant)
    reportInvalid(level, floats, idx, numSegments,
                  "no kernel for the first argument's dtype and shape");
  return *variant;
}

std::string mismatch(const Variant &variant, at::TensorList floats,
                     const at::Tensor &idx, int64_t numSegments,
                     c10::DeviceType deviceType) {
  c10::Device device = idx.device();
  if (device.type() != deviceType ||
      (idx.scalar_type() != at::kInt && idx.scalar_type() != at::kLong) ||
      idx.dim() != 1)
    return "idx must be a 1-D int32 or int64 " +
           c10::DeviceTypeName(deviceType) + " tensor";
  if (numSegments < 0 || numSegments > std::numeric_limits<int32_t>::max())
    return "num_segments must lie in [0, 2^31)";
  int64_t numRows = idx.size(0);
  size_t next = 0;
  for (const Buffer &buffer : variant.buffers) {
    if (buffer.isOutput || buffer.isIndex)
      continue;
    if (next == floats.size())
      return "too few float arguments";
    const at::Tensor &tensor = floats[next++];
    // A second index may be int64: it is narrowed (and checked) before
    // the kernel runs.
    bool dtypeFits = tensor.scalar_type() == buffer.dtype ||
                     (buffer.dtype == at::kInt &&
                      tensor.scalar_type() == at::kLong);
    if (tensor.device() != device || !dtypeFits ||
        tensor.dim() != int64_t(buffer.shape.size())) {
      std::ostringstream out;
      out << "argument " << next - 1 << " must be a "
          << c10::toString(buffer.dtype) << " tensor on " << device
          << " of rank " << buffer.shape.size();
      return out.str();
    }
    // An input the kernel never reads, or reads at random rows (a table),
    // may have any number of rows.
    bool anyRows = !buffer.isRead || buffer.shape.front() == kAnyRows;
    for (size_t d = anyRows ? 1 : 0; d < buffer.shape.size(); ++d)
      if (tensor.size(d) != extent(buffer.shape[d], numRows, numSegments)) {
        std::ostringstream out;
        out << "argument " << next - 1 << " has shape " << tensor.sizes()
            << " where the kernel expects (";
        for (size_t e = 0; e < buffer.shape.size(); ++e) {
          int64_t dimension = buffer.shape[e];
          out << (e ? ", " : "");
          if (dimension == kRows)
            out << "N";
          else if (dimension == kSegments)
            out << "S";
          else
            out << dimension;
        }
        out << ") with N = " << numRows << ", S = " << numSegments;
        return out.str();
      }
  }
  if (next != floats.size())
    return "too many float arguments";
  return {};
}

at::Tensor kernelIndex(const at::Tensor &idx) {
  return idx.scalar_type() == at::kLong
             ? idx.clamp(-1, std::numeric_limits<int32_t>::max())
                   .to(at::kInt)
                   .contiguous()
             : idx.contiguous();
}

OperatorCall takeArguments(const OperatorLevel &level, torch::jit::Stack *stack,
                           c10::DeviceType deviceType) {
  OperatorCall call;
  size_t numFloats = level.numFloats;
  auto args = torch::jit::last(stack, numFloats + 2);
  call.floats.reserve(numFloats);
  for (size_t i = 0; i < numFloats; ++i)
    call.floats.push_back(args[i].toTensor());
  call.idx = args[numFloats].toTensor();
  call.numSegments =
      args[numFloats + 1].toSymInt().guard_int(__FILE__, __LINE__);
  torch::jit::drop(stack, numFloats + 2);
  call.variant = &selectVariant(level, call.floats, call.idx, call.numSegments);
  std::string problem = mismatch(*call.variant, call.floats, call.idx,
                                 call.numSegments, deviceType);
  if (!problem.empty())
    reportInvalid(level, call.floats, call.idx, call.numSegments, problem);
  return call;
}

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

BoundBuffers bindBuffers(const OperatorCall &call, at::Tensor kernelIdx) {
  BoundBuffers bound;
  int64_t numRows = call.idx.size(0);
  bound.kernelIdx = std::move(kernelIdx);
  bound.pointers.reserve(call.variant->buffers.size());
  size_t next = 0;
  for (const Buffer &buffer : call.variant->buffers) {
    if (buffer.isIndex) {
      bound.pointers.push_back(
          reinterpret_cast<uintptr_t>(bound.kernelIdx.data_ptr()));
    } else if (!buffer.isOutput) {
      bound.keepAlive.push_back(contiguousInput(call.floats[next++]));
      bound.pointers.push_back(
          reinterpret_cast<uintptr_t>(bound.keepAlive.back().data_ptr()));
    } else {
      at::DimVector shape;
      for (int64_t dimension : buffer.shape)
        shape.push_back(extent(dimension, numRows, call.numSegments));
      bound.outputs.push_back(
          call.idx.is_cpu() ? emptyHostOutput(shape, buffer.dtype)
                            : at::empty(shape, at::TensorOptions()
                                                   .dtype(buffer.dtype)
                                                   .device(call.idx.device())));
      bound.pointers.push_back(
          reinterpret_cast<uintptr_t>(bound.outputs.back().data_ptr()));
    }
  }
  return bound;
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
/// floats is a few loads: aten's index_select and index_copy_ cost ~10x
/// more per row here (a generic copy per row).
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

void runGpuCall(const OperatorCall &call, const BoundBuffers &bound,
                segrt::CudaModule &module, uintptr_t stream) {
  const segrt::GpuProgram &program = call.variant->gpu;
  int64_t numRows = call.idx.size(0), numSegments = call.numSegments;
  if (numRows == 0 && numSegments == 0)
    return;
  // The long-segment kernels' scratch: on CUDA from the caching allocator,
  // freed on return and reused only by work queued after these launches on
  // this stream (it is stream-ordered); simulated, 0xff bytes (NaN floats,
  // -1 integers), so that a kernel reading what was never written shows.
  at::Tensor scratch;
  if (int64_t bytes = program.scratchBytes(numRows, numSegments)) {
    auto options = at::TensorOptions().dtype(at::kByte).device(call.idx.device());
    scratch = call.idx.is_cpu() ? at::full({bytes}, 255, options)
                                : at::empty({bytes}, options);
  }
  segrt::launchGpuProgram(
      module, program, stream, bound.pointers, numRows, numSegments,
      scratch.defined() ? reinterpret_cast<uintptr_t>(scratch.data_ptr()) : 0);
}

void GpuModules::setPtxSource(PtxSource source) {
  std::lock_guard<std::mutex> lock(mutex);
  ptxSource = std::move(source);
}

void GpuModules::setSimulatorImage(const std::string &image) {
  std::lock_guard<std::mutex> lock(mutex);
  if (image.empty())
    simulator.release(); // kernels of it may still be queued: never unloaded
  else
    simulator = std::make_unique<segrt::CudaModule>(
        0, image, segrt::CudaBackend::Simulator);
}

segrt::CudaModule &GpuModules::onDevice(int device) {
  std::lock_guard<std::mutex> lock(mutex);
  auto it = modules.find(device);
  if (it != modules.end())
    return *it->second;
  TORCH_CHECK(ptxSource, "segops: no PTX source was set for these kernels");
  auto module = std::make_unique<segrt::CudaModule>(device, ptxSource(device));
  return *modules.emplace(device, std::move(module)).first->second;
}

segrt::CudaModule *GpuModules::simulated() {
  std::lock_guard<std::mutex> lock(mutex);
  return simulator.get();
}

std::shared_ptr<GpuModules> libraryGpuModules() {
  // Never destroyed: kernels may run until exit.
  static auto *modules =
      new std::shared_ptr<GpuModules>(std::make_shared<GpuModules>());
  return *modules;
}

/// The GPU kernels of `call` on the simulated driver's `module`.
static c10::SmallVector<at::Tensor, 4>
runSimulatedCall(const OperatorLevel &level, const OperatorCall &call,
                 segrt::CudaModule &module) {
  const at::Tensor &idx = call.idx;
  int64_t numRows = idx.size(0), numSegments = call.numSegments;
  at::Tensor kernelIdx = kernelIndex(idx);
  // Range first, over every row (a descent must not hide a value out of
  // range), then order where the kernel needs it.
  auto check = [&](bool requireSorted) {
    return segrt::checkIndex(kernelIdx.data_ptr<int32_t>(), /*is64Bit=*/false,
                             numRows, numSegments, at::get_num_threads(),
                             requireSorted);
  };
  if (check(false).problem != segrt::IndexProblem::None)
    reportInvalid(level, call.floats, idx, numSegments, "idx is out of range");
  bool unsorted = call.variant->range == segrt::HostRange::Segments &&
                  check(true).problem != segrt::IndexProblem::None;
  BoundBuffers bound = bindBuffers(call, kernelIdx);
  auto run = [&](BoundBuffers &buffers) {
    runGpuCall(call, buffers, module, /*stream=*/0);
    return segrt::IndexCheck();
  };
  // GPU segment kernels walk sorted rows, as the host's do.
  if (unsorted) {
    std::optional<SortedRows> known = cachedSortedRows(idx);
    runOnSortedRows(call, known ? *known : sortRows(idx, bound.kernelIdx),
                    bound, run);
  }
  else
    run(bound);
  return std::move(bound.outputs);
}

c10::SmallVector<at::Tensor, 4> runCpuCall(const OperatorLevel &level,
                                           const OperatorCall &call) {
  if (segrt::CudaModule *simulated = call.variant->gpuModules->simulated())
    return runSimulatedCall(level, call, *simulated);
  return runHostCall(level, call);
}

namespace {
std::atomic<bool> debugChecksEnabled{false};
} // namespace

void setDebugChecks(bool enabled) { debugChecksEnabled = enabled; }
bool debugChecks() { return debugChecksEnabled; }

} // namespace segops_torch


namespace {
using namespace segops_torch;

/// The kernels' registrations. Never destroyed: the dispatcher may call the
/// kernels until exit. Made on first use: the operator library registers
/// from its static initialization, in no order with this file's.
std::vector<std::unique_ptr<torch::Library>> &registrations() {
  static auto *libraries = new std::vector<std::unique_ptr<torch::Library>>();
  return *libraries;
}

int64_t parseExtent(const std::string &symbol) {
  return symbol == "N"   ? kRows
         : symbol == "S" ? kSegments
         : symbol == "?" ? kAnyRows
                         : std::stoll(symbol);
}

/// The CPU kernel of one operator level (boxed: one implementation serves
/// every operator).
class HostKernel final : public c10::OperatorKernel {
public:
  explicit HostKernel(std::shared_ptr<const OperatorLevel> level)
      : level(std::move(level)) {}

  void operator()(const c10::OperatorHandle &, c10::DispatchKeySet,
                  torch::jit::Stack *stack) {
    OperatorCall call = takeArguments(*level, stack, c10::DeviceType::CPU);
    for (at::Tensor &output : runCpuCall(*level, call))
      stack->emplace_back(std::move(output));
  }

private:
  std::shared_ptr<const OperatorLevel> level;
};

/// The autograd kernel of one operator level (all but the last): its
/// arguments as the one autograd implementation reads them (the floats,
/// then idx and S), and the next level as its operator.
class AutogradKernel final : public c10::OperatorKernel {
public:
  explicit AutogradKernel(std::shared_ptr<const OperatorLevel> level)
      : level(std::move(level)) {}

  void operator()(const c10::OperatorHandle &op, c10::DispatchKeySet keys,
                  torch::jit::Stack *stack) {
    size_t numFloats = level->numFloats;
    auto args = torch::jit::last(stack, numFloats + 2);
    bool wanted = false;
    if (at::GradMode::is_enabled())
      for (size_t i = 0; i < numFloats; ++i)
        wanted |= args[i].toTensor().requires_grad();
    if (!wanted)
      return runBelowAutograd(op, keys, stack);
    LevelCall call;
    for (size_t i = 0; i <= numFloats; ++i)
      call.tensors.push_back(args[i].toTensor());
    call.idxPosition = numFloats;
    call.numSegments = args[numFloats + 1].toSymInt();
    call.level = level.get();
    call.nodeName = level->backward + "Backward";
    call.replaceIndex = [](torch::jit::Stack &stack, at::Tensor idx) {
      stack[stack.size() - 2] = std::move(idx);
    };
    call.callNext = [next = *level->backwardOp](
                        std::vector<at::Tensor> tensors, size_t idxPosition,
                        const c10::SymInt &numSegments) {
      torch::jit::Stack stack;
      for (size_t i = 0; i < tensors.size(); ++i)
        if (i != idxPosition)
          stack.emplace_back(tensors[i]);
      stack.emplace_back(tensors[idxPosition]);
      stack.emplace_back(numSegments);
      next.callBoxed(stack);
      std::vector<at::Tensor> outputs;
      for (c10::IValue &value : stack)
        outputs.push_back(value.toTensor());
      return outputs;
    };
    differentiate(op, keys, stack, std::move(call));
  }

private:
  std::shared_ptr<const OperatorLevel> level;
};

/// The Meta (fake) kernel of one operator level: its outputs' shapes, in
/// the symbolic N and S of a trace, without reading any data.
class MetaKernel final : public c10::OperatorKernel {
public:
  explicit MetaKernel(std::shared_ptr<const OperatorLevel> level)
      : level(std::move(level)) {}

  void operator()(const c10::OperatorHandle &, c10::DispatchKeySet,
                  torch::jit::Stack *stack) {
    size_t numFloats = level->numFloats;
    auto args = torch::jit::last(stack, numFloats + 2);
    c10::SmallVector<at::Tensor, 4> floats;
    for (size_t i = 0; i < numFloats; ++i)
      floats.push_back(args[i].toTensor());
    at::Tensor idx = args[numFloats].toTensor();
    c10::SymInt numSegments = args[numFloats + 1].toSymInt();
    torch::jit::drop(stack, numFloats + 2);
    // The forward's arguments as the package checks them (its public ops'
    // errors, under tracing too); the generic checks where it is absent.
    if (level->derivativeOrder == 0)
      if (OperatorLevel::Validator validate = level->validator())
        validate(floats, idx, numSegments);
    if (std::string problem = argumentProblem(floats, idx); !problem.empty())
      TORCH_CHECK_VALUE(false, "segops::", level->name, ": ", problem);
    for (const OutputShape &output : level->outputShapes) {
      c10::SymDimVector shape{output.rows == kRows ? idx.sym_size(0)
                                                   : numSegments};
      if (output.featuresOf >= 0) {
        c10::SymIntArrayRef sizes = floats[output.featuresOf].sym_sizes();
        shape.append(sizes.begin() + 1, sizes.end());
      } else {
        shape.append(output.features.begin(), output.features.end());
      }
      stack->emplace_back(at::empty_symint(shape, floats[0].options()));
    }
  }

private:
  /// What the kernels would refuse that a trace can see (dtypes and ranks;
  /// sizes and idx's values are checked where data runs).
  static std::string argumentProblem(at::TensorList floats,
                                     const at::Tensor &idx) {
    at::ScalarType dtype = floats[0].scalar_type();
    if (dtype != at::kFloat && dtype != at::kDouble)
      return "float arguments must be float32 or float64";
    for (size_t i = 0; i < floats.size(); ++i)
      if (floats[i].scalar_type() != dtype || floats[i].dim() < 1 ||
          floats[i].dim() > 3)
        return "argument " + std::to_string(i) + " must be a " +
               c10::toString(dtype) + " tensor of rank 1 to 3";
    if ((idx.scalar_type() != at::kInt && idx.scalar_type() != at::kLong) ||
        idx.dim() != 1)
      return "idx must be a 1-D int32 or int64 tensor";
    return {};
  }

  std::shared_ptr<const OperatorLevel> level;
};

at::ScalarType parseDtype(const std::string &name) {
  if (name == "f32")
    return at::kFloat;
  if (name == "f64")
    return at::kDouble;
  if (name == "i32")
    return at::kInt;
  throw std::invalid_argument("unknown kernel dtype " + name);
}

/// Where each output of a level gets its shape, read from one of its
/// kernels: an output whose features are those of the float argument in
/// its position (a gradient, or a forward keeping its rows' features) takes
/// that argument's at run time; any other keeps the kernel's.
std::vector<OutputShape> outputShapesOf(const Variant &reference) {
  std::vector<const Buffer *> floats, outputs;
  for (const Buffer &buffer : reference.buffers)
    if (buffer.isOutput)
      outputs.push_back(&buffer);
    else if (!buffer.isIndex)
      floats.push_back(&buffer);
  std::vector<OutputShape> shapes;
  for (size_t k = 0; k < outputs.size(); ++k) {
    OutputShape shape;
    shape.rows = outputs[k]->shape.front();
    std::vector<int64_t> features(outputs[k]->shape.begin() + 1,
                                  outputs[k]->shape.end());
    if (k < floats.size() &&
        features == std::vector<int64_t>(floats[k]->shape.begin() + 1,
                                         floats[k]->shape.end()))
      shape.featuresOf = static_cast<int>(k);
    else
      shape.features = std::move(features);
    shapes.push_back(std::move(shape));
  }
  return shapes;
}

/// A kernel of rows wider than one feature shows how features flow (a
/// kernel of (N,) rows cannot tell a kept width from a contracted one).
const Variant &referenceVariant(const std::map<std::string, Variant> &variants) {
  for (const auto &[key, variant] : variants)
    if (key.find("_w") != std::string::npos && key.substr(key.find("_w")) != "_w1")
      return variant;
  return variants.begin()->second;
}

template <typename Kernel>
void implement(const std::string &name, c10::DispatchKey key,
               std::unique_ptr<Kernel> kernel) {
  auto library = std::make_unique<torch::Library>(
      torch::Library::IMPL, "segops", key, __FILE__, __LINE__);
  library->impl(name.c_str(),
                torch::CppFunction::makeFromBoxedFunctor(std::move(kernel)));
  registrations().push_back(std::move(library));
}

} // namespace

Variant segops_torch::parseKernelEntry(const nlohmann::json &entry,
                                       const SymbolResolver &resolve) {
  Variant variant;
  variant.kernel = entry.at("name").get<std::string>();
  const nlohmann::json &host = entry.at("host");
  variant.symbol = resolve(host.value("symbol", variant.kernel));
  const nlohmann::json &buffers = entry.at("buffers");
  for (const nlohmann::json &description : buffers) {
    Buffer buffer;
    buffer.isOutput = description.at("role").get<std::string>() == "output";
    buffer.isIndex = description.at("name").get<std::string>() == "idx";
    buffer.isRead = description.value("read", true);
    buffer.dtype = parseDtype(description.at("dtype").get<std::string>());
    for (const nlohmann::json &symbol : description.at("shape"))
      buffer.shape.push_back(parseExtent(symbol.get<std::string>()));
    variant.buffers.push_back(std::move(buffer));
  }
  // Buffers before a position, but idx and outputs, are the float
  // arguments before it.
  auto floatArgument = [&](size_t position) {
    int argument = 0;
    for (size_t b = 0; b < position; ++b)
      argument += !variant.buffers[b].isIndex && !variant.buffers[b].isOutput;
    return argument;
  };
  for (size_t b = 0; b < variant.buffers.size(); ++b) {
    const nlohmann::json &description = buffers[b];
    if (!description.contains("sums_by"))
      continue;
    Buffer &buffer = variant.buffers[b];
    buffer.sumsBy = floatArgument(description["sums_by"].get<size_t>());
    buffer.sumsIntoRowsOf =
        floatArgument(description.at("into_rows_of").get<size_t>());
    variant.indexedTables.emplace_back(buffer.sumsBy, buffer.sumsIntoRowsOf);
  }
  if (entry.contains("gathers") && entry["gathers"].is_array())
    for (const nlohmann::json &gather : entry["gathers"])
      variant.indexedTables.emplace_back(
          floatArgument(gather.at("index").get<size_t>()),
          floatArgument(gather.at("table").get<size_t>()));
  variant.range = host.value("range", "segments") == "rows"
                      ? segrt::HostRange::Rows
                      : segrt::HostRange::Segments;
  if (host.contains("split") && host["split"].is_object()) {
    const nlohmann::json &split = host["split"];
    variant.split.rows = resolve(split.at("rows_symbol").get<std::string>());
    variant.split.finish =
        resolve(split.at("finish_symbol").get<std::string>());
    variant.split.passTotals =
        split.at("pass_totals").get<std::vector<int64_t>>();
    variant.split.combine = segrt::parseTotalCombines(
        split.at("combine").get<std::vector<std::string>>());
    // From the manifest, not the variant's key: JIT programs register
    // under "jit" whatever their dtype.
    variant.split.isDouble = split.at("totals_dtype").get<std::string>() ==
                             "f64";
  }
  variant.gpu = segops_python::gpuProgram(variant.kernel, entry.at("gpu"));
  variant.gpuModules = libraryGpuModules();
  variant.savedForBackward.assign(
      std::count_if(variant.buffers.begin(), variant.buffers.end(),
                    [](const Buffer &buffer) {
                      return !buffer.isOutput && !buffer.isIndex;
                    }),
      true);
  if (host.contains("sums_rows_of") && host["sums_rows_of"].is_number())
    variant.summedFloatArgument =
        floatArgument(host["sums_rows_of"].get<size_t>());
  return variant;
}

void segops_torch::OperatorLevel::setHooks(Validator validator,
                                           VariantProvider provider) {
  std::unique_lock<std::shared_mutex> lock(providedMutex);
  validatorHook = std::move(validator);
  variantProvider = std::move(provider);
}

segops_torch::OperatorLevel::Validator
segops_torch::OperatorLevel::validator() const {
  std::shared_lock<std::shared_mutex> lock(providedMutex);
  return validatorHook;
}

const Variant *segops_torch::findVariant(const OperatorLevel &level,
                                         const std::string &key) {
  auto shipped = level.variants.find(key);
  if (shipped != level.variants.end())
    return &shipped->second;
  OperatorLevel::VariantProvider provider;
  {
    std::shared_lock<std::shared_mutex> lock(level.providedMutex);
    auto it = level.provided.find(key);
    if (it != level.provided.end())
      return &it->second;
    provider = level.variantProvider;
  }
  if (!provider)
    return nullptr;
  std::optional<Variant> variant = provider(key);
  if (!variant)
    return nullptr;
  std::unique_lock<std::shared_mutex> lock(level.providedMutex);
  // Another thread may have made it meanwhile: the first one stays.
  return &level.provided.emplace(key, std::move(*variant)).first->second;
}

std::shared_ptr<OperatorLevel>
segops_torch::makeOperatorLevel(const std::string &name, size_t numFloats,
                                size_t numOutputs,
                                std::map<std::string, Variant> variants,
                                const std::string &backward) {
  auto level = std::make_shared<OperatorLevel>();
  level->name = name;
  level->numFloats = numFloats;
  level->numOutputs = numOutputs;
  level->backward = backward;
  if (!backward.empty())
    level->backwardOp = c10::Dispatcher::singleton().findSchemaOrThrow(
        ("segops::" + backward).c_str(), "");
  if (!variants.empty())
    level->outputShapes = outputShapesOf(referenceVariant(variants));
  level->variants = std::move(variants);
  return level;
}

void segops_torch::registerLevelKernels(std::shared_ptr<OperatorLevel> level,
                                        bool withMetaKernel) {
  const std::string &name = level->name;
  implement(name, c10::DispatchKey::CPU, std::make_unique<HostKernel>(level));
  if (cudaKernelsBuilt())
    registerCudaKernel(level, registrations());
  if (!level->backward.empty())
    implement(name, c10::DispatchKey::Autograd,
              std::make_unique<AutogradKernel>(level));
  if (withMetaKernel)
    implement(name, c10::DispatchKey::Meta,
              std::make_unique<MetaKernel>(level));
}
