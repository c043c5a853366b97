//===- ExpandExtrema.cpp - maximumf/minimumf as compares and selects ------===//

#include "segops/Conversion/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/IR/TypeUtilities.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace mlir {
namespace seg {
#define GEN_PASS_DEF_SEGEXPANDEXTREMA
#include "segops/Conversion/Passes.h.inc"
} // namespace seg
} // namespace mlir

using namespace mlir;

namespace {
/// maximumf(a, b) (or minimumf): a where a > b (a < b), or where a == b and
/// the sign bit of b is set (of a is set), so that max(-0, +0) is +0 and
/// min(+0, -0) is -0 in either order; else b; NaN where either is NaN.
template <typename Op, bool isMax>
struct ExpandExtremum : public OpRewritePattern<Op> {
  using OpRewritePattern<Op>::OpRewritePattern;

  LogicalResult matchAndRewrite(Op op,
                                PatternRewriter &rewriter) const override {
    Type type = op.getType();
    auto element = dyn_cast<FloatType>(getElementTypeOrSelf(type));
    if (!element || isa<TensorType>(type))
      return rewriter.notifyMatchFailure(op, "not a float scalar or vector");
    Location loc = op.getLoc();
    Value a = op.getLhs(), b = op.getRhs();
    Type integer = rewriter.getIntegerType(element.getWidth());
    if (auto vector = dyn_cast<VectorType>(type))
      integer = vector.clone(integer);
    auto negative = [&](Value value) {
      Value bits = rewriter.create<arith::BitcastOp>(loc, integer, value);
      Value zero = rewriter.create<arith::ConstantOp>(
          loc, rewriter.getZeroAttr(integer));
      return rewriter.create<arith::CmpIOp>(loc, arith::CmpIPredicate::slt,
                                            bits, zero);
    };
    // Unordered: a NaN in a picks a.
    Value beyond = rewriter.create<arith::CmpFOp>(
        loc, isMax ? arith::CmpFPredicate::UGT : arith::CmpFPredicate::ULT, a,
        b);
    Value equal =
        rewriter.create<arith::CmpFOp>(loc, arith::CmpFPredicate::OEQ, a, b);
    Value bySign = rewriter.create<arith::AndIOp>(loc, equal,
                                                  negative(isMax ? b : a));
    Value picksA = rewriter.create<arith::OrIOp>(loc, beyond, bySign);
    Value picked = rewriter.create<arith::SelectOp>(loc, picksA, a, b);
    Value bIsNaN =
        rewriter.create<arith::CmpFOp>(loc, arith::CmpFPredicate::UNO, b, b);
    rewriter.replaceOpWithNewOp<arith::SelectOp>(op, bIsNaN, b, picked);
    return success();
  }
};

struct SegExpandExtremaPass
    : public seg::impl::SegExpandExtremaBase<SegExpandExtremaPass> {
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    patterns.add<ExpandExtremum<arith::MaximumFOp, /*isMax=*/true>,
                 ExpandExtremum<arith::MinimumFOp, /*isMax=*/false>>(
        &getContext());
    if (failed(applyPatternsAndFoldGreedily(getOperation(),
                                            std::move(patterns))))
      signalPassFailure();
  }
};
} // namespace
