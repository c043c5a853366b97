//===- SegDialect.h - seg dialect -------------------------------*- C++ -*-===//
#ifndef SEGOPS_DIALECT_SEG_IR_SEGDIALECT_H
#define SEGOPS_DIALECT_SEG_IR_SEGDIALECT_H

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/Dialect.h"

#include "segops/Dialect/Seg/IR/SegOpsDialect.h.inc"

namespace mlir::seg {
/// A function attribute (unit): derive this function's gradient, and the
/// gradients of that, on saved results (seg-differentiate's saved-results
/// for this function alone). The op library's kernel functions carry it.
constexpr StringLiteral kSavedResultsAttrName = "seg.saved_results";
/// An argument attribute of a gradient function derived on saved results:
/// the argument is the primal's result #k (an integer), saved by the caller.
constexpr StringLiteral kSavedResultAttrName = "seg.saved_result";
} // namespace mlir::seg

#endif // SEGOPS_DIALECT_SEG_IR_SEGDIALECT_H
