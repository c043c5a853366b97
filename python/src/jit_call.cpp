//===- jit_call.cpp - segops::jit_call, the operator of segops.jit programs -===//
//
// segops.jit runs every compiled function through one operator,
// `segops::jit_call(str program, Tensor[] args, SymInt num_segments)`. It is
// defined here, in the operator library, with its CPU, CUDA, autograd and
// Meta kernels, running the library ops' host and GPU launchers, so a warm call
// costs a dispatch and a kernel launch. Programs (one per specialization and
// derivative level) are registered with their kernels' addresses; a level
// not yet compiled (the first backward at that level) is asked of the
// compile hook (segops.jit's, with the GIL).
//
//===----------------------------------------------------------------------===//

#include "jit_call.h"

#include "autograd.h"

#include "segrt/IndexCheck.h"
#include "segrt/OpLibrary.h"

#include <ATen/Parallel.h>

#include <algorithm>
#include <map>
#include <mutex>
#include <shared_mutex>
#include <sstream>
#include <unordered_map>

namespace segops_torch {
namespace {

std::shared_mutex programsMutex;
// Never destroyed (made on first use: registered from static
// initialization): the dispatcher may run kernels until exit.
std::unordered_map<std::string, JitProgram> &programs() {
  static auto *registered = new std::unordered_map<std::string, JitProgram>();
  return *registered;
}
JitCompileHook &compileHook() {
  static auto *hook = new JitCompileHook();
  return *hook;
}

const JitProgram *registeredProgram(const std::string &name) {
  std::shared_lock<std::shared_mutex> lock(programsMutex);
  auto it = programs().find(name);
  return it == programs().end() ? nullptr : &it->second;
}

const JitProgram &findProgram(const std::string &name) {
  if (const JitProgram *program = registeredProgram(name))
    return *program;
  // Programs shipped with an exported model, named by the environment.
  static std::once_flag environmentLoaded;
  std::call_once(environmentLoaded, loadProgramsFromEnvironment);
  if (const JitProgram *program = registeredProgram(name))
    return *program;
  bool canCompile;
  {
    std::shared_lock<std::shared_mutex> lock(programsMutex);
    canCompile = static_cast<bool>(compileHook());
  }
  TORCH_CHECK(canCompile, "segops::jit_call: no program ", name,
              ": register the programs an exported model calls with "
              "segops::load_programs(directory) or SEGOPS_PROGRAMS=directory "
              "(segops.export.package writes them)");
  compileHook()(name); // raises the compiler's error, if any
  const JitProgram *program = registeredProgram(name);
  TORCH_CHECK(program, "segops::jit_call: program ", name,
              " was not registered by its compilation");
  return *program;
}

/// The call's floats (every tensor but idx), idx and S.
OperatorCall makeCall(const JitProgram &program, at::TensorList args,
                      int64_t numSegments, c10::DeviceType deviceType) {
  const OperatorLevel &level = *program.level;
  OperatorCall call;
  for (size_t i = 0; i < args.size(); ++i) {
    if (i == program.idxPosition)
      call.idx = args[i];
    else
      call.floats.push_back(args[i]);
  }
  call.numSegments = numSegments;
  call.variant = &level.variants.begin()->second;
  if (!call.idx.defined() || call.floats.size() != level.numFloats)
    reportInvalid(level, call.floats, call.idx, numSegments,
                  "wrong number of tensor arguments");
  std::string problem = mismatch(*call.variant, call.floats, call.idx,
                                 numSegments, deviceType);
  if (!problem.empty())
    reportInvalid(level, call.floats, call.idx, numSegments, problem);
  return call;
}

/// `index` (a second index on the call's device) as the int32 the kernels
/// read, checked to hold values in [0, numRows): remembered per index
/// content, so a neighbour list is checked (and an int64 one narrowed)
/// once, not per call.
at::Tensor checkedSecondIndex(const OperatorLevel &level,
                              const OperatorCall &call, size_t argument,
                              int64_t numRows, size_t table) {
  const at::Tensor &index = call.floats[argument];
  if (at::Tensor cached = cachedNarrowing(index, numRows); cached.defined())
    return cached;
  at::Tensor narrowed;
  bool inRange = true;
  if (index.is_cpu()) {
    at::Tensor contiguous = index.contiguous();
    if (index.scalar_type() == at::kLong) {
      narrowed = narrowHostIndex(contiguous, numRows, at::get_num_threads());
      inRange = narrowed.defined();
    } else {
      narrowed = contiguous;
      inRange = index.numel() == 0 ||
                segrt::checkIndex(contiguous.data_ptr<int32_t>(),
                                  /*is64Bit=*/false, index.numel(), numRows,
                                  at::get_num_threads(),
                                  /*requireSorted=*/false)
                        .problem == segrt::IndexProblem::None;
    }
  } else {
    // One host sync per index content (then remembered): a value out of
    // range would make the kernels read outside the table.
    inRange = index.numel() == 0 ||
              !((index < 0) | (index >= numRows)).any().item<bool>();
    narrowed = index.to(at::kInt).contiguous();
  }
  if (!inRange) {
    std::ostringstream problem;
    problem << "tensor argument " << argument
            << " (an index gathering rows of argument " << table
            << ") has values outside [0, " << numRows << ")";
    reportInvalid(level, call.floats, call.idx, call.numSegments,
                  problem.str());
  }
  rememberNarrowing(index, numRows, narrowed);
  return narrowed;
}

/// Second indices (read by seg.gather_rows, or summing a seg.scatter_sum's
/// rows): each checked against the rows of the tables it indexes, and
/// replaced in `call` by the int32 tensor the kernels read.
void prepareSecondIndices(const OperatorLevel &level, OperatorCall &call) {
  const Variant &variant = *call.variant;
  if (variant.indexedTables.empty())
    return;
  // Per second index (a float argument), the fewest rows of its tables.
  std::map<size_t, std::pair<int64_t, size_t>> limits;
  for (auto [index, table] : variant.indexedTables) {
    int64_t rows = call.floats[table].size(0);
    auto [it, inserted] = limits.try_emplace(index, rows, table);
    if (!inserted && rows < it->second.first)
      it->second = {rows, table};
  }
  for (auto [index, rowsAndTable] : limits)
    call.floats[index] = checkedSecondIndex(level, call, index,
                                            rowsAndTable.first,
                                            rowsAndTable.second);
}

/// seg.scatter_sum outputs: the kernel wrote their N rows; each is summed
/// by its index into its table's rows by segops::segmented_sum (by chunks
/// or over the index's transposed order: deterministic, no atomics).
void sumScatteredOutputs(const OperatorCall &call,
                         c10::SmallVector<at::Tensor, 4> &outputs) {
  static c10::OperatorHandle sum =
      c10::Dispatcher::singleton().findSchemaOrThrow("segops::segmented_sum",
                                                     "");
  const Variant &variant = *call.variant;
  if (variant.indexedTables.empty())
    return; // no scatter outputs either
  size_t output = 0;
  for (const Buffer &buffer : variant.buffers) {
    if (!buffer.isOutput)
      continue;
    at::Tensor &result = outputs[output++];
    if (buffer.sumsBy < 0)
      continue;
    const at::Tensor &index = call.floats[buffer.sumsBy];
    int64_t numRows = call.floats[buffer.sumsIntoRowsOf].size(0);
    torch::jit::Stack stack{c10::IValue(result), c10::IValue(index),
                            c10::IValue(c10::SymInt(numRows))};
    sum.callBoxed(&stack);
    result = stack.back().toTensor();
  }
}

/// jit_call's CPU kernel (the host kernels, or simulated GPU kernels) or
/// CUDA kernel.
class JitKernel final : public c10::OperatorKernel {
public:
  explicit JitKernel(c10::DeviceType deviceType) : deviceType(deviceType) {}

  void operator()(const c10::OperatorHandle &, c10::DispatchKeySet,
                  torch::jit::Stack *stack) {
    auto args = torch::jit::last(stack, 3);
    std::string name = args[0].toStringRef();
    std::vector<at::Tensor> tensors = args[1].toTensorVector();
    int64_t numSegments = args[2].toSymInt().guard_int(__FILE__, __LINE__);
    torch::jit::drop(stack, 3);
    const JitProgram &program = findProgram(name);
    OperatorCall call = makeCall(program, tensors, numSegments, deviceType);
    prepareSecondIndices(*program.level, call);
    // On CUDA idx's content costs a host sync to check: only in debug mode,
    // as for the library ops.
    if (deviceType == c10::DeviceType::CUDA && debugChecks())
      callValidator(*program.level, call.floats, call.idx, call.numSegments);
    c10::SmallVector<at::Tensor, 4> outputs =
        deviceType == c10::DeviceType::CUDA
            ? runCudaCall(*program.level, call)
            : runCpuCall(*program.level, call);
    sumScatteredOutputs(call, outputs);
    stack->emplace_back(
        c10::List<at::Tensor>(std::vector<at::Tensor>(outputs.begin(),
                                                      outputs.end())));
  }

private:
  c10::DeviceType deviceType;
};

/// jit_call's Meta (fake) kernel: the program's outputs, shaped from its
/// kernel record in the symbolic N and S of a trace (a scatter output has
/// as many rows as the table it sums into), without reading any data.
class JitMetaKernel final : public c10::OperatorKernel {
public:
  void operator()(const c10::OperatorHandle &, c10::DispatchKeySet,
                  torch::jit::Stack *stack) {
    auto args = torch::jit::last(stack, 3);
    std::string name = args[0].toStringRef();
    std::vector<at::Tensor> tensors = args[1].toTensorVector();
    c10::SymInt numSegments = args[2].toSymInt();
    torch::jit::drop(stack, 3);
    const JitProgram &program = findProgram(name);
    const OperatorLevel &level = *program.level;
    TORCH_CHECK_VALUE(tensors.size() == level.numFloats + 1,
                      "segops::jit_call: program ", name, " takes ",
                      level.numFloats + 1, " tensors, got ", tensors.size());
    const at::Tensor &idx = tensors[program.idxPosition];
    auto floatArgument = [&](int position) -> const at::Tensor & {
      size_t k = static_cast<size_t>(position);
      return tensors[k < program.idxPosition ? k : k + 1];
    };
    std::vector<at::Tensor> outputs;
    for (const Buffer &buffer : level.variants.begin()->second.buffers) {
      if (!buffer.isOutput)
        continue;
      c10::SymDimVector shape;
      for (int64_t dimension : buffer.shape) {
        TORCH_CHECK(dimension != kAnyRows, "segops::jit_call: program ", name,
                    " has an output of any number of rows");
        shape.push_back(dimension == kRows       ? idx.sym_size(0)
                        : dimension == kSegments ? numSegments
                                                 : c10::SymInt(dimension));
      }
      if (buffer.sumsBy >= 0)
        shape.front() = floatArgument(buffer.sumsIntoRowsOf).sym_size(0);
      outputs.push_back(
          at::empty_symint(shape, idx.options().dtype(buffer.dtype)));
    }
    stack->emplace_back(c10::List<at::Tensor>(std::move(outputs)));
  }
};

/// jit_call's autograd kernel: its arguments as the one autograd
/// implementation reads them (the tensor list, idx at the program's
/// position), and the next level as jit_call of `<program>_grad`.
class JitAutogradKernel final : public c10::OperatorKernel {
public:
  void operator()(const c10::OperatorHandle &op, c10::DispatchKeySet keys,
                  torch::jit::Stack *stack) {
    auto args = torch::jit::last(stack, 3);
    if (!wantsGradient(args[1].toTensorList()))
      return runBelowAutograd(op, keys, stack);
    std::string name = args[0].toStringRef();
    LevelCall call;
    call.tensors = args[1].toTensorVector();
    call.idxPosition = findProgram(name).idxPosition;
    call.numSegments = args[2].toSymInt();
    call.nodeName = "JitCallBackward";
    call.replaceIndex = [position = call.idxPosition](torch::jit::Stack &stack,
                                                      at::Tensor idx) {
      std::vector<at::Tensor> tensors = stack[stack.size() - 2].toTensorVector();
      tensors[position] = std::move(idx);
      stack[stack.size() - 2] = std::move(tensors);
    };
    call.callNext = [next = name + segrt::kGradientSuffix](
                        std::vector<at::Tensor> tensors, size_t,
                        const c10::SymInt &numSegments) {
      static c10::OperatorHandle jitCall =
          c10::Dispatcher::singleton().findSchemaOrThrow("segops::jit_call", "");
      torch::jit::Stack stack{c10::IValue(next), c10::IValue(std::move(tensors)),
                              c10::IValue(numSegments)};
      jitCall.callBoxed(&stack);
      return stack.back().toTensorVector();
    };
    differentiate(op, keys, stack, std::move(call));
  }
};

} // namespace

void setJitCompileHook(JitCompileHook hook) {
  std::unique_lock<std::shared_mutex> lock(programsMutex);
  compileHook() = std::move(hook);
}

void registerJitProgram(const std::string &name, JitProgram program) {
  std::unique_lock<std::shared_mutex> lock(programsMutex);
  programs().emplace(name, std::move(program));
}

JitProgram makeJitProgram(const std::string &name, Variant variant,
                          size_t idxPosition,
                          OperatorLevel::Validator validator) {
  size_t numFloats = variant.savedForBackward.size();
  size_t numOutputs =
      std::count_if(variant.buffers.begin(), variant.buffers.end(),
                    [](const Buffer &buffer) { return buffer.isOutput; });
  std::map<std::string, Variant> variants;
  variants.emplace("jit", std::move(variant));
  std::shared_ptr<OperatorLevel> level =
      makeOperatorLevel(name, numFloats, numOutputs, std::move(variants), "");
  if (validator)
    level->setHooks(std::move(validator), nullptr);
  return JitProgram{std::move(level), idxPosition};
}

void defineJitCall(torch::Library &library) {
  library.def("jit_call(str program, Tensor[] args, SymInt num_segments) -> Tensor[]");
  library.def("load_programs(str directory) -> int",
              [](std::string directory) { return loadPrograms(directory); });
  library.impl("jit_call",
               torch::dispatch(c10::DispatchKey::CPU,
                               torch::CppFunction::makeFromBoxedFunctor(
                                   std::make_unique<JitKernel>(c10::DeviceType::CPU))));
  if (cudaKernelsBuilt())
    library.impl("jit_call",
                 torch::dispatch(c10::DispatchKey::CUDA,
                                 torch::CppFunction::makeFromBoxedFunctor(
                                     std::make_unique<JitKernel>(
                                         c10::DeviceType::CUDA))));
  library.impl("jit_call",
               torch::dispatch(c10::DispatchKey::Meta,
                               torch::CppFunction::makeFromBoxedFunctor(
                                   std::make_unique<JitMetaKernel>())));
  library.impl("jit_call",
               torch::dispatch(c10::DispatchKey::Autograd,
                               torch::CppFunction::makeFromBoxedFunctor(
                                   std::make_unique<JitAutogradKernel>())));
}

} // namespace segops_torch
