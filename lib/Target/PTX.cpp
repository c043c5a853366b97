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

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/IR/Threading.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Target/LLVM/ModuleToObject.h"
#include "segops/Conversion/Passes.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/Sequence.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/IR/Module.h"
#include "llvm/Passes/PassBuilder.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FileUtilities.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Program.h"
#include "llvm/Support/TargetSelect.h"
#include "llvm/Target/TargetMachine.h"

#include <mutex>

using namespace mlir;
using namespace mlir::seg;

namespace {
/// A PTX module's text: its header (version, target) and each kernel's
/// definition.
struct PTXText {
  StringRef header;
  SmallVector<std::pair<StringRef, StringRef>> kernels; // name, text
};
} // namespace

/// Splits the NVPTX back end's output at the `// .globl NAME` line opening
/// each kernel; fails on text holding anything else between kernels.
static FailureOr<PTXText> splitPTX(StringRef ptx) {
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

/// The smallest register cap above `registers` per thread at which fewer
/// blocks of `blockSize` threads fit an SM's 64K registers (allocated per
/// warp in units of 256, so per thread in multiples of 8), up to 255: the
/// next occupancy step down. 255 when already at or past the last step.
static unsigned nextRegisterCap(unsigned registers, int64_t blockSize) {
  constexpr unsigned kRegistersPerSM = 65536, kMostPerThread = 255;
  unsigned threads = std::max<int64_t>(blockSize, 32);
  for (unsigned blocks = kRegistersPerSM / threads; blocks > 1; --blocks) {
    unsigned cap = kRegistersPerSM / (blocks * threads) / 8 * 8;
    if (cap > registers)
      return std::min(cap, kMostPerThread);
  }
  return kMostPerThread;
}

/// The kernels of `ptx` that ptxas, compiling for `chip`, spills registers
/// in, and the registers it gave each (from its -v report: "Function
/// properties for NAME", "N bytes stack frame, N bytes spill stores, N bytes
/// spill loads", "Used N registers, ...").
static FailureOr<llvm::StringMap<unsigned>>
spillingKernels(Location loc, StringRef ptxas, StringRef chip, StringRef ptx) {
  SmallString<128> input, report, cubin;
  int fd = -1;
  if (llvm::sys::fs::createTemporaryFile("segops", "ptx", fd, input) ||
      llvm::sys::fs::createTemporaryFile("segops-ptxas", "txt", report) ||
      llvm::sys::fs::createTemporaryFile("segops", "cubin", cubin))
    return emitError(loc, "cannot create temporary files for ptxas");
  llvm::FileRemover removeInput(input), removeReport(report),
      removeCubin(cubin);
  {
    llvm::raw_fd_ostream os(fd, /*shouldClose=*/true);
    os << ptx;
  }
  // A bare name is looked up on PATH, as a shell would.
  std::string program = ptxas.str();
  if (!ptxas.contains('/'))
    if (llvm::ErrorOr<std::string> found = llvm::sys::findProgramByName(ptxas))
      program = *found;
  std::string arch = ("-arch=" + chip).str();
  SmallVector<StringRef> args = {program, arch, "-v", input, "-o", cubin};
  std::optional<StringRef> redirects[] = {StringRef(""), StringRef(report),
                                          StringRef(report)};
  std::string error;
  int status = llvm::sys::ExecuteAndWait(program, args, /*Env=*/std::nullopt,
                                         redirects, /*SecondsToWait=*/0,
                                         /*MemoryLimit=*/0, &error);
  llvm::ErrorOr<std::unique_ptr<llvm::MemoryBuffer>> text =
      llvm::MemoryBuffer::getFile(report);
  if (status != 0 || !text) {
    std::string why = text ? (*text)->getBuffer().take_back(2000).trim().str()
                           : std::string();
    if (why.empty())
      why = error.empty() ? "exit status " + std::to_string(status) : error;
    return emitError(loc, "ptxas (")
           << ptxas << ") failed on the generated PTX for " << chip << ": "
           << why;
  }

  llvm::StringMap<unsigned> spilling;
  static constexpr StringLiteral kProperties = "Function properties for ";
  static constexpr StringLiteral kUsed = "Used ";
  StringRef function;
  bool spills = false;
  SmallVector<StringRef> lines;
  (*text)->getBuffer().split(lines, '\n');
  for (StringRef line : lines) {
    if (size_t at = line.find(kProperties); at != StringRef::npos) {
      function = line.drop_front(at + kProperties.size()).trim();
      spills = false;
    } else if (line.contains("spill stores")) {
      SmallVector<StringRef> counts;
      line.split(counts, ',');
      for (StringRef count : counts) {
        uint64_t bytes = 0;
        StringRef digits = count.trim();
        spills |= count.contains("spill") &&
                  !digits.consumeInteger(10, bytes) && bytes > 0;
      }
    } else if (size_t at = line.find(kUsed);
               at != StringRef::npos && spills && !function.empty()) {
      unsigned registers = 0;
      StringRef digits = line.drop_front(at + kUsed.size());
      if (!digits.consumeInteger(10, registers))
        spilling[function] = registers;
      function = StringRef();
    }
  }
  return spilling;
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
  // Compiles the groups numbered in `which` to PTX, into texts.
  auto generate = [&](ArrayRef<size_t> which) -> LogicalResult {
    return failableParallelForEachN(
        context, 0, which.size(), [&](size_t i) -> LogicalResult {
          size_t group = which[i];
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
        });
  };
  // The groups' texts as one PTX text, kernel modules in order.
  auto join = [&]() -> FailureOr<std::string> {
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
    return ptx;
  };
  auto all = llvm::to_vector(llvm::seq<size_t>(0, groups.size()));
  if (failed(generate(all)))
    return failure();
  FailureOr<std::string> joined = join();
  if (failed(joined))
    return failure();
  std::string ptx = std::move(*joined);

  // Kernels ptxas spills in get a higher register cap, an occupancy step at
  // a time, until none spills or the cap is the most a thread can have.
  llvm::StringMap<unsigned> caps;
  while (!codegen.ptxas.empty() && !ptx.empty()) {
    FailureOr<llvm::StringMap<unsigned>> spilling =
        spillingKernels(source.getLoc(), codegen.ptxas, options.chip, ptx);
    if (failed(spilling))
      return failure();
    SmallVector<size_t> again;
    for (auto [index, group] : llvm::enumerate(groups)) {
      bool raised = false;
      group.walk([&](LLVM::LLVMFuncOp kernel) {
        auto spilled = spilling->find(kernel.getName());
        if (spilled == spilling->end())
          return;
        unsigned &cap = caps[kernel.getName()];
        unsigned next = nextRegisterCap(std::max(cap, spilled->second),
                                        options.blockSize);
        if (next <= cap)
          return;
        cap = next;
        kernel->setAttr(NVVM::NVVMDialect::getMaxnregAttrName(),
                        IntegerAttr::get(IntegerType::get(context, 32), cap));
        raised = true;
      });
      if (raised)
        again.push_back(index);
    }
    if (again.empty())
      break;
    if (failed(generate(again)) || failed(joined = join()))
      return failure();
    ptx = std::move(*joined);
  }
  if (ptx.empty())
    return source.emitError("the module has no kernels to compile to PTX");
  return ptx;
}
