//===- LinkDerived.h - derived functions linked into a kernel ---*- C++ -*-===//
//
// segops.fusion builds a kernel that calls the compiler's derivatives of seg
// ops and programs; these link them in as private functions, for the
// seg-inline pipeline to inline.
//
//===----------------------------------------------------------------------===//
#ifndef SEGOPS_PIPELINES_LINKDERIVED_H
#define SEGOPS_PIPELINES_LINKDERIVED_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Support/LogicalResult.h"

namespace mlir {
namespace seg {

/// Derivative level `level` of function `function` in `derived` (a module
/// seg-derive has run on to that order), or null.
func::FuncOp lookupDerivedFunction(ModuleOp derived, StringRef function,
                                   unsigned level);

/// Clones derivative level `level` of function `function` of `derived` (a
/// module seg-derive has run on to that order) into `module` as the private
/// function `symbol`. With `takesForward`, the clone takes the results of
/// level 0 on its leading arguments as new trailing arguments instead of
/// recomputing them. Emits an error on `module` and fails if there is no
/// such function, or if `takesForward` is asked of level 0.
LogicalResult linkDerivedFunction(ModuleOp module, ModuleOp derived,
                                  StringRef function, unsigned level,
                                  StringRef symbol, bool takesForward);

} // namespace seg
} // namespace mlir

#endif // SEGOPS_PIPELINES_LINKDERIVED_H
