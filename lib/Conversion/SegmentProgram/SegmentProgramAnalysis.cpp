//===- SegmentProgramAnalysis.cpp - spaces, shapes and passes -------------===//

#include "segops/Conversion/SegmentProgram.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "segops/Dialect/Seg/IR/SegOps.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace mlir::seg;

bool SegmentProgram::isCandidate(func::FuncOp func) {
  if (func.isExternal())
    return false;
  // Seg ops, or tensors anywhere in the signature: such a function is meant
  // as a kernel, and if it cannot be one the analysis says why.
  auto isTensor = [](Type type) { return isa<RankedTensorType>(type); };
  FunctionType type = func.getFunctionType();
  if (llvm::any_of(type.getInputs(), isTensor) ||
      llvm::any_of(type.getResults(), isTensor))
    return true;
  bool hasSegOp = false;
  func.walk(
      [&](Operation *op) { hasSegOp |= isa<SegDialect>(op->getDialect()); });
  return hasSegOp;
}

static bool isReduction(Operation *op) {
  return isa<SumOp, MeanOp, RmsNormOp, DotOp, OuterSumOp>(op);
}

namespace mlir {
namespace seg {
class SegmentProgramAnalysis {
public:
  explicit SegmentProgramAnalysis(func::FuncOp func) : func(func) {
    program.func = func;
    program.name = func.getSymName().str();
  }

  FailureOr<SegmentProgram> run();

private:
  InFlightDiagnostic fail(const Twine &why) {
    return func.emitError() << "'" << func.getSymName()
                            << "' is not a seg kernel function: " << why;
  }
  LogicalResult assignSpaces();
  LogicalResult checkSizes();
  void assignStages();
  LogicalResult buildBuffers();

  func::FuncOp func;
  SegmentProgram program;
};
} // namespace seg
} // namespace mlir

LogicalResult SegmentProgramAnalysis::assignSpaces() {
  FailureOr<DenseMap<Value, ValueSpace>> spaces =
      inferValueSpaces(func, [&](const Twine &why) { return fail(why); });
  if (failed(spaces))
    return failure();
  for (auto [value, space] : *spaces) {
    SegmentProgram::Info info;
    info.space = space;
    if (auto tensor = dyn_cast<RankedTensorType>(value.getType()))
      info.shape.assign(tensor.getShape().drop_front().begin(),
                        tensor.getShape().drop_front().end());
    program.infos[value] = info;
  }
  return success();
}

// Segment counts must all be the kernel's S: one index argument, or the
// leading dimension of a per-segment value.
LogicalResult SegmentProgramAnalysis::checkSizes() {
  Value countArgument;
  auto check = [&](Value numSegments) -> LogicalResult {
    if (auto dim = numSegments.getDefiningOp<tensor::DimOp>()) {
      std::optional<int64_t> index = dim.getConstantIndex();
      if (index && *index == 0 && program.hasInfo(dim.getSource()) &&
          program.info(dim.getSource()).space == ValueSpace::Segment)
        return success();
    }
    auto arg = dyn_cast<BlockArgument>(numSegments);
    if (arg && (!countArgument || countArgument == arg)) {
      countArgument = arg;
      return success();
    }
    fail("every segment count must be the same index argument or the "
         "length of a per-segment value");
    return failure();
  };
  for (Operation &op : func.getBody().front().without_terminator()) {
    LogicalResult result =
        TypeSwitch<Operation *, LogicalResult>(&op)
            .Case<SumOp, MeanOp, RmsNormOp, DotOp, OuterSumOp, CountOp>(
                [&](auto reduce) { return check(reduce.getNumSegments()); })
            .Default([](Operation *) { return success(); });
    if (failed(result))
      return failure();
  }
  return success();
}

void SegmentProgramAnalysis::assignStages() {
  unsigned passes = 0;
  for (Operation &op : func.getBody().front().without_terminator()) {
    unsigned stage = 0;
    for (Value operand : op.getOperands())
      if (program.hasInfo(operand))
        stage = std::max(stage, program.info(operand).stage);
    if (isReduction(&op)) {
      passes = std::max(passes, stage + 1);
      stage += 1;
    }
    for (Value result : op.getResults()) {
      auto it = program.infos.find(result);
      if (it != program.infos.end())
        it->second.stage = stage;
    }
  }
  for (Value result : func.getBody().front().getTerminator()->getOperands()) {
    if (!program.hasInfo(result))
      continue; // rejected when the buffers are built
    const SegmentProgram::Info &info = program.info(result);
    if (info.space == ValueSpace::Row)
      passes = std::max(passes, info.stage + 1);
  }
  program.numPasses = passes;
}

LogicalResult SegmentProgramAnalysis::buildBuffers() {
  Block &body = func.getBody().front();
  auto addBuffer = [&](Value value, StringRef name, bool isOutput) {
    auto type = cast<RankedTensorType>(value.getType());
    KernelBuffer buffer;
    buffer.name = name.str();
    buffer.isOutput = isOutput;
    buffer.elementType = type.getElementType();
    if (value == program.idx) {
      buffer.shape.push_back("N");
    } else if (!program.hasInfo(value)) {
      // An argument the program never reads (e.g. x in the second
      // derivative of a linear op): passed for a stable ABI, never touched.
      buffer.shape.push_back("?");
      for (int64_t d : type.getShape().drop_front())
        buffer.shape.push_back(std::to_string(d));
    } else {
      const SegmentProgram::Info &info = program.info(value);
      buffer.shape.push_back(info.space == ValueSpace::Row ? "N" : "S");
      for (int64_t d : info.shape)
        buffer.shape.push_back(std::to_string(d));
    }
    program.buffers.push_back(std::move(buffer));
  };
  for (BlockArgument arg : body.getArguments()) {
    if (!isa<RankedTensorType>(arg.getType())) {
      program.argumentBuffer.push_back(-1);
      continue;
    }
    program.argumentBuffer.push_back(program.buffers.size());
    addBuffer(arg,
              arg == program.idx ? "idx"
                                 : "arg" + std::to_string(arg.getArgNumber()),
              /*isOutput=*/false);
    // tensor.dim only needs the length, which the kernel gets as N or S.
    program.buffers.back().isRead =
        llvm::any_of(arg.getUsers(),
                     [](Operation *user) { return !isa<tensor::DimOp>(user); });
  }
  for (auto [i, result] :
       llvm::enumerate(body.getTerminator()->getOperands())) {
    // A result may be an argument itself (an identity gradient, e.g. through
    // addf): the kernel copies it.
    if (!program.hasInfo(result))
      return fail("cannot tell whether result #" + Twine(i) +
                  " is per row or per segment");
    const SegmentProgram::Info &info = program.info(result);
    if (info.space != ValueSpace::Row && info.space != ValueSpace::Segment)
      return fail("result #" + Twine(i) + " is not a tensor");
    if (info.space == ValueSpace::Row)
      program.hasRowOutputs = true;
    addBuffer(result, "result" + std::to_string(i), /*isOutput=*/true);
  }
  return success();
}

FailureOr<SegmentProgram> SegmentProgramAnalysis::run() {
  if (!func.getBody().hasOneBlock())
    return fail("its body must be one block");
  Block &body = func.getBody().front();
  for (BlockArgument arg : body.getArguments())
    if (!isa<RankedTensorType, IndexType>(arg.getType()))
      return fail("arguments must be ranked tensors or index");
  if (body.getTerminator()->getNumOperands() == 0)
    return fail("it returns nothing");

  // One segment index, a function argument, for every seg op.
  for (Operation &op : body.without_terminator()) {
    if (!isa<SegDialect>(op.getDialect()))
      continue;
    Value idx = TypeSwitch<Operation *, Value>(&op)
                    .Case<SumOp, MeanOp, RmsNormOp, DotOp, MulOp, MatvecOp,
                          GatherOp, OuterSumOp, CountOp>(
                        [](auto segOp) { return segOp.getIdx(); })
                    .Default([](Operation *) { return Value(); });
    if (!isa_and_nonnull<BlockArgument>(idx))
      return fail("every seg operation's idx must be a function argument");
    if (program.idx && program.idx != idx)
      return fail("all seg operations must share one idx");
    program.idx = idx;
  }
  if (!program.idx)
    return fail("it has no seg operation (elementwise tensor code alone "
                "has no segments to run over)");

  if (failed(assignSpaces()) || failed(checkSizes()))
    return failure();
  for (Value result : body.getTerminator()->getOperands())
    program.elementType =
        cast<RankedTensorType>(result.getType()).getElementType();
  assignStages();
  if (failed(buildBuffers()))
    return failure();
  return program;
}

FailureOr<SegmentProgram> SegmentProgram::analyze(func::FuncOp func) {
  return SegmentProgramAnalysis(func).run();
}

bool SegmentProgram::mapsRowsOnly() const {
  Block &body = func.getBody().front();
  for (Operation &op : body.without_terminator())
    if (isa<SumOp, MeanOp, RmsNormOp, DotOp, OuterSumOp, CountOp>(op))
      return false;
  return llvm::all_of(body.getTerminator()->getOperands(), [&](Value result) {
    return info(result).space == ValueSpace::Row;
  });
}

int64_t SegmentProgram::numReductionComponents(unsigned pass) const {
  int64_t count = 0;
  for (Operation &op : func.getBody().front().without_terminator())
    if (isa<SumOp, MeanOp, RmsNormOp, DotOp, OuterSumOp>(op) &&
        info(op.getResult(0)).stage == pass + 1)
      count += info(op.getResult(0)).numComponents();
  return count;
}

int64_t SegmentProgram::reductionOffset(unsigned pass) const {
  int64_t offset = 0;
  for (unsigned earlier = 0; earlier < pass; ++earlier)
    offset += numReductionComponents(earlier);
  return offset;
}

bool SegmentProgram::storesRowsInPass(unsigned pass) const {
  return llvm::any_of(
      func.getBody().front().getTerminator()->getOperands(), [&](Value v) {
        return info(v).space == ValueSpace::Row && info(v).stage == pass;
      });
}

int64_t SegmentProgram::numReductionComponents() const {
  int64_t count = 0;
  for (Operation &op : func.getBody().front().without_terminator())
    if (isa<SumOp, MeanOp, RmsNormOp, DotOp, OuterSumOp>(op))
      count += info(op.getResult(0)).numComponents();
  return count;
}
