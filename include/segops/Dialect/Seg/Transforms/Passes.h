//===- Passes.h - seg dialect transformations -------------------*- C++ -*-===//
#ifndef SEGOPS_DIALECT_SEG_TRANSFORMS_PASSES_H
#define SEGOPS_DIALECT_SEG_TRANSFORMS_PASSES_H

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"
#include "segrt/OpLibrary.h"

namespace mlir {
namespace seg {

#define GEN_PASS_DECL
#include "segops/Dialect/Seg/Transforms/Passes.h.inc"

/// Builds `name`, the reverse-mode gradient of `func` with respect to the
/// arguments at `wrt` (see the seg-differentiate pass), next to `func`;
/// with `savedResults` (or `func` carrying kSavedResultsAttrName), it takes
/// the floating-point results of `func` that its rules read instead of
/// recomputing them, each marked with kSavedResultAttrName.
FailureOr<func::FuncOp> differentiateFunction(func::FuncOp func,
                                              ArrayRef<unsigned> wrt,
                                              StringRef name,
                                              bool savedResults = false);

#define GEN_PASS_REGISTRATION
#include "segops/Dialect/Seg/Transforms/Passes.h.inc"

} // namespace seg
} // namespace mlir

#endif // SEGOPS_DIALECT_SEG_TRANSFORMS_PASSES_H
