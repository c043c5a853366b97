//===- SegRowCode.cpp - SegmentOpInterface of the seg ops -----------------===//
//
// Where each seg op's operands live, and the scalar code of one row and of
// a reduction's epilogue: everything the segment-program analysis and the
// emitter shared by both lowerings know of an op.
//
//===----------------------------------------------------------------------===//

#include "segops/Dialect/Seg/IR/SegOps.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"

using namespace mlir;
using namespace mlir::seg;

Value mlir::seg::buildRowCount(OpBuilder &builder, Location loc, Value idx) {
  return builder.create<tensor::DimOp>(loc, idx, 0);
}

// Linear in each float operand: a zero operand makes the result zero.
bool SumOp::isMultilinear() { return true; }
bool MeanOp::isMultilinear() { return true; }
bool DotOp::isMultilinear() { return true; }
bool OuterSumOp::isMultilinear() { return true; }
bool MulOp::isMultilinear() { return true; }
bool MatvecOp::isMultilinear() { return true; }
bool GatherOp::isMultilinear() { return true; }

// The row term is x itself, a component each.
bool SumOp::reducesOperandAsIs() { return true; }
bool MeanOp::reducesOperandAsIs() { return true; }
bool MaxOp::reducesOperandAsIs() { return true; }
bool MinOp::reducesOperandAsIs() { return true; }

using Components = SmallVector<Value>;

/// Σ_k a[k] b[k], added in component order.
static Value dotComponents(OpBuilder &b, Location loc, ValueRange lhs,
                           ValueRange rhs) {
  Value total;
  for (auto [l, r] : llvm::zip(lhs, rhs)) {
    Value term = b.create<arith::MulFOp>(loc, l, r);
    total = total ? b.create<arith::AddFOp>(loc, total, term).getResult()
                  : term;
  }
  return total;
}

/// Each total divided by the (safe) count.
static Components divideByCount(OpBuilder &b, Location loc, ValueRange totals,
                                Value count) {
  Components result;
  for (Value total : totals)
    result.push_back(b.create<arith::DivFOp>(loc, total, count));
  return result;
}

//===----------------------------------------------------------------------===//
// Reductions.
//===----------------------------------------------------------------------===//

#define SEG_UNARY_REDUCTION_COMMON(Op)                                         \
  Value Op::getSegmentCount() { return getNumSegments(); }                     \
  bool Op::isReduction() { return true; }                                      \
  SmallVector<Value> Op::getRowOperands() { return {getX()}; }

SEG_UNARY_REDUCTION_COMMON(SumOp)
SEG_UNARY_REDUCTION_COMMON(MeanOp)
SEG_UNARY_REDUCTION_COMMON(RmsNormOp)
SEG_UNARY_REDUCTION_COMMON(MaxOp)
SEG_UNARY_REDUCTION_COMMON(MinOp)
#undef SEG_UNARY_REDUCTION_COMMON

// sum, mean, max, min (and gather below) keep the interface's default row
// code: the row itself.

// mean: total / count.
Components MeanOp::buildEpilogue(OpBuilder &b, Location loc, ValueRange totals,
                                 Value count, Value) {
  return divideByCount(b, loc, totals, count);
}

// rms_norm: sqrt(Σ |x|² / count).
Components RmsNormOp::buildRowComponents(OpBuilder &b, Location loc,
                                         ArrayRef<ValueRange> operands) {
  return {dotComponents(b, loc, operands[0], operands[0])};
}
Components RmsNormOp::buildEpilogue(OpBuilder &b, Location loc,
                                    ValueRange totals, Value count, Value) {
  return {b.create<math::SqrtOp>(
      loc, b.create<arith::DivFOp>(loc, totals[0], count))};
}
bool RmsNormOp::hasCostlyEpilogue() { return true; }

// max and min start from -inf / +inf; an empty segment gives 0.
static Components zeroIfEmpty(OpBuilder &b, Location loc, ValueRange totals,
                              Value hasRows) {
  Components result;
  for (Value total : totals) {
    Value zero = b.create<arith::ConstantOp>(
        loc, b.getZeroAttr(total.getType()));
    result.push_back(b.create<arith::SelectOp>(loc, hasRows, total, zero));
  }
  return result;
}
arith::AtomicRMWKind MaxOp::getCombiningKind() {
  return arith::AtomicRMWKind::maximumf;
}
Components MaxOp::buildEpilogue(OpBuilder &b, Location loc, ValueRange totals,
                                Value, Value hasRows) {
  return zeroIfEmpty(b, loc, totals, hasRows);
}
arith::AtomicRMWKind MinOp::getCombiningKind() {
  return arith::AtomicRMWKind::minimumf;
}
Components MinOp::buildEpilogue(OpBuilder &b, Location loc, ValueRange totals,
                                Value, Value hasRows) {
  return zeroIfEmpty(b, loc, totals, hasRows);
}

// dot: Σ_k x[k] y[k] per row.
Value DotOp::getSegmentCount() { return getNumSegments(); }
bool DotOp::isReduction() { return true; }
SmallVector<Value> DotOp::getRowOperands() { return {getX(), getY()}; }
Components DotOp::buildRowComponents(OpBuilder &b, Location loc,
                                     ArrayRef<ValueRange> operands) {
  return {dotComponents(b, loc, operands[0], operands[1])};
}

// outer_sum: v gᵀ per row, row-major.
Value OuterSumOp::getSegmentCount() { return getNumSegments(); }
bool OuterSumOp::isReduction() { return true; }
SmallVector<Value> OuterSumOp::getRowOperands() { return {getV(), getG()}; }
Components OuterSumOp::buildRowComponents(OpBuilder &b, Location loc,
                                          ArrayRef<ValueRange> operands) {
  Components out;
  for (Value v : operands[0])
    for (Value g : operands[1])
      out.push_back(b.create<arith::MulFOp>(loc, v, g));
  return out;
}

//===----------------------------------------------------------------------===//
// Row maps.
//===----------------------------------------------------------------------===//

// mul: x[i] y[s].
SmallVector<Value> MulOp::getRowOperands() { return {getX()}; }
SmallVector<Value> MulOp::getSegmentOperands() { return {getY()}; }
Components MulOp::buildRowComponents(OpBuilder &b, Location loc,
                                     ArrayRef<ValueRange> operands) {
  Components out;
  for (Value component : operands[0])
    out.push_back(b.create<arith::MulFOp>(loc, component, operands[1][0]));
  return out;
}

// matvec: m[s]ᵀ v[i] (transpose) or m[s] v[i].
SmallVector<Value> MatvecOp::getRowOperands() { return {getV()}; }
SmallVector<Value> MatvecOp::getSegmentOperands() { return {getM()}; }
Components MatvecOp::buildRowComponents(OpBuilder &b, Location loc,
                                        ArrayRef<ValueRange> operands) {
  ValueRange v = operands[0], m = operands[1];
  bool transpose = getTranspose();
  Components out;
  for (int64_t a = 0; a < 3; ++a) {
    Components column;
    for (int64_t k = 0; k < 3; ++k)
      column.push_back(transpose ? m[k * 3 + a] : m[a * 3 + k]);
    out.push_back(dotComponents(b, loc, column, v));
  }
  return out;
}

// gather: y[s].
SmallVector<Value> GatherOp::getRowOperands() { return {}; }
SmallVector<Value> GatherOp::getSegmentOperands() { return {getY()}; }

//===----------------------------------------------------------------------===//
// count: the segment's row count, known before any pass; the emitter never
// asks for its row code.
//===----------------------------------------------------------------------===//

Value CountOp::getSegmentCount() { return getNumSegments(); }
SmallVector<Value> CountOp::getRowOperands() { return {}; }
Components CountOp::buildFromRowCount(OpBuilder &, Location, Value count) {
  return {count};
}

//===----------------------------------------------------------------------===//
// Per-element shape changes.
//===----------------------------------------------------------------------===//

Components BroadcastOp::buildComponents(OpBuilder &, Location,
                                        ValueRange operand) {
  auto type = cast<RankedTensorType>(getResult().getType());
  int64_t width = type.getRank() == 1 ? 1 : type.getDimSize(1);
  return Components(width, operand[0]);
}

/// Rows this wide or wider sum their scalar components as one vector.
static constexpr int64_t kVectorSumComponents = 8;

Components ComponentSumOp::buildComponents(OpBuilder &b, Location loc,
                                           ValueRange operand) {
  Type type = operand[0].getType();
  if (static_cast<int64_t>(operand.size()) >= kVectorSumComponents &&
      isa<FloatType>(type)) {
    // The components as a vector, summed by an ordered reduction from -0
    // (the same additions, in the same order, as the scalar chain below):
    // the vector is a seed for LLVM's SLP vectoriser, which then computes
    // the features' row code as vectors too.
    auto vectorType = VectorType::get({int64_t(operand.size())}, type);
    Value vector = b.create<LLVM::PoisonOp>(loc, vectorType);
    for (auto [position, component] : llvm::enumerate(operand))
      vector = b.create<LLVM::InsertElementOp>(
          loc, vector, component,
          b.create<arith::ConstantIntOp>(loc, position, 32));
    Value negativeZero = b.create<arith::ConstantOp>(
        loc, b.getFloatAttr(type, -0.0));
    return {b.create<LLVM::vector_reduce_fadd>(loc, type, negativeZero,
                                               vector)};
  }
  Value total = operand[0];
  for (Value component : operand.drop_front())
    total = b.create<arith::AddFOp>(loc, total, component);
  return {total};
}

/// The components combined in order by `Combine` (arith.maximumf or
/// arith.minimumf: NaN if any is).
template <typename Combine>
static Components combineComponents(OpBuilder &b, Location loc,
                                    ValueRange operand) {
  Value total = operand[0];
  for (Value component : operand.drop_front())
    total = b.create<Combine>(loc, total, component);
  return {total};
}

std::optional<arith::AtomicRMWKind> ComponentSumOp::getComponentCombiningKind() {
  return arith::AtomicRMWKind::addf;
}
std::optional<arith::AtomicRMWKind> ComponentMaxOp::getComponentCombiningKind() {
  return arith::AtomicRMWKind::maximumf;
}
std::optional<arith::AtomicRMWKind> ComponentMinOp::getComponentCombiningKind() {
  return arith::AtomicRMWKind::minimumf;
}

Components ComponentMaxOp::buildComponents(OpBuilder &b, Location loc,
                                           ValueRange operand) {
  return combineComponents<arith::MaximumFOp>(b, loc, operand);
}

Components ComponentMinOp::buildComponents(OpBuilder &b, Location loc,
                                           ValueRange operand) {
  return combineComponents<arith::MinimumFOp>(b, loc, operand);
}
