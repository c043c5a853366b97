//===- segc_module.cpp - the segops compiler as a Python module
//------------===//
//
// segops._native._segc: compiles seg kernel modules inside the Python
// process (no seg-opt process to start, no MLIR text to re-parse), for
// run-time compilation. Built only with the compiler (SEGOPS_BUILD_COMPILER);
// the runtime never needs it.
//
//===----------------------------------------------------------------------===//

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "segops/Pipelines/LinkDerived.h"
#include "segops/Pipelines/Pipelines.h"
#include "segops/Registration.h"
#include "segops/Target/OpLibrary.h"
#include "llvm/ExecutionEngine/Orc/ExecutionUtils.h"
#include "llvm/ExecutionEngine/Orc/LLJIT.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Program.h"
#include "llvm/Support/TargetSelect.h"
#include "llvm/TargetParser/Host.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/ThreadPool.h"

#include <mutex>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>
#include <tuple>
#include <type_traits>
#include <dlfcn.h>
#include <unistd.h>

namespace py = pybind11;
using namespace mlir;

namespace {
/// The compilation failed; carries the MLIR diagnostics.
struct CompileError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// A derived function's parameters ((type, seg.space) each) and results.
struct DerivedSignature {
  std::vector<std::pair<std::string, std::string>> params;
  std::vector<std::string> results;
};

/// A private function of a fused kernel: derivative level `level` of
/// `function` in `source`, linked in as `symbol`; with `takesForward`, it
/// takes the results of level 0 on its leading arguments as trailing
/// arguments instead of recomputing them.
struct DerivedCallee {
  std::string symbol, source, function;
  unsigned level;
  bool takesForward;
};

/// ptxas, for run-time compilation's register ladder (PTXCodegenOptions::
/// ptxas): on PATH, else in $CUDA_HOME/bin or /usr/local/cuda/bin; empty if
/// there is none (the PTX is then left as LLVM writes it, and the driver
/// may spill registers where ptxas would have).
const std::string &ptxasPath() {
  static const std::string path = [] {
    if (llvm::ErrorOr<std::string> found = llvm::sys::findProgramByName("ptxas"))
      return *found;
    std::vector<std::string> directories;
    if (const char *home = std::getenv("CUDA_HOME"))
      directories.push_back(std::string(home) + "/bin");
    directories.push_back("/usr/local/cuda/bin");
    for (const std::string &directory : directories)
      if (llvm::ErrorOr<std::string> found =
              llvm::sys::findProgramByName("ptxas", {directory}))
        return *found;
    return std::string();
  }();
  return path;
}

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
    static std::once_flag options;
    std::call_once(options, [] {
      const char *args[] = {"segops-jit", "-disable-lsr"};
      llvm::cl::ParseCommandLineOptions(2, args, "", &llvm::errs());
    });
    DialectRegistry registry;
    seg::registerSegDialects(registry);
    context.appendDialectRegistry(registry);
    context.loadAllAvailableDialects();
  }

  std::string compilePTX(const std::string &source, unsigned order,
                         const std::string &chip, unsigned optLevel, bool quick,
                         unsigned numGroups, bool checkRegisters) {
    return withModule(source, order, [&](ModuleOp module) {
      seg::SegToPTXOptions options;
      options.chip = chip;
      options.optLevel = optLevel;
      seg::PTXCodegenOptions codegen;
      codegen.numGroups = numGroups;
      codegen.quickOptimization = quick;
      if (checkRegisters)
        codegen.ptxas = ptxasPath();
      return seg::compileToPTX(module, options, codegen);
    });
  }

  /// Compiles the kernel functions of `source` (and derivatives to `order`;
  /// only function `keep` if it is not empty) to host object files for this
  /// CPU (or the LLVM CPU `cpu`, with `vectorBits` for it), in up to
  /// `numParts` parts compiled in parallel; returns the manifest and the
  /// objects.
  std::pair<std::string, std::vector<std::string>>
  compileHostObjects(const std::string &source, unsigned order,
                     const std::string &keep, unsigned optLevel,
                     int64_t vectorBits, int64_t interleave,
                     unsigned numParts, const std::string &cpu = "") {
    std::string manifestText;
    std::vector<std::string> objects;
    withModule(
        source, order,
        [&](ModuleOp module) -> FailureOr<std::string> {
          FailureOr<llvm::json::Object> manifest =
              seg::buildKernelManifest(module, /*blockSize=*/256);
          if (failed(manifest))
            return failure();
          manifestText =
              llvm::formatv("{0}", llvm::json::Value(std::move(*manifest)))
                  .str();
          seg::HostTarget target = hostTarget();
          if (!cpu.empty())
            target.cpu = cpu;
          target.optLevel = optLevel;
          if (vectorBits > 0)
            target.vectorBits = vectorBits;
          target.interleave = interleave;
          FailureOr<SmallVector<std::string>> parts =
              seg::compileToHostObjectParts(module, target, numParts);
          if (failed(parts))
            return failure();
          objects.assign(parts->begin(), parts->end());
          return std::string();
        },
        keep);
    return {manifestText, objects};
  }

  /// compileHostObjects in one part: one object.
  std::pair<std::string, std::string>
  compileHostObject(const std::string &source, unsigned order,
                    const std::string &keep, unsigned optLevel,
                    int64_t vectorBits, int64_t interleave) {
    std::pair<std::string, std::vector<std::string>> result =
        compileHostObjects(source, order, keep, optLevel, vectorBits,
                           interleave, /*numParts=*/1);
    return {result.first, result.second.front()};
  }

  /// The GPU kernels of `source` (derived to `order`, only `keep` if not
  /// empty) as host code for the SIMT simulator (tests without a GPU).
  std::string compileSimulatorObject(const std::string &source, unsigned order,
                                     const std::string &keep) {
    return withModule(
        source, order,
        [&](ModuleOp module) {
          return seg::compileToGPUSimulatorObject(module, /*blockSize=*/256);
        },
        keep);
  }

  /// Loads a host object into the process with ORC's LLJIT (one JITDylib
  /// per object, resolving libm and the rest from the process) and returns
  /// the address of each of `symbols`. The code lives until exit.
  std::map<std::string, uintptr_t>
  loadHostObject(const std::vector<std::string> &objects,
                 const std::vector<std::string> &symbols,
                 const std::string &library) {
    std::lock_guard<std::mutex> lock(mutex);
    llvm::orc::LLJIT &jit = hostJIT();
    std::string dylibName = "segops_jit_" + std::to_string(numDylibs++);
    llvm::Expected<llvm::orc::JITDylib &> dylib = jit.createJITDylib(dylibName);
    if (!dylib)
      throw CompileError(llvm::toString(dylib.takeError()));
    char prefix = jit.getDataLayout().getGlobalPrefix();
    if (!library.empty()) {
      // Symbols of one library first, opened locally (it is already loaded:
      // this takes a reference), without making its symbols global.
      void *handle = dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
      if (!handle)
        throw CompileError("cannot open " + library + ": " + dlerror());
      dylib->addGenerator(
          std::make_unique<llvm::orc::DynamicLibrarySearchGenerator>(
              llvm::sys::DynamicLibrary(handle), prefix));
    }
    dylib->addGenerator(llvm::cantFail(
        llvm::orc::DynamicLibrarySearchGenerator::GetForCurrentProcess(prefix)));
    for (const std::string &object : objects)
      if (llvm::Error error = jit.addObjectFile(
              *dylib, llvm::MemoryBuffer::getMemBufferCopy(object, dylibName)))
        throw CompileError(llvm::toString(std::move(error)));
    std::map<std::string, uintptr_t> addresses;
    for (const std::string &name : symbols) {
      llvm::Expected<llvm::orc::ExecutorAddr> address =
          jit.lookup(*dylib, name);
      if (!address)
        throw CompileError(llvm::toString(address.takeError()));
      addresses[name] = address->getValue();
    }
    return addresses;
  }

  /// The CPU the host code is compiled for: this one, with its vector width.
  static seg::HostTarget hostTarget() {
    seg::HostTarget target;
    target.cpu = llvm::sys::getHostCPUName().str();
    llvm::StringMap<bool> features = llvm::sys::getHostCPUFeatures();
    target.vectorBits = features.lookup("avx512f")  ? 512
                        : features.lookup("avx2") ? 256
                                                  : 128;
    return target;
  }

  std::string derive(const std::string &source, unsigned order) {
    return withModule(source, order,
                      [&](ModuleOp module) -> FailureOr<std::string> {
                        std::string text;
                        llvm::raw_string_ostream os(text);
                        module.print(os);
                        return text;
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

  /// The signature of derivative level `level` of function `name` in
  /// `source`: per parameter its type and seg.space ("" if none), and the
  /// result types, printed.
  DerivedSignature derivedSignature(const std::string &source,
                                    const std::string &name, unsigned level) {
    return withDiagnostics([&](std::string &diagnostics) {
      OwningOpRef<ModuleOp> module = parseAndDerive(source, level, diagnostics);
      func::FuncOp func = derivedFunction(*module, name, level);
      DerivedSignature signature;
      auto print = [](Type type) {
        std::string text;
        llvm::raw_string_ostream os(text);
        type.print(os);
        return text;
      };
      for (auto [position, type] :
           llvm::enumerate(func.getFunctionType().getInputs())) {
        auto space = func.getArgAttrOfType<StringAttr>(position, "seg.space");
        signature.params.emplace_back(print(type),
                                      space ? space.getValue().str() : "");
      }
      for (Type type : func.getFunctionType().getResults())
        signature.results.push_back(print(type));
      return signature;
    });
  }

  /// `caller` (a module of one kernel function calling private functions
  /// that it does not define) with each callee linked in and inlined: callee
  /// `symbol` is derivative level `level` of function `function` in
  /// `source`. Returns the printed module, which calls nothing.
  std::string inlineDerived(const std::string &caller,
                            const std::vector<DerivedCallee> &callees) {
    return withDiagnostics([&](std::string &diagnostics) {
      // Verified once its callees are linked in: a call of a function the
      // module does not define yet is invalid.
      OwningOpRef<ModuleOp> module = parseSourceString<ModuleOp>(
          caller, ParserConfig(&context, /*verifyAfterParse=*/false),
          "<caller>");
      if (!module)
        throw CompileError("cannot parse the calling module:\n" + diagnostics);
      for (const DerivedCallee &callee : callees) {
        OwningOpRef<ModuleOp> derived =
            parseAndDerive(callee.source, callee.level, diagnostics);
        if (failed(seg::linkDerivedFunction(*module, *derived, callee.function,
                                            callee.level, callee.symbol,
                                            callee.takesForward)))
          throw CompileError("cannot link @" + callee.symbol + ":\n" +
                             diagnostics);
      }
      if (failed(verify(*module)))
        throw CompileError("the linked module is invalid:\n" + diagnostics);
      PassManager pm(&context);
      seg::buildSegInlinePipeline(pm);
      if (failed(pm.run(*module)))
        throw CompileError("inlining failed:\n" + diagnostics);
      for (auto func : module->getOps<func::FuncOp>())
        if (func.isPrivate())
          throw CompileError("a call of @" + func.getSymName().str() +
                             " was not inlined");
      std::string text;
      llvm::raw_string_ostream os(text);
      module->print(os);
      return text;
    });
  }

private:
  /// Parses `source`, derives gradients to `order`, and runs `compile` on
  /// the result; throws CompileError with the diagnostics on failure.
  template <typename Compile>
  std::string withModule(const std::string &source, unsigned order,
                         Compile compile, const std::string &keep = "") {
    return withDiagnostics([&](std::string &diagnostics) {
      OwningOpRef<ModuleOp> module = parseAndDerive(source, order, diagnostics);
      if (!keep.empty()) {
        // One function of the derived module (a derivative level compiled on
        // first use).
        bool found = false;
        for (auto func :
             llvm::make_early_inc_range(module->getOps<func::FuncOp>())) {
          if (func.getSymName() == keep)
            found = true;
          else
            func.erase();
        }
        if (!found)
          throw CompileError("no function '" + keep + "' after seg-derive\n" +
                             diagnostics);
      }
      FailureOr<std::string> result = compile(*module);
      if (failed(result))
        throw CompileError("compilation failed:\n" + diagnostics);
      return std::move(*result);
    });
  }

  /// Runs `body(diagnostics)` holding the context, with the context's
  /// diagnostics collected in `diagnostics`.
  template <typename Body>
  std::invoke_result_t<Body, std::string &> withDiagnostics(Body body) {
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
    return body(diagnostics);
  }

  /// `source` parsed, with its derivatives to `order`; throws CompileError.
  OwningOpRef<ModuleOp> parseAndDerive(const std::string &source,
                                       unsigned order,
                                       const std::string &diagnostics) {
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
    return module;
  }

  /// Derivative level `level` of function `name` in the derived `module`.
  static func::FuncOp derivedFunction(ModuleOp module, const std::string &name,
                                      unsigned level) {
    func::FuncOp func = seg::lookupDerivedFunction(module, name, level);
    if (!func)
      throw CompileError("no function '" +
                         seg::derivativeFunctionName(name, level) +
                         "' after seg-derive");
    return func;
  }

  /// The process's JIT for host kernels, made on first use.
  llvm::orc::LLJIT &hostJIT() {
    if (!jit) {
      llvm::InitializeNativeTarget();
      llvm::InitializeNativeTargetAsmPrinter();
      llvm::Expected<std::unique_ptr<llvm::orc::LLJIT>> created =
          llvm::orc::LLJITBuilder().create();
      if (!created)
        throw CompileError(llvm::toString(created.takeError()));
      jit = std::move(*created);
    }
    return *jit;
  }

  std::unique_ptr<llvm::orc::LLJIT> jit;
  unsigned numDylibs = 0;
  // Threads start on first use; the context must not outlive the pool.
  llvm::DefaultThreadPool threads;
  pid_t creator = getpid();
  MLIRContext context{MLIRContext::Threading::DISABLED};
  std::mutex mutex;
};

/// The process's compiler. Calls from several threads (the caller's and
/// _jit.py's background compilation worker) take turns: MLIR contexts made
/// and used on several threads at once abort in dialect registration.
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
         unsigned optLevel, bool quick, unsigned groups, bool checkRegisters) {
        py::gil_scoped_release release;
        return compiler().compilePTX(source, order, chip, optLevel, quick,
                                     groups, checkRegisters);
      },
      py::arg("source"), py::arg("order") = 0, py::arg("chip") = "sm_90",
      py::arg("opt_level") = 2, py::arg("quick") = true, py::arg("groups") = 0,
      py::arg("check_registers") = true,
      "PTX for the kernel functions of `source` and their derivatives up to "
      "`order`. LLVM runs its O<opt_level> pipeline, or with `quick` a short "
      "one for run-time compilation; it compiles the kernels in `groups` "
      "groups in parallel (0: one per hardware thread), which does not change "
      "the PTX. With `check_registers` and ptxas at hand (ptxas_path()), "
      "kernels ptxas spills registers in are compiled again with a higher "
      "register cap, as seg-compile does for the op library.");
  m.def("ptxas_path", &ptxasPath,
        "The ptxas compile_ptx checks registers with ('' if none).");
  m.def(
      "compile_host_object",
      [](const std::string &source, unsigned order, const std::string &keep,
         unsigned optLevel, int64_t vectorBits, int64_t interleave) {
        std::pair<std::string, std::string> result;
        {
          py::gil_scoped_release release;
          result = compiler().compileHostObject(source, order, keep, optLevel,
                                                vectorBits, interleave);
        }
        return py::make_tuple(result.first, py::bytes(result.second));
      },
      py::arg("source"), py::arg("order") = 0, py::arg("keep") = "",
      py::arg("opt_level") = 3, py::arg("vector_bits") = 0,
      py::arg("interleave") = 1,
      "Host code for the kernel functions of `source` and their derivatives "
      "up to `order` (only function `keep`, if given), compiled for this "
      "CPU at LLVM's O<opt_level> with vectors of `vector_bits` (0: the CPU's "
      "widest) and `interleave` partial sums per reduction (1 compiles a "
      "third faster than the op library's 4): (manifest JSON, object file "
      "bytes).");
  m.def(
      "compile_host_objects",
      [](const std::string &source, unsigned order, const std::string &keep,
         unsigned optLevel, int64_t vectorBits, int64_t interleave,
         unsigned parts, const std::string &cpu) {
        if (!cpu.empty() && vectorBits <= 0)
          throw py::value_error(
              "compile_host_objects: a cpu needs its vector_bits");
        std::pair<std::string, std::vector<std::string>> result;
        {
          py::gil_scoped_release release;
          result = compiler().compileHostObjects(source, order, keep, optLevel,
                                                 vectorBits, interleave, parts,
                                                 cpu);
        }
        py::list objects;
        for (const std::string &object : result.second)
          objects.append(py::bytes(object));
        return py::make_tuple(result.first, objects);
      },
      py::arg("source"), py::arg("order") = 0, py::arg("keep") = "",
      py::arg("opt_level") = 3, py::arg("vector_bits") = 0,
      py::arg("interleave") = 1, py::arg("parts") = 2, py::arg("cpu") = "",
      "compile_host_object in up to `parts` object files, LLVM running on "
      "them in parallel (the functions split by size): (manifest JSON, "
      "[object file bytes]); load them together with load_host_object, or "
      "link them into a shared library. `cpu` (an LLVM CPU such as "
      "x86-64-v3, with its vector_bits) compiles for that CPU level instead "
      "of this CPU.");
  m.def(
      "compile_simulator_object",
      [](const std::string &source, unsigned order, const std::string &keep) {
        std::string object;
        {
          py::gil_scoped_release release;
          object = compiler().compileSimulatorObject(source, order, keep);
        }
        return py::bytes(object);
      },
      py::arg("source"), py::arg("order") = 0, py::arg("keep") = "",
      "The GPU kernels of `source` (and derivatives up to `order`; only "
      "function `keep`, if given) as a host object calling the SIMT "
      "simulator's runtime (load it with load_host_object, naming the "
      "simulator's library).");
  m.def(
      "load_host_object",
      [](py::object object, const std::vector<std::string> &symbols,
         const std::string &library) {
        // One object (bytes), or the parts of compile_host_objects.
        std::vector<std::string> objects;
        if (py::isinstance<py::bytes>(object))
          objects.push_back(object.cast<std::string>());
        else
          objects = object.cast<std::vector<std::string>>();
        py::gil_scoped_release release;
        return compiler().loadHostObject(objects, symbols, library);
      },
      py::arg("object"), py::arg("symbols"), py::arg("library") = "",
      "Loads a host object file (bytes), or several that belong together (a "
      "list), into the process (ORC LLJIT, one JITDylib) and returns "
      "{symbol: address} for `symbols`; the code lives until exit. Their "
      "undefined symbols resolve in shared library `library` (if given), "
      "then in the process.");
  m.def(
      "derive",
      [](const std::string &source, unsigned order) {
        py::gil_scoped_release release;
        return compiler().derive(source, order);
      },
      py::arg("source"), py::arg("order") = 1,
      "`source` with its derivatives up to `order` (seg-derive), as text.");
  m.def(
      "derived_signature",
      [](const std::string &source, const std::string &name, unsigned level) {
        DerivedSignature signature;
        {
          py::gil_scoped_release release;
          signature = compiler().derivedSignature(source, name, level);
        }
        return py::make_tuple(signature.params, signature.results);
      },
      py::arg("source"), py::arg("name"), py::arg("level"),
      "The signature of derivative level `level` of function `name` in "
      "`source`: ([(parameter type, seg.space or '')], [result type]), "
      "types as MLIR prints them.");
  m.def(
      "inline_derived",
      [](const std::string &caller,
         const std::vector<std::tuple<std::string, std::string, std::string,
                                      unsigned, bool>> &callees) {
        std::vector<DerivedCallee> linked;
        for (const auto &[symbol, source, function, level, forward] : callees)
          linked.push_back({symbol, source, function, level, forward});
        py::gil_scoped_release release;
        return compiler().inlineDerived(caller, linked);
      },
      py::arg("caller"), py::arg("callees"),
      "`caller`, a module whose kernel calls private functions it does not "
      "define, with each callee (symbol, source, function, level, "
      "takes_forward) linked in as derivative level `level` of `function` in "
      "`source` (with takes_forward, taking level 0's results on its leading "
      "arguments as trailing arguments instead of recomputing them), then "
      "inlined "
      "(MLIR's inliner), the callees dropped and the result CSE'd: the "
      "printed module.");
  m.def(
      "host_cpu", []() { return Compiler::hostTarget().cpu; },
      "The LLVM CPU name compile_host compiles for.");
  m.def(
      "manifest",
      [](const std::string &source, unsigned order, int64_t blockSize) {
        py::gil_scoped_release release;
        return compiler().manifest(source, order, blockSize);
      },
      py::arg("source"), py::arg("order") = 0, py::arg("block_size") = 256,
      "The kernel manifest (JSON) of `source` and its derivatives.");
}
