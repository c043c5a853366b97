//===- op_library.cpp - the segops operators, defined and registered in C++ -===//
//
// libsegops_ops.so: loading it (torch.ops.load_library, or linking it into a
// C++ program) defines every library operator, segops::<op> and its
// derivative levels <op>_grad... with their CPU, CUDA (where built),
// autograd and Meta kernels, from the op library beside it: its manifest
// names the kernels (one per op, dtype, row width and level), and their
// host code is the best build of libsegops_host_<cpu>.so this CPU runs. No
// Python is needed; the Python package attaches hooks on top (error
// wording, row widths compiled at run time, PTX per device).
//
//===----------------------------------------------------------------------===//

#include "jit_call.h"
#include "manifest_record.h"
#include "torch_ops.h"

#include "segrt/CpuLevel.h"
#include "segrt/Host.h"
#include "segrt/OpLibrary.h"

#include <torch/library.h>

#include <dlfcn.h>

#include <fstream>
#include <map>
#include <sstream>

namespace segops_torch {
namespace {

/// The directory holding this shared library (and the op library).
std::string libraryDirectory() {
  Dl_info info;
  if (!dladdr(reinterpret_cast<void *>(&libraryDirectory), &info) ||
      !info.dli_fname)
    throw std::runtime_error("segops: cannot locate libsegops_ops.so");
  std::string path = info.dli_fname;
  size_t slash = path.rfind('/');
  return slash == std::string::npos ? "." : path.substr(0, slash);
}

/// A kernel's name split into the operator level it serves
/// (segmented_sum_grad) and its variant key (f32_w3).
struct KernelName {
  std::string op;
  std::string key;
  int level = 0;
};

// Parsed by hand, not with std::regex: this runs while the library loads,
// and a toolchain that links libstdc++ statically (the GPU machine's) may
// not have initialized the locale std::regex needs by then.
std::optional<KernelName> splitKernelName(std::string name) {
  // name = <op>_<f32|f64>_w<digits>(_grad)*
  const std::string suffix = segrt::kGradientSuffix;
  int level = 0;
  while (name.size() > suffix.size() &&
         name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0) {
    name.resize(name.size() - suffix.size());
    ++level;
  }
  size_t digits = name.find_last_not_of("0123456789");
  if (digits == std::string::npos || digits + 1 == name.size() ||
      digits < 5 || name.compare(digits - 1, 2, "_w") != 0)
    return std::nullopt;
  size_t dtype = digits - 5; // the '_' before f32 or f64
  std::string type = name.substr(dtype + 1, 3);
  if (dtype == 0 || name[dtype] != '_' || (type != "f32" && type != "f64"))
    return std::nullopt;
  return KernelName{name.substr(0, dtype), name.substr(dtype + 1), level};
}

/// The outputs of the level below that a level's kernels take (their
/// buffers' saved_result, in order): the same for every variant, since one
/// schema serves them all.
std::vector<size_t>
savedResultsOf(const std::map<std::string, Variant> &variants) {
  std::optional<std::vector<size_t>> common;
  for (const auto &[key, variant] : variants) {
    std::vector<size_t> saved;
    for (const Buffer &buffer : variant.buffers)
      if (buffer.savedResult >= 0)
        saved.push_back(buffer.savedResult);
    if (common && *common != saved)
      throw std::runtime_error("segops: the op library's kernels of " +
                               variant.kernel +
                               " take other saved results than their "
                               "level's other kernels");
    common = std::move(saved);
  }
  return common.value_or(std::vector<size_t>{});
}

std::string levelName(const std::string &op, int level) {
  std::string name = op;
  for (int i = 0; i < level; ++i)
    name += segrt::kGradientSuffix;
  return name;
}

/// Appends to `kinds` what `variant`'s level adds to the float arguments of
/// the level below (`kinds`; empty: `variant` is the op itself): "arg"s for
/// the op, else the results of the level below that it reads, saved by
/// autograd ("saved"), and the cotangents ("grad"). Returns its number of
/// outputs.
size_t addLevelKinds(const Variant &variant, std::vector<std::string> &kinds) {
  size_t floats = 0, outputs = 0;
  bool isForward = kinds.empty();
  for (const Buffer &buffer : variant.buffers) {
    if (buffer.isOutput)
      ++outputs;
    else if (!buffer.isIndex && floats++ == kinds.size())
      kinds.push_back(isForward                 ? "arg"
                      : buffer.savedResult >= 0 ? "saved"
                                                : "grad");
  }
  return outputs;
}

/// `segops::<name>(Tensor arg0, ..., Tensor saved<i>, ..., Tensor grad<i>,
/// ..., Tensor idx, SymInt num_segments)`, the floats of `kinds` named by
/// kind and position; without the "saved" ones if not `withSaved`.
std::string schemaOf(const std::string &name,
                     const std::vector<std::string> &kinds, size_t outputs,
                     bool withSaved) {
  std::string schema = name + "(";
  size_t position = 0;
  for (const std::string &kind : kinds)
    if (withSaved || kind != "saved")
      schema += "Tensor " + kind + std::to_string(position++) + ", ";
  schema += "Tensor idx, SymInt num_segments) -> ";
  if (outputs == 1)
    return schema + "Tensor";
  schema += "(";
  for (size_t k = 0; k < outputs; ++k)
    schema += k ? ", Tensor" : "Tensor";
  return schema + ")";
}

/// A level below a recomputing overload: its operator (the one with the
/// kernels), its number of outputs and those the level above takes.
struct LevelBelow {
  c10::OperatorHandle op;
  size_t numOutputs = 0;
  std::vector<size_t> savedResults;
};

/// The default overload of a level whose kernels take saved results (its
/// `saved` overload): the same arguments less the saved ones, the contract
/// of a level that recomputes what it needs. It runs the levels below to
/// get those results, then the `saved` overload. A composite
/// (CompositeImplicitAutograd): autograd, Meta and traces follow the calls.
class RecomputingKernel final : public c10::OperatorKernel {
public:
  RecomputingKernel(size_t numArguments, std::vector<LevelBelow> below,
                    c10::OperatorHandle target)
      : numArguments(numArguments), below(std::move(below)),
        target(std::move(target)) {}

  void operator()(const c10::OperatorHandle &op, c10::DispatchKeySet,
                  torch::jit::Stack *stack) {
    size_t numInputs = op.schema().arguments().size();
    auto args = torch::jit::last(stack, numInputs);
    c10::IValue idx = args[numInputs - 2], numSegments = args[numInputs - 1];
    // The float arguments of each level in turn, saved results included.
    torch::jit::Stack floats(args.begin(), args.begin() + numArguments);
    size_t next = numArguments;
    for (const LevelBelow &level : below) {
      if (!level.savedResults.empty()) {
        torch::jit::Stack call = floats;
        call.push_back(idx);
        call.push_back(numSegments);
        level.op.callBoxed(call);
        for (size_t k : level.savedResults)
          floats.push_back(call.at(k));
      }
      for (size_t k = 0; k < level.numOutputs; ++k)
        floats.push_back(args[next++]);
    }
    torch::jit::drop(stack, numInputs);
    floats.push_back(std::move(idx));
    floats.push_back(std::move(numSegments));
    target.callBoxed(floats);
    for (c10::IValue &output : floats)
      stack->push_back(std::move(output));
  }

private:
  size_t numArguments;
  std::vector<LevelBelow> below;
  c10::OperatorHandle target;
};

} // namespace

OperatorSignature signatureOf(const OperatorLevel &level) {
  // As schemaOf writes it: the float arguments, then idx, then S.
  OperatorSignature signature;
  signature.numArguments = level.numArguments;
  signature.numLevelInputs = level.numFloats - level.numArguments;
  signature.idxPosition = level.numFloats;
  signature.numSegmentsPosition = level.numFloats + 1;
  signature.numOutputs = level.numOutputs;
  signature.derivativeOrder = level.derivativeOrder;
  signature.backward = level.backward;
  signature.savedResults = level.savedResults;
  return signature;
}

namespace {

// Never destroyed: the dispatcher may call the kernels until exit.
segrt::HostLibrary *hostLibrary = nullptr;
auto *levelsByName =
    new std::map<std::string, std::shared_ptr<OperatorLevel>>();
auto *compositeRegistrations =
    new std::vector<std::unique_ptr<torch::Library>>();

void defineLibraryOps(torch::Library &library) {
  runWorkersOnIntraOpPool();
  std::string directory = libraryDirectory();
  segops_python::ManifestRecord manifest =
      segops_python::readManifest(directory + "/manifest.json");
  hostLibrary = new segrt::HostLibrary(
      directory + "/" + segops_python::chooseHostBuild(manifest).library);
  libraryGpuModules()->setPtxSource(
      [ptx = readPortablePtx(manifest, directory)](int) { return ptx; });
  auto resolve = [](const std::string &symbol) {
    return hostLibrary->lookup(symbol);
  };
  defineJitCall(library);

  // Every kernel, by operator, level and variant key.
  struct Level {
    std::map<std::string, Variant> variants;
  };
  std::map<std::string, std::map<int, Level>> ops;
  for (const segops_python::KernelRecord &kernel : manifest.kernels) {
    std::optional<KernelName> name = splitKernelName(kernel.name);
    if (!name)
      continue;
    ops[name->op][name->level].variants.emplace(name->key,
                                                variantOf(kernel, resolve));
  }

  for (auto &[op, levels] : ops) {
    size_t numArguments =
        levels.begin()->second.variants.begin()->second.savedForBackward.size();
    // A level whose kernels take saved results (its own or, through the
    // levels below, those of a lower level) is the overload `saved`; its
    // default overload recomputes them.
    std::vector<std::string> kinds;
    std::map<int, std::string> overloads;
    std::map<int, size_t> numOutputs;
    for (auto &[number, level] : levels) {
      std::string name = levelName(op, number);
      numOutputs[number] = addLevelKinds(level.variants.begin()->second, kinds);
      bool takesSaved =
          std::find(kinds.begin(), kinds.end(), "saved") != kinds.end();
      library.def(schemaOf(name, kinds, numOutputs[number], /*withSaved=*/false)
                      .c_str());
      if (takesSaved) {
        overloads[number] = kSavedOverload;
        library.def(schemaOf(name + "." + kSavedOverload, kinds,
                             numOutputs[number], /*withSaved=*/true)
                        .c_str());
      }
    }
    // Each level saves what the next level's kernel reads: of its float
    // arguments, those the next reads; of its outputs, those the next takes.
    std::map<int, std::vector<size_t>> savedResults;
    for (auto &[number, level] : levels) {
      auto next = levels.find(number + 1);
      if (next == levels.end())
        continue;
      savedResults[number] = savedResultsOf(next->second.variants);
      for (auto &[key, variant] : level.variants) {
        auto reader = next->second.variants.find(key);
        if (reader == next->second.variants.end())
          continue;
        size_t argument = 0;
        for (const Buffer &buffer : reader->second.buffers)
          if (!buffer.isOutput && !buffer.isIndex &&
              argument < variant.savedForBackward.size())
            variant.savedForBackward[argument++] = buffer.isRead;
      }
    }
    // The last level first: each level's autograd calls the next one.
    for (auto it = levels.rbegin(); it != levels.rend(); ++it) {
      auto &[number, level] = *it;
      const Variant &any = level.variants.begin()->second;
      size_t numFloats = any.savedForBackward.size();
      std::string name = levelName(op, number);
      std::string backward =
          levels.count(number + 1) ? levelName(op, number + 1) : "";
      std::shared_ptr<OperatorLevel> registered = makeOperatorLevel(
          name, numFloats, numOutputs[number], std::move(level.variants),
          backward, overloads[number], overloads[number + 1]);
      registered->derivativeOrder = number;
      registered->numArguments = numArguments;
      registered->savedResults = savedResults[number];
      registerLevelKernels(registered, /*withMetaKernel=*/true);
      levelsByName->emplace(name, std::move(registered));
      if (overloads[number].empty())
        continue;
      std::vector<LevelBelow> below;
      for (int lower = levels.begin()->first; lower < number; ++lower)
        below.push_back({c10::Dispatcher::singleton().findSchemaOrThrow(
                             ("segops::" + levelName(op, lower)).c_str(),
                             overloads[lower].c_str()),
                         numOutputs[lower], savedResults[lower]});
      auto composite = std::make_unique<torch::Library>(
          torch::Library::IMPL, "segops",
          c10::DispatchKey::CompositeImplicitAutograd, __FILE__, __LINE__);
      composite->impl(
          name.c_str(),
          torch::CppFunction::makeFromBoxedFunctor(
              std::make_unique<RecomputingKernel>(
                  numArguments, std::move(below),
                  c10::Dispatcher::singleton().findSchemaOrThrow(
                      ("segops::" + name).c_str(), kSavedOverload))));
      compositeRegistrations->push_back(std::move(composite));
    }
  }
}

// Why the library defined no operators ("": it did).
auto *loadError = new std::string();

} // namespace

const std::string &libraryLoadError() { return *loadError; }

std::shared_ptr<OperatorLevel> libraryLevel(const std::string &name) {
  auto it = levelsByName->find(name);
  return it == levelsByName->end() ? nullptr : it->second;
}

bool provideLibraryVariant(const std::string &kernelName, Variant variant) {
  std::optional<KernelName> name = splitKernelName(kernelName);
  if (!name)
    return false;
  std::shared_ptr<OperatorLevel> level =
      libraryLevel(levelName(name->op, name->level));
  if (!level)
    return false;
  level->provide(name->key, std::move(variant));
  return true;
}

const std::map<std::string, std::shared_ptr<OperatorLevel>> &libraryLevels() {
  return *levelsByName;
}

} // namespace segops_torch

// An exception must not leave a library's static initialization (the
// process would terminate): the error is kept for load_error() and said
// once, and no operator is defined.
TORCH_LIBRARY(segops, library) {
  try {
    segops_torch::defineLibraryOps(library);
  } catch (const std::exception &error) {
    *segops_torch::loadError = error.what();
    TORCH_WARN("segops: the operator library defines no operators: ",
               error.what());
  }
}
