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
    What the segment-program analysis, the emitter, the lowerings and the
    dialect's canonicalizations need to know of a seg op, kept beside the
    op: where its operands and result live (per row or per segment), the
    result's length, whether it reduces rows or is linear in its operands,
    and the scalar code of one row and of the epilogue. Every seg op
    implements it (SegOps.cpp); those components read seg ops only through
    it, so adding an op means writing its ODS and these methods.

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
    InterfaceMethod<[{
        The length of the result's leading dimension: the segment count for
        ops with one, else the rows of the segment index.
      }],
      "::mlir::Value", "buildResultLength",
      (ins "::mlir::OpBuilder &":$builder, "::mlir::Location":$loc),
      /*methodBody=*/"", [{
        if (::mlir::Value count = $_op.getSegmentCount())
          return count;
        return ::mlir::seg::buildRowCount(builder, loc, $_op.getSegmentIndex());
      }]>,
    InterfaceMethod<[{
        Whether the result is linear in each float operand separately (sum,
        dot, mul, ...), so that a zero operand makes it zero: the
        canonicalizer folds such ops away in derived gradients.
      }],
      "bool", "isMultilinear", (ins), /*methodBody=*/"", [{ return false; }]>,
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
        Whether the row term is the first operand's components as they are
        (buildRowComponents' default: sum, mean, max, min), so that a
        reduction of a row input needs only its values, each component
        reduced on its own, in whatever arrangement over lanes the kernel
        loads them. False unless the op says so.
      }],
      "bool", "reducesOperandAsIs", (ins), /*methodBody=*/"",
      [{ return false; }]>,
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
    InterfaceMethod<[{
        Whether the epilogue takes a square root (or something as costly):
        the host lowering then computes a batch of segments' epilogues at
        once, in vectors.
      }],
      "bool", "hasCostlyEpilogue", (ins), /*methodBody=*/"", [{ return false; }]>,
    InterfaceMethod<[{
        The value of an op known from its segment's row count alone, before
        any pass (seg.count: the count itself), given the count as a float;
        empty for every other op.
      }],
      "::llvm::SmallVector<::mlir::Value>", "buildFromRowCount",
      (ins "::mlir::OpBuilder &":$builder, "::mlir::Location":$loc,
           "::mlir::Value":$count),
      /*methodBody=*/"", [{ return {}; }]>,
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
    InterfaceMethod<[{
        How the op combines an element's components into its one result
        (add, maximumf or minimumf), or none if it does not (a broadcast):
        GPU kernels holding a row's features split over lanes combine the
        lanes' parts this way.
      }],
      "::std::optional<::mlir::arith::AtomicRMWKind>",
      "getComponentCombiningKind", (ins), /*methodBody=*/"",
      [{ return ::std::nullopt; }]>,
  ];
}

#endif // SEGOPS_DIALECT_SEG_IR_SEGINTERFACES_TD
