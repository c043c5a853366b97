//===- segc_module.cpp - the segops compiler as a Python module
//------------===//
//
// segops._native._segc: compiles seg kernel modules inside the Python
// process (no seg-opt process to start, no MLIR text to re-parse), for
// run-time compilation. Built only with the compiler (SEGOPS_BUILD_COMPILER);
// the runtime never needs it.
//
//===----------------------------------------------------------------------===//

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "segops/Pipelines/Pipelines.h"
#include "segops/Registration.h"
#include "segops/Target/OpLibrary.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/ThreadPool.h"

#include <mutex>
#include <pybind11/pybind11.h>
#include <unistd.h>

namespace py = pybind11;
using namespace mlir;

namespace {
/// The compilation failed; carries the MLIR diagnostics.
struct CompileError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// One MLIR context for the process, with the seg dialects loaded; calls are
/// serialized (a compilation is short and the context is not the bottleneck),
/// and each compiles its kernels on the context's threads.
class Compiler {
public:
  Compiler() {
    context.setThreadPool(threads);
    // Loop strength reduction takes half of NVPTX code generation time on
    // segment kernels (measured with -time-passes) and ptxas strength-reduces
    // addresses itself; run-time compilation skips it. The op library, built
    // by seg-compile, keeps LLVM's default pipeline.
    const char *args[] = {"segops-jit", "-disable-lsr"};
    llvm::cl::ParseCommandLineOptions(2, args, "", &llvm::errs());
    DialectRegistry registry;
    seg::registerSegDialects(registry);
    context.appendDialectRegistry(registry);
    context.loadAllAvailableDialects();
  }

  std::string compilePTX(const std::string &source, unsigned order,
                         const std::string &chip, unsigned optLevel, bool quick,
                         unsigned numGroups) {
    return withModule(source, order, [&](ModuleOp module) {
      seg::SegToPTXOptions options;
      options.chip = chip;
      options.optLevel = optLevel;
      seg::PTXCodegenOptions codegen;
      codegen.numGroups = numGroups;
      codegen.quickOptimization = quick;
      return seg::compileToPTX(module, options, codegen);
    });
  }

  std::string manifest(const std::string &source, unsigned order,
                       int64_t blockSize) {
    return withModule(
        source, order, [&](ModuleOp module) -> FailureOr<std::string> {
          FailureOr<llvm::json::Object> manifest =
              seg::buildKernelManifest(module, blockSize);
          if (failed(manifest))
            return failure();
          return llvm::formatv("{0}", llvm::json::Value(std::move(*manifest)))
              .str();
        });
  }

private:
  /// Parses `source`, derives gradients to `order`, and runs `compile` on
  /// the result; throws CompileError with the diagnostics on failure.
  template <typename Compile>
  std::string withModule(const std::string &source, unsigned order,
                         Compile compile) {
    std::lock_guard<std::mutex> lock(mutex);
    // A forked child (a DataLoader worker, say) has the pool but not its
    // threads: compile on the calling thread there.
    if (getpid() != creator && context.isMultithreadingEnabled())
      context.disableMultithreading();
    std::string diagnostics;
    ScopedDiagnosticHandler handler(&context, [&](Diagnostic &diagnostic) {
      llvm::raw_string_ostream os(diagnostics);
      os << diagnostic.getLocation() << ": " << diagnostic << "\n";
      return success();
    });
    OwningOpRef<ModuleOp> module =
        parseSourceString<ModuleOp>(source, &context, "<source>");
    if (!module)
      throw CompileError("cannot parse the kernel module:\n" + diagnostics);
    if (order > 0) {
      PassManager pm(&context);
      seg::SegDeriveOptions options;
      options.order = order;
      seg::buildSegDerivePipeline(pm, options);
      if (failed(pm.run(*module)))
        throw CompileError("seg-derive failed:\n" + diagnostics);
    }
    FailureOr<std::string> result = compile(*module);
    if (failed(result))
      throw CompileError("compilation failed:\n" + diagnostics);
    return std::move(*result);
  }

  // Threads start on first use; the context must not outlive the pool.
  llvm::DefaultThreadPool threads;
  pid_t creator = getpid();
  MLIRContext context{MLIRContext::Threading::DISABLED};
  std::mutex mutex;
};

Compiler &compiler() {
  static Compiler *instance = new Compiler(); // never destroyed: no exit order
  return *instance;
}
} // namespace

PYBIND11_MODULE(_segc, m) {
  m.doc() = "segops compiler: seg kernel modules to PTX and manifests";
  py::register_exception<CompileError>(m, "CompileError", PyExc_ValueError);
  m.def(
      "compile_ptx",
      [](const std::string &source, unsigned order, const std::string &chip,
         unsigned optLevel, bool quick, unsigned groups) {
        py::gil_scoped_release release;
        return compiler().compilePTX(source, order, chip, optLevel, quick,
                                     groups);
      },
      py::arg("source"), py::arg("order") = 0, py::arg("chip") = "sm_90",
      py::arg("opt_level") = 2, py::arg("quick") = true, py::arg("groups") = 0,
      "PTX for the kernel functions of `source` and their derivatives up to "
      "`order`. LLVM runs its O<opt_level> pipeline, or with `quick` a short "
      "one for run-time compilation; it compiles the kernels in `groups` "
      "groups in parallel (0: one per hardware thread), which does not change "
      "the PTX.");
  m.def(
      "manifest",
      [](const std::string &source, unsigned order, int64_t blockSize) {
        py::gil_scoped_release release;
        return compiler().manifest(source, order, blockSize);
      },
      py::arg("source"), py::arg("order") = 0, py::arg("block_size") = 256,
      "The kernel manifest (JSON) of `source` and its derivatives.");
}
