//===- jit_ops.cpp - segops::jit_call's CPU and autograd kernels ----------===//
//
// segops.jit runs every compiled function through one operator,
// `segops::jit_call(str program, Tensor[] args, SymInt num_segments)`. Its
// CPU, CUDA and autograd kernels live here, in C++ like the library ops'
// (and running the same host and GPU launchers), so a warm call costs a
// dispatch and a kernel launch. Programs (one per
// specialization and derivative level) are registered by _jit.py with their
// kernels' addresses; a level not yet compiled (the first backward at that
// level) is compiled through a Python hook, with the GIL.
//
//===----------------------------------------------------------------------===//

#include "torch_ops_bindings.h"

#include "segrt/IndexCheck.h"

#include <torch/csrc/autograd/functions/utils.h>
#include <torch/csrc/autograd/python_variable.h>

#include <ATen/Parallel.h>
#include <pybind11/stl.h>

#include <map>
#include <memory>
#include <shared_mutex>
#include <string>
#include <unordered_map>

namespace py = pybind11;
using namespace segops_torch;
using torch::autograd::Node;
using torch::autograd::SavedVariable;
using torch::autograd::variable_list;

namespace {
/// One registered program level: the level (its one variant, "jit"), and
/// where idx is among its tensor arguments.
struct JitProgram {
  std::shared_ptr<const OperatorLevel> level;
  size_t idxPosition = 0;
};

std::shared_mutex programsMutex;
// Never destroyed: the dispatcher may run kernels during interpreter exit.
auto *programs = new std::unordered_map<std::string, JitProgram>();
/// compile(program) compiles a level and registers it (_jit.py); a strong
/// reference kept until exit.
PyObject *compileHook = nullptr;

const JitProgram &findProgram(const std::string &name) {
  {
    std::shared_lock<std::shared_mutex> lock(programsMutex);
    auto it = programs->find(name);
    if (it != programs->end())
      return it->second;
  }
  TORCH_CHECK(compileHook, "segops::jit_call: no program ", name);
  {
    py::gil_scoped_acquire gil;
    py::handle hook(compileHook);
    hook(name); // raises the compiler's error, if any
  }
  std::shared_lock<std::shared_mutex> lock(programsMutex);
  auto it = programs->find(name);
  TORCH_CHECK(it != programs->end(), "segops::jit_call: program ", name,
              " was not registered by its compilation");
  return it->second;
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

/// The backward of one program level: jit_call of the next level on the
/// saved arguments and the output cotangents (through the dispatcher, so
/// that it is differentiable in turn).
struct JitCallBackward final : Node {
  std::string next;
  size_t idxPosition = 0;
  std::vector<SavedVariable> args;
  c10::SymInt numSegments;

  variable_list apply(variable_list &&grads) override {
    static c10::OperatorHandle op =
        c10::Dispatcher::singleton().findSchemaOrThrow("segops::jit_call", "");
    std::vector<at::Tensor> inputs;
    for (const SavedVariable &saved : args)
      inputs.push_back(saved.unpack());
    for (size_t i = 0; i < grads.size(); ++i)
      inputs.push_back(grads[i].defined() ? grads[i]
                                          : input_metadata(i).zeros_like());
    torch::jit::Stack stack{c10::IValue(next), c10::IValue(inputs),
                            c10::IValue(numSegments)};
    op.callBoxed(&stack);
    std::vector<at::Tensor> result = stack.back().toTensorVector();
    // The next level returns gradients of the float arguments only: a
    // second index (an integer tensor) gets none.
    variable_list gradients;
    size_t next = 0;
    for (size_t i = 0; i < args.size(); ++i) {
      if (i == idxPosition)
        continue;
      bool isIndex = !isFloatingType(inputs[i].scalar_type());
      gradients.push_back(isIndex || next == result.size() ? at::Tensor()
                                                           : result[next++]);
    }
    return gradients;
  }

  void release_variables() override { args.clear(); }
  std::string name() const override { return "JitCallBackward"; }
};

class JitAutogradKernel final : public c10::OperatorKernel {
public:
  void operator()(const c10::OperatorHandle &op, c10::DispatchKeySet keys,
                  torch::jit::Stack *stack) {
    auto args = torch::jit::last(stack, 3);
    std::string name = args[0].toStringRef();
    std::vector<at::Tensor> tensors = args[1].toTensorVector();
    c10::SymInt numSegments = args[2].toSymInt();
    const JitProgram &program = findProgram(name);
    std::vector<at::Tensor> floats;
    bool requiresGrad = false;
    for (size_t i = 0; i < tensors.size(); ++i) {
      if (i == program.idxPosition)
        continue;
      floats.push_back(tensors[i]);
      requiresGrad |= tensors[i].requires_grad();
    }
    requiresGrad &= at::GradMode::is_enabled();
    {
      at::AutoDispatchBelowADInplaceOrView guard;
      op.redispatchBoxed(keys & c10::after_ADInplaceOrView_keyset, stack);
    }
    if (!requiresGrad)
      return;
    auto node = makeNode<JitCallBackward>();
    auto *backward = static_cast<JitCallBackward *>(node.get());
    backward->next = name + "_grad";
    backward->idxPosition = program.idxPosition;
    for (const at::Tensor &tensor : tensors)
      backward->args.emplace_back(tensor, /*is_output=*/false);
    backward->numSegments = numSegments;
    node->set_next_edges(
        torch::autograd::collect_next_edges(at::TensorList(floats)));
    for (const at::Tensor &output : stack->back().toTensorVector())
      torch::autograd::set_history(const_cast<at::Tensor &>(output), node);
  }
};

auto *registrations = new std::vector<std::unique_ptr<torch::Library>>();

/// A segops.jit function's warm path: its specializations by argument
/// metadata (per tensor its dtype, rank, element shape and whether it is
/// on CUDA; ints by type), each calling jit_call through the dispatcher.
/// A call whose key is not there (the first with these types, or with
/// arguments this table does not key: floats, symbolic sizes) returns None
/// and _jit.py specializes it in Python.
class JitCallTable {
public:
  py::object call(const py::args &args) {
    std::vector<int64_t> key;
    if (!makeKey(args, key))
      return py::none();
    const Entry *entry = nullptr;
    {
      std::shared_lock<std::shared_mutex> lock(mutex);
      auto it = entries.find(key);
      if (it == entries.end())
        return py::none();
      entry = &it->second;
    }
    std::vector<at::Tensor> tensors;
    tensors.reserve(entry->tensorPositions.size());
    for (int position : entry->tensorPositions)
      tensors.push_back(THPVariable_Unpack(args[position].ptr()));
    int64_t numSegments = args[entry->sizePosition].cast<int64_t>();
    static c10::OperatorHandle op =
        c10::Dispatcher::singleton().findSchemaOrThrow("segops::jit_call", "");
    torch::jit::Stack stack{c10::IValue(entry->program),
                            c10::IValue(std::move(tensors)),
                            c10::IValue(numSegments)};
    {
      py::gil_scoped_release release;
      op.callBoxed(&stack);
    }
    std::vector<at::Tensor> outputs = stack.back().toTensorVector();
    if (entry->single)
      return py::reinterpret_steal<py::object>(THPVariable_Wrap(outputs[0]));
    py::tuple result(outputs.size());
    for (size_t i = 0; i < outputs.size(); ++i)
      result[i] = py::reinterpret_steal<py::object>(THPVariable_Wrap(outputs[i]));
    return result;
  }

  /// Keys `args` (as a call would) to a specialization.
  void add(const py::args &args, const std::string &program,
           std::vector<int> tensorPositions, int sizePosition, bool single) {
    std::vector<int64_t> key;
    if (!makeKey(args, key))
      return; // such calls take the Python path
    std::unique_lock<std::shared_mutex> lock(mutex);
    entries[key] = Entry{program, std::move(tensorPositions), sizePosition,
                         single};
  }

private:
  struct Entry {
    std::string program;
    std::vector<int> tensorPositions;
    int sizePosition = 0;
    bool single = true;
  };

  /// Per tensor its dtype, rank, element shape, device type and whether
  /// its length is N (the first 1-D integer tensor's), S (the first int),
  /// both or neither (as _jit.py's key: the length tells a tensor's space);
  /// ints by type.
  static bool makeKey(const py::args &args, std::vector<int64_t> &key) {
    int64_t rows = -1, segments = -1;
    for (py::handle arg : args) {
      PyObject *object = arg.ptr();
      if (rows < 0 && THPVariable_Check(object)) {
        const at::Tensor &tensor = THPVariable_Unpack(object);
        if (tensor.dim() == 1 && !tensor.unsafeGetTensorImpl()
                                      ->has_symbolic_sizes_strides() &&
            (tensor.scalar_type() == at::kInt ||
             tensor.scalar_type() == at::kLong))
          rows = tensor.size(0);
      } else if (segments < 0 && PyLong_CheckExact(object)) {
        segments = PyLong_AsLongLong(object);
        if (segments < 0) {
          PyErr_Clear(); // overflow or negative: the Python path reports it
          return false;
        }
      }
    }
    key.reserve(5 * args.size());
    for (py::handle arg : args) {
      PyObject *object = arg.ptr();
      if (THPVariable_Check(object)) {
        const at::Tensor &tensor = THPVariable_Unpack(object);
        if (tensor.unsafeGetTensorImpl()->has_symbolic_sizes_strides())
          return false;
        key.push_back(static_cast<int64_t>(tensor.scalar_type()));
        key.push_back(tensor.dim());
        for (int64_t d = 1; d < tensor.dim(); ++d)
          key.push_back(tensor.size(d));
        key.push_back(tensor.is_cuda() ? -2 : -1);
        if (tensor.dim() > 0)
          key.push_back(int64_t(tensor.size(0) == rows) |
                        int64_t(tensor.size(0) == segments) << 1);
      } else if (PyLong_CheckExact(object)) {
        key.push_back(-3);
      } else {
        return false;
      }
    }
    return true;
  }

  std::shared_mutex mutex;
  std::map<std::vector<int64_t>, Entry> entries;
};
} // namespace

void segops_torch::registerJitBindings(py::module_ &m) {
  py::class_<JitCallTable>(m, "JitCallTable")
      .def(py::init<>())
      .def("__call__", &JitCallTable::call,
           "jit_call of the specialization these arguments key, or None.")
      .def("add", &JitCallTable::add, py::arg("program"),
           py::arg("tensor_positions"), py::arg("size_position"),
           py::arg("single"),
           "Keys calls like args(...) to `program`.");
  m.def(
      "register_jit_op",
      [](py::object hook) {
        compileHook = hook.release().ptr();
        auto add = [](c10::DispatchKey key, auto kernel) {
          auto library = std::make_unique<torch::Library>(
              torch::Library::IMPL, "segops", key, __FILE__, __LINE__);
          library->impl("jit_call", torch::CppFunction::makeFromBoxedFunctor(
                                        std::move(kernel)));
          registrations->push_back(std::move(library));
        };
        add(c10::DispatchKey::CPU,
            std::make_unique<JitKernel>(c10::DeviceType::CPU));
        if (cudaKernelsBuilt())
          add(c10::DispatchKey::CUDA,
              std::make_unique<JitKernel>(c10::DeviceType::CUDA));
        add(c10::DispatchKey::Autograd,
            std::make_unique<JitAutogradKernel>());
      },
      py::arg("compile"),
      "Registers segops::jit_call's CPU, CUDA (where built) and autograd "
      "kernels (the schema is defined by _jit.py); compile(program) compiles and registers a "
      "program level not registered yet.");
  m.def(
      "register_jit_program",
      [](const std::string &name, size_t numFloats, size_t numOutputs,
         const py::dict &variant, size_t idxPosition, py::object validator) {
        std::map<std::string, Variant> variants;
        variants.emplace("jit", parseVariantDescription(variant));
        std::shared_ptr<OperatorLevel> level = makeOperatorLevel(
            name, numFloats, numOutputs, std::move(variants), "");
        level->setHooks(pythonValidator(std::move(validator)), nullptr);
        JitProgram program;
        program.level = std::move(level);
        program.idxPosition = idxPosition;
        std::unique_lock<std::shared_mutex> lock(programsMutex);
        programs->emplace(name, std::move(program));
      },
      py::arg("name"), py::arg("num_floats"), py::arg("num_outputs"),
      py::arg("variant"), py::arg("idx_position"), py::arg("validator"),
      "Registers one compiled program level for jit_call (variant: its "
      "manifest entry and kernel addresses, see parseVariantDescription).");
}
