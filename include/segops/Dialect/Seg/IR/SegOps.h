//===- SegOps.h - seg dialect operations ------------------------*- C++ -*-===//
#ifndef SEGOPS_DIALECT_SEG_IR_SEGOPS_H
#define SEGOPS_DIALECT_SEG_IR_SEGOPS_H

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "segops/Dialect/Seg/IR/SegDialect.h"
#include "segops/Dialect/Seg/IR/SegInterfaces.h"

#define GET_OP_CLASSES
#include "segops/Dialect/Seg/IR/SegOps.h.inc"

namespace mlir {
namespace seg {
/// A value of `like`'s type filled with `value`: a tensor.splat (sized like
/// `like`) for tensors, an arith.constant for scalars. Derivative rules and
/// seg-differentiate use it for zeros and ones.
Value createSplatLike(OpBuilder &b, Location loc, Value like, double value);
} // namespace seg
} // namespace mlir

#endif // SEGOPS_DIALECT_SEG_IR_SEGOPS_H
