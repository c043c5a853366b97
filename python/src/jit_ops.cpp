//===- jit_ops.cpp - segops.jit's side of jit_call in _torchops -----------===//
//
// What segops.jit adds to jit_call (jit_call.cpp): its compile hook, the
// registration of compiled programs (manifest entries and addresses), and
// the warm path, a C++ table from argument metadata to programs.
//
//===----------------------------------------------------------------------===//

#include "jit_call.h"
#include "torch_ops_bindings.h"

#include <torch/csrc/autograd/python_variable.h>

#include <pybind11/stl.h>

#include <algorithm>
#include <map>
#include <shared_mutex>
#include <string>

namespace py = pybind11;
using namespace segops_torch;

namespace {
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
        py::handle kept = hook.release(); // levels may compile until exit
        setJitCompileHook([kept](const std::string &program) {
          py::gil_scoped_acquire gil;
          kept(program);
        });
      },
      py::arg("compile"),
      "Sets jit_call's compile hook: compile(program) compiles and registers "
      "a program level not registered yet.");
  m.def(
      "register_jit_program",
      [](const std::string &name, const CompiledKernel &kernel,
         size_t idxPosition, py::object validator) {
        // Its float arguments and outputs are its kernel's buffers.
        Variant variant = variantOf(kernel);
        size_t numFloats = variant.savedForBackward.size();
        size_t numOutputs = std::count_if(
            variant.buffers.begin(), variant.buffers.end(),
            [](const Buffer &buffer) { return buffer.isOutput; });
        std::map<std::string, Variant> variants;
        variants.emplace("jit", std::move(variant));
        std::shared_ptr<OperatorLevel> level = makeOperatorLevel(
            name, numFloats, numOutputs, std::move(variants), "");
        level->setHooks(pythonValidator(std::move(validator)), nullptr);
        registerJitProgram(name, JitProgram{std::move(level), idxPosition});
      },
      py::arg("name"), py::arg("kernel"), py::arg("idx_position"),
      py::arg("validator"),
      "Registers one compiled program level (a CompiledKernel) for "
      "jit_call.");
}
