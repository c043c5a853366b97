//===- SegDialect.cpp - seg dialect registration --------------------------===//

#include "segops/Dialect/Seg/IR/SegDialect.h"
#include "segops/Dialect/Seg/IR/SegOps.h"

#include "segops/Dialect/Seg/IR/SegInterfaces.cpp.inc"

using namespace mlir;
using namespace mlir::seg;

#include "segops/Dialect/Seg/IR/SegOpsDialect.cpp.inc"

void SegDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "segops/Dialect/Seg/IR/SegOps.cpp.inc"
      >();
}
