//===- SegmentProgramAnalysis.cpp - spaces, shapes and passes -------------===//

#include "segops/Conversion/SegmentProgram.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "segops/Dialect/Seg/IR/SegOps.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/Support/MathExtras.h"
#include "llvm/Support/raw_ostream.h"

using namespace mlir;
using namespace mlir::seg;

bool SegmentProgram::isCandidate(func::FuncOp func) {
  // Seg ops, or tensors anywhere in the signature: such a function is meant
  // as a kernel, and if it cannot be one the analysis says why (a
  // declaration too: nothing downstream could lower its tensors).
  auto isTensor = [](Type type) { return isa<RankedTensorType>(type); };
  FunctionType type = func.getFunctionType();
  if (llvm::any_of(type.getInputs(), isTensor) ||
      llvm::any_of(type.getResults(), isTensor))
    return true;
  if (func.isExternal())
    return false;
  bool hasSegOp = false;
  func.walk(
      [&](Operation *op) { hasSegOp |= isa<SegDialect>(op->getDialect()); });
  return hasSegOp;
}

static std::string typeString(Type type) {
  std::string text;
  llvm::raw_string_ostream(text) << type;
  return text;
}

bool mlir::seg::isReductionOp(Operation *op) {
  auto segOp = dyn_cast<SegmentOpInterface>(op);
  return segOp && segOp.isReduction();
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
  LogicalResult checkElementTypes();
  LogicalResult findIndex();
  LogicalResult assignSpaces();
  LogicalResult checkSizes();
  LogicalResult checkSecondIndices();
  void eraseDeadOps();
  void assignPasses();
  void findRowCountReads();
  LogicalResult buildBuffers();

  func::FuncOp func;
  SegmentProgram program;
};
} // namespace seg
} // namespace mlir

// One float element type per kernel: the lowerings compute, load and store
// every value in program.elementType.
LogicalResult SegmentProgramAnalysis::checkElementTypes() {
  Type first;
  Value firstValue;
  auto check = [&](Value value) -> LogicalResult {
    auto type = dyn_cast<FloatType>(getElementTypeOrSelf(value.getType()));
    if (!type)
      return success();
    if (!first) {
      first = type;
      firstValue = value;
      return success();
    }
    if (type == first)
      return success();
    InFlightDiagnostic diag =
        fail("it mixes float element types (" + typeString(first) +
             " and " + typeString(type) +
             "): every float value of a kernel function must have one");
    diag.attachNote(firstValue.getLoc()) << "a value of type " << first;
    diag.attachNote(value.getLoc()) << "a value of type " << type;
    return failure();
  };
  Block &body = func.getBody().front();
  for (BlockArgument arg : body.getArguments())
    if (failed(check(arg)))
      return failure();
  for (Operation &op : body) {
    for (Value value : op.getOperands())
      if (failed(check(value)))
        return failure();
    for (Value value : op.getResults())
      if (failed(check(value)))
        return failure();
  }
  if (!first)
    return fail("it computes no floating-point value");
  program.elementType = first;
  return success();
}

// The segment index: the idx of every seg op, a function argument. A
// function without seg ops (a derived gradient whose seg ops canonicalized
// away, say) runs over its one integer tensor argument.
LogicalResult SegmentProgramAnalysis::findIndex() {
  Block &body = func.getBody().front();
  for (Operation &op : body.without_terminator()) {
    auto segOp = dyn_cast<SegmentOpInterface>(&op);
    if (!segOp)
      continue;
    Value idx = segOp.getSegmentIndex();
    if (!isa_and_nonnull<BlockArgument>(idx))
      return fail("every seg operation's idx must be a function argument");
    if (program.idx && program.idx != idx)
      return fail("all seg operations must share one idx");
    program.idx = idx;
  }
  if (program.idx)
    return success();
  SmallVector<BlockArgument> indices;
  for (BlockArgument arg : body.getArguments()) {
    auto tensor = dyn_cast<RankedTensorType>(arg.getType());
    bool isSecondIndex = llvm::any_of(arg.getUsers(), [](Operation *user) {
      return isa<GatherRowsOp, ScatterSumOp>(user);
    });
    if (tensor && tensor.getRank() == 1 &&
        isa<IntegerType>(tensor.getElementType()) && !isSecondIndex)
      indices.push_back(arg);
  }
  if (indices.size() != 1)
    return fail("it has no seg operation, and no single integer tensor "
                "argument to take as its idx (elementwise tensor code alone "
                "has no segments to run over)");
  program.idx = indices.front();
  return success();
}

// Ops nothing uses are no part of the kernel (and may have no space: a dead
// splat's square root). Their spaces still anchored the others'.
void SegmentProgramAnalysis::eraseDeadOps() {
  // Users before producers: a reverse_iterator would point at erased ops.
  SmallVector<Operation *> ops;
  for (Operation &op : func.getBody().front().without_terminator())
    ops.push_back(&op);
  for (Operation *op : llvm::reverse(ops)) {
    if (!isOpTriviallyDead(op))
      continue;
    for (Value result : op->getResults())
      program.infos.erase(result);
    op->erase();
  }
}

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

// seg.gather_rows reads an argument's rows by an argument index; a
// seg.scatter_sum is returned as it is (the runtime sums the rows the
// kernel writes), into as many rows as an argument has. In the program a
// scatter_sum's result is its rows: per row.
LogicalResult SegmentProgramAnalysis::checkSecondIndices() {
  Block &body = func.getBody().front();
  for (Operation &op : body.without_terminator()) {
    if (auto gather = dyn_cast<GatherRowsOp>(op)) {
      if (!isa<BlockArgument>(gather.getTable()))
        return fail("seg.gather_rows reads its table at random rows, so the "
                    "table must be a function argument");
      if (!isa<BlockArgument>(gather.getJ()))
        return fail("seg.gather_rows' index must be a function argument");
      continue;
    }
    auto scatter = dyn_cast<ScatterSumOp>(op);
    if (!scatter)
      continue;
    if (!isa<BlockArgument>(scatter.getJ()))
      return fail("seg.scatter_sum's index must be a function argument");
    if (!llvm::all_of(scatter->getUsers(), [](Operation *user) {
          return isa<func::ReturnOp>(user);
        }))
      return fail("seg.scatter_sum's result must be returned as it is (the "
                  "kernel writes the rows to sum, the runtime sums them)");
    auto dim = scatter.getNumRows().getDefiningOp<tensor::DimOp>();
    if (!dim || dim.getConstantIndex() != std::optional<int64_t>(0) ||
        !isa<BlockArgument>(dim.getSource()))
      return fail("seg.scatter_sum's num_rows must be the length of a tensor "
                  "argument");
    program.infos[scatter.getResult()].space = ValueSpace::Row;
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
    auto segOp = dyn_cast<SegmentOpInterface>(&op);
    if (segOp && segOp.getSegmentCount() &&
        failed(check(segOp.getSegmentCount())))
      return failure();
  }
  return success();
}

void SegmentProgramAnalysis::assignPasses() {
  unsigned passes = 0;
  for (Operation &op : func.getBody().front().without_terminator()) {
    unsigned pass = 0;
    for (Value operand : op.getOperands())
      if (program.hasInfo(operand))
        pass = std::max(pass, program.info(operand).pass);
    if (isReductionOp(&op)) {
      passes = std::max(passes, pass + 1);
      pass += 1;
    }
    for (Value result : op.getResults()) {
      auto it = program.infos.find(result);
      if (it != program.infos.end())
        it->second.pass = pass;
    }
  }
  for (Value result : func.getBody().front().getTerminator()->getOperands()) {
    if (!program.hasInfo(result))
      continue; // rejected when the buffers are built
    const SegmentProgram::Info &info = program.info(result);
    if (info.space == ValueSpace::Row)
      passes = std::max(passes, info.pass + 1);
  }
  program.numPasses = passes;
}

void SegmentProgramAnalysis::findRowCountReads() {
  // Values known from the row count alone: a segment op's per-segment
  // result that no pass reduces (seg.count: the emitter builds it from the
  // count, SegmentOpInterface::buildFromRowCount), and what is computed
  // from one.
  DenseSet<Value> fromCount;
  for (Operation &op : func.getBody().front().without_terminator()) {
    bool known = isa<SegmentOpInterface>(op) && !isReductionOp(&op) &&
                 llvm::all_of(op.getResults(), [&](Value result) {
                   return program.hasInfo(result) &&
                          program.info(result).space == ValueSpace::Segment;
                 });
    known |= llvm::any_of(op.getOperands(), [&](Value operand) {
      return fromCount.contains(operand);
    });
    if (!known)
      continue;
    for (Value result : op.getResults()) {
      fromCount.insert(result);
      if (program.hasInfo(result) &&
          program.info(result).space == ValueSpace::Row)
        program.rowsReadRowCount = true;
    }
  }
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
    if (auto saved = func.getArgAttrOfType<IntegerAttr>(arg.getArgNumber(),
                                                        kSavedResultAttrName))
      program.buffers.back().savedResult = saved.getInt();
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
    if (auto scatter = result.getDefiningOp<ScatterSumOp>()) {
      auto into = cast<BlockArgument>(
          scatter.getNumRows().getDefiningOp<tensor::DimOp>().getSource());
      program.buffers.back().sumsBy = program.argumentBuffer[cast<BlockArgument>(
          scatter.getJ()).getArgNumber()];
      program.buffers.back().sumsIntoRowsOf =
          program.argumentBuffer[into.getArgNumber()];
    }
  }
  for (Operation &op : body.without_terminator()) {
    auto gather = dyn_cast<GatherRowsOp>(op);
    if (!gather)
      continue;
    TableGather use{
        unsigned(program.argumentBuffer[cast<BlockArgument>(gather.getJ())
                                            .getArgNumber()]),
        unsigned(program.argumentBuffer[cast<BlockArgument>(gather.getTable())
                                            .getArgNumber()])};
    if (!llvm::is_contained(program.gathers, use))
      program.gathers.push_back(use);
  }
  return success();
}

FailureOr<SegmentProgram> SegmentProgramAnalysis::run() {
  if (func.isExternal())
    return fail("it is a declaration (a kernel function needs a body)");
  if (!func.getBody().hasOneBlock())
    return fail("its body must be one block");
  Block &body = func.getBody().front();
  for (BlockArgument arg : body.getArguments())
    if (!isa<RankedTensorType, IndexType>(arg.getType()))
      return fail("arguments must be ranked tensors or index");
  if (body.getTerminator()->getNumOperands() == 0)
    return fail("it returns nothing");
  for (auto [i, type] : llvm::enumerate(func.getResultTypes()))
    if (!isa<RankedTensorType>(type))
      return fail("result #" + Twine(i) + " is not a tensor (it has type " +
                  typeString(type) + ")");
  if (failed(checkElementTypes()) || failed(findIndex()) ||
      failed(assignSpaces()) || failed(checkSizes()) ||
      failed(checkSecondIndices()))
    return failure();
  eraseDeadOps();
  assignPasses();
  findRowCountReads();
  if (failed(buildBuffers()))
    return failure();
  return program;
}

FailureOr<SegmentProgram> SegmentProgram::analyze(func::FuncOp func) {
  return SegmentProgramAnalysis(func).run();
}

bool SegmentProgram::mapsRowsOnly() const {
  Block &body = func.getBody().front();
  for (Operation &op : body.without_terminator()) {
    // Reductions and counts are per segment.
    auto segOp = dyn_cast<SegmentOpInterface>(op);
    if (segOp && segOp.getSegmentCount())
      return false;
  }
  return llvm::all_of(body.getTerminator()->getOperands(), [&](Value result) {
    return info(result).space == ValueSpace::Row;
  });
}

int64_t SegmentProgram::numReductionComponents(unsigned pass) const {
  int64_t count = 0;
  for (Operation &op : func.getBody().front().without_terminator())
    if (isReductionOp(&op) && info(op.getResult(0)).pass == pass + 1)
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
        return info(v).space == ValueSpace::Row && info(v).pass == pass;
      });
}

int64_t SegmentProgram::numReductionComponents() const {
  int64_t count = 0;
  for (Operation &op : func.getBody().front().without_terminator())
    if (isReductionOp(&op))
      count += info(op.getResult(0)).numComponents();
  return count;
}

int64_t SegmentProgram::maxComponents() const {
  int64_t widest = 1;
  for (const auto &entry : infos)
    widest = std::max(widest, entry.second.numComponents());
  return widest;
}

/// Features of a row value (0 for other shapes).
static int64_t rowFeatures(const SegmentProgram::Info &info) {
  return info.shape.size() == 1 ? info.shape[0] : 0;
}

bool SegmentProgram::combinesRowFeatures() const {
  return llvm::any_of(func.getBody().front(), [](Operation &op) {
    auto component = dyn_cast<ComponentOpInterface>(op);
    return component && component.getComponentCombiningKind().has_value();
  });
}

int64_t SegmentProgram::widestRowFeatures() const {
  int64_t widest = 0;
  for (const auto &entry : infos)
    widest = std::max(widest, rowFeatures(entry.second));
  return widest;
}

int64_t SegmentProgram::gpuFeatureLanes() const {
  int64_t widest = widestRowFeatures();
  if (widest < kGPUFeatureLanesFrom)
    return 0;
  // Row maps run each group's own rows, so the groups of a warp part ways
  // (rows past N, invalid segments). Combining a row's features over its
  // lanes needs the whole warp at the butterfly: such programs split only
  // from 32 features, a warp per row, and narrower rows run a thread per
  // row.
  if (mapsRowsOnly() && combinesRowFeatures())
    return widest >= kGPUChunkRows ? kGPUChunkRows : 0;
  int64_t lanes = kGPUFeatureLanesFrom;
  while (lanes * 2 <= std::min<int64_t>(widest, kGPUChunkRows))
    lanes *= 2;
  // A row of exactly G features (16, 32) holds one a lane: half the lanes
  // take it in pairs where a pair is narrow enough, so that a warp runs
  // twice the rows a step (see kGPUNarrowRowPairBytes).
  int64_t pairBytes =
      kGPUFeatureVectorWidth * elementType.getIntOrFloatBitWidth() / 8;
  if (widest == lanes && lanes > kGPUFeatureLanesFrom &&
      pairBytes <= kGPUNarrowRowPairBytes && !foldsSplitRows())
    lanes /= 2;
  return lanes;
}

bool SegmentProgram::foldsSplitRows() const {
  auto isSplit = [&](Value value) {
    return hasInfo(value) && isFeatureSplit(value);
  };
  return llvm::any_of(
      func.getBody().front().without_terminator(), [&](Operation &op) {
        // Tensors only: a split row's tensor.dim is its row count.
        return op.getNumResults() == 1 &&
               isa<RankedTensorType>(op.getResult(0).getType()) &&
               hasInfo(op.getResult(0)) && !isSplit(op.getResult(0)) &&
               llvm::any_of(op.getOperands(), isSplit);
      });
}

int64_t SegmentProgram::gpuFeatureVectorWidth(int64_t features) const {
  int64_t lanes = gpuFeatureLanes();
  if (lanes == 0 || foldsSplitRows())
    return 1;
  int64_t elementBytes = elementType.getIntOrFloatBitWidth() / 8;
  int64_t width = kGPUFeatureVectorWidth;
  if (width * elementBytes <= kGPUFeatureVectorBytes &&
      features % (lanes * width) == 0)
    return width;
  return 1;
}

int64_t SegmentProgram::gpuColumnBlocks() const {
  int64_t lanes = gpuFeatureLanes();
  int64_t widest = widestRowFeatures();
  if (lanes == 0 || widest <= lanes * kGPUMostFeaturesPerLane ||
      foldsSplitRows())
    return 1;
  for (const auto &entry : infos)
    if (isFeatureSplit(entry.first) && rowFeatures(entry.second) != widest)
      return 1;
  int64_t wholeVectors = lanes * gpuFeatureVectorWidth(widest);
  int64_t blocks = 2;
  while (widest > blocks * lanes * kGPUMostFeaturesPerLane)
    blocks *= 2;
  return widest % (blocks * wholeVectors) == 0 ? blocks : 1;
}

int64_t SegmentProgram::gpuRowMapBlockRows(int64_t blockSize) const {
  int64_t lanes = gpuFeatureLanes();
  if (lanes == 0)
    return blockSize * gpuRowMapRowsPerUnit();
  if (lanes == kGPUChunkRows)
    return blockSize / kGPUChunkRows * kGPURowMapRowsPerUnit;
  return blockSize;
}

SmallVector<Value> SegmentProgram::gpuStripedRows() const {
  const SegmentProgram &program = *this;
  Block &body = program.func.getBody().front();
  SmallVector<Value> rows;
  auto isStripedRow = [&](Value value) {
    return program.hasInfo(value) &&
           program.info(value).space == ValueSpace::Row &&
           SegmentProgram::isGPUStripedWidth(
               program.info(value).numComponents());
  };
  for (BlockArgument arg : body.getArguments())
    if (isStripedRow(arg) && !arg.use_empty())
      rows.push_back(arg);
  for (Value result : body.getTerminator()->getOperands())
    if (isStripedRow(result))
      rows.push_back(result);
  return rows;
}

bool SegmentProgram::gpuStripesRowMap() const {
  return mapsRowsOnly() && !splitsFeatures() && !gpuStripedRows().empty();
}

SmallVector<SegmentProgram::StripedReduction>
SegmentProgram::gpuStripedReductions() const {
  if (mapsRowsOnly() || !isOnePass() || hasRowOutputs || splitsFeatures() ||
      !gathers.empty())
    return {};
  SmallVector<StripedReduction> reductions;
  bool anyStriped = false;
  for (Operation &op : func.getBody().front().without_terminator()) {
    if (!isReductionOp(&op))
      continue;
    auto reduction = cast<SegmentOpInterface>(op);
    Value input = op.getOperand(0);
    if (!reduction.reducesOperandAsIs() || !isa<BlockArgument>(input) ||
        info(input).space != ValueSpace::Row)
      return {};
    int64_t components = info(input).numComponents();
    if (components != 1 && !isGPUStripedWidth(components))
      return {};
    anyStriped |= components > 1;
    reductions.push_back({input, components, reduction.getCombiningKind()});
  }
  if (!anyStriped)
    return {};
  return reductions;
}

int64_t SegmentProgram::gpuRowMapRowsPerUnit() const {
  if (!gpuStripesRowMap())
    return kGPURowMapRowsPerUnit;
  int64_t bytes = 0;
  for (Value row : gpuStripedRows())
    bytes +=
        info(row).numComponents() * elementType.getIntOrFloatBitWidth() / 8;
  return bytes <= kGPUStripedRowBytesForTwoRows ? 2 : 1;
}

bool SegmentProgram::gpuPacksTailsFromNextChunk() const {
  if (!isOnePass() || hasRowOutputs || splitsFeatures() || !gathers.empty())
    return false;
  int64_t rowComponents = 0;
  for (const KernelBuffer &buffer : buffers) {
    if (buffer.isOutput || !buffer.isRead || buffer.shape.empty())
      continue;
    // Segment inputs are read at the lane's segment, which the row 32
    // after its own need not share.
    if (buffer.shape.front() == "S")
      return false;
    if (buffer.shape.front() != "N" || !isa<FloatType>(buffer.elementType))
      continue;
    int64_t components = 1;
    for (StringRef extent : ArrayRef(buffer.shape).drop_front()) {
      int64_t size;
      if (extent.getAsInteger(10, size))
        return false;
      components *= size;
    }
    rowComponents += components;
  }
  return 2 + 2 * rowComponents <= kGPULoadsPerRound;
}

SmallVector<Value> SegmentProgram::rowInputs() const {
  SmallVector<Value> inputs;
  for (BlockArgument argument : func.getArguments()) {
    if (argument == idx || !hasInfo(argument) ||
        info(argument).space != ValueSpace::Row ||
        !isa<FloatType>(getElementTypeOrSelf(argument.getType())))
      continue;
    // A table gathered by second indices is read at their values.
    if (llvm::any_of(argument.getUsers(),
                     [](Operation *user) { return !isa<GatherRowsOp>(user); }))
      inputs.push_back(argument);
  }
  return inputs;
}

bool SegmentProgram::gpuCachesOwnRowInputs() const {
  if (numPasses < 2 || splitsFeatures())
    return false;
  int64_t components = 0;
  for (Value input : rowInputs())
    components += info(input).numComponents();
  int64_t words =
      components * llvm::divideCeil(elementType.getIntOrFloatBitWidth(), 32);
  return components >= kGPUMinCachedRowComponents &&
         words <= kGPUMostCachedRowWords;
}

bool SegmentProgram::gpuSavesNarrowRowSectors() const {
  return !splitsFeatures() &&
         widestRowFeatures() * elementType.getIntOrFloatBitWidth() / 8 <=
             kGPUNarrowRowBytes;
}

int64_t SegmentProgram::gpuSuperTileWarps() const {
  return llvm::divideCeil(widestPassComponents(),
                          kGPUSuperTileComponentsPerWarp);
}

int64_t SegmentProgram::gpuSuperTileComponentLanes() const {
  return std::min<int64_t>(llvm::PowerOf2Ceil(widestPassComponents()),
                           kGPUSuperTileComponentsPerWarp);
}

int64_t SegmentProgram::widestPassComponents() const {
  int64_t widest = 1;
  for (unsigned pass = 0; pass < numPasses; ++pass)
    widest = std::max(widest, numReductionComponents(pass));
  return widest;
}

bool SegmentProgram::isFeatureSplit(Value value) const {
  return rowFeatures(info(value)) >= kGPUFeatureLanesFrom;
}

std::optional<unsigned> SegmentProgram::summedRowBuffer() const {
  Block &body = func.getBody().front();
  ValueRange results = body.getTerminator()->getOperands();
  auto sum = results.size() == 1 ? results.front().getDefiningOp<SumOp>()
                                 : SumOp();
  auto rows = sum ? dyn_cast<BlockArgument>(sum.getX()) : BlockArgument();
  if (!rows || !hasInfo(rows) || info(rows).space != ValueSpace::Row)
    return std::nullopt;
  // Nothing else computed: only the sum and what its count is read from.
  for (Operation &op : body.without_terminator())
    if (&op != sum.getOperation() &&
        !isa<tensor::DimOp, arith::ConstantOp>(op))
      return std::nullopt;
  return argumentBuffer[rows.getArgNumber()];
}

SmallVector<arith::AtomicRMWKind>
SegmentProgram::combiningKinds(unsigned pass) const {
  SmallVector<arith::AtomicRMWKind> kinds;
  for (Operation &op : func.getBody().front().without_terminator())
    if (isReductionOp(&op) && info(op.getResult(0)).pass == pass + 1)
      kinds.append(info(op.getResult(0)).numComponents(),
                   cast<SegmentOpInterface>(op).getCombiningKind());
  return kinds;
}
