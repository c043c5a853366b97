//===- SegInterfaces.h - seg op interfaces ----------------------*- C++ -*-===//
#ifndef SEGOPS_DIALECT_SEG_IR_SEGINTERFACES_H
#define SEGOPS_DIALECT_SEG_IR_SEGINTERFACES_H

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/OpDefinition.h"

namespace mlir {
namespace seg {
/// `tensor.dim %idx, 0`: the rows of a segment index (the default result
/// length of SegmentOpInterface's row maps).
Value buildRowCount(OpBuilder &builder, Location loc, Value idx);
} // namespace seg
} // namespace mlir

#include "segops/Dialect/Seg/IR/SegInterfaces.h.inc"

namespace mlir {
class DialectRegistry;
namespace seg {
/// Attaches ReverseDifferentiableOpInterface to the arith and math ops that
/// kernel functions use for elementwise work: the table of those ops
/// (ElementwiseOps.cpp).
void registerDerivativeExternalModels(DialectRegistry &registry);

/// Whether kernel functions accept `op` as elementwise arithmetic: an arith
/// or math op with the Elementwise trait and a registered derivative rule.
bool isKernelElementwiseOp(Operation *op);

/// `op` rebuilt on scalar (or, one lane per row, vector) `operands`: the
/// same op name and attributes, results of the operands' float type (i1 for
/// comparisons).
Value buildElementwiseOnComponents(OpBuilder &b, Location loc, Operation *op,
                                   ValueRange operands);
} // namespace seg
} // namespace mlir

#endif // SEGOPS_DIALECT_SEG_IR_SEGINTERFACES_H
