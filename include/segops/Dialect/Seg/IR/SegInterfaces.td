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

def Seg_SegmentOpInterface : OpInterface<"SegmentOpInterface"> {
  let cppNamespace = "::mlir::seg";
  let description = [{
    What the segment-program analysis and emitter need to know of a seg op,
    kept beside the op: where its operands and result live (per row or per
    segment), whether it reduces rows, and the scalar code of one row and of
    the epilogue. Every seg op implements it (SegOps.cpp); the analysis,
    space inference and both lowerings read ops only through it.

    A *reduction* (sum, mean, rms_norm, dot, outer_sum, max, min) has a
    per-segment result accumulated over the segment's rows: each row adds
    its row term's components into accumulators combined with
    `getCombiningKind()`, and the epilogue turns the combined totals into
    the result. A *row map* (mul, matvec, gather) computes a row value from
    its row operands and its segment's segment operands. `seg.count` is
    neither: its value is the segment's row count, known before any pass.
  }];
  let methods = [
    InterfaceMethod<"The segment index (a function argument in kernels).",
      "::mlir::Value", "getSegmentIndex", (ins),
      /*methodBody=*/"", [{ return $_op.getIdx(); }]>,
    InterfaceMethod<[{
        The number of segments, for ops that produce per-segment values
        (null for row maps: their segment operands' length is S).
      }],
      "::mlir::Value", "getSegmentCount", (ins), /*methodBody=*/"", [{ return {}; }]>,
    InterfaceMethod<"Whether the result is accumulated over each segment's rows.",
      "bool", "isReduction", (ins), /*methodBody=*/"", [{ return false; }]>,
    InterfaceMethod<"The float operands that live per row.",
      "::llvm::SmallVector<::mlir::Value>", "getRowOperands", (ins)>,
    InterfaceMethod<"The float operands that live per segment.",
      "::llvm::SmallVector<::mlir::Value>", "getSegmentOperands", (ins),
      /*methodBody=*/"", [{ return {}; }]>,
    InterfaceMethod<[{
        How a reduction's partial accumulators combine (addf for sums,
        maximumf / minimumf): the row loops, the GPU butterflies and the
        lane reductions use it, starting from its identity.
      }],
      "::mlir::arith::AtomicRMWKind", "getCombiningKind", (ins),
      /*methodBody=*/"", [{ return ::mlir::arith::AtomicRMWKind::addf; }]>,
    InterfaceMethod<[{
        The scalar code of one row: for a reduction its row term (the
        components accumulated), for a row map its row value. `operands`
        holds the components of every float operand, in operand order
        (segment operands already those of the row's segment). By default
        the first operand itself (sum, mean, max, min, gather).
      }],
      "::llvm::SmallVector<::mlir::Value>", "buildRowComponents",
      (ins "::mlir::OpBuilder &":$builder, "::mlir::Location":$loc,
           "::llvm::ArrayRef<::mlir::ValueRange>":$operands),
      /*methodBody=*/"",
      [{ return ::llvm::SmallVector<::mlir::Value>(operands.front()); }]>,
    InterfaceMethod<[{
        A reduction's result from its combined totals, given the segment's
        row count as a float (`count`, replaced by 1 in an empty segment)
        and whether it has rows (`hasRows`, i1).
      }],
      "::llvm::SmallVector<::mlir::Value>", "buildEpilogue",
      (ins "::mlir::OpBuilder &":$builder, "::mlir::Location":$loc,
           "::mlir::ValueRange":$totals, "::mlir::Value":$count,
           "::mlir::Value":$hasRows),
      /*methodBody=*/"", [{ return ::llvm::SmallVector<::mlir::Value>(totals); }]>,
  ];
}

def Seg_ComponentOpInterface : OpInterface<"ComponentOpInterface"> {
  let cppNamespace = "::mlir::seg";
  let description = [{
    An op that maps each element (a row's or a segment's value) to one of
    the same space, changing its shape: a per-row scalar broadcast to a
    3-vector, a 3-vector's component sum. Space inference treats it like
    elementwise arithmetic (its operand and result share one space); the
    emitter builds its scalar code from its operand's components.
  }];
  let methods = [
    InterfaceMethod<[{
        The result's components from the operand's.
      }],
      "::llvm::SmallVector<::mlir::Value>", "buildComponents",
      (ins "::mlir::OpBuilder &":$builder, "::mlir::Location":$loc,
           "::mlir::ValueRange":$operand)>,
  ];
}

#endif // SEGOPS_DIALECT_SEG_IR_SEGINTERFACES_TD
