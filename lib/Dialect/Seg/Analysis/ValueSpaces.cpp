//===- ValueSpaces.cpp - per-row or per-segment values --------------------===//

#include "segops/Dialect/Seg/Analysis/ValueSpaces.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "segops/Dialect/Seg/IR/SegInterfaces.h"
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
  case ValueSpace::Table:
    return "table";
  }
  llvm_unreachable("unknown value space");
}

/// Ops whose operands and result share one space: elementwise arithmetic
/// on same-shaped tensors (or scalars), and per-element shape changes.
static bool isElementwise(Operation *op) {
  return isKernelElementwiseOp(op) || isa<ComponentOpInterface>(op);
}

/// How a diagnostic names a space.
static std::string describe(ValueSpace space) {
  switch (space) {
  case ValueSpace::Row:
    return "per row";
  case ValueSpace::Segment:
    return "per segment";
  case ValueSpace::Table:
    return "as a table summed by a second index";
  default:
    return ("as a " + stringifyValueSpace(space)).str();
  }
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
    bool rowAndSegment =
        llvm::is_contained({ValueSpace::Row, ValueSpace::Segment}, space) &&
        llvm::is_contained({ValueSpace::Row, ValueSpace::Segment}, it->second);
    fail(rowAndSegment ? std::string("a value is used both per row and per "
                                     "segment")
                       : "a value is used both " + describe(it->second) +
                             " and " + describe(space))
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
            .Case<SegmentOpInterface>([&](SegmentOpInterface segOp) {
              // Seg ops fix their operands' and result's spaces: row
              // operands per row, segment operands per segment, the result
              // per segment for ops with a segment count, else per row.
              if (Value count = segOp.getSegmentCount())
                anchorSegmentCount(count);
              for (Value operand : segOp.getRowOperands())
                if (failed(assign(operand, ValueSpace::Row)))
                  return failure();
              for (Value operand : segOp.getSegmentOperands())
                if (failed(assign(operand, ValueSpace::Segment)))
                  return failure();
              return assign(segOp->getResult(0),
                            segOp.getSegmentCount() ? ValueSpace::Segment
                                                    : ValueSpace::Row);
            })
            .Case<GatherRowsOp>([&](GatherRowsOp gather) {
              // The table is read at random rows: any argument will do.
              if (failed(assign(gather.getJ(), ValueSpace::Row)))
                return failure();
              return assign(gather.getResult(), ValueSpace::Row);
            })
            .Case<ScatterSumOp>([&](ScatterSumOp scatter) {
              if (failed(assign(scatter.getX(), ValueSpace::Row)) ||
                  failed(assign(scatter.getJ(), ValueSpace::Row)))
                return failure();
              return assign(scatter.getResult(), ValueSpace::Table);
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
