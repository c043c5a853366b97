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
#include <cstring>
#include <optional>
#include <map>
#include <shared_mutex>
#include <string>

namespace py = pybind11;
using namespace segops_torch;

namespace {

/// The specialization key of segops.jit calls: the one key of a call's
/// arguments, for the warm-path table below, _jit.JitFunction and
/// _jit_stages.StagedFunction alike. Per argument, tagged:
/// - a tensor: dtype, rank, element shape (dims 1..), CUDA or not; a 0-d
///   tensor is a uniform value (nothing more); else its length class: the
///   one given, or, with none given, whether its length is N (the first
///   1-D integer tensor's), S (the first int), both or neither; a tensor of
///   no class (or neither length) adds its whole shape;
/// - an int (or torch.SymInt): by type, or by value where a class list
///   gives it none; a float by its bits (-0.0 and each NaN are their own
///   constants); a bool by value; None;
/// - anything else by equality: its position in `extras`.
/// Symbolic sizes (fake tensors inside torch.compile) key by their example
/// value, without a guard: a trace depends on no size.
struct SpecializationKey {
  std::vector<int64_t> codes;
  std::vector<py::handle> extras;
};

// Tags, and the length classes inferred (kBothLengths: row | segment).
constexpr int64_t kTensorTag = -101, kCountTag = -102, kIntValueTag = -103,
                  kFloatTag = -104, kBoolTag = -105, kNoneTag = -106,
                  kObjectTag = -107;
constexpr int64_t kNoClass = -1, kOtherLength = 0, kRowLength = 1,
                  kSegmentLength = 2;

bool isSymInt(py::handle object) {
  static py::handle symInt =
      py::object(py::module_::import("torch").attr("SymInt")).release();
  return PyObject_IsInstance(object.ptr(), symInt.ptr()) == 1;
}

/// A size without a guard: a symbolic one's example value.
int64_t exampleValue(const c10::SymInt &size) {
  if (std::optional<int64_t> value = size.maybe_as_int())
    return *value;
  return py::cast(size).attr("node").attr("hint").cast<int64_t>();
}

int64_t exampleValue(py::handle count) {
  if (PyLong_CheckExact(count.ptr()))
    return PyLong_AsLongLong(count.ptr());
  return count.attr("node").attr("hint").cast<int64_t>();
}

/// Keys `args`; `classes`: per argument its length class or None (none
/// given: inferred from N and S). False if an int is out of range.
bool makeKey(py::sequence args, const std::optional<py::sequence> &classes,
             SpecializationKey &key) {
  int64_t rows = -1, segments = -1;
  if (!classes) {
    for (py::handle arg : args) {
      PyObject *object = arg.ptr();
      if (THPVariable_Check(object)) {
        const at::Tensor &tensor = THPVariable_Unpack(object);
        if (rows < 0 && tensor.dim() == 1 &&
            (tensor.scalar_type() == at::kInt ||
             tensor.scalar_type() == at::kLong))
          rows = exampleValue(tensor.sym_size(0));
      } else if (segments < 0 &&
                 (PyLong_CheckExact(object) || isSymInt(arg))) {
        segments = exampleValue(arg);
        if (PyErr_Occurred()) {
          PyErr_Clear(); // overflow: the Python path reports it
          return false;
        }
      }
    }
  }
  key.codes.reserve(6 * args.size());
  size_t position = 0;
  for (py::handle arg : args) {
    PyObject *object = arg.ptr();
    std::optional<int64_t> givenClass;
    if (classes) {
      py::handle cls = (*classes)[position];
      givenClass = cls.is_none() ? kNoClass : cls.cast<int64_t>();
    }
    ++position;
    if (THPVariable_Check(object)) {
      const at::Tensor &tensor = THPVariable_Unpack(object);
      c10::SymIntArrayRef sizes = tensor.sym_sizes();
      key.codes.push_back(kTensorTag);
      key.codes.push_back(static_cast<int64_t>(tensor.scalar_type()));
      key.codes.push_back(tensor.dim());
      key.codes.push_back(tensor.is_cuda());
      if (tensor.dim() == 0)
        continue; // a uniform value
      for (size_t d = 1; d < sizes.size(); ++d)
        key.codes.push_back(exampleValue(sizes[d]));
      int64_t length = exampleValue(sizes[0]);
      int64_t lengthClass =
          givenClass ? *givenClass
                     : (length == rows ? kRowLength : kOtherLength) |
                           (length == segments ? kSegmentLength : 0);
      key.codes.push_back(lengthClass);
      if (lengthClass == kNoClass || (!givenClass && lengthClass == kOtherLength))
        key.codes.push_back(length); // with the element shape: all of it
    } else if (PyBool_Check(object)) {
      key.codes.push_back(kBoolTag);
      key.codes.push_back(object == Py_True);
    } else if (PyLong_CheckExact(object) || isSymInt(arg)) {
      if (givenClass && *givenClass == kNoClass) {
        key.codes.push_back(kIntValueTag);
        key.codes.push_back(exampleValue(arg));
        if (PyErr_Occurred()) {
          PyErr_Clear();
          return false;
        }
      } else {
        key.codes.push_back(kCountTag);
      }
    } else if (PyFloat_CheckExact(object)) {
      double value = PyFloat_AS_DOUBLE(object);
      int64_t bits;
      std::memcpy(&bits, &value, sizeof bits);
      key.codes.push_back(kFloatTag);
      key.codes.push_back(bits);
    } else if (object == Py_None) {
      key.codes.push_back(kNoneTag);
    } else {
      key.codes.push_back(kObjectTag);
      key.codes.push_back(key.extras.size());
      key.extras.push_back(arg);
    }
  }
  return true;
}

/// The key as a hashable Python value: (codes as bytes, *extras).
py::object keyObject(const SpecializationKey &key) {
  py::tuple result(1 + key.extras.size());
  result[0] = py::bytes(reinterpret_cast<const char *>(key.codes.data()),
                        key.codes.size() * sizeof(int64_t));
  for (size_t i = 0; i < key.extras.size(); ++i)
    result[1 + i] = py::reinterpret_borrow<py::object>(key.extras[i]);
  return result;
}

/// A segops.jit function's warm path: its specializations by their key
/// (SpecializationKey, classes inferred), each calling jit_call through the
/// dispatcher. A call whose key is not there (the first with these types,
/// or with arguments keyed by equality) returns None and _jit.py
/// specializes it in Python.
class JitCallTable {
public:
  py::object call(const py::args &args) {
    SpecializationKey key;
    if (!makeKey(args, std::nullopt, key) || !key.extras.empty())
      return py::none();
    const Entry *entry = nullptr;
    {
      std::shared_lock<std::shared_mutex> lock(mutex);
      auto it = entries.find(key.codes);
      if (it == entries.end())
        return py::none();
      entry = &it->second;
    }
    int64_t numSegments = args[entry->sizePosition].cast<int64_t>();
    if (numSegments < 0)
      return py::none(); // the Python path words the error
    std::vector<at::Tensor> tensors;
    tensors.reserve(entry->tensorPositions.size());
    for (int position : entry->tensorPositions)
      tensors.push_back(THPVariable_Unpack(args[position].ptr()));
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
    SpecializationKey key;
    if (!makeKey(args, std::nullopt, key) || !key.extras.empty())
      return; // such calls take the Python path
    std::unique_lock<std::shared_mutex> lock(mutex);
    entries[key.codes] = Entry{program, std::move(tensorPositions),
                               sizePosition, single};
  }

private:
  struct Entry {
    std::string program;
    std::vector<int> tensorPositions;
    int sizePosition = 0;
    bool single = true;
  };

  std::shared_mutex mutex;
  std::map<std::vector<int64_t>, Entry> entries;
};
} // namespace

void segops_torch::registerJitBindings(py::module_ &m) {
  m.def(
      "specialization_key",
      [](py::sequence args, std::optional<py::sequence> classes) -> py::object {
        SpecializationKey key;
        if (classes && classes->size() != args.size())
          throw py::value_error("specialization_key: one class per argument");
        if (!makeKey(args, classes, key))
          throw py::value_error("specialization_key: an int out of range");
        return keyObject(key);
      },
      py::arg("args"), py::arg("classes") = py::none(),
      "The specialization key of a segops.jit call's arguments (the warm "
      "path's, see SpecializationKey): hashable; `classes`: per argument its "
      "length class or None, else inferred from N and S.");
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
        registerJitProgram(name, makeJitProgram(name, variantOf(kernel),
                                                idxPosition,
                                                pythonValidator(
                                                    std::move(validator))));
      },
      py::arg("name"), py::arg("kernel"), py::arg("idx_position"),
      py::arg("validator"),
      "Registers one compiled program level (a CompiledKernel) for "
      "jit_call.");
}
