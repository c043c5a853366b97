//===- SegInterfaces.h - seg op interfaces ----------------------*- C++ -*-===//
#ifndef SEGOPS_DIALECT_SEG_IR_SEGINTERFACES_H
#define SEGOPS_DIALECT_SEG_IR_SEGINTERFACES_H

#include "mlir/IR/Builders.h"
#include "mlir/IR/OpDefinition.h"

#include "segops/Dialect/Seg/IR/SegInterfaces.h.inc"

namespace mlir {
class DialectRegistry;
namespace seg {
/// Attaches ReverseDifferentiableOpInterface to the arith and math ops that
/// seg programs use for elementwise work (addf, subf, mulf, divf, negf,
/// select, sqrt).
void registerDerivativeExternalModels(DialectRegistry &registry);
} // namespace seg
} // namespace mlir

#endif // SEGOPS_DIALECT_SEG_IR_SEGINTERFACES_H
