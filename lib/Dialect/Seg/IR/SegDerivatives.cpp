//===- SegDerivatives.cpp - reverse-mode derivative rules of seg ops ------===//
//
// One rule per op, each written with seg ops (and elementwise arith on
// per-segment tensors), so the op set is closed under differentiation and
// seg-differentiate can be applied to its own output.
//
//===----------------------------------------------------------------------===//

#include "segops/Dialect/Seg/IR/SegOps.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"

#include <limits>

using namespace mlir;
using namespace mlir::seg;

/// Number of rows of a tensor, as an index value.
static Value leadingDim(OpBuilder &b, Location loc, Value tensor) {
  return b.create<tensor::DimOp>(loc, tensor, 0);
}

Value mlir::seg::createSplatLike(OpBuilder &b, Location loc, Value like,
                                 double value) {
  Type type = like.getType();
  auto tensorType = dyn_cast<RankedTensorType>(type);
  Type elementType = tensorType ? tensorType.getElementType() : type;
  Value scalar =
      b.create<arith::ConstantOp>(loc, b.getFloatAttr(elementType, value));
  if (!tensorType)
    return scalar;
  SmallVector<Value> dynamicSizes;
  for (int64_t d = 0; d < tensorType.getRank(); ++d)
    if (tensorType.isDynamicDim(d))
      dynamicSizes.push_back(b.create<tensor::DimOp>(loc, like, d));
  return b.create<tensor::SplatOp>(loc, scalar, tensorType, dynamicSizes);
}

/// The per-segment row count of `idx` as floats of `like`'s type.
static Value countLike(OpBuilder &b, Location loc, Value idx, Value numSegments,
                       Value like) {
  auto type = cast<RankedTensorType>(like.getType());
  auto countType =
      RankedTensorType::get({type.getDimSize(0)}, type.getElementType());
  return b.create<CountOp>(loc, countType, idx, numSegments);
}

// sum: out[s] = Σ x[i]          =>  x̄ = gather(ḡ, idx)
LogicalResult SumOp::buildAdjoints(OpBuilder &b, ArrayRef<Value> results,
                                   SmallVectorImpl<Value> &operands) {
  operands.assign(getNumOperands(), Value());
  if (Value g = results[0])
    operands[0] = b.create<GatherOp>(getLoc(), getX().getType(), g, getIdx());
  return success();
}

// mean: out[s] = Σ x[i] / c[s]   =>  x̄[i] = ḡ[s] / c[s], as
// mul(gather(ḡ), 1/c): rows only read their own (non-empty) segment's 1/c.
LogicalResult MeanOp::buildAdjoints(OpBuilder &b, ArrayRef<Value> results,
                                    SmallVectorImpl<Value> &operands) {
  operands.assign(getNumOperands(), Value());
  Value g = results[0];
  if (!g)
    return success();
  Location loc = getLoc();
  Value count = countLike(b, loc, getIdx(), getNumSegments(), getResult());
  Value reciprocal =
      b.create<arith::DivFOp>(loc, createSplatLike(b, loc, count, 1.0), count);
  Value spread = b.create<GatherOp>(loc, getX().getType(), g, getIdx());
  operands[0] =
      b.create<MulOp>(loc, getX().getType(), spread, reciprocal, getIdx());
  return success();
}

// rms_norm: r[s] = sqrt(Σ |x[i]|² / c[s])  =>  x̄[i] = x[i] · w[s] with
// w = ḡ / (c · r) where r > 0 and 0 where r == 0 (no epsilon; empty
// segments too). The denominator is replaced by 1 where r == 0, so that no
// derivative of this rule (of any order) meets 0/0 either.
LogicalResult RmsNormOp::buildAdjoints(OpBuilder &b, ArrayRef<Value> results,
                                       SmallVectorImpl<Value> &operands) {
  operands.assign(getNumOperands(), Value());
  Value g = results[0];
  if (!g)
    return success();
  Location loc = getLoc();
  Value r = getResult();
  Value count = countLike(b, loc, getIdx(), getNumSegments(), r);
  Value zero = createSplatLike(b, loc, r, 0.0);
  Value one = createSplatLike(b, loc, r, 1.0);
  Value positive =
      b.create<arith::CmpFOp>(loc, arith::CmpFPredicate::OGT, r, zero);
  Value denominator = b.create<arith::SelectOp>(
      loc, positive, b.create<arith::MulFOp>(loc, count, r), one);
  Value scale = b.create<arith::DivFOp>(loc, g, denominator);
  Value weight = b.create<arith::SelectOp>(loc, positive, scale, zero);
  operands[0] =
      b.create<MulOp>(loc, getX().getType(), getX(), weight, getIdx());
  return success();
}

// dot: out[s] = Σ x[i]·y[i]  =>  x̄[i] = y[i] ḡ[s], ȳ[i] = x[i] ḡ[s]
LogicalResult DotOp::buildAdjoints(OpBuilder &b, ArrayRef<Value> results,
                                   SmallVectorImpl<Value> &operands) {
  operands.assign(getNumOperands(), Value());
  Value g = results[0];
  if (!g)
    return success();
  operands[0] =
      b.create<MulOp>(getLoc(), getX().getType(), getY(), g, getIdx());
  operands[1] =
      b.create<MulOp>(getLoc(), getY().getType(), getX(), g, getIdx());
  return success();
}

// mul: out[i] = x[i] y[idx[i]]  =>  x̄ = mul(ḡ, y), ȳ = dot(ḡ, x) over y's
// segments
LogicalResult MulOp::buildAdjoints(OpBuilder &b, ArrayRef<Value> results,
                                   SmallVectorImpl<Value> &operands) {
  operands.assign(getNumOperands(), Value());
  Value g = results[0];
  if (!g)
    return success();
  Location loc = getLoc();
  operands[0] = b.create<MulOp>(loc, getX().getType(), g, getY(), getIdx());
  operands[1] = b.create<DotOp>(loc, getY().getType(), g, getX(), getIdx(),
                                leadingDim(b, loc, getY()));
  return success();
}

// matvec (transpose): out[i] = m[s]ᵀ v[i]  =>  v̄ = m[s] ḡ[i],
//                                              m̄[s] = Σ v[i] ḡ[i]ᵀ
// matvec (plain):     out[i] = m[s] v[i]   =>  v̄ = m[s]ᵀ ḡ[i],
//                                              m̄[s] = Σ ḡ[i] v[i]ᵀ
LogicalResult MatvecOp::buildAdjoints(OpBuilder &b, ArrayRef<Value> results,
                                      SmallVectorImpl<Value> &operands) {
  operands.assign(getNumOperands(), Value());
  Value g = results[0];
  if (!g)
    return success();
  Location loc = getLoc();
  bool transpose = getTranspose();
  operands[0] = b.create<MatvecOp>(loc, getV().getType(), g, getM(), getIdx(),
                                   b.getBoolAttr(!transpose));
  Value numSegments = leadingDim(b, loc, getM());
  Value left = transpose ? getV() : g, right = transpose ? g : getV();
  operands[1] = b.create<OuterSumOp>(loc, getM().getType(), left, right,
                                     getIdx(), numSegments);
  return success();
}

// gather: out[i] = y[idx[i]]  =>  ȳ = sum(ḡ) over y's segments
LogicalResult GatherOp::buildAdjoints(OpBuilder &b, ArrayRef<Value> results,
                                      SmallVectorImpl<Value> &operands) {
  operands.assign(getNumOperands(), Value());
  if (Value g = results[0])
    operands[0] = b.create<SumOp>(getLoc(), getY().getType(), g, getIdx(),
                                  leadingDim(b, getLoc(), getY()));
  return success();
}

// gather_rows: out[i] = t[j[i]]  =>  t̄ = scatter_sum(ḡ, j) into t's rows
LogicalResult GatherRowsOp::buildAdjoints(OpBuilder &b, ArrayRef<Value> results,
                                          SmallVectorImpl<Value> &operands) {
  operands.assign(getNumOperands(), Value());
  if (Value g = results[0])
    operands[0] =
        b.create<ScatterSumOp>(getLoc(), getTable().getType(), g, getJ(),
                               leadingDim(b, getLoc(), getTable()));
  return success();
}

// scatter_sum: out[m] = Σ_{j[i]=m} x[i]  =>  x̄ = gather_rows(ḡ, j)
LogicalResult ScatterSumOp::buildAdjoints(OpBuilder &b, ArrayRef<Value> results,
                                          SmallVectorImpl<Value> &operands) {
  operands.assign(getNumOperands(), Value());
  if (Value g = results[0])
    operands[0] =
        b.create<GatherRowsOp>(getLoc(), getX().getType(), g, getJ());
  return success();
}

// outer_sum: M[s] = Σ v[i] g[i]ᵀ  =>  v̄[i] = M̄[s] g[i], ḡ[i] = M̄[s]ᵀ v[i]
LogicalResult OuterSumOp::buildAdjoints(OpBuilder &b, ArrayRef<Value> results,
                                        SmallVectorImpl<Value> &operands) {
  operands.assign(getNumOperands(), Value());
  Value adjoint = results[0];
  if (!adjoint)
    return success();
  Location loc = getLoc();
  operands[0] = b.create<MatvecOp>(loc, getV().getType(), getG(), adjoint,
                                   getIdx(), b.getBoolAttr(false));
  operands[1] = b.create<MatvecOp>(loc, getG().getType(), getV(), adjoint,
                                   getIdx(), b.getBoolAttr(true));
  return success();
}

// count depends on idx only: no adjoints.
LogicalResult CountOp::buildAdjoints(OpBuilder &b, ArrayRef<Value> results,
                                     SmallVectorImpl<Value> &operands) {
  operands.assign(getNumOperands(), Value());
  return success();
}

// max / min: out[s] = ext_{i in s} x[i] (per component)  =>  the cotangent
// split evenly among the rows attaining it:
//   hit[i] = x[i] == gather(out)[i],  n = sum(hit),
//   x̄[i]  = hit[i] * gather(ḡ / n)[i]   (n >= 1 in every non-empty segment;
//                                         an empty one divides by 1),
// and NaN in a segment whose extremum is NaN, as torch.amax's.
// hit is constant almost everywhere, so the rule is linear in ḡ and its
// own derivatives with respect to x are zero.
static LogicalResult buildExtremumAdjoints(Operation *op, Value x, Value idx,
                                           Value numSegments, Value result,
                                           OpBuilder &b,
                                           ArrayRef<Value> results,
                                           SmallVectorImpl<Value> &operands) {
  operands.assign(op->getNumOperands(), Value());
  Value g = results[0];
  if (!g)
    return success();
  Location loc = op->getLoc();
  Value attained = b.create<GatherOp>(loc, x.getType(), result, idx);
  Value isHit =
      b.create<arith::CmpFOp>(loc, arith::CmpFPredicate::OEQ, x, attained);
  Value hit = b.create<arith::SelectOp>(loc, isHit,
                                        createSplatLike(b, loc, x, 1.0),
                                        createSplatLike(b, loc, x, 0.0));
  Value hits = b.create<SumOp>(loc, result.getType(), hit, idx, numSegments);
  Value zero = createSplatLike(b, loc, hits, 0.0);
  Value anyHit =
      b.create<arith::CmpFOp>(loc, arith::CmpFPredicate::OGT, hits, zero);
  Value safeHits = b.create<arith::SelectOp>(
      loc, anyHit, hits, createSplatLike(b, loc, hits, 1.0));
  Value share = b.create<arith::DivFOp>(loc, g, safeHits);
  Value spread = b.create<GatherOp>(loc, x.getType(), share, idx);
  // A segment whose extremum is NaN: no row equals it, and torch.amax's
  // gradient is NaN in every row (0 times its share, divided by 0 hits).
  Value isNaN = b.create<arith::CmpFOp>(loc, arith::CmpFPredicate::UNO,
                                        attained, attained);
  operands[0] = b.create<arith::SelectOp>(
      loc, isNaN,
      createSplatLike(b, loc, x, std::numeric_limits<double>::quiet_NaN()),
      b.create<arith::MulFOp>(loc, hit, spread));
  return success();
}

LogicalResult MaxOp::buildAdjoints(OpBuilder &b, ArrayRef<Value> results,
                                   SmallVectorImpl<Value> &operands) {
  return buildExtremumAdjoints(*this, getX(), getIdx(), getNumSegments(),
                               getResult(), b, results, operands);
}

LogicalResult MinOp::buildAdjoints(OpBuilder &b, ArrayRef<Value> results,
                                   SmallVectorImpl<Value> &operands) {
  return buildExtremumAdjoints(*this, getX(), getIdx(), getNumSegments(),
                               getResult(), b, results, operands);
}

// broadcast: out[i, c] = x[i]  =>  x̄ = component_sum(ḡ)
LogicalResult BroadcastOp::buildAdjoints(OpBuilder &b, ArrayRef<Value> results,
                                         SmallVectorImpl<Value> &operands) {
  operands.assign(1, Value());
  if (Value g = results[0])
    operands[0] = b.create<ComponentSumOp>(getLoc(), getX().getType(), g);
  return success();
}

// component_sum: out[i] = Σ_c x[i, c]  =>  x̄ = broadcast(ḡ)
LogicalResult ComponentSumOp::buildAdjoints(OpBuilder &b,
                                            ArrayRef<Value> results,
                                            SmallVectorImpl<Value> &operands) {
  operands.assign(1, Value());
  if (Value g = results[0])
    operands[0] = b.create<BroadcastOp>(getLoc(), getX().getType(), g);
  return success();
}

// component_max / component_min: out[i] = max_c x[i, c]  =>  x̄[i, c] =
// ḡ[i] t[i, c] / Σ_c t[i, c] with t = (x[i, c] == out[i]): the components
// attaining the extremum share the gradient evenly (as torch.amax's).
static LogicalResult
buildComponentExtremumAdjoints(Operation *op, OpBuilder &b,
                               ArrayRef<Value> results,
                               SmallVectorImpl<Value> &operands) {
  operands.assign(1, Value());
  Value g = results[0];
  if (!g)
    return success();
  Location loc = op->getLoc();
  Value x = op->getOperand(0), extremum = op->getResult(0);
  Type rowsType = x.getType();
  Value attains = b.create<arith::CmpFOp>(
      loc, arith::CmpFPredicate::OEQ, x,
      b.create<BroadcastOp>(loc, rowsType, extremum));
  Value mask =
      b.create<arith::SelectOp>(loc, attains, createSplatLike(b, loc, x, 1.0),
                                createSplatLike(b, loc, x, 0.0));
  Value ties = b.create<ComponentSumOp>(loc, extremum.getType(), mask);
  Value share = b.create<arith::DivFOp>(loc, g, ties);
  operands[0] = b.create<arith::MulFOp>(
      loc, b.create<BroadcastOp>(loc, rowsType, share), mask);
  return success();
}

LogicalResult ComponentMaxOp::buildAdjoints(OpBuilder &b,
                                            ArrayRef<Value> results,
                                            SmallVectorImpl<Value> &operands) {
  return buildComponentExtremumAdjoints(*this, b, results, operands);
}

LogicalResult ComponentMinOp::buildAdjoints(OpBuilder &b,
                                            ArrayRef<Value> results,
                                            SmallVectorImpl<Value> &operands) {
  return buildComponentExtremumAdjoints(*this, b, results, operands);
}
