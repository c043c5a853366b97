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
std::vector<size_t> savedResultsOf(const std::map<std::string, Variant> &variants) {
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

/// `segops::<level>(Tensor arg0, ..., Tensor saved<i>, ..., Tensor grad<i>,
/// ..., Tensor idx, SymInt num_segments)`: the float arguments of the level
/// below, as it names them (`kinds`; level 0: the op's arguments), then
/// what this level adds: the results of the level below that it reads
/// (saved by autograd) and the cotangents, named by their position. Appends
/// the kinds of those it adds to `kinds`.
std::string schemaOf(const std::string &name, const Variant &variant,
                     std::vector<std::string> &kinds) {
  std::string schema = name + "(";
  size_t floats = 0, outputs = 0;
  bool isForward = kinds.empty();
  for (const Buffer &buffer : variant.buffers) {
    if (buffer.isOutput)
      ++outputs;
    else if (!buffer.isIndex) {
      if (floats == kinds.size())
        kinds.push_back(isForward                 ? "arg"
                        : buffer.savedResult >= 0 ? "saved"
                                                  : "grad");
      schema += "Tensor " + kinds[floats] + std::to_string(floats) + ", ";
      ++floats;
    }
  }
  schema += "Tensor idx, SymInt num_segments) -> ";
  if (outputs == 1)
    return schema + "Tensor";
  schema += "(";
  for (size_t k = 0; k < outputs; ++k)
    schema += k ? ", Tensor" : "Tensor";
  return schema + ")";
}

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
    std::vector<std::string> kinds;
    for (auto &[number, level] : levels)
      library.def(schemaOf(levelName(op, number),
                           level.variants.begin()->second, kinds)
                      .c_str());
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
      size_t numOutputs = std::count_if(
          any.buffers.begin(), any.buffers.end(),
          [](const Buffer &buffer) { return buffer.isOutput; });
      std::string name = levelName(op, number);
      std::string backward =
          levels.count(number + 1) ? levelName(op, number + 1) : "";
      std::shared_ptr<OperatorLevel> registered = makeOperatorLevel(
          name, numFloats, numOutputs, std::move(level.variants), backward);
      registered->derivativeOrder = number;
      registered->numArguments = numArguments;
      registered->savedResults = savedResults[number];
      registerLevelKernels(registered, /*withMetaKernel=*/true);
      levelsByName->emplace(name, std::move(registered));
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
