//===- HostObject.cpp - kernel functions to a host object file ------------===//

#include "segops/Target/OpLibrary.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/IR/Threading.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Target/LLVMIR/Export.h"
#include "llvm/IR/LegacyPassManager.h"
#include "llvm/IR/Module.h"
#include "llvm/MC/MCSubtargetInfo.h"
#include "llvm/MC/TargetRegistry.h"
#include "llvm/Passes/PassBuilder.h"
#include "llvm/Support/TargetSelect.h"
#include "llvm/Support/raw_ostream.h"
#include "llvm/Target/TargetMachine.h"
#include "llvm/Target/TargetOptions.h"
#include "llvm/TargetParser/Host.h"

#include <algorithm>
#include <mutex>

using namespace mlir;
using namespace mlir::seg;

static void optimize(llvm::Module &module, llvm::TargetMachine &machine,
                     unsigned optLevel) {
  llvm::LoopAnalysisManager loops;
  llvm::FunctionAnalysisManager functions;
  llvm::CGSCCAnalysisManager sccs;
  llvm::ModuleAnalysisManager modules;
  // The SLP vectoriser is off in PassBuilder's defaults (clang turns it on
  // at -O2 and up). Rows of many features are unrolled into one scalar
  // per feature, which only it vectorises (loads, arithmetic and stores of
  // consecutive features); it reorders no floating-point reduction, so
  // results do not change.
  llvm::PipelineTuningOptions tuning;
  tuning.SLPVectorization = optLevel >= 2;
  llvm::PassBuilder builder(&machine, tuning);
  builder.registerModuleAnalyses(modules);
  builder.registerCGSCCAnalyses(sccs);
  builder.registerFunctionAnalyses(functions);
  builder.registerLoopAnalyses(loops);
  builder.crossRegisterProxies(loops, functions, sccs, modules);
  llvm::ModulePassManager pipeline =
      builder.buildPerModuleDefaultPipeline(optLevel >= 3   ? llvm::OptimizationLevel::O3
                                            : optLevel == 2 ? llvm::OptimizationLevel::O2
                                                            : llvm::OptimizationLevel::O1);
  pipeline.run(module, modules);
}

/// Translates `module` (LLVM dialect) to LLVM IR, optimizes it at
/// O`optLevel` for `cpu` and emits a position independent object file.
static FailureOr<std::string> emitObject(ModuleOp module, StringRef cpu,
                                         StringRef name,
                                         unsigned optLevel = 3) {
  // The trailing parameters' names (seg.param) are for reading the IR;
  // LLVM IR has no place for them.
  module.walk([](LLVM::LLVMFuncOp function) {
    for (unsigned i = 0, e = function.getNumArguments(); i < e; ++i)
      function.removeArgAttr(i, "seg.param");
  });
  llvm::LLVMContext llvmContext;
  std::unique_ptr<llvm::Module> llvmModule =
      translateModuleToLLVMIR(module, llvmContext, name);
  if (!llvmModule)
    return module.emitError("translation to LLVM IR failed");

  // Builds may be compiled concurrently (compileToHostObjects).
  static std::once_flag initializeNative;
  std::call_once(initializeNative, [] {
    llvm::InitializeNativeTarget();
    llvm::InitializeNativeTargetAsmPrinter();
  });
  std::string triple = llvm::sys::getDefaultTargetTriple();
  std::string error;
  const llvm::Target *target =
      llvm::TargetRegistry::lookupTarget(triple, error);
  if (!target)
    return module.emitError()
           << "no LLVM target for " << triple << ": " << error;
  // LLVM compiles for an unknown CPU as for a generic one, with a warning.
  // (The subtarget for the generic CPU knows the names; one for an unknown
  // CPU would warn too.)
  std::unique_ptr<llvm::MCSubtargetInfo> subtarget(
      target->createMCSubtargetInfo(triple, /*CPU=*/"", /*Features=*/""));
  if (!subtarget || !subtarget->isCPUStringValid(cpu))
    return emitError(module.getLoc())
           << "LLVM does not know the CPU '" << cpu << "' for " << triple;
  std::unique_ptr<llvm::TargetMachine> machine(target->createTargetMachine(
      triple, cpu, /*Features=*/"", llvm::TargetOptions(), llvm::Reloc::PIC_,
      std::nullopt,
      optLevel >= 3 ? llvm::CodeGenOptLevel::Aggressive
                    : llvm::CodeGenOptLevel::Default));
  if (!machine)
    return module.emitError() << "cannot target CPU '" << cpu << "'";
  llvmModule->setTargetTriple(triple);
  llvmModule->setDataLayout(machine->createDataLayout());
  optimize(*llvmModule, *machine, optLevel);

  llvm::SmallVector<char, 0> buffer;
  llvm::raw_svector_ostream stream(buffer);
  llvm::legacy::PassManager codegen;
  if (machine->addPassesToEmitFile(codegen, stream, nullptr,
                                   llvm::CodeGenFileType::ObjectFile))
    return module.emitError("the host target cannot emit object files");
  codegen.run(*llvmModule);
  return std::string(buffer.begin(), buffer.end());
}

FailureOr<std::string>
mlir::seg::compileToHostObject(ModuleOp source, const HostTarget &target) {
  FailureOr<SmallVector<std::string>> objects =
      compileToHostObjectParts(source, target, /*numParts=*/1);
  if (failed(objects))
    return failure();
  return std::move(objects->front());
}

/// The defined functions of `module` in `numParts` groups of about equal
/// size (operations), largest first into the smallest group.
static SmallVector<SmallVector<StringRef>>
partitionFunctions(ModuleOp module, unsigned numParts) {
  SmallVector<std::pair<int64_t, StringRef>> sizes;
  for (auto func : module.getOps<func::FuncOp>()) {
    if (func.isExternal())
      continue;
    int64_t size = 0;
    func.walk([&](Operation *) { ++size; });
    sizes.push_back({size, func.getSymName()});
  }
  llvm::stable_sort(sizes, [](auto &a, auto &b) { return a.first > b.first; });
  numParts = std::max<unsigned>(1, std::min<unsigned>(numParts, sizes.size()));
  SmallVector<SmallVector<StringRef>> parts(numParts);
  SmallVector<int64_t> load(numParts, 0);
  for (auto &[size, name] : sizes) {
    unsigned lightest =
        std::min_element(load.begin(), load.end()) - load.begin();
    parts[lightest].push_back(name);
    load[lightest] += size;
  }
  return parts;
}

FailureOr<SmallVector<std::string>>
mlir::seg::compileToHostObjectParts(ModuleOp source, const HostTarget &target,
                                    unsigned numParts) {
  MLIRContext *context = source.getContext();
  OwningOpRef<ModuleOp> kernels = cast<ModuleOp>(source->clone());
  PassManager pm(context);
  SegToHostOptions options;
  options.vectorBits = target.vectorBits;
  options.interleave = target.interleave;
  buildSegToHostKernelsPipeline(pm, options);
  if (failed(pm.run(*kernels)))
    return failure();
  // One module per part: its functions defined, the others declared
  // (kernels do not call each other; a declaration keeps any reference
  // valid). Lowered here, one after another (passes load dialects, which a
  // context must not do on several threads at once), then translated and
  // compiled by LLVM in parallel.
  SmallVector<OwningOpRef<ModuleOp>> modules;
  for (ArrayRef<StringRef> part : partitionFunctions(*kernels, numParts)) {
    OwningOpRef<ModuleOp> module = cast<ModuleOp>((*kernels)->clone());
    for (auto func : module->getOps<func::FuncOp>()) {
      if (func.isExternal() || llvm::is_contained(part, func.getSymName()))
        continue;
      func.eraseBody();
      func.setPrivate();
    }
    PassManager lowering(context);
    buildHostToLLVMPipeline(lowering);
    if (failed(lowering.run(*module)))
      return failure();
    modules.push_back(std::move(module));
  }
  SmallVector<std::string> objects(modules.size());
  LogicalResult emitted =
      failableParallelForEachN(context, 0, modules.size(), [&](size_t i) {
        FailureOr<std::string> object = emitObject(
            *modules[i], target.cpu, "segops_host", target.optLevel);
        if (failed(object))
          return failure();
        objects[i] = std::move(*object);
        return success();
      });
  if (failed(emitted))
    return failure();
  return objects;
}

/// Loads every dialect the host pipeline's passes depend on. A pass manager
/// loads them when it starts running, and a context must not load dialects
/// on several threads at once (under ASan: a crash in getOrLoadDialect), so
/// callers that run host pipelines in parallel load them first.
static void loadHostPipelineDialects(MLIRContext *context) {
  PassManager pm(context);
  buildSegToHostPipeline(pm);
  DialectRegistry registry;
  pm.getDependentDialects(registry);
  context->appendDialectRegistry(registry);
  for (StringRef name : registry.getDialectNames())
    context->getOrLoadDialect(name);
}

FailureOr<SmallVector<std::string>>
mlir::seg::compileToHostObjects(ModuleOp source, ArrayRef<HostTarget> targets) {
  loadHostPipelineDialects(source.getContext());
  SmallVector<std::string> objects(targets.size());
  LogicalResult compiled = failableParallelForEachN(
      source.getContext(), 0, targets.size(), [&](size_t i) {
        FailureOr<std::string> object = compileToHostObject(source, targets[i]);
        if (failed(object))
          return failure();
        objects[i] = std::move(*object);
        return success();
      });
  if (failed(compiled))
    return failure();
  return objects;
}

FailureOr<std::string>
mlir::seg::compileToGPUSimulatorObject(ModuleOp source, int64_t blockSize) {
  OwningOpRef<ModuleOp> module = cast<ModuleOp>(source->clone());
  PassManager pm(source.getContext());
  SegToPTXOptions options;
  options.blockSize = blockSize;
  buildSegToGPUSimulatorPipeline(pm, options);
  if (failed(pm.run(*module)))
    return failure();
  return emitObject(*module, "x86-64", "segops_gpusim");
}
