//===- ElementwiseOps.cpp - the elementwise ops of kernel functions -------===//
//
// The one table of elementwise arith and math ops that kernel functions
// accept: an op is in it when its derivative rule (an external model of
// ReverseDifferentiableOpInterface) is registered here. Space inference
// accepts exactly these ops, and both lowerings emit them by rebuilding
// the op on scalars (buildElementwiseOnComponents), so adding an op means
// adding its rule below and nothing else (plus, for a transcendental
// function, nothing: the host and GPU pipelines lower every math op).
//
//===----------------------------------------------------------------------===//

#include "segops/Dialect/Seg/IR/SegInterfaces.h"
#include "segops/Dialect/Seg/IR/SegOps.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/TypeUtilities.h"

using namespace mlir;
using namespace mlir::seg;

namespace {
/// Shared boilerplate: sizes the operand adjoints and skips zero adjoints.
template <typename Model, typename Op>
struct ElementwiseAdjoint
    : public ReverseDifferentiableOpInterface::ExternalModel<Model, Op> {
  LogicalResult buildAdjoints(Operation *op, OpBuilder &b,
                              ArrayRef<Value> results,
                              SmallVectorImpl<Value> &operands) const {
    operands.assign(op->getNumOperands(), Value());
    if (!results[0])
      return success();
    static_cast<const Model *>(this)->build(cast<Op>(op), b, results[0],
                                            operands);
    return success();
  }
};

// a + b  =>  ā = ḡ, b̄ = ḡ
struct AddFAdjoint : ElementwiseAdjoint<AddFAdjoint, arith::AddFOp> {
  void build(arith::AddFOp, OpBuilder &, Value g,
             SmallVectorImpl<Value> &operands) const {
    operands[0] = g;
    operands[1] = g;
  }
};

// a - b  =>  ā = ḡ, b̄ = -ḡ
struct SubFAdjoint : ElementwiseAdjoint<SubFAdjoint, arith::SubFOp> {
  void build(arith::SubFOp op, OpBuilder &b, Value g,
             SmallVectorImpl<Value> &operands) const {
    operands[0] = g;
    operands[1] = b.create<arith::NegFOp>(op.getLoc(), g);
  }
};

// a * b  =>  ā = ḡ b, b̄ = ḡ a
struct MulFAdjoint : ElementwiseAdjoint<MulFAdjoint, arith::MulFOp> {
  void build(arith::MulFOp op, OpBuilder &b, Value g,
             SmallVectorImpl<Value> &operands) const {
    operands[0] = b.create<arith::MulFOp>(op.getLoc(), g, op.getRhs());
    operands[1] = b.create<arith::MulFOp>(op.getLoc(), g, op.getLhs());
  }
};

// q = a / b  =>  ā = ḡ / b, b̄ = -ā q
struct DivFAdjoint : ElementwiseAdjoint<DivFAdjoint, arith::DivFOp> {
  void build(arith::DivFOp op, OpBuilder &b, Value g,
             SmallVectorImpl<Value> &operands) const {
    Location loc = op.getLoc();
    Value lhsAdjoint = b.create<arith::DivFOp>(loc, g, op.getRhs());
    operands[0] = lhsAdjoint;
    operands[1] = b.create<arith::NegFOp>(
        loc, b.create<arith::MulFOp>(loc, lhsAdjoint, op.getResult()));
  }
};

// -a  =>  ā = -ḡ
struct NegFAdjoint : ElementwiseAdjoint<NegFAdjoint, arith::NegFOp> {
  void build(arith::NegFOp op, OpBuilder &b, Value g,
             SmallVectorImpl<Value> &operands) const {
    operands[0] = b.create<arith::NegFOp>(op.getLoc(), g);
  }
};

// select(c, a, b)  =>  ā = select(c, ḡ, 0), b̄ = select(c, 0, ḡ); c gets none
struct SelectAdjoint : ElementwiseAdjoint<SelectAdjoint, arith::SelectOp> {
  void build(arith::SelectOp op, OpBuilder &b, Value g,
             SmallVectorImpl<Value> &operands) const {
    Location loc = op.getLoc();
    Value zero = createSplatLike(b, loc, g, 0.0);
    operands[1] = b.create<arith::SelectOp>(loc, op.getCondition(), g, zero);
    operands[2] = b.create<arith::SelectOp>(loc, op.getCondition(), zero, g);
  }
};

// r = sqrt(a)  =>  ā = ḡ / (2 r) where r > 0, and 0 at a == 0 (the
// convention rms_norm's contract asks for; divides by a safe r).
struct SqrtAdjoint : ElementwiseAdjoint<SqrtAdjoint, math::SqrtOp> {
  void build(math::SqrtOp op, OpBuilder &b, Value g,
             SmallVectorImpl<Value> &operands) const {
    Location loc = op.getLoc();
    Value r = op.getResult();
    Value zero = createSplatLike(b, loc, r, 0.0);
    Value positive =
        b.create<arith::CmpFOp>(loc, arith::CmpFPredicate::OGT, r, zero);
    Value safe = b.create<arith::SelectOp>(loc, positive, r,
                                           createSplatLike(b, loc, r, 1.0));
    Value twice = b.create<arith::AddFOp>(loc, safe, safe);
    Value scaled = b.create<arith::DivFOp>(loc, g, twice);
    operands[0] = b.create<arith::SelectOp>(loc, positive, scaled, zero);
  }
};
// r = exp(a)  =>  ā = ḡ r
struct ExpAdjoint : ElementwiseAdjoint<ExpAdjoint, math::ExpOp> {
  void build(math::ExpOp op, OpBuilder &b, Value g,
             SmallVectorImpl<Value> &operands) const {
    operands[0] = b.create<arith::MulFOp>(op.getLoc(), g, op.getResult());
  }
};

// log(a)  =>  ā = ḡ / a
struct LogAdjoint : ElementwiseAdjoint<LogAdjoint, math::LogOp> {
  void build(math::LogOp op, OpBuilder &b, Value g,
             SmallVectorImpl<Value> &operands) const {
    operands[0] = b.create<arith::DivFOp>(op.getLoc(), g, op.getOperand());
  }
};

// r = tanh(a)  =>  ā = ḡ (1 - r²)
struct TanhAdjoint : ElementwiseAdjoint<TanhAdjoint, math::TanhOp> {
  void build(math::TanhOp op, OpBuilder &b, Value g,
             SmallVectorImpl<Value> &operands) const {
    Location loc = op.getLoc();
    Value r = op.getResult();
    Value slope = b.create<arith::SubFOp>(
        loc, createSplatLike(b, loc, r, 1.0), b.create<arith::MulFOp>(loc, r, r));
    operands[0] = b.create<arith::MulFOp>(loc, g, slope);
  }
};

// r = 1 / sqrt(a)  =>  ā = -ḡ r³ / 2
struct RsqrtAdjoint : ElementwiseAdjoint<RsqrtAdjoint, math::RsqrtOp> {
  void build(math::RsqrtOp op, OpBuilder &b, Value g,
             SmallVectorImpl<Value> &operands) const {
    Location loc = op.getLoc();
    Value r = op.getResult();
    Value cube =
        b.create<arith::MulFOp>(loc, r, b.create<arith::MulFOp>(loc, r, r));
    Value half = b.create<arith::MulFOp>(loc, g, createSplatLike(b, loc, r, -0.5));
    operands[0] = b.create<arith::MulFOp>(loc, half, cube);
  }
};

// |a|  =>  ā = ḡ sign(a), and 0 at a == 0 (as torch.abs)
struct AbsFAdjoint : ElementwiseAdjoint<AbsFAdjoint, math::AbsFOp> {
  void build(math::AbsFOp op, OpBuilder &b, Value g,
             SmallVectorImpl<Value> &operands) const {
    Location loc = op.getLoc();
    Value a = op.getOperand();
    Value zero = createSplatLike(b, loc, a, 0.0);
    Value positive =
        b.create<arith::CmpFOp>(loc, arith::CmpFPredicate::OGT, a, zero);
    Value negative =
        b.create<arith::CmpFOp>(loc, arith::CmpFPredicate::OLT, a, zero);
    Value flipped = b.create<arith::SelectOp>(
        loc, negative, b.create<arith::NegFOp>(loc, g), zero);
    operands[0] = b.create<arith::SelectOp>(loc, positive, g, flipped);
  }
};

// max(a, b) / min(a, b)  =>  ḡ to the operand chosen, split evenly on a tie
// (as torch.maximum and torch.minimum).
template <typename Model, typename Op, arith::CmpFPredicate Wins>
struct ExtremumAdjoint : ElementwiseAdjoint<Model, Op> {
  void build(Op op, OpBuilder &b, Value g,
             SmallVectorImpl<Value> &operands) const {
    Location loc = op.getLoc();
    Value lhs = op.getLhs(), rhs = op.getRhs();
    Value zero = createSplatLike(b, loc, g, 0.0);
    Value tie = b.create<arith::CmpFOp>(loc, arith::CmpFPredicate::OEQ, lhs, rhs);
    Value half = b.create<arith::SelectOp>(
        loc, tie, b.create<arith::MulFOp>(loc, g, createSplatLike(b, loc, g, 0.5)),
        zero);
    auto share = [&](Value winner, Value loser) -> Value {
      Value wins = b.create<arith::CmpFOp>(loc, Wins, winner, loser);
      return b.create<arith::SelectOp>(loc, wins, g, half);
    };
    operands[0] = share(lhs, rhs);
    operands[1] = share(rhs, lhs);
  }
};
struct MaximumFAdjoint
    : ExtremumAdjoint<MaximumFAdjoint, arith::MaximumFOp,
                      arith::CmpFPredicate::OGT> {};
struct MinimumFAdjoint
    : ExtremumAdjoint<MinimumFAdjoint, arith::MinimumFOp,
                      arith::CmpFPredicate::OLT> {};

// sin(a)  =>  ā = ḡ cos(a)
struct SinAdjoint : ElementwiseAdjoint<SinAdjoint, math::SinOp> {
  void build(math::SinOp op, OpBuilder &b, Value g,
             SmallVectorImpl<Value> &operands) const {
    Location loc = op.getLoc();
    operands[0] = b.create<arith::MulFOp>(
        loc, g, b.create<math::CosOp>(loc, op.getOperand()));
  }
};

// cos(a)  =>  ā = -ḡ sin(a)
struct CosAdjoint : ElementwiseAdjoint<CosAdjoint, math::CosOp> {
  void build(math::CosOp op, OpBuilder &b, Value g,
             SmallVectorImpl<Value> &operands) const {
    Location loc = op.getLoc();
    Value sine = b.create<math::SinOp>(loc, op.getOperand());
    operands[0] = b.create<arith::NegFOp>(loc, b.create<arith::MulFOp>(loc, g, sine));
  }
};

// atan(a)  =>  ā = ḡ / (1 + a²)
struct AtanAdjoint : ElementwiseAdjoint<AtanAdjoint, math::AtanOp> {
  void build(math::AtanOp op, OpBuilder &b, Value g,
             SmallVectorImpl<Value> &operands) const {
    Location loc = op.getLoc();
    Value a = op.getOperand();
    Value denominator = b.create<arith::AddFOp>(
        loc, createSplatLike(b, loc, a, 1.0), b.create<arith::MulFOp>(loc, a, a));
    operands[0] = b.create<arith::DivFOp>(loc, g, denominator);
  }
};

// erf(a)  =>  ā = ḡ 2/√π e^(-a²)
struct ErfAdjoint : ElementwiseAdjoint<ErfAdjoint, math::ErfOp> {
  void build(math::ErfOp op, OpBuilder &b, Value g,
             SmallVectorImpl<Value> &operands) const {
    Location loc = op.getLoc();
    Value a = op.getOperand();
    Value gaussian = b.create<math::ExpOp>(
        loc, b.create<arith::NegFOp>(loc, b.create<arith::MulFOp>(loc, a, a)));
    Value scale = createSplatLike(b, loc, a, 1.1283791670955126);
    operands[0] = b.create<arith::MulFOp>(
        loc, g, b.create<arith::MulFOp>(loc, scale, gaussian));
  }
};

// r = e^a - 1  =>  ā = ḡ (r + 1)
struct ExpM1Adjoint : ElementwiseAdjoint<ExpM1Adjoint, math::ExpM1Op> {
  void build(math::ExpM1Op op, OpBuilder &b, Value g,
             SmallVectorImpl<Value> &operands) const {
    Location loc = op.getLoc();
    Value r = op.getResult();
    operands[0] = b.create<arith::MulFOp>(
        loc, g, b.create<arith::AddFOp>(loc, r, createSplatLike(b, loc, r, 1.0)));
  }
};

// log(1 + a)  =>  ā = ḡ / (1 + a)
struct Log1pAdjoint : ElementwiseAdjoint<Log1pAdjoint, math::Log1pOp> {
  void build(math::Log1pOp op, OpBuilder &b, Value g,
             SmallVectorImpl<Value> &operands) const {
    Location loc = op.getLoc();
    Value a = op.getOperand();
    operands[0] = b.create<arith::DivFOp>(
        loc, g, b.create<arith::AddFOp>(loc, a, createSplatLike(b, loc, a, 1.0)));
  }
};

// r = fmod(a, b) = a - trunc(a / b) b  =>  ā = ḡ, b̄ = -ḡ (a - r) / b (the
// quotient's integer part, exact where r is; piecewise constant, so the
// second derivative is 0 as torch's)
struct RemFAdjoint : ElementwiseAdjoint<RemFAdjoint, arith::RemFOp> {
  void build(arith::RemFOp op, OpBuilder &b, Value g,
             SmallVectorImpl<Value> &operands) const {
    Location loc = op.getLoc();
    Value quotient = b.create<arith::DivFOp>(
        loc, b.create<arith::SubFOp>(loc, op.getLhs(), op.getResult()),
        op.getRhs());
    operands[0] = g;
    operands[1] = b.create<arith::NegFOp>(
        loc, b.create<arith::MulFOp>(loc, g, quotient));
  }
};

// Piecewise-constant ops (comparisons, floor): no adjoints. Their operands
// get none (a zero gradient, as torch's); comparisons' i1 results are never
// active.
template <typename Op>
struct ConstantPiecesAdjoint
    : public ReverseDifferentiableOpInterface::ExternalModel<
          ConstantPiecesAdjoint<Op>, Op> {
  LogicalResult buildAdjoints(Operation *op, OpBuilder &, ArrayRef<Value>,
                              SmallVectorImpl<Value> &operands) const {
    operands.assign(op->getNumOperands(), Value());
    return success();
  }
};
} // namespace

bool mlir::seg::isKernelElementwiseOp(Operation *op) {
  return op->hasTrait<OpTrait::Elementwise>() &&
         isa<arith::ArithDialect, math::MathDialect>(op->getDialect()) &&
         isa<ReverseDifferentiableOpInterface>(op);
}

Value mlir::seg::buildElementwiseOnComponents(OpBuilder &b, Location loc,
                                              Operation *op,
                                              ValueRange operands) {
  // Results are floats like the operands, or i1 (comparisons); with vector
  // operands (one lane per row), vectors of as many lanes.
  VectorType lanes;
  Type floatType;
  for (Value operand : operands) {
    if (auto vector = dyn_cast<VectorType>(operand.getType()))
      lanes = vector;
    if (isa<FloatType>(getElementTypeOrSelf(operand.getType())))
      floatType = getElementTypeOrSelf(operand.getType());
  }
  Type resultElement = getElementTypeOrSelf(op->getResult(0).getType());
  if (!isa<IntegerType>(resultElement))
    resultElement = floatType;
  Type resultType =
      lanes ? VectorType::get(lanes.getShape(), resultElement) : resultElement;
  // Scalar operands (the i1 of a select, a constant) of a vector op are
  // broadcast by the lowering's splats before they get here.
  OperationState state(loc, op->getName().getStringRef(), operands,
                       TypeRange{resultType}, op->getAttrs());
  return b.create(state)->getResult(0);
}

void mlir::seg::registerDerivativeExternalModels(DialectRegistry &registry) {
  registry.addExtension(+[](MLIRContext *ctx, arith::ArithDialect *) {
    arith::AddFOp::attachInterface<AddFAdjoint>(*ctx);
    arith::SubFOp::attachInterface<SubFAdjoint>(*ctx);
    arith::MulFOp::attachInterface<MulFAdjoint>(*ctx);
    arith::DivFOp::attachInterface<DivFAdjoint>(*ctx);
    arith::NegFOp::attachInterface<NegFAdjoint>(*ctx);
    arith::SelectOp::attachInterface<SelectAdjoint>(*ctx);
    arith::MaximumFOp::attachInterface<MaximumFAdjoint>(*ctx);
    arith::MinimumFOp::attachInterface<MinimumFAdjoint>(*ctx);
    arith::RemFOp::attachInterface<RemFAdjoint>(*ctx);
    arith::CmpFOp::attachInterface<ConstantPiecesAdjoint<arith::CmpFOp>>(*ctx);
  });
  registry.addExtension(+[](MLIRContext *ctx, math::MathDialect *) {
    math::SqrtOp::attachInterface<SqrtAdjoint>(*ctx);
    math::RsqrtOp::attachInterface<RsqrtAdjoint>(*ctx);
    math::ExpOp::attachInterface<ExpAdjoint>(*ctx);
    math::LogOp::attachInterface<LogAdjoint>(*ctx);
    math::TanhOp::attachInterface<TanhAdjoint>(*ctx);
    math::AbsFOp::attachInterface<AbsFAdjoint>(*ctx);
    math::SinOp::attachInterface<SinAdjoint>(*ctx);
    math::CosOp::attachInterface<CosAdjoint>(*ctx);
    math::AtanOp::attachInterface<AtanAdjoint>(*ctx);
    math::ErfOp::attachInterface<ErfAdjoint>(*ctx);
    math::ExpM1Op::attachInterface<ExpM1Adjoint>(*ctx);
    math::Log1pOp::attachInterface<Log1pAdjoint>(*ctx);
    math::FloorOp::attachInterface<ConstantPiecesAdjoint<math::FloorOp>>(*ctx);
  });
}
