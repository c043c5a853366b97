//===- ApproximateMath.cpp - f32 transcendental functions as arith --------===//

#include "segops/Conversion/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Math/Transforms/Approximation.h"
#include "mlir/Dialect/Math/Transforms/Passes.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

#include <limits>

namespace mlir {
namespace seg {
#define GEN_PASS_DEF_SEGAPPROXIMATEMATH
#include "segops/Conversion/Passes.h.inc"
} // namespace seg
} // namespace mlir

using namespace mlir;

namespace {
/// floor(x) for f32 without a floor instruction: t = trunc(x) through i32,
/// minus 1 where t > x; values of magnitude 2^23 and more (and NaN) are
/// integers already (or stay NaN) and pass through. Exact.
struct ExpandFloor : public OpRewritePattern<math::FloorOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(math::FloorOp op,
                                PatternRewriter &rewriter) const override {
    Type type = op.getType();
    if (!getElementTypeOrSelf(type).isF32() || isa<VectorType>(type))
      return failure();
    Location loc = op.getLoc();
    Value x = op.getOperand();
    auto constant = [&](float value) {
      return rewriter.create<arith::ConstantOp>(
          loc, rewriter.getF32FloatAttr(value));
    };
    Value truncated = rewriter.create<arith::SIToFPOp>(
        loc, type,
        rewriter.create<arith::FPToSIOp>(loc, rewriter.getI32Type(), x));
    Value above = rewriter.create<arith::CmpFOp>(
        loc, arith::CmpFPredicate::OGT, truncated, x);
    Value floor = rewriter.create<arith::SelectOp>(
        loc, above,
        rewriter.create<arith::SubFOp>(loc, truncated, constant(1.0f)),
        truncated);
    Value small = rewriter.create<arith::CmpFOp>(
        loc, arith::CmpFPredicate::OLT, rewriter.create<math::AbsFOp>(loc, x),
        constant(8388608.0f));
    rewriter.replaceOpWithNewOp<arith::SelectOp>(op, small, floor, x);
    return success();
  }
};

/// |x| as a sign-bit mask (f32 or f64): the GPU's NVVM lowering would call
/// libdevice for math.absf too.
struct ExpandAbsF : public OpRewritePattern<math::AbsFOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(math::AbsFOp op,
                                PatternRewriter &rewriter) const override {
    auto type = dyn_cast<FloatType>(op.getType());
    if (!type)
      return failure();
    Location loc = op.getLoc();
    unsigned bits = type.getWidth();
    Type integer = rewriter.getIntegerType(bits);
    Value mask = rewriter.create<arith::ConstantOp>(
        loc, rewriter.getIntegerAttr(integer,
                                     APInt::getSignedMaxValue(bits)));
    Value magnitude = rewriter.create<arith::AndIOp>(
        loc, rewriter.create<arith::BitcastOp>(loc, integer, op.getOperand()),
        mask);
    rewriter.replaceOpWithNewOp<arith::BitcastOp>(op, type, magnitude);
    return success();
  }
};

/// expm1 of types the polynomial approximations leave (f64): Kahan's
/// u = e^x, (u - 1) x / log(u), exact to a few ulp near 0 where e^x - 1
/// (MathToLLVM's form) cancels; x itself where u rounds to 1, and u where
/// it is -1 or +inf after rounding (no 0/0 or inf/inf).
struct ExpandExpM1 : public OpRewritePattern<math::ExpM1Op> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(math::ExpM1Op op,
                                PatternRewriter &rewriter) const override {
    Type type = op.getType();
    Type element = getElementTypeOrSelf(type);
    if (!isa<FloatType>(element) || element.isF32() || isa<TensorType>(type))
      return failure();
    Location loc = op.getLoc();
    auto constant = [&](double value) -> Value {
      TypedAttr attr = rewriter.getFloatAttr(element, value);
      if (auto vector = dyn_cast<VectorType>(type))
        attr = DenseElementsAttr::get(vector, attr);
      return rewriter.create<arith::ConstantOp>(loc, attr);
    };
    using Predicate = arith::CmpFPredicate;
    Value x = op.getOperand();
    Value u = rewriter.create<math::ExpOp>(loc, x);
    Value um1 = rewriter.create<arith::SubFOp>(loc, u, constant(1.0));
    Value scaled = rewriter.create<arith::DivFOp>(
        loc, rewriter.create<arith::MulFOp>(loc, um1, x),
        rewriter.create<math::LogOp>(loc, u));
    Value exactlyOne =
        rewriter.create<arith::CmpFOp>(loc, Predicate::OEQ, u, constant(1.0));
    Value saturated = rewriter.create<arith::OrIOp>(
        loc,
        rewriter.create<arith::CmpFOp>(loc, Predicate::OEQ, um1,
                                       constant(-1.0)),
        rewriter.create<arith::CmpFOp>(
            loc, Predicate::OEQ, u,
            constant(std::numeric_limits<double>::infinity())));
    Value general =
        rewriter.create<arith::SelectOp>(loc, saturated, um1, scaled);
    rewriter.replaceOpWithNewOp<arith::SelectOp>(op, exactlyOne, x, general);
    return success();
  }
};

struct SegApproximateMathPass
    : public seg::impl::SegApproximateMathBase<SegApproximateMathPass> {
  using SegApproximateMathBase::SegApproximateMathBase;

  void runOnOperation() override {
    // The approximations build scalar constants for their operands' element
    // type, which is only valid IR for scalars and vectors: math on tensors
    // (seg IR before lowering) is rejected, not rewritten into invalid IR.
    WalkResult tensors = getOperation()->walk([](Operation *op) {
      if (op->getDialect() && isa<math::MathDialect>(op->getDialect()) &&
          llvm::any_of(op->getResultTypes(), llvm::IsaPred<TensorType>)) {
        op->emitOpError()
            << "on tensors: seg-approximate-math rewrites scalar and vector "
               "math of lowered kernels (run it after convert-seg-to-host or "
               "convert-seg-to-gpu)";
        return WalkResult::interrupt();
      }
      return WalkResult::advance();
    });
    if (tensors.wasInterrupted())
      return signalPassFailure();
    RewritePatternSet patterns(&getContext());
    // The approximations match f32 only; f64 ops stay (libm on the host),
    // but tanh, which has no LLVM intrinsic, becomes exp of any type.
    populateMathPolynomialApproximationPatterns(patterns);
    populateExpandTanhPattern(patterns);
    patterns.add<ExpandExpM1>(&getContext());
    if (expandFloor)
      patterns.add<ExpandFloor, ExpandAbsF>(&getContext());
    if (failed(applyPatternsAndFoldGreedily(getOperation(),
                                            std::move(patterns))))
      signalPassFailure();
  }
};
} // namespace
