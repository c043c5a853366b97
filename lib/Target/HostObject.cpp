//===- HostObject.cpp - kernel functions to a host object file ------------===//

#include "segops/Target/OpLibrary.h"

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

#include <mutex>

using namespace mlir;
using namespace mlir::seg;

static void optimize(llvm::Module &module, llvm::TargetMachine &machine,
                     unsigned optLevel) {
  llvm::LoopAnalysisManager loops;
  llvm::FunctionAnalysisManager functions;
  llvm::CGSCCAnalysisManager sccs;
  llvm::ModuleAnalysisManager modules;
  llvm::PassBuilder builder(&machine);
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
  OwningOpRef<ModuleOp> module = cast<ModuleOp>(source->clone());
  PassManager pm(source.getContext());
  SegToHostOptions options;
  options.vectorBits = target.vectorBits;
  options.interleave = target.interleave;
  buildSegToHostPipeline(pm, options);
  if (failed(pm.run(*module)))
    return failure();
  return emitObject(*module, target.cpu, "segops_host", target.optLevel);
}

FailureOr<SmallVector<std::string>>
mlir::seg::compileToHostObjects(ModuleOp source, ArrayRef<HostTarget> targets) {
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
