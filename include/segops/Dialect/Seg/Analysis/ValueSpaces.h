//===- ValueSpaces.h - per-row or per-segment values ------------*- C++ -*-===//
//
// In a function of seg ops every tensor lives either per row (N rows of idx)
// or per segment (S segments). Seg ops fix the spaces of their operands and
// results; elementwise ops and splats share one space among their tensors.
// A (?, 3, 3) argument is per segment (matrices exist only per segment).
// A table that seg.gather_rows reads by a second index gets no space from
// it (any argument can be read at random rows); seg.scatter_sum's result
// is a table of its own.
// A `seg.space = "row" | "segment"` argument attribute fixes an argument's
// space where no op does (seg-differentiate writes it on gradient
// functions, whose zero gradients may not touch any seg op).
//
//===----------------------------------------------------------------------===//

#ifndef SEGOPS_DIALECT_SEG_ANALYSIS_VALUESPACES_H
#define SEGOPS_DIALECT_SEG_ANALYSIS_VALUESPACES_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/DenseMap.h"

namespace mlir {
namespace seg {

enum class ValueSpace {
  Row,     // one element per row of idx
  Segment, // one element per segment
  Size,    // an index: N, S or a constant
  Scalar,  // a floating-point scalar constant
  Table,   // rows by a second index: a seg.scatter_sum's result
};

/// The name of the argument attribute that fixes an argument's space.
constexpr StringLiteral kSpaceAttrName = "seg.space";

/// Infers the space of every value it can in `func`'s single block. Values
/// connected to no seg op and no annotated argument stay absent. Reports a
/// value used in two spaces, or an unsupported op, through `fail` (which
/// returns the diagnostic to attach notes to) and returns failure.
FailureOr<DenseMap<Value, ValueSpace>>
inferValueSpaces(func::FuncOp func,
                 function_ref<InFlightDiagnostic(const Twine &)> fail);

/// "row" or "segment".
StringRef stringifyValueSpace(ValueSpace space);

} // namespace seg
} // namespace mlir

#endif // SEGOPS_DIALECT_SEG_ANALYSIS_VALUESPACES_H
