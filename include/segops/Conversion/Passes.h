//===- Passes.h - seg conversion passes -------------------------*- C++ -*-===//
#ifndef SEGOPS_CONVERSION_PASSES_H
#define SEGOPS_CONVERSION_PASSES_H

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"

namespace mlir {
namespace seg {

#define GEN_PASS_DECL
#include "segops/Conversion/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "segops/Conversion/Passes.h.inc"

} // namespace seg
} // namespace mlir

#endif // SEGOPS_CONVERSION_PASSES_H
