//===- SegBase.td - seg dialect definition -----------------*- tablegen -*-===//
//
// The seg dialect: segmented reductions and per-segment algebra over rows
// grouped by a sorted segment index.
//
//===----------------------------------------------------------------------===//

#ifndef SEGOPS_DIALECT_SEG_IR_SEGBASE_TD
#define SEGOPS_DIALECT_SEG_IR_SEGBASE_TD

include "mlir/IR/OpBase.td"
include "mlir/IR/AttrTypeBase.td"

def Seg_Dialect : Dialect {
  let name = "seg";
  let cppNamespace = "::mlir::seg";
  let summary = "Segmented operations over rows grouped by a sorted index";
  let description = [{
    The `seg` dialect models operations over N rows that are partitioned into
    S contiguous segments by a non-decreasing segment index `idx` (`i32`,
    values in `[0, S)`). Rows are scalars (`tensor<?xT>`), 3-vectors
    (`tensor<?x3xT>`) or, per segment, 3x3 matrices (`tensor<?x3x3xT>`), with
    `T` one of `f32` and `f64`. Sizes are dynamic so that one compiled kernel
    serves every N and S; the number of segments is an `index` value.

    Semantics shared by every op: rows whose index lies outside `[0, S)` do
    not contribute, an empty segment reduces to 0, and nothing is ever read or
    written out of bounds whatever `idx` holds (a sorted index is a
    precondition for meaningful results, not for memory safety).
  }];
  // Derivative rules build arith and tensor ops.
  let dependentDialects = ["::mlir::arith::ArithDialect",
                           "::mlir::tensor::TensorDialect"];
  // Folds of tensor.dim of seg results and of structural zeros (see
  // SegCanonicalize.cpp).
  let hasCanonicalizer = 1;
}

class Seg_Op<string mnemonic, list<Trait> traits = []>
    : Op<Seg_Dialect, mnemonic, traits>;

// Rows of floating-point data: (N), (N,3), (S), (S,3) or (S,3,3). The exact
// rank and width are checked by each op's verifier, which can say precisely
// what it expected.
def Seg_FloatTensor : RankedTensorOf<[F32, F64]>;

// The segment index: one i32 per row.
def Seg_IndexTensor : 1DTensorOf<[I32]>;

#endif // SEGOPS_DIALECT_SEG_IR_SEGBASE_TD
