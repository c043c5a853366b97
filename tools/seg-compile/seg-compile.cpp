//===- seg-compile.cpp - build the segops op library ----------------------===//
//
// Compiles a module of seg kernel functions ahead of time into the files the
// runtime loads: one PTX file per GPU architecture, a host object file, and
// manifest.json.
//
//   seg-compile oplib/segops.mlir -o build/oplib --chips=sm_80,sm_90
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
static cl::opt<std::string> hostCpu("host-cpu",
                                    cl::desc("LLVM CPU for host kernels"),
                                    cl::init("x86-64-v2"));
static cl::opt<std::string>
    hostLibrary("host-library",
                cl::desc("File name the host object is linked into"),
                cl::init("libsegops_host.so"));
static cl::opt<bool> gpuSimulator(
    "gpu-simulator",
    cl::desc("Also write segops_gpusim.o: the GPU kernels as host code for "
             "the SIMT simulator (testing without a GPU)"),
    cl::init(false));
static cl::opt<int64_t> blockSize("block-size", cl::desc("Threads per block"),
                                  cl::init(256));

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
    seg::SegToPTXOptions options;
    options.chip = chip;
    options.blockSize = blockSize.getValue();
    FailureOr<std::string> ptx = seg::compileToPTX(*module, options);
    if (failed(ptx))
      return failure();
    std::string fileName = "segops_" + chip + ".ptx";
    if (failed(writeFile(fileName, *ptx)))
      return failure();
    ptxFiles[chip] = fileName;
  }

  FailureOr<std::string> object = seg::compileToHostObject(*module, hostCpu);
  if (failed(object) || failed(writeFile("segops_host.o", *object)))
    return failure();

  if (gpuSimulator) {
    FailureOr<std::string> simulated =
        seg::compileToGPUSimulatorObject(*module, blockSize);
    if (failed(simulated) || failed(writeFile("segops_gpusim.o", *simulated)))
      return failure();
    (*manifest)["gpu_simulator_object"] = "segops_gpusim.o";
  }

  (*manifest)["ptx"] = std::move(ptxFiles);
  (*manifest)["host_object"] = "segops_host.o";
  (*manifest)["host_library"] = hostLibrary.getValue();
  (*manifest)["host_cpu"] = hostCpu.getValue();
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
