//===- ValueSpaces.cpp - per-row or per-segment values --------------------===//

#include "segops/Dialect/Seg/Analysis/ValueSpaces.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "segops/Dialect/Seg/IR/SegOps.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace mlir::seg;

StringRef mlir::seg::stringifyValueSpace(ValueSpace space) {
  switch (space) {
  case ValueSpace::Row:
    return "row";
  case ValueSpace::Segment:
    return "segment";
  case ValueSpace::Size:
    return "size";
  case ValueSpace::Scalar:
    return "scalar";
  }
  llvm_unreachable("unknown value space");
}

/// Elementwise ops allowed on same-shaped tensors (or scalars) of one space.
static bool isElementwise(Operation *op) {
  return isa<arith::AddFOp, arith::SubFOp, arith::MulFOp, arith::DivFOp,
             arith::NegFOp, arith::MaximumFOp, arith::MinimumFOp, arith::CmpFOp,
             arith::SelectOp, math::SqrtOp>(op);
}

namespace {
class SpaceInference {
public:
  SpaceInference(func::FuncOp func,
                 function_ref<InFlightDiagnostic(const Twine &)> fail)
      : func(func), fail(fail) {}

  FailureOr<DenseMap<Value, ValueSpace>> run() {
    if (failed(assignSpaces()))
      return failure();
    return spaces;
  }

private:
  LogicalResult assign(Value value, ValueSpace space);
  LogicalResult assignSpaces();

  func::FuncOp func;
  function_ref<InFlightDiagnostic(const Twine &)> fail;
  DenseMap<Value, ValueSpace> spaces;
  bool changed = false;
};
} // namespace

LogicalResult SpaceInference::assign(Value value, ValueSpace space) {
  auto [it, inserted] = spaces.try_emplace(value, space);
  if (inserted) {
    changed = true;
    return success();
  }
  if (it->second != space) {
    fail("a value is used both per row and per segment")
            .attachNote(value.getLoc())
        << "this value";
    return failure();
  }
  return success();
}

// Seg ops fix the spaces of their operands and results; elementwise ops
// propagate a space between their operands and result until nothing changes.
LogicalResult SpaceInference::assignSpaces() {
  Block &body = func.getBody().front();
  // A segment count read off a tensor's length makes that tensor per
  // segment.
  auto anchorSegmentCount = [&](Value numSegments) {
    if (auto dim = numSegments.getDefiningOp<tensor::DimOp>())
      if (dim.getConstantIndex() == 0)
        (void)assign(dim.getSource(), ValueSpace::Segment);
  };
  for (BlockArgument arg : body.getArguments()) {
    if (isa<IndexType>(arg.getType()))
      (void)assign(arg, ValueSpace::Size);
    // 3x3 matrices exist only per segment.
    auto tensor = dyn_cast<RankedTensorType>(arg.getType());
    if (tensor && tensor.getRank() == 3 &&
        failed(assign(arg, ValueSpace::Segment)))
      return failure();
    auto annotation =
        func.getArgAttrOfType<StringAttr>(arg.getArgNumber(), kSpaceAttrName);
    if (annotation && annotation.getValue() == "row" &&
        failed(assign(arg, ValueSpace::Row)))
      return failure();
    if (annotation && annotation.getValue() == "segment" &&
        failed(assign(arg, ValueSpace::Segment)))
      return failure();
  }

  for (Operation &op : body.without_terminator()) {
    LogicalResult result =
        TypeSwitch<Operation *, LogicalResult>(&op)
            .Case<SumOp, MeanOp, RmsNormOp>([&](auto reduce) {
              anchorSegmentCount(reduce.getNumSegments());
              return success(
                  succeeded(assign(reduce.getX(), ValueSpace::Row)) &&
                  succeeded(assign(reduce.getResult(), ValueSpace::Segment)));
            })
            .Case<DotOp>([&](DotOp dot) {
              anchorSegmentCount(dot.getNumSegments());
              return success(
                  succeeded(assign(dot.getX(), ValueSpace::Row)) &&
                  succeeded(assign(dot.getY(), ValueSpace::Row)) &&
                  succeeded(assign(dot.getResult(), ValueSpace::Segment)));
            })
            .Case<OuterSumOp>([&](OuterSumOp outer) {
              anchorSegmentCount(outer.getNumSegments());
              return success(
                  succeeded(assign(outer.getV(), ValueSpace::Row)) &&
                  succeeded(assign(outer.getG(), ValueSpace::Row)) &&
                  succeeded(assign(outer.getResult(), ValueSpace::Segment)));
            })
            .Case<MulOp>([&](MulOp mul) {
              return success(
                  succeeded(assign(mul.getX(), ValueSpace::Row)) &&
                  succeeded(assign(mul.getY(), ValueSpace::Segment)) &&
                  succeeded(assign(mul.getResult(), ValueSpace::Row)));
            })
            .Case<MatvecOp>([&](MatvecOp matvec) {
              return success(
                  succeeded(assign(matvec.getV(), ValueSpace::Row)) &&
                  succeeded(assign(matvec.getM(), ValueSpace::Segment)) &&
                  succeeded(assign(matvec.getResult(), ValueSpace::Row)));
            })
            .Case<GatherOp>([&](GatherOp gather) {
              return success(
                  succeeded(assign(gather.getY(), ValueSpace::Segment)) &&
                  succeeded(assign(gather.getResult(), ValueSpace::Row)));
            })
            .Case<CountOp>([&](CountOp count) {
              anchorSegmentCount(count.getNumSegments());
              return assign(count.getResult(), ValueSpace::Segment);
            })
            .Case<arith::ConstantOp>([&](arith::ConstantOp constant) {
              if (isa<IndexType>(constant.getType()))
                return assign(constant, ValueSpace::Size);
              if (isa<FloatType>(constant.getType()))
                return assign(constant, ValueSpace::Scalar);
              fail("only scalar constants are supported")
                      .attachNote(op.getLoc())
                  << "this constant";
              return failure();
            })
            .Case<tensor::DimOp>([&](tensor::DimOp dim) {
              return assign(dim, ValueSpace::Size);
            })
            .Case<tensor::SplatOp>([&](auto) { return success(); })
            .Default([&](Operation *other) {
              if (isElementwise(other) &&
                  llvm::all_of(other->getOperandTypes(), [](Type type) {
                    return isa<RankedTensorType>(type);
                  }))
                return success();
              fail("'" + other->getName().getStringRef() +
                   "' is not supported in kernel functions")
                      .attachNote(other->getLoc())
                  << "this operation";
              return failure();
            });
    if (failed(result))
      return failure();
  }

  // Propagate through elementwise ops and splats to a fixpoint.
  do {
    changed = false;
    for (Operation &op : body.without_terminator()) {
      if (!isElementwise(&op) && !isa<tensor::SplatOp>(&op))
        continue;
      SmallVector<Value> tensors;
      for (Value operand : op.getOperands())
        if (isa<RankedTensorType>(operand.getType()))
          tensors.push_back(operand);
      // A splat sized like another tensor lives where that tensor lives.
      if (auto splat = dyn_cast<tensor::SplatOp>(&op))
        for (Value size : splat.getDynamicSizes())
          if (auto dim = size.getDefiningOp<tensor::DimOp>())
            if (dim.getConstantIndex() == 0)
              tensors.push_back(dim.getSource());
      tensors.push_back(op.getResult(0));
      std::optional<ValueSpace> known;
      for (Value value : tensors)
        if (spaces.count(value))
          known = spaces.lookup(value);
      if (!known)
        continue;
      for (Value value : tensors)
        if (failed(assign(value, *known)))
          return failure();
    }
  } while (changed);

  // Values still without a space are connected to no seg op (unused
  // arguments, constant splats feeding nothing anchored).
  return success();
}

FailureOr<DenseMap<Value, ValueSpace>> mlir::seg::inferValueSpaces(
    func::FuncOp func, function_ref<InFlightDiagnostic(const Twine &)> fail) {
  return SpaceInference(func, fail).run();
}
