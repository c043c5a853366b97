//===- PTX.cpp - kernel functions to PTX text -----------------------------===//
//
// convert-seg-to-gpu puts the kernels in one gpu.module; it is split into
// groups of kernels, which are lowered to NVVM and compiled to PTX by LLVM on
// the context's threads (the kernels call nothing, so groups are
// independent), and the groups' PTX is joined into one text, kernels in
// module order. The text does not depend on the number of groups. With
// ptxas at hand, kernels it spills registers in are compiled again with a
// higher `.maxnreg` (PTXCodegenOptions::ptxas).
//
//===----------------------------------------------------------------------===//

#include "segops/Target/OpLibrary.h"

#include "PTXText.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/IR/Threading.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Target/LLVM/ModuleToObject.h"
#include "segops/Conversion/Passes.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/IR/Module.h"
#include "llvm/Passes/PassBuilder.h"
#include "llvm/Support/TargetSelect.h"
#include "llvm/Target/TargetMachine.h"

#include <mutex>

using namespace mlir;
using namespace mlir::seg;

FailureOr<PTXText> mlir::seg::splitPTX(StringRef ptx) {
  static constexpr StringLiteral kKernelStart = "\t// .globl\t";
  PTXText text;
  size_t start = ptx.find(kKernelStart);
  if (start == StringRef::npos)
    return failure();
  text.header = ptx.take_front(start);
  while (start != StringRef::npos) {
    size_t next = ptx.find(kKernelStart, start + 1);
    StringRef kernel = ptx.slice(start, next);
    StringRef name =
        kernel.drop_front(kKernelStart.size()).take_until([](char c) {
          return c == '\n';
        });
    if (!kernel.contains((".entry " + name + "(").str()))
      return failure();
    text.kernels.push_back({name, kernel});
    start = next;
  }
  return text;
}

/// The LLVM passes of PTXCodegenOptions::quickOptimization: what the kernels
/// as lowered from MLIR still need (redundant loads and address arithmetic,
/// branches on constants, invariant code in loops), leaving unrolling,
/// scheduling and register allocation to the NVPTX back end and ptxas.
/// Without loop rotation ptxas gave matvec's backward kernels a third more
/// registers, without integer reassociation rms_norm's forward 40 instead
/// of 32 (bench/compile_time.py compares the pipelines).
static constexpr StringLiteral kQuickPipeline =
    "function(reassociate,early-cse,instcombine<no-verify-fixpoint>,"
    "simplifycfg,loop(loop-rotate),loop-mssa(licm),"
    "instcombine<no-verify-fixpoint>,simplifycfg)";

namespace {
/// One gpu.module of NVVM kernels to PTX text: MLIR's serialization (LLVM IR
/// translation, data layout) with a choice of LLVM pipeline.
class PTXGenerator : public LLVM::ModuleToObject {
public:
  PTXGenerator(gpu::GPUModuleOp module, NVVM::NVVMTargetAttr target,
               bool quickOptimization)
      : ModuleToObject(*module, target.getTriple(), target.getChip(),
                       target.getFeatures(), target.getO()),
        quickOptimization(quickOptimization) {
    static std::once_flag initializeNVPTX;
    std::call_once(initializeNVPTX, [] {
      LLVMInitializeNVPTXTargetInfo();
      LLVMInitializeNVPTXTarget();
      LLVMInitializeNVPTXTargetMC();
      LLVMInitializeNVPTXAsmPrinter();
    });
  }

protected:
  LogicalResult optimizeModule(llvm::Module &module, int optLevel) override {
    if (!quickOptimization)
      return ModuleToObject::optimizeModule(module, optLevel);
    std::optional<llvm::TargetMachine *> machine = getOrCreateTargetMachine();
    if (!machine)
      return getOperation().emitError("no LLVM target for ") << triple;
    llvm::LoopAnalysisManager loops;
    llvm::FunctionAnalysisManager functions;
    llvm::CGSCCAnalysisManager sccs;
    llvm::ModuleAnalysisManager modules;
    llvm::PassBuilder builder(*machine);
    builder.registerModuleAnalyses(modules);
    builder.registerCGSCCAnalyses(sccs);
    builder.registerFunctionAnalyses(functions);
    builder.registerLoopAnalyses(loops);
    builder.crossRegisterProxies(loops, functions, sccs, modules);
    llvm::ModulePassManager pipeline;
    if (llvm::Error error = builder.parsePassPipeline(pipeline, kQuickPipeline))
      return getOperation().emitError("bad LLVM pipeline: ")
             << llvm::toString(std::move(error));
    pipeline.run(module, modules);
    return success();
  }

  std::optional<SmallVector<char, 0>>
  moduleToObject(llvm::Module &module) override {
    std::optional<llvm::TargetMachine *> machine = getOrCreateTargetMachine();
    if (!machine)
      return std::nullopt;
    std::optional<std::string> ptx = translateToISA(module, **machine);
    if (!ptx)
      return std::nullopt;
    return SmallVector<char, 0>(ptx->begin(), ptx->end());
  }

private:
  bool quickOptimization;
};
} // namespace

/// `kernel`'s PTX text as that of the module's `index`-th kernel: the back end
/// numbers branch labels (`$L__BB<function>_<block>`) by the function's place
/// in the module it compiled, and puts a blank line after the `.globl`
/// comment of some kernels; so the text depends on the groups unless both are
/// made uniform.
static std::string asKernelNumber(StringRef kernel, size_t index) {
  static constexpr StringLiteral kLabel = "$L__BB";
  auto [globl, body] = kernel.split('\n');
  std::string text = (globl + "\n").str();
  body = body.ltrim('\n');
  std::string number = std::to_string(index);
  for (size_t label = body.find(kLabel); label != StringRef::npos;
       label = body.find(kLabel)) {
    size_t digits = label + kLabel.size();
    size_t end =
        body.find_if_not([](char c) { return llvm::isDigit(c); }, digits);
    text += body.take_front(digits);
    if (end != StringRef::npos && end > digits && body[end] == '_')
      text += number;
    else
      end = digits; // not a label of this form: copied as it is
    body = body.drop_front(end);
  }
  text += body;
  return text;
}

/// Replaces the kernel module `module` (gpu.func kernels, as
/// convert-seg-to-gpu leaves them) by copies holding the kernels of one of
/// at most `maxGroups` groups each, of about equal size (largest kernel
/// first into the smallest group). Returns the copies.
static SmallVector<gpu::GPUModuleOp> splitKernelModule(gpu::GPUModuleOp module,
                                                       unsigned maxGroups) {
  SmallVector<std::pair<int64_t, StringRef>> sizes;
  for (auto kernel : module.getOps<gpu::GPUFuncOp>()) {
    int64_t size = 0;
    kernel.walk([&](Operation *) { ++size; });
    sizes.push_back({size, kernel.getName()});
  }
  llvm::stable_sort(sizes, [](auto &a, auto &b) { return a.first > b.first; });
  unsigned numGroups =
      std::max<unsigned>(1, std::min<unsigned>(maxGroups, sizes.size()));
  SmallVector<int64_t> groupSizes(numGroups, 0);
  llvm::StringMap<unsigned> groupOf;
  for (auto [size, name] : sizes) {
    unsigned group = std::min_element(groupSizes.begin(), groupSizes.end()) -
                     groupSizes.begin();
    groupSizes[group] += size;
    groupOf[name] = group;
  }
  SmallVector<gpu::GPUModuleOp> groups;
  OpBuilder builder(module);
  for (unsigned group = 0; group < numGroups; ++group) {
    auto copy = cast<gpu::GPUModuleOp>(builder.clone(*module));
    copy.setName((module.getName() + "_" + Twine(group)).str());
    for (auto kernel :
         llvm::make_early_inc_range(copy.getOps<gpu::GPUFuncOp>()))
      if (groupOf.lookup(kernel.getName()) != group)
        kernel.erase();
    groups.push_back(copy);
  }
  module.erase();
  return groups;
}

/// Joins the PTX of the groups of one kernel module: the header they share,
/// then the kernels in `order`.
static FailureOr<std::string> joinPTX(Location loc, ArrayRef<std::string> texts,
                                      ArrayRef<std::string> order) {
  llvm::StringMap<StringRef> kernelText;
  StringRef header;
  for (const std::string &ptx : texts) {
    FailureOr<PTXText> split = splitPTX(ptx);
    if (failed(split) || (!header.empty() && split->header != header))
      return emitError(loc, "unexpected PTX from the NVPTX back end");
    header = split->header;
    for (auto [name, text] : split->kernels)
      kernelText[name] = text;
  }
  std::string ptx = header.str();
  for (auto [index, name] : llvm::enumerate(order)) {
    StringRef text = kernelText.lookup(name);
    if (text.empty())
      return emitError(loc)
             << "kernel '" << name << "' is missing from the generated PTX";
    ptx += asKernelNumber(text, index);
  }
  return ptx;
}

namespace {
/// A kernel module of the source, as the groups it is compiled in.
struct KernelModule {
  Location loc;
  /// Its kernels, in order.
  SmallVector<std::string> order;
  /// Holding anything but kernels: compiled whole, its PTX kept as printed.
  bool whole = false;
  SmallVector<gpu::GPUModuleOp> groups;
};
} // namespace

FailureOr<std::string>
mlir::seg::compileToPTX(ModuleOp source, const SegToPTXOptions &options,
                        const PTXCodegenOptions &codegen) {
  MLIRContext *context = source.getContext();
  OwningOpRef<ModuleOp> module = cast<ModuleOp>(source->clone());
  PassManager toGPU(context);
  ConvertSegToGPUOptions toGPUOptions;
  toGPUOptions.blockSize = options.blockSize;
  toGPU.addPass(createConvertSegToGPU(toGPUOptions));
  if (failed(toGPU.run(*module)))
    return failure();

  // Each kernel module in groups, lowered to NVVM and compiled to PTX on
  // the context's threads. Groups need kernels only (no group then needs
  // another's functions or globals); a module holding anything else (a
  // device function, a declaration) is compiled whole.
  unsigned maxGroups =
      codegen.numGroups ? codegen.numGroups : context->getNumThreads();
  SmallVector<KernelModule> kernelModules;
  for (auto kernels :
       llvm::make_early_inc_range(module->getOps<gpu::GPUModuleOp>())) {
    KernelModule &entry =
        kernelModules.emplace_back(KernelModule{kernels.getLoc()});
    entry.whole = !llvm::all_of(kernels.getBody()->without_terminator(),
                                [](Operation &op) {
                                  auto function = dyn_cast<gpu::GPUFuncOp>(op);
                                  return function && function.isKernel();
                                });
    for (auto kernel : kernels.getOps<gpu::GPUFuncOp>())
      entry.order.push_back(kernel.getName().str());
    entry.groups = entry.whole ? SmallVector<gpu::GPUModuleOp>{kernels}
                               : splitKernelModule(kernels, maxGroups);
  }
  PassManager toNVVM(context);
  buildKernelModulesToNVVMPipeline(toNVVM, options);
  if (failed(toNVVM.run(*module)))
    return failure();

  SmallVector<gpu::GPUModuleOp> groups;
  for (KernelModule &entry : kernelModules)
    llvm::append_range(groups, entry.groups);
  SmallVector<std::string> texts(groups.size());
  if (failed(failableParallelForEachN(
          context, 0, groups.size(), [&](size_t group) -> LogicalResult {
            ArrayAttr targets = groups[group].getTargetsAttr();
            auto target = targets && targets.size() == 1
                              ? dyn_cast<NVVM::NVVMTargetAttr>(targets[0])
                              : NVVM::NVVMTargetAttr();
            if (!target)
              return groups[group].emitError(
                  "expected one NVVM target on the kernel module");
            PTXGenerator generator(groups[group], target,
                                   codegen.quickOptimization);
            std::optional<SmallVector<char, 0>> ptx = generator.run();
            if (!ptx)
              return groups[group].emitError("PTX generation failed");
            texts[group] = std::string(ptx->begin(), ptx->end());
            return success();
          })))
    return failure();

  // The groups' texts as one PTX text, kernel modules in order.
  std::string ptx;
  ArrayRef<std::string> remaining = texts;
  for (KernelModule &entry : kernelModules) {
    ArrayRef<std::string> own = remaining.take_front(entry.groups.size());
    remaining = remaining.drop_front(entry.groups.size());
    if (entry.whole) {
      ptx += own.front();
      continue;
    }
    FailureOr<std::string> joined = joinPTX(entry.loc, own, entry.order);
    if (failed(joined))
      return failure();
    ptx += *joined;
  }

  if (!codegen.ptxas.empty() && !ptx.empty()) {
    FailureOr<std::string> capped = capRegisters(
        source.getLoc(), std::move(ptx), codegen.ptxas, options.chip,
        options.blockSize);
    if (failed(capped))
      return failure();
    ptx = std::move(*capped);
  }
  if (ptx.empty())
    return source.emitError("the module has no kernels to compile to PTX");
  return ptx;
}
