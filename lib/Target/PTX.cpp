//===- PTX.cpp - kernel functions to PTX text -----------------------------===//

#include "segops/Target/OpLibrary.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Pass/PassManager.h"

using namespace mlir;
using namespace mlir::seg;

FailureOr<std::string> mlir::seg::compileToPTX(ModuleOp source,
                                               const SegToPTXOptions &options) {
  OwningOpRef<ModuleOp> module = cast<ModuleOp>(source->clone());
  PassManager pm(source.getContext());
  buildSegToPTXPipeline(pm, options);
  if (failed(pm.run(*module)))
    return failure();
  std::string ptx;
  for (auto binary : module->getOps<gpu::BinaryOp>()) {
    for (Attribute object : binary.getObjects()) {
      auto objectAttr = cast<gpu::ObjectAttr>(object);
      if (objectAttr.getFormat() != gpu::CompilationTarget::Assembly)
        return source.emitError("expected a PTX (assembly) object");
      // The serialized PTX carries the C string's terminating NUL, which
      // ptxas and the driver's JIT reject in a file.
      ptx += objectAttr.getObject().getValue().rtrim('\0').str();
    }
  }
  if (ptx.empty())
    return source.emitError("the module has no kernels to compile to PTX");
  return ptx;
}
