//===- SegDialect.h - seg dialect -------------------------------*- C++ -*-===//
#ifndef SEGOPS_DIALECT_SEG_IR_SEGDIALECT_H
#define SEGOPS_DIALECT_SEG_IR_SEGDIALECT_H

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/Dialect.h"

#include "segops/Dialect/Seg/IR/SegOpsDialect.h.inc"

#endif // SEGOPS_DIALECT_SEG_IR_SEGDIALECT_H
