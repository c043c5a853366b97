//===- SegCanonicalize.cpp - dialect-wide simplifications -----------------===//
//
// Patterns that keep derived gradient programs small: the length of a seg
// result is known from its operands, and a seg op that is linear in an
// operand which is a structural zero (a splat of 0, as seg-differentiate
// produces for gradients that do not flow) produces zeros.
//
//===----------------------------------------------------------------------===//

#include "segops/Dialect/Seg/IR/SegOps.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/Matchers.h"
#include "mlir/IR/PatternMatch.h"

using namespace mlir;
using namespace mlir::seg;

static bool isZeroSplat(Value value) {
  auto splat = value.getDefiningOp<tensor::SplatOp>();
  return splat && matchPattern(splat.getInput(), m_AnyZeroFloat());
}

namespace {
// dim(seg.sum(x, idx, n), 0) => n ; dim(seg.gather(y, idx), 0) => dim(idx, 0)
struct FoldDimOfSegResult : public OpRewritePattern<tensor::DimOp> {
  using OpRewritePattern<tensor::DimOp>::OpRewritePattern;

  LogicalResult matchAndRewrite(tensor::DimOp dim,
                                PatternRewriter &rewriter) const override {
    std::optional<int64_t> index = dim.getConstantIndex();
    if (!index || *index != 0)
      return rewriter.notifyMatchFailure(dim, "not the leading dimension");
    auto producer = dim.getSource().getDefiningOp<SegmentOpInterface>();
    if (!producer)
      return rewriter.notifyMatchFailure(dim, "not a segment op's result");
    rewriter.replaceOp(dim, producer.buildResultLength(rewriter, dim.getLoc()));
    return success();
  }
};

// seg.op(..., zeros, ...) => zeros, where the op is linear in that operand
// (SegmentOpInterface::isMultilinear).
struct FoldZeroOperand : public RewritePattern {
  FoldZeroOperand(MLIRContext *context)
      : RewritePattern(MatchAnyOpTypeTag(), /*benefit=*/1, context) {}

  LogicalResult matchAndRewrite(Operation *op,
                                PatternRewriter &rewriter) const override {
    auto segmentOp = dyn_cast<SegmentOpInterface>(op);
    if (!segmentOp || !segmentOp.isMultilinear())
      return failure();
    if (!llvm::any_of(op->getOperands(), isZeroSplat))
      return rewriter.notifyMatchFailure(op, "no structural zero operand");
    auto type = cast<RankedTensorType>(op->getResult(0).getType());
    Location loc = op->getLoc();
    SmallVector<Value> dynamicSizes;
    if (type.isDynamicDim(0))
      dynamicSizes.push_back(segmentOp.buildResultLength(rewriter, loc));
    Value zero = rewriter.create<arith::ConstantOp>(
        loc, rewriter.getFloatAttr(type.getElementType(), 0.0));
    rewriter.replaceOpWithNewOp<tensor::SplatOp>(op, zero, type, dynamicSizes);
    return success();
  }
};

// dim(seg.gather_rows(t, j), 0) => dim(j, 0);
// dim(seg.scatter_sum(x, j, m), 0) => m
struct FoldDimOfSecondIndexResult : public OpRewritePattern<tensor::DimOp> {
  using OpRewritePattern<tensor::DimOp>::OpRewritePattern;

  LogicalResult matchAndRewrite(tensor::DimOp dim,
                                PatternRewriter &rewriter) const override {
    std::optional<int64_t> index = dim.getConstantIndex();
    if (!index || *index != 0)
      return rewriter.notifyMatchFailure(dim, "not the leading dimension");
    Operation *producer = dim.getSource().getDefiningOp();
    if (auto gather = dyn_cast_or_null<GatherRowsOp>(producer)) {
      rewriter.replaceOpWithNewOp<tensor::DimOp>(dim, gather.getJ(), 0);
      return success();
    }
    if (auto scatter = dyn_cast_or_null<ScatterSumOp>(producer)) {
      rewriter.replaceOp(dim, scatter.getNumRows());
      return success();
    }
    return rewriter.notifyMatchFailure(dim, "not a second-index op's result");
  }
};

// seg.gather_rows(zeros, j) => zeros (rows of j)
struct FoldGatherRowsOfZeros : public OpRewritePattern<GatherRowsOp> {
  using OpRewritePattern<GatherRowsOp>::OpRewritePattern;

  LogicalResult matchAndRewrite(GatherRowsOp gather,
                                PatternRewriter &rewriter) const override {
    if (!isZeroSplat(gather.getTable()))
      return rewriter.notifyMatchFailure(gather, "table is not zeros");
    auto type = cast<RankedTensorType>(gather.getType());
    Location loc = gather.getLoc();
    SmallVector<Value> dynamicSizes;
    if (type.isDynamicDim(0))
      dynamicSizes.push_back(
          rewriter.create<tensor::DimOp>(loc, gather.getJ(), 0));
    Value zero = rewriter.create<arith::ConstantOp>(
        loc, rewriter.getFloatAttr(type.getElementType(), 0.0));
    rewriter.replaceOpWithNewOp<tensor::SplatOp>(gather, zero, type,
                                                 dynamicSizes);
    return success();
  }
};

// scatter_sum(a, j, m) + scatter_sum(b, j, m) => scatter_sum(a + b, j, m):
// a table gathered twice by one index gets one sum (a kernel function
// returns a scatter_sum as it is, never added to).
struct MergeScatterSums : public OpRewritePattern<arith::AddFOp> {
  using OpRewritePattern<arith::AddFOp>::OpRewritePattern;

  LogicalResult matchAndRewrite(arith::AddFOp add,
                                PatternRewriter &rewriter) const override {
    auto lhs = add.getLhs().getDefiningOp<ScatterSumOp>();
    auto rhs = add.getRhs().getDefiningOp<ScatterSumOp>();
    if (!lhs || !rhs || lhs.getJ() != rhs.getJ() ||
        lhs.getNumRows() != rhs.getNumRows() ||
        lhs.getX().getType() != rhs.getX().getType())
      return rewriter.notifyMatchFailure(add, "not two sums by one index");
    Value rows =
        rewriter.create<arith::AddFOp>(add.getLoc(), lhs.getX(), rhs.getX());
    rewriter.replaceOpWithNewOp<ScatterSumOp>(add, add.getType(), rows,
                                              lhs.getJ(), lhs.getNumRows());
    return success();
  }
};
} // namespace

void SegDialect::getCanonicalizationPatterns(RewritePatternSet &results) const {
  results.add<FoldDimOfSegResult, FoldZeroOperand, FoldDimOfSecondIndexResult,
              FoldGatherRowsOfZeros, MergeScatterSums>(getContext());
}
