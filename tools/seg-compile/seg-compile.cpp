//===- seg-compile.cpp - build the segops op library ----------------------===//
//
// Compiles a module of seg kernel functions ahead of time into the files the
// runtime loads: one PTX file per GPU architecture, one host object file per
// host CPU level (the runtime loads the best one the machine runs), and
// manifest.json.
//
//   seg-compile oplib/segops.mlir -o build/oplib --chips=sm_80,sm_90 \
//     --host-targets=x86-64-v3:256,x86-64-v2:128
//
//===----------------------------------------------------------------------===//

#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Support/FileUtilities.h"
#include "segops/Registration.h"
#include "segops/Target/OpLibrary.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/ToolOutputFile.h"

using namespace mlir;
namespace cl = llvm::cl;

static cl::opt<std::string>
    inputFile(cl::Positional, cl::desc("<kernel module .mlir>"), cl::Required);
static cl::opt<std::string> outputDir("o", cl::desc("Output directory"),
                                      cl::value_desc("dir"), cl::Required);
static cl::list<std::string> chips("chips", cl::CommaSeparated,
                                   cl::desc("GPU architectures (sm_80,...)"));
static cl::list<std::string> hostTargets(
    "host-targets", cl::CommaSeparated,
    cl::desc("Host kernel builds, best first, as LLVM CPU:vector bits "
             "(default x86-64-v2:128); each one writes segops_host_<CPU>.o"));
static cl::opt<bool> gpuSimulator(
    "gpu-simulator",
    cl::desc("Also write segops_gpusim.o: the GPU kernels as host code for "
             "the SIMT simulator (testing without a GPU)"),
    cl::init(false));
static cl::opt<std::string> ptxas(
    "ptxas",
    cl::desc("ptxas to check the PTX with: kernels it spills registers in "
             "get a higher .maxnreg, kernels below half occupancy the cap "
             "of half occupancy where they then spill nothing"),
    cl::value_desc("path"), cl::init(""));
static cl::opt<int64_t> blockSize("block-size", cl::desc("Threads per block"),
                                  cl::init(256));

/// The host builds of --host-targets (CPU:vector bits each), or the default
/// x86-64-v2:128.
static FailureOr<SmallVector<seg::HostTarget>> parseHostTargets() {
  SmallVector<seg::HostTarget> targets;
  for (StringRef spec : hostTargets) {
    auto [cpu, bits] = spec.split(':');
    seg::HostTarget target;
    target.cpu = cpu.str();
    if (cpu.empty() || bits.getAsInteger(10, target.vectorBits)) {
      llvm::errs() << "--host-targets: expected CPU:BITS, got '" << spec
                   << "'\n";
      return failure();
    }
    if (llvm::any_of(targets, [&](const seg::HostTarget &other) {
          return other.cpu == target.cpu;
        })) {
      llvm::errs() << "--host-targets: CPU '" << cpu << "' given twice\n";
      return failure();
    }
    targets.push_back(std::move(target));
  }
  if (targets.empty())
    targets.push_back(seg::HostTarget());
  return targets;
}

static LogicalResult writeFile(StringRef name, StringRef contents) {
  SmallString<256> path(outputDir);
  llvm::sys::path::append(path, name);
  std::string error;
  auto output = openOutputFile(path, &error);
  if (!output) {
    llvm::errs() << error << "\n";
    return failure();
  }
  output->os() << contents;
  output->keep();
  return success();
}

static LogicalResult run(MLIRContext &context) {
  llvm::SourceMgr sourceMgr;
  SourceMgrDiagnosticHandler diagnostics(sourceMgr, &context);
  OwningOpRef<ModuleOp> module =
      parseSourceFile<ModuleOp>(inputFile, sourceMgr, &context);
  if (!module)
    return failure();
  if (std::error_code ec = llvm::sys::fs::create_directories(outputDir)) {
    llvm::errs() << "cannot create " << outputDir << ": " << ec.message()
                 << "\n";
    return failure();
  }

  FailureOr<llvm::json::Object> manifest =
      seg::buildKernelManifest(*module, blockSize);
  if (failed(manifest))
    return failure();

  llvm::json::Object ptxFiles;
  for (const std::string &chip : chips) {
    if (!StringRef(chip).starts_with("sm_")) {
      llvm::errs() << "seg-compile: --chips takes GPU architectures such as "
                      "sm_90, got '"
                   << chip << "'\n";
      return failure();
    }
    seg::SegToPTXOptions options;
    options.chip = chip;
    options.blockSize = blockSize.getValue();
    seg::PTXCodegenOptions codegen;
    codegen.ptxas = ptxas;
    FailureOr<std::string> ptx = seg::compileToPTX(*module, options, codegen);
    if (failed(ptx))
      return failure();
    std::string fileName = "segops_" + chip + ".ptx";
    if (failed(writeFile(fileName, *ptx)))
      return failure();
    ptxFiles[chip] = fileName;
  }

  FailureOr<SmallVector<seg::HostTarget>> targets = parseHostTargets();
  if (failed(targets))
    return failure();
  FailureOr<SmallVector<std::string>> objects =
      seg::compileToHostObjects(*module, *targets);
  if (failed(objects))
    return failure();
  llvm::json::Array hostBuilds;
  for (auto [target, object] : llvm::zip(*targets, *objects)) {
    std::string objectName = "segops_host_" + target.cpu + ".o";
    if (failed(writeFile(objectName, object)))
      return failure();
    hostBuilds.push_back(llvm::json::Object{
        {"cpu", target.cpu},
        {"vector_bits", target.vectorBits},
        {"object", objectName},
        {"library", "libsegops_host_" + target.cpu + ".so"},
    });
  }

  if (gpuSimulator) {
    FailureOr<std::string> simulated =
        seg::compileToGPUSimulatorObject(*module, blockSize);
    if (failed(simulated) || failed(writeFile("segops_gpusim.o", *simulated)))
      return failure();
    (*manifest)["gpu_simulator_object"] = "segops_gpusim.o";
  }

  (*manifest)["ptx"] = std::move(ptxFiles);
  (*manifest)["host"] = std::move(hostBuilds);
  std::string text;
  llvm::raw_string_ostream os(text);
  os << llvm::formatv("{0:2}", llvm::json::Value(std::move(*manifest)));
  return writeFile("manifest.json", os.str() + "\n");
}

int main(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  cl::ParseCommandLineOptions(argc, argv, "segops op library compiler\n");
  DialectRegistry registry;
  seg::registerSegDialects(registry);
  MLIRContext context(registry);
  context.loadAllAvailableDialects();
  return failed(run(context)) ? 1 : 0;
}
