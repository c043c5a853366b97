//===- Manifest.cpp - the op library's kernel manifest --------------------===//

#include "segops/Target/OpLibrary.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "segops/Conversion/SegKernelABI.h"

using namespace mlir;
using namespace mlir::seg;

static std::string typeName(Type type) {
  std::string name;
  llvm::raw_string_ostream os(name);
  type.print(os);
  return name;
}

static llvm::json::Object describeKernel(const KernelInterface &interface,
                                         int64_t blockSize) {
  llvm::json::Array buffers;
  for (const KernelBuffer &buffer : interface.buffers) {
    llvm::json::Array shape;
    for (const std::string &dim : buffer.shape)
      shape.push_back(dim);
    buffers.push_back(llvm::json::Object{
        {"name", buffer.name},
        {"role", buffer.isOutput ? "output" : "input"},
        {"dtype", typeName(buffer.elementType)},
        {"shape", std::move(shape)},
    });
  }
  bool perSegment =
      interface.strategy == KernelStrategy::SegmentReduction;
  return llvm::json::Object{
      {"name", interface.getName().str()},
      {"op", interface.op->getName().getStringRef().str()},
      {"dtype", typeName(interface.elementType)},
      {"width", interface.width},
      {"buffers", std::move(buffers)},
      {"sizes", llvm::json::Array{"N", "S"}},
      // Host work items (see "host"."range") and the GPU grid: reductions
      // give each thread one row (a warp per 32-row chunk) and need one block
      // even without rows, to zero the segments; row maps give each thread
      // one output element. Kernels grid-stride, so any grid is correct.
      {"work", perSegment ? "segments" : "elements"},
      {"gpu",
       llvm::json::Object{
           {"block", llvm::json::Array{blockSize, 1, 1}},
           {"dynamic_shared_bytes", 0},
           {"grid",
            llvm::json::Object{
                {"elements", perSegment ? "rows" : "row_elements"},
                {"per_block", blockSize},
                {"min", perSegment ? 1 : 0}}}}},
      {"host", llvm::json::Object{{"symbol", interface.getName().str()},
                                  {"range", perSegment ? "segments" : "rows"}}},
  };
}

FailureOr<llvm::json::Object>
mlir::seg::buildKernelManifest(ModuleOp source, int64_t blockSize) {
  llvm::json::Array kernels;
  for (auto func : source.getOps<func::FuncOp>()) {
    if (!isKernelFunctionCandidate(func))
      continue;
    FailureOr<KernelInterface> interface = analyzeKernelFunction(func);
    if (failed(interface))
      return failure();
    kernels.push_back(describeKernel(*interface, blockSize));
  }
  return llvm::json::Object{{"format", "segops-op-library"},
                            {"version", 1},
                            {"kernels", std::move(kernels)}};
}
