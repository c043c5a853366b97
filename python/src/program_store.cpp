//===- program_store.cpp - jit_call programs shipped with an exported model -===//
//
// An AOTInductor package of a model that uses segops.jit or segops.fusion
// calls `segops::jit_call("<program>", ...)`. segops.export.package writes
// the programs it names beside the package, one directory per program
// level: manifest.json (the op library's format, one kernel), the kernel's
// host code as one shared library per CPU level, and its PTX per chip; and
// so the kernels of library ops on rows wider than the op library ships. A
// process without Python or the compiler registers them here, through
// segops::load_programs(directory) or SEGOPS_PROGRAMS, with the same
// reader, launchers and autograd as the op library.
//
//===----------------------------------------------------------------------===//

#include "jit_call.h"

#include "segrt/Host.h"

#include <c10/util/Exception.h>

#include <cstdlib>
#include <filesystem>
#include <sstream>
#include <stdexcept>

namespace segops_torch {
namespace {

namespace fs = std::filesystem;

/// Registers the kernels of the program level in `directory`; returns how
/// many.
int64_t loadProgramLevel(const fs::path &directory) {
  std::string where = directory.string();
  segops_python::ManifestRecord manifest =
      segops_python::readManifest((directory / "manifest.json").string());
  const segops_python::HostBuildRecord &build =
      segops_python::chooseHostBuild(manifest);
  // Never destroyed: the kernels may run until exit.
  auto *library =
      new segrt::HostLibrary((directory / build.library).string());
  auto resolve = [library](const std::string &symbol) {
    return library->lookup(symbol);
  };
  auto modules = std::make_shared<GpuModules>();
  if (!manifest.ptx.empty())
    modules->setPtxSource([manifest, where](int) {
      return readPortablePtx(manifest, where);
    });
  for (const segops_python::KernelRecord &kernel : manifest.kernels) {
    TORCH_CHECK(kernel.numOutputs() > 0, "segops::load_programs: ", where,
                ": kernel ", kernel.name, " has no outputs");
    Variant variant = variantOf(kernel, resolve);
    variant.gpuModules = modules;
    // A library op's row width the op library lacks, or a jit_call program.
    if (provideLibraryVariant(kernel.name, variant))
      continue;
    // idx's position among the tensors jit_call takes (the inputs).
    size_t idxPosition = kernel.floatArgumentsBefore(kernel.idxPosition());
    registerJitProgram(kernel.name, makeJitProgram(kernel.name,
                                                   std::move(variant),
                                                   idxPosition));
  }
  return static_cast<int64_t>(manifest.kernels.size());
}

} // namespace

int64_t loadPrograms(const std::string &directory) {
  fs::path root(directory);
  std::error_code error;
  TORCH_CHECK(fs::is_directory(root, error), "segops::load_programs: ",
              directory, " is not a directory");
  try {
    if (fs::exists(root / "manifest.json"))
      return loadProgramLevel(root);
    // An empty directory: a model that calls no programs.
    int64_t loaded = 0, entries = 0;
    for (const fs::directory_entry &entry : fs::directory_iterator(root)) {
      ++entries;
      if (entry.is_directory() && fs::exists(entry.path() / "manifest.json"))
        loaded += loadProgramLevel(entry.path());
    }
    TORCH_CHECK(loaded > 0 || entries == 0, "segops::load_programs: ",
                directory,
                " holds no programs (a directory per program level, each "
                "with a manifest.json, as segops.export.package writes)");
    return loaded;
  } catch (const c10::Error &) {
    throw;
  } catch (const std::exception &failure) {
    TORCH_CHECK(false, "segops::load_programs: ", directory, ": ",
                failure.what());
  }
}

void loadProgramsFromEnvironment() {
  const char *variable = std::getenv("SEGOPS_PROGRAMS");
  if (!variable)
    return;
  std::stringstream directories(variable);
  std::string directory;
  while (std::getline(directories, directory, ':'))
    if (!directory.empty())
      loadPrograms(directory);
}

} // namespace segops_torch
