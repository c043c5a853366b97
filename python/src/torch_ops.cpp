//===- torch_ops.cpp - segops operators as C++ PyTorch kernels ------------===//
//
// segops._native._torchops: the CPU kernels and the autograd kernels of the
// segops operators, registered with the PyTorch dispatcher from C++, so that
// calling an operator on CPU tensors runs no Python at all.
//
// ops.py defines the schemas, the fake kernels and the CUDA kernels, then
// describes each operator level to this module: its host kernels by dtype and
// row width with their buffers (from the op library's manifest), the next
// level's operator (its backward) and a Python validator. The checks here are
// generic: every tensor must match its kernel buffer's dtype and symbolic
// shape (N rows, S segments); when one does not, the Python validator is
// called to word the error the user sees, so messages stay in one place.
//
//===----------------------------------------------------------------------===//

#include "torch_ops.h"

#include "gpu_program.h"
#include "scatter_sum.h"
#include "segrt/BufferCache.h"
#include "segrt/Host.h"
#include "segrt/IndexCheck.h"

#include <ATen/Parallel.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/functions/utils.h>
#include <torch/csrc/autograd/python_variable.h>
#include <torch/library.h>

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <atomic>
#include <limits>
#include <map>
#include <mutex>
#include <memory>
#include <optional>
#include <sstream>
#include <type_traits>

namespace py = pybind11;
using torch::autograd::Node;
using torch::autograd::SavedVariable;
using torch::autograd::variable_list;

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
  py::gil_scoped_acquire gil;
  py::tuple args(floats.size() + 2);
  for (size_t i = 0; i < floats.size(); ++i)
    args[i] = py::reinterpret_steal<py::object>(THPVariable_Wrap(floats[i]));
  args[floats.size()] =
      py::reinterpret_steal<py::object>(THPVariable_Wrap(idx));
  args[floats.size() + 1] = py::int_(numSegments);
  py::handle(level.validator)(*args);
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

void GpuModules::setPtxSource(PyObject *source) {
  std::lock_guard<std::mutex> lock(mutex);
  ptxSource = source;
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
  std::string ptx;
  {
    py::gil_scoped_acquire gil;
    ptx = py::handle(ptxSource)(device).cast<std::string>();
  }
  auto module = std::make_unique<segrt::CudaModule>(device, ptx);
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

// Never destroyed: the dispatcher and the interpreter may be gone at exit.
segrt::HostLibrary *hostLibrary = nullptr;
auto *registrations = new std::vector<std::unique_ptr<torch::Library>>();

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

/// The backward of one operator level: calls the next level's operator
/// (through the dispatcher, so that it is differentiable in turn).
struct SegmentOpBackward final : Node {
  std::string levelName;
  c10::OperatorHandle next;
  std::vector<SavedVariable> floats;
  SavedVariable idx;
  c10::SymInt numSegments;

  SegmentOpBackward(std::string levelName, c10::OperatorHandle next)
      : levelName(std::move(levelName)), next(std::move(next)) {}

  variable_list apply(variable_list &&grads) override {
    torch::jit::Stack stack;
    for (const SavedVariable &saved : floats)
      stack.emplace_back(saved.unpack());
    for (size_t i = 0; i < grads.size(); ++i)
      stack.emplace_back(grads[i].defined() ? grads[i]
                                            : input_metadata(i).zeros_like());
    stack.emplace_back(idx.unpack());
    stack.emplace_back(numSegments);
    next.callBoxed(stack);
    variable_list result;
    for (c10::IValue &value : stack)
      result.push_back(value.toTensor());
    return result;
  }

  void release_variables() override {
    floats.clear();
    idx.reset_data();
  }

  std::string name() const override { return levelName + "Backward"; }
};


/// The autograd kernel of one operator level (all but the last).
class AutogradKernel final : public c10::OperatorKernel {
public:
  explicit AutogradKernel(std::shared_ptr<const OperatorLevel> level)
      : level(std::move(level)) {}

  void operator()(const c10::OperatorHandle &op, c10::DispatchKeySet keys,
                  torch::jit::Stack *stack) {
    size_t numFloats = level->numFloats;
    auto args = torch::jit::last(stack, numFloats + 2);
    c10::SmallVector<at::Tensor, 4> floats;
    bool requiresGrad = false;
    for (size_t i = 0; i < numFloats; ++i) {
      floats.push_back(args[i].toTensor());
      requiresGrad |= floats.back().requires_grad();
    }
    at::Tensor idx = args[numFloats].toTensor();
    c10::SymInt numSegments = args[numFloats + 1].toSymInt();
    requiresGrad &= at::GradMode::is_enabled();
    if (requiresGrad) {
      // The backward reads the int32 index the forward's kernel reads: narrow
      // it once here, for the forward and every backward level, instead of
      // once per level.
      if (at::Tensor narrowed = narrowedForBackward(idx, numSegments);
          narrowed.defined()) {
        idx = narrowed;
        (*stack)[stack->size() - 2] = std::move(narrowed);
      }
    }
    {
      at::AutoDispatchBelowADInplaceOrView guard;
      op.redispatchBoxed(keys & c10::after_ADInplaceOrView_keyset, stack);
    }
    if (!requiresGrad)
      return;

    auto node =
        makeNode<SegmentOpBackward>(level->backward, *level->backwardOp);
    auto *backward = static_cast<SegmentOpBackward *>(node.get());
    const Variant *variant = findVariant(*level, variantKey(floats[0]));
    for (size_t i = 0; i < numFloats; ++i) {
      bool saved = !variant || variant->savedForBackward[i];
      // An input the backward never reads is saved as an empty tensor of
      // the same dtype and row shape (the kernel needs no data from it).
      // Symbolic sizes: a fake tensor's row count must not be specialized.
      at::Tensor kept = saved ? floats[i] : [&] {
        c10::SymDimVector shape(floats[i].sym_sizes().begin(),
                                floats[i].sym_sizes().end());
        shape[0] = 0;
        return floats[i].new_empty_symint(shape);
      }();
      backward->floats.emplace_back(kept, /*is_output=*/false);
    }
    backward->idx = SavedVariable(idx, /*is_output=*/false);
    backward->numSegments = numSegments;
    node->set_next_edges(
        torch::autograd::collect_next_edges(at::TensorList(floats)));
    for (size_t i = stack->size() - level->numOutputs; i < stack->size(); ++i)
      torch::autograd::set_history((*stack)[i].toTensor(), node);
  }

private:
  /// `idx` narrowed to int32 and checked, if it is an int64 index of plain
  /// CPU tensors (not fake, functional or batched ones, whose data cannot be
  /// read here) that passes the level's check; else an undefined tensor,
  /// and the forward's kernel narrows idx (or reports what is wrong with it)
  /// as without autograd.
  at::Tensor narrowedForBackward(const at::Tensor &idx,
                                 const c10::SymInt &numSegments) const {
    std::optional<int64_t> segments = numSegments.maybe_as_int();
    c10::DispatchKeySet dataKeys =
        idx.key_set() - c10::autograd_dispatch_keyset_with_ADInplaceOrView -
        c10::autocast_dispatch_keyset;
    if (!segments || idx.scalar_type() != at::kLong || idx.dim() != 1 ||
        dataKeys != c10::DispatchKeySet(c10::DispatchKey::CPU))
      return {};
    return narrowedIndex(idx, *segments, at::get_num_threads());
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

/// Reads one variant's description (see register_level).
Variant parseVariant(const py::dict &entry) {
  Variant variant;
  variant.kernel = entry["kernel"].cast<std::string>();
  // Run-time compiled kernels (segops.jit) come with their addresses.
  variant.symbol =
      entry.contains("address")
          ? reinterpret_cast<void *>(entry["address"].cast<uintptr_t>())
          : hostLibrary->lookup(variant.kernel);
  for (py::handle item : entry["buffers"].cast<py::list>()) {
    py::dict description = item.cast<py::dict>();
    Buffer buffer;
    std::string role = description["role"].cast<std::string>();
    buffer.isOutput = role == "output";
    buffer.isIndex = description["name"].cast<std::string>() == "idx";
    buffer.isRead =
        !description.contains("read") || description["read"].cast<bool>();
    buffer.dtype = parseDtype(description["dtype"].cast<std::string>());
    for (const std::string &symbol :
         description["shape"].cast<std::vector<std::string>>())
      buffer.shape.push_back(parseExtent(symbol));
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
  py::list descriptions = entry["buffers"].cast<py::list>();
  for (size_t b = 0; b < variant.buffers.size(); ++b) {
    py::dict description = descriptions[b].cast<py::dict>();
    if (!description.contains("sums_by"))
      continue;
    Buffer &buffer = variant.buffers[b];
    buffer.sumsBy = floatArgument(description["sums_by"].cast<size_t>());
    buffer.sumsIntoRowsOf =
        floatArgument(description["into_rows_of"].cast<size_t>());
    variant.indexedTables.emplace_back(buffer.sumsBy, buffer.sumsIntoRowsOf);
  }
  if (entry.contains("gathers") && !entry["gathers"].is_none())
    for (py::handle item : entry["gathers"].cast<py::list>()) {
      py::dict gather = item.cast<py::dict>();
      variant.indexedTables.emplace_back(
          floatArgument(gather["index"].cast<size_t>()),
          floatArgument(gather["table"].cast<size_t>()));
    }
  variant.range = entry["row_range"].cast<bool>()
                      ? segrt::HostRange::Rows
                      : segrt::HostRange::Segments;
  if (!entry["split"].is_none()) {
    py::dict split = entry["split"].cast<py::dict>();
    auto address = [&](const char *symbol, const char *jitAddress) {
      return split.contains(jitAddress)
                 ? reinterpret_cast<void *>(
                       split[jitAddress].cast<uintptr_t>())
                 : hostLibrary->lookup(split[symbol].cast<std::string>());
    };
    variant.split.rows = address("rows_symbol", "rows_address");
    variant.split.finish = address("finish_symbol", "finish_address");
    variant.split.passTotals =
        split["pass_totals"].cast<std::vector<int64_t>>();
    variant.split.combine = segrt::parseTotalCombines(
        split["combine"].cast<std::vector<std::string>>());
    // From the manifest, not the variant's key: JIT programs register
    // under "jit" whatever their dtype.
    variant.split.isDouble =
        split["totals_dtype"].cast<std::string>() == "f64";
  }
  variant.gpu = segops_python::gpuProgram(variant.kernel,
                                          entry["gpu"].cast<py::dict>());
  // Run-time compiled kernels bring their own GPU code: PTX per device,
  // and, simulated, an image of their simulated kernels.
  if (entry.contains("ptx_source") || entry.contains("simulator_image")) {
    variant.gpuModules = std::make_shared<GpuModules>();
    if (entry.contains("ptx_source") && !entry["ptx_source"].is_none())
      variant.gpuModules->setPtxSource(
          entry["ptx_source"].cast<py::object>().release().ptr());
    if (entry.contains("simulator_image") &&
        !entry["simulator_image"].is_none())
      variant.gpuModules->setSimulatorImage(
          entry["simulator_image"].cast<std::string>());
  } else {
    variant.gpuModules = libraryGpuModules();
  }
  variant.savedForBackward =
      entry["saved_for_backward"].cast<std::vector<bool>>();
  if (entry.contains("sums_rows_of") && !entry["sums_rows_of"].is_none()) {
    variant.summedFloatArgument =
        floatArgument(entry["sums_rows_of"].cast<size_t>());
  }
  return variant;
}

/// Reads a level description handed over by ops.py (see register_level).
std::shared_ptr<OperatorLevel>
parseLevel(const std::string &name, size_t numFloats,
           size_t numOutputs, const py::dict &variants,
           const std::string &backward, py::object validator) {
  auto level = std::make_shared<OperatorLevel>();
  level->name = name;
  level->numFloats = numFloats;
  level->numOutputs = numOutputs;
  level->backward = backward;
  if (!backward.empty())
    // Defined before any level is registered (ops.py defines all levels).
    level->backwardOp = c10::Dispatcher::singleton().findSchemaOrThrow(
        ("segops::" + backward).c_str(), "");
  level->validator = validator.release().ptr();
  for (auto [key, value] : variants)
    level->variants.emplace(key.cast<std::string>(),
                            parseVariant(value.cast<py::dict>()));
  return level;
}

} // namespace

const Variant *segops_torch::findVariant(const OperatorLevel &level,
                                         const std::string &key) {
  auto shipped = level.variants.find(key);
  if (shipped != level.variants.end())
    return &shipped->second;
  if (!level.variantProvider)
    return nullptr;
  {
    std::shared_lock<std::shared_mutex> lock(level.providedMutex);
    auto it = level.provided.find(key);
    if (it != level.provided.end())
      return &it->second;
  }
  Variant variant;
  {
    py::gil_scoped_acquire gil;
    py::object description = py::handle(level.variantProvider)(key);
    if (description.is_none())
      return nullptr;
    variant = parseVariant(description.cast<py::dict>());
  }
  std::unique_lock<std::shared_mutex> lock(level.providedMutex);
  // Another thread may have made it meanwhile: the first one stays.
  return &level.provided.emplace(key, std::move(variant)).first->second;
}

std::shared_ptr<OperatorLevel>
segops_torch::parseOperatorLevel(const std::string &name, size_t numFloats,
                                 size_t numOutputs, const py::dict &variants,
                                 const std::string &backward,
                                 py::object validator) {
  return parseLevel(name, numFloats, numOutputs, variants, backward,
                    std::move(validator));
}

PYBIND11_MODULE(_torchops, m) {
  m.doc() = "segops operators' CPU and autograd kernels in C++";
  runWorkersOnIntraOpPool();
  registerJitBindings(m);
  m.def("index_rechecks", &segrt::indexRechecks,
        "How many times these kernels checked idx again after running (they "
        "saw a problem, or their rows did not meet): never for a valid "
        "index.");
  m.def(
      "sorted_rows",
      [](const at::Tensor &idx) {
        std::optional<SortedRows> known = cachedSortedRows(idx);
        SortedRows rows = known ? *known : sortRows(idx, kernelIndex(idx));
        return std::make_pair(rows.sortedIdx, rows.order);
      },
      py::arg("idx"),
      "idx's rows in a stable sort (int32 sorted values, int64 order), "
      "remembered for idx's current content: the kernels reducing by idx "
      "then run on them without sorting. The caller checks idx first.");
  m.def("index_sorts", &indexSorts,
        "How many times the kernels sorted an index (no remembered order).");
  m.def("clear_index_cache", &clearIndexCache,
        "Forgets every remembered narrowing and sorted order.");
  m.def("has_cuda_kernels", &cudaKernelsBuilt,
        "Whether the CUDA kernels were built (against a PyTorch with CUDA); "
        "register_level then registers them too.");
  m.def(
      "set_ptx_source",
      [](py::object source) {
        libraryGpuModules()->setPtxSource(source.release().ptr());
      },
      py::arg("source"),
      "source(device) returns the PTX text for a CUDA device (called once per "
      "device).");
  m.def(
      "output_cache_info",
      [] {
        segrt::HostBufferCache::Stats stats = segrt::hostOutputCache().stats();
        py::dict info;
        info["cached_bytes"] = stats.cachedBytes;
        info["cached_buffers"] = stats.cachedBuffers;
        info["live_bytes"] = stats.liveBytes;
        info["limit_bytes"] = stats.limitBytes;
        info["hits"] = stats.hits;
        info["misses"] = stats.misses;
        return info;
      },
      "The host output cache: bytes held for reuse and handed out, its "
      "limit, allocations served from it (hits) and mapped afresh.");
  m.def(
      "empty_output_cache", [] { segrt::hostOutputCache().empty(); },
      "Returns every cached host output buffer to the system.");
  m.def(
      "set_output_cache_limit",
      [](size_t bytes) { segrt::hostOutputCache().setLimit(bytes); },
      py::arg("bytes"),
      "Caps the bytes the host output cache holds (0: none).");
  m.def(
      "set_gpu_simulator",
      [](const std::string &path) {
        libraryGpuModules()->setSimulatorImage(
            path.empty() ? std::string() : segrt::simulatorImage(path));
      },
      py::arg("path"),
        "Run CPU calls through the GPU kernels of the simulated library at "
        "`path` (segrt's GPU launcher over the simulated driver); '' runs "
        "the host kernels.");
  m.def("set_debug_checks", &setDebugChecks, py::arg("enabled"),
        "Check idx's content on CUDA too (a host sync per call).");
  m.def(
      "load_host_library",
      [](const std::string &path) {
        if (!hostLibrary)
          hostLibrary = new segrt::HostLibrary(path);
      },
      py::arg("path"), "Loads the op library's host kernels.");
  m.def(
      "register_level",
      [](const std::string &name, size_t numFloats,
         size_t numOutputs, const py::dict &variants,
         const std::string &backward, py::object validator,
         py::object provider) {
        std::shared_ptr<OperatorLevel> level =
            parseLevel(name, numFloats, numOutputs, variants, backward,
                       std::move(validator));
        if (!provider.is_none())
          level->variantProvider = provider.release().ptr();
        auto cpu = std::make_unique<torch::Library>(
            torch::Library::IMPL, "segops", c10::DispatchKey::CPU, __FILE__,
            __LINE__);
        cpu->impl(name.c_str(), torch::CppFunction::makeFromBoxedFunctor(
                                    std::make_unique<HostKernel>(level)));
        registrations->push_back(std::move(cpu));
        if (cudaKernelsBuilt())
          registerCudaKernel(level, *registrations);
        if (!backward.empty()) {
          auto autograd = std::make_unique<torch::Library>(
              torch::Library::IMPL, "segops", c10::DispatchKey::Autograd,
              __FILE__, __LINE__);
          autograd->impl(name.c_str(),
                         torch::CppFunction::makeFromBoxedFunctor(
                             std::make_unique<AutogradKernel>(level)));
          registrations->push_back(std::move(autograd));
        }
      },
      py::arg("name"), py::arg("num_floats"),
      py::arg("num_outputs"), py::arg("variants"), py::arg("backward"),
      py::arg("validator"), py::arg("provider") = py::none(),
      "Registers the CPU kernel of operator segops::<name> (and its CUDA "
      "kernel, if built) and, if it has a backward (the next level's "
      "operator name), its autograd kernel. "
      "variants maps 'f32_w3'-style keys to {'kernel', 'buffers' (manifest), "
      "'saved_for_backward' (per float argument)}; validator(*args) raises "
      "the error for arguments the kernel rejects; provider(key), if given, "
      "makes a variant for a key not in variants (a row width compiled at "
      "run time) or returns None.");
}
