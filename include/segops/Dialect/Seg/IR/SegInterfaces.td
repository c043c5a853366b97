//===- SegInterfaces.td - seg op interfaces ----------------*- tablegen -*-===//

#ifndef SEGOPS_DIALECT_SEG_IR_SEGINTERFACES_TD
#define SEGOPS_DIALECT_SEG_IR_SEGINTERFACES_TD

include "mlir/IR/OpBase.td"

def Seg_ReverseDifferentiableOpInterface
    : OpInterface<"ReverseDifferentiableOpInterface"> {
  let cppNamespace = "::mlir::seg";
  let description = [{
    The reverse-mode derivative rule of an operation, kept beside the
    operation: given the adjoints (cotangents) of its results, build IR that
    computes its operands' adjoints. `seg-differentiate` calls it on every
    active operation in reverse order. Seg ops implement it in
    SegDerivatives.cpp; arith and math ops get it as external models.
  }];
  let methods = [
    InterfaceMethod<[{
        Builds, at the builder's insertion point, the adjoints of the
        operands. `resultAdjoints` has one entry per result, null where the
        result's adjoint is zero. Fills `operandAdjoints` (one entry per
        operand, null where the operand gets no contribution: integer
        operands, sizes, or a zero adjoint).
      }],
      "::mlir::LogicalResult", "buildAdjoints",
      (ins "::mlir::OpBuilder &":$builder,
           "::mlir::ArrayRef<::mlir::Value>":$resultAdjoints,
           "::llvm::SmallVectorImpl<::mlir::Value> &":$operandAdjoints)>,
  ];
}

#endif // SEGOPS_DIALECT_SEG_IR_SEGINTERFACES_TD
