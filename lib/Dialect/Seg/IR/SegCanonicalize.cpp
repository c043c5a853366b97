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
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace mlir::seg;

/// The leading dimension of a seg op's result: its segment count for
/// reductions and counts, the number of rows of idx for row results.
static Value leadingDimOf(OpBuilder &b, Location loc, Operation *op) {
  return TypeSwitch<Operation *, Value>(op)
      .Case<SumOp, MeanOp, RmsNormOp, DotOp, OuterSumOp, CountOp>(
          [](auto reduce) { return reduce.getNumSegments(); })
      .Case<MulOp, MatvecOp, GatherOp>([&](auto rowOp) -> Value {
        return b.create<tensor::DimOp>(loc, rowOp.getIdx(), 0);
      })
      .Default([](Operation *) { return Value(); });
}

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
    Operation *producer = dim.getSource().getDefiningOp();
    if (!producer || !isa<SegDialect>(producer->getDialect()))
      return rewriter.notifyMatchFailure(dim, "not a seg result");
    Value length = leadingDimOf(rewriter, dim.getLoc(), producer);
    if (!length)
      return rewriter.notifyMatchFailure(dim, "unknown seg op");
    rewriter.replaceOp(dim, length);
    return success();
  }
};

// seg.op(..., zeros, ...) => zeros, where the op is linear in that operand
// (every seg op but count is linear in each floating-point operand).
struct FoldZeroOperand : public RewritePattern {
  FoldZeroOperand(MLIRContext *context)
      : RewritePattern(MatchAnyOpTypeTag(), /*benefit=*/1, context) {}

  LogicalResult matchAndRewrite(Operation *op,
                                PatternRewriter &rewriter) const override {
    if (!isa<SumOp, MeanOp, DotOp, MulOp, MatvecOp, GatherOp, OuterSumOp>(op))
      return failure();
    if (!llvm::any_of(op->getOperands(), isZeroSplat))
      return rewriter.notifyMatchFailure(op, "no structural zero operand");
    auto type = cast<RankedTensorType>(op->getResult(0).getType());
    Location loc = op->getLoc();
    SmallVector<Value> dynamicSizes;
    if (type.isDynamicDim(0))
      dynamicSizes.push_back(leadingDimOf(rewriter, loc, op));
    Value zero = rewriter.create<arith::ConstantOp>(
        loc, rewriter.getFloatAttr(type.getElementType(), 0.0));
    rewriter.replaceOpWithNewOp<tensor::SplatOp>(op, zero, type, dynamicSizes);
    return success();
  }
};
} // namespace

void SegDialect::getCanonicalizationPatterns(RewritePatternSet &results) const {
  results.add<FoldDimOfSegResult, FoldZeroOperand>(getContext());
}
