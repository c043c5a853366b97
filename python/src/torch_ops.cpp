//===- torch_ops.cpp - segops operators as C++ PyTorch kernels ------------===//
//
// The CPU, autograd and Meta kernels of every segops operator level (one
// boxed implementation each, parameterized by the level), the checks of a
// call's arguments against its kernel's buffers, and the levels' variants.
// op_library.cpp registers the library ops with them; jit_call's programs
// run through the same calls (host_call.cpp, gpu_call.cpp).
//
// The checks here are generic: every tensor must match its kernel buffer's
// dtype and symbolic shape (N rows, S segments); when one does not, the
// level's validator hook (the Python package's, where it is loaded) words
// the error the user sees, so messages stay in one place.
//
//===----------------------------------------------------------------------===//

#include "torch_ops.h"

#include "autograd.h"

#include "segrt/BufferCache.h"
#include "segrt/Host.h"
#include "segrt/IndexCheck.h"

#include <ATen/Parallel.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <torch/csrc/autograd/function.h>
#include <torch/library.h>


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

void segops_torch::OperatorLevel::provide(const std::string &key,
                                         Variant variant) {
  std::unique_lock<std::shared_mutex> lock(providedMutex);
  provided.emplace(key, std::move(variant));
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
                                const std::string &backward,
                                const std::string &overload,
                                const std::string &backwardOverload) {
  auto level = std::make_shared<OperatorLevel>();
  level->name = name;
  level->overload = overload;
  level->numFloats = numFloats;
  level->numOutputs = numOutputs;
  level->backward = backward;
  if (!backward.empty())
    level->backwardOp = c10::Dispatcher::singleton().findSchemaOrThrow(
        ("segops::" + backward).c_str(), backwardOverload.c_str());
  if (!variants.empty())
    level->outputShapes = outputShapesOf(referenceVariant(variants));
  level->variants = std::move(variants);
  return level;
}

void segops_torch::registerLevelKernels(std::shared_ptr<OperatorLevel> level,
                                        bool withMetaKernel) {
  std::string name = level->qualifiedName();
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
