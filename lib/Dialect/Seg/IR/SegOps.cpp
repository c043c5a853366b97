//===- SegOps.cpp - seg dialect operations: verifiers and rewrites --------===//

#include "segops/Dialect/Seg/IR/SegOps.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Utils/StaticValueUtils.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/PatternMatch.h"

using namespace mlir;
using namespace mlir::seg;

//===----------------------------------------------------------------------===//
// Shape helpers shared by the verifiers.
//===----------------------------------------------------------------------===//

namespace {
/// Describes the rows of one operand or result, for diagnostics.
struct Rows {
  Operation *op;
  Value value;
  StringRef name;

  RankedTensorType type() const {
    return cast<RankedTensorType>(value.getType());
  }
};
} // namespace

/// Returns the row width (1 for (L), F for (L,F) with a static F >= 1) or
/// emits an error. Wider trailing shapes are flattened to one F by callers.
static FailureOr<int64_t> verifyRowTensor(const Rows &rows,
                                          StringRef leading = "N") {
  RankedTensorType type = rows.type();
  if (type.getRank() == 1)
    return int64_t(1);
  if (type.getRank() == 2 && !type.isDynamicDim(1) && type.getDimSize(1) >= 1)
    return type.getDimSize(1);
  return rows.op->emitOpError()
         << "expects " << rows.name << " to have shape (" << leading << ") or ("
         << leading << ",F) with a static F >= 1, but got " << type;
}

/// (L,F) with a static F >= 1: the operand or result of a per-element shape
/// change.
static LogicalResult verifyFeatureTensor(const Rows &rows, StringRef leading) {
  RankedTensorType type = rows.type();
  if (type.getRank() == 2 && !type.isDynamicDim(1) && type.getDimSize(1) >= 1)
    return success();
  return rows.op->emitOpError()
         << "expects " << rows.name << " to have shape (" << leading
         << ",F) with a static F >= 1, but got " << type;
}

static LogicalResult verifyVec3Tensor(const Rows &rows, StringRef leading) {
  RankedTensorType type = rows.type();
  if (type.getRank() == 2 && type.getDimSize(1) == 3)
    return success();
  return rows.op->emitOpError() << "expects " << rows.name << " to have shape ("
                                << leading << ",3), but got " << type;
}

static LogicalResult verifyScalarTensor(const Rows &rows, StringRef leading) {
  if (rows.type().getRank() == 1)
    return success();
  return rows.op->emitOpError() << "expects " << rows.name << " to have shape ("
                                << leading << "), but got " << rows.type();
}

static LogicalResult verifyMatrixTensor(const Rows &rows) {
  RankedTensorType type = rows.type();
  if (type.getRank() == 3 && type.getDimSize(1) == 3 && type.getDimSize(2) == 3)
    return success();
  return rows.op->emitOpError() << "expects " << rows.name
                                << " to have shape (S,3,3), but got " << type;
}

/// All floating-point operands and results of a seg op share one element type.
static LogicalResult verifySameElementType(ArrayRef<Rows> all) {
  Type expected = all.front().type().getElementType();
  for (const Rows &rows : all.drop_front()) {
    Type actual = rows.type().getElementType();
    if (actual != expected)
      return rows.op->emitOpError()
             << "expects " << all.front().name << " and " << rows.name
             << " to have the same element type, but got " << expected
             << " and " << actual;
  }
  return success();
}

/// Two leading dimensions that are both static must agree.
static LogicalResult verifySameLeadingDim(const Rows &a, const Rows &b) {
  int64_t da = a.type().getDimSize(0), db = b.type().getDimSize(0);
  if (ShapedType::isDynamic(da) || ShapedType::isDynamic(db) || da == db)
    return success();
  return a.op->emitOpError() << "expects " << a.name << " and " << b.name
                             << " to have the same leading dimension, but got "
                             << da << " and " << db;
}

/// A result with a static number of segments must agree with a constant
/// num_segments operand.
static LogicalResult verifySegmentCount(Operation *op, Value numSegments,
                                        const Rows &result) {
  std::optional<int64_t> constant = getConstantIntValue(numSegments);
  if (constant && *constant < 0)
    return op->emitOpError() << "expects num_segments to be non-negative, but "
                                "got "
                             << *constant;
  int64_t dim = result.type().getDimSize(0);
  if (!constant || ShapedType::isDynamic(dim) || dim == *constant)
    return success();
  return op->emitOpError() << "expects " << result.name
                           << " to have num_segments (" << *constant
                           << ") rows, but got " << dim;
}

//===----------------------------------------------------------------------===//
// Verifiers.
//===----------------------------------------------------------------------===//

// sum, mean, max and min: (N) -> (S), (N,3) -> (S,3).
static LogicalResult verifyWidthPreservingReduction(Operation *op, Value x,
                                                    Value idx,
                                                    Value numSegments,
                                                    Value result) {
  Rows xRows{op, x, "x"}, idxRows{op, idx, "idx"}, out{op, result, "result"};
  FailureOr<int64_t> xWidth = verifyRowTensor(xRows);
  if (failed(xWidth))
    return failure();
  FailureOr<int64_t> outWidth = verifyRowTensor(out, "S");
  if (failed(outWidth))
    return failure();
  if (*xWidth != *outWidth)
    return op->emitOpError() << "expects result to have the row width of x ("
                             << *xWidth << "), but got " << *outWidth;
  if (failed(verifySameElementType({xRows, out})) ||
      failed(verifySameLeadingDim(xRows, idxRows)))
    return failure();
  return verifySegmentCount(op, numSegments, out);
}

LogicalResult SumOp::verify() {
  return verifyWidthPreservingReduction(*this, getX(), getIdx(),
                                        getNumSegments(), getResult());
}

LogicalResult MeanOp::verify() {
  return verifyWidthPreservingReduction(*this, getX(), getIdx(),
                                        getNumSegments(), getResult());
}

LogicalResult MaxOp::verify() {
  return verifyWidthPreservingReduction(*this, getX(), getIdx(),
                                        getNumSegments(), getResult());
}

LogicalResult MinOp::verify() {
  return verifyWidthPreservingReduction(*this, getX(), getIdx(),
                                        getNumSegments(), getResult());
}

LogicalResult RmsNormOp::verify() {
  Rows x{*this, getX(), "x"}, idx{*this, getIdx(), "idx"},
      out{*this, getResult(), "result"};
  if (failed(verifyRowTensor(x)) || failed(verifyScalarTensor(out, "S")) ||
      failed(verifySameElementType({x, out})) ||
      failed(verifySameLeadingDim(x, idx)))
    return failure();
  return verifySegmentCount(*this, getNumSegments(), out);
}

LogicalResult DotOp::verify() {
  Rows x{*this, getX(), "x"}, y{*this, getY(), "y"},
      idx{*this, getIdx(), "idx"}, out{*this, getResult(), "result"};
  FailureOr<int64_t> xWidth = verifyRowTensor(x);
  if (failed(xWidth))
    return failure();
  FailureOr<int64_t> yWidth = verifyRowTensor(y);
  if (failed(yWidth))
    return failure();
  if (*xWidth != *yWidth)
    return emitOpError() << "expects x and y to have the same row width, but "
                            "got "
                         << *xWidth << " and " << *yWidth;
  if (failed(verifyScalarTensor(out, "S")) ||
      failed(verifySameElementType({x, y, out})) ||
      failed(verifySameLeadingDim(x, y)) ||
      failed(verifySameLeadingDim(x, idx)))
    return failure();
  return verifySegmentCount(*this, getNumSegments(), out);
}

LogicalResult MulOp::verify() {
  Rows x{*this, getX(), "x"}, y{*this, getY(), "y"},
      idx{*this, getIdx(), "idx"}, out{*this, getResult(), "result"};
  if (failed(verifyRowTensor(x)) || failed(verifyScalarTensor(y, "S")) ||
      failed(verifySameElementType({x, y, out})) ||
      failed(verifySameLeadingDim(x, idx)))
    return failure();
  if (x.type().getShape() != out.type().getShape())
    return emitOpError() << "expects result to have the shape of x, but got "
                         << out.type() << " for x of type " << x.type();
  return success();
}

LogicalResult MatvecOp::verify() {
  Rows v{*this, getV(), "v"}, m{*this, getM(), "m"},
      idx{*this, getIdx(), "idx"}, out{*this, getResult(), "result"};
  if (failed(verifyVec3Tensor(v, "N")) || failed(verifyMatrixTensor(m)) ||
      failed(verifyVec3Tensor(out, "N")) ||
      failed(verifySameElementType({v, m, out})) ||
      failed(verifySameLeadingDim(v, idx)) ||
      failed(verifySameLeadingDim(v, out)))
    return failure();
  return success();
}

/// A gather: `source` rows (leading extent `sourceRows`) read at `index`'s
/// values, the result of the source's width with one row per index value.
static LogicalResult verifyGather(Operation *op, const Rows &source,
                                  StringRef sourceRows, const Rows &index) {
  Rows out{op, op->getResult(0), "result"};
  FailureOr<int64_t> sourceWidth = verifyRowTensor(source, sourceRows);
  if (failed(sourceWidth))
    return failure();
  FailureOr<int64_t> outWidth = verifyRowTensor(out);
  if (failed(outWidth))
    return failure();
  if (*sourceWidth != *outWidth)
    return op->emitOpError()
           << "expects result to have the row width of " << source.name << " ("
           << *sourceWidth << "), but got " << *outWidth;
  if (failed(verifySameElementType({source, out})) ||
      failed(verifySameLeadingDim(out, index)))
    return failure();
  return success();
}

LogicalResult GatherOp::verify() {
  return verifyGather(*this, Rows{*this, getY(), "y"}, "S",
                      Rows{*this, getIdx(), "idx"});
}

LogicalResult GatherRowsOp::verify() {
  return verifyGather(*this, Rows{*this, getTable(), "table"}, "M",
                      Rows{*this, getJ(), "j"});
}

LogicalResult ScatterSumOp::verify() {
  Rows x{*this, getX(), "x"}, j{*this, getJ(), "j"},
      out{*this, getResult(), "result"};
  FailureOr<int64_t> xWidth = verifyRowTensor(x);
  if (failed(xWidth))
    return failure();
  FailureOr<int64_t> outWidth = verifyRowTensor(out, "M");
  if (failed(outWidth))
    return failure();
  if (*xWidth != *outWidth)
    return emitOpError() << "expects result to have the row width of x ("
                         << *xWidth << "), but got " << *outWidth;
  if (failed(verifySameElementType({x, out})) ||
      failed(verifySameLeadingDim(x, j)))
    return failure();
  std::optional<int64_t> numRows = getConstantIntValue(getNumRows());
  if (numRows && *numRows < 0)
    return emitOpError() << "expects num_rows to be non-negative, but got "
                         << *numRows;
  int64_t dim = out.type().getDimSize(0);
  if (numRows && !ShapedType::isDynamic(dim) && dim != *numRows)
    return emitOpError() << "expects result to have num_rows (" << *numRows
                         << ") rows, but got " << dim;
  return success();
}

LogicalResult OuterSumOp::verify() {
  Rows v{*this, getV(), "v"}, g{*this, getG(), "g"},
      idx{*this, getIdx(), "idx"}, out{*this, getResult(), "result"};
  if (failed(verifyVec3Tensor(v, "N")) || failed(verifyVec3Tensor(g, "N")) ||
      failed(verifyMatrixTensor(out)) ||
      failed(verifySameElementType({v, g, out})) ||
      failed(verifySameLeadingDim(v, g)) ||
      failed(verifySameLeadingDim(v, idx)))
    return failure();
  return verifySegmentCount(*this, getNumSegments(), out);
}

LogicalResult CountOp::verify() {
  Rows out{*this, getResult(), "result"};
  if (failed(verifyScalarTensor(out, "S")))
    return failure();
  return verifySegmentCount(*this, getNumSegments(), out);
}

//===----------------------------------------------------------------------===//
// Canonicalization.
//===----------------------------------------------------------------------===//

namespace {
// mul(mul(x, a, idx), b, idx) => mul(x, a * b, idx)
//
// Only where `a` and `b` provably have the same length (the same value, or
// equal static types): otherwise rows indexed past the shorter one would
// change from 0 to a product.
struct CombineNestedMul : public OpRewritePattern<MulOp> {
  using OpRewritePattern<MulOp>::OpRewritePattern;

  LogicalResult matchAndRewrite(MulOp outer,
                                PatternRewriter &rewriter) const override {
    auto inner = outer.getX().getDefiningOp<MulOp>();
    if (!inner)
      return rewriter.notifyMatchFailure(outer, "x is not produced by seg.mul");
    if (inner.getIdx() != outer.getIdx())
      return rewriter.notifyMatchFailure(outer, "the two muls use different "
                                                "segment indices");
    Value a = inner.getY(), b = outer.getY();
    auto aType = cast<RankedTensorType>(a.getType());
    if (a != b && (a.getType() != b.getType() || !aType.hasStaticShape()))
      return rewriter.notifyMatchFailure(outer,
                                         "segment scales may differ in length");
    Value scale = rewriter.create<arith::MulFOp>(outer.getLoc(), a, b);
    rewriter.replaceOpWithNewOp<MulOp>(outer, outer.getType(), inner.getX(),
                                       scale, outer.getIdx());
    return success();
  }
};
} // namespace

void MulOp::getCanonicalizationPatterns(RewritePatternSet &results,
                                        MLIRContext *context) {
  results.add<CombineNestedMul>(context);
}

#define GET_OP_CLASSES
#include "segops/Dialect/Seg/IR/SegOps.cpp.inc"

// broadcast: (L) -> (L,F); component_sum: (L,F) -> (L).
LogicalResult BroadcastOp::verify() {
  Rows x{*this, getX(), "x"}, out{*this, getResult(), "result"};
  if (failed(verifyScalarTensor(x, "L")) ||
      failed(verifyFeatureTensor(out, "L")) ||
      failed(verifySameElementType({x, out})))
    return failure();
  return verifySameLeadingDim(x, out);
}

/// component_sum, component_max and component_min: (L,F) -> (L).
static LogicalResult verifyComponentReduction(Operation *op) {
  Rows x{op, op->getOperand(0), "x"}, out{op, op->getResult(0), "result"};
  if (failed(verifyFeatureTensor(x, "L")) ||
      failed(verifyScalarTensor(out, "L")) ||
      failed(verifySameElementType({x, out})))
    return failure();
  return verifySameLeadingDim(x, out);
}

LogicalResult ComponentSumOp::verify() {
  return verifyComponentReduction(*this);
}
LogicalResult ComponentMaxOp::verify() {
  return verifyComponentReduction(*this);
}
LogicalResult ComponentMinOp::verify() {
  return verifyComponentReduction(*this);
}
