//===- SegDialect.cpp - seg dialect registration --------------------------===//

#include "segops/Dialect/Seg/IR/SegDialect.h"
#include "segops/Dialect/Seg/IR/SegOps.h"

#include "mlir/Transforms/InliningUtils.h"

#include "segops/Dialect/Seg/IR/SegInterfaces.cpp.inc"

using namespace mlir;
using namespace mlir::seg;

#include "segops/Dialect/Seg/IR/SegOpsDialect.cpp.inc"

namespace {
/// Seg ops are pure functions of their operands: any may be inlined into any
/// function (segops.fusion inlines derived functions into fused kernels).
struct SegInlinerInterface : public DialectInlinerInterface {
  using DialectInlinerInterface::DialectInlinerInterface;

  bool isLegalToInline(Operation *, Region *, bool,
                       IRMapping &) const final {
    return true;
  }
  bool isLegalToInline(Region *, Region *, bool, IRMapping &) const final {
    return true;
  }
};
} // namespace

void SegDialect::initialize() {
  addInterfaces<SegInlinerInterface>();
  addOperations<
#define GET_OP_LIST
#include "segops/Dialect/Seg/IR/SegOps.cpp.inc"
      >();
}
