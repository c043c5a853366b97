//===- ArithDerivatives.cpp - derivative rules of elementwise ops ---------===//
//
// External models of ReverseDifferentiableOpInterface for the arith and math
// ops that seg programs (and derived gradients) use on same-shaped tensors.
//
//===----------------------------------------------------------------------===//

#include "segops/Dialect/Seg/IR/SegInterfaces.h"
#include "segops/Dialect/Seg/IR/SegOps.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/DialectRegistry.h"

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
} // namespace

void mlir::seg::registerDerivativeExternalModels(DialectRegistry &registry) {
  registry.addExtension(+[](MLIRContext *ctx, arith::ArithDialect *) {
    arith::AddFOp::attachInterface<AddFAdjoint>(*ctx);
    arith::SubFOp::attachInterface<SubFAdjoint>(*ctx);
    arith::MulFOp::attachInterface<MulFAdjoint>(*ctx);
    arith::DivFOp::attachInterface<DivFAdjoint>(*ctx);
    arith::NegFOp::attachInterface<NegFAdjoint>(*ctx);
    arith::SelectOp::attachInterface<SelectAdjoint>(*ctx);
  });
  registry.addExtension(+[](MLIRContext *ctx, math::MathDialect *) {
    math::SqrtOp::attachInterface<SqrtAdjoint>(*ctx);
  });
}
