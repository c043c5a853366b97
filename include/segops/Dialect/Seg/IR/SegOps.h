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

#endif // SEGOPS_DIALECT_SEG_IR_SEGOPS_H
