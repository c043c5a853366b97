//===- SegmentProgramEmitter.cpp - scalar code of a segment program -------===//

#include "segops/Conversion/SegmentProgram.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/TypeUtilities.h"
#include "segops/Conversion/KernelCodeBuilder.h"
#include "segops/Dialect/Seg/IR/SegOps.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace mlir::seg;

using Components = SmallVector<Value, 9>;

Value SegmentProgramEmitter::bufferOf(Value argument) const {
  auto arg = cast<BlockArgument>(argument);
  return buffers[program.argumentBuffer[arg.getArgNumber()]];
}

Value SegmentProgramEmitter::outputBuffer(unsigned resultIndex) const {
  unsigned numInputs =
      program.buffers.size() -
      program.func.getBody().front().getTerminator()->getNumOperands();
  return buffers[numInputs + resultIndex];
}

void SegmentProgramEmitter::splitFeaturesOver(Value lane, int64_t lanes,
                                              Value first,
                                              CombineBuilder combine,
                                              int64_t blocks, Value base) {
  assert((blocks == 1) == !base && "a column base for column blocks only");
  featureLane = lane;
  groupLanes = lanes;
  firstGroup = first;
  combineLanes = std::move(combine);
  columnBlocks = blocks;
  columnBase = base;
}

void SegmentProgramEmitter::stageValues(DenseMap<Value, Components> values,
                                        RowOutputSink sink) {
  staged = std::move(values);
  rowOutputSink = std::move(sink);
}

bool SegmentProgramEmitter::isHeldSplit(Value value) const {
  return featureLane && program.hasInfo(value) &&
         program.isFeatureSplit(value);
}

int64_t SegmentProgramEmitter::heldComponents(Value value) const {
  int64_t components = program.info(value).numComponents();
  return isHeldSplit(value) ? heldFeatures(components) : components;
}

int64_t SegmentProgramEmitter::heldFeatures(int64_t features) const {
  return llvm::divideCeil(features / columnBlocks, groupLanes);
}

std::pair<Value, Value>
SegmentProgramEmitter::splitFeature(KernelCodeBuilder &code, int64_t part,
                                    int64_t features) {
  // Part p = qV + v of V consecutive features a vector: feature
  // (qG + lane)V + v (from the column block's base). With V > 1 or column
  // blocks every vector is whole (no padding).
  OpBuilder &b = code.builder;
  int64_t width = program.gpuFeatureVectorWidth(features);
  int64_t vector = part / width, inVector = part % width;
  Value feature = b.create<arith::AddIOp>(code.loc, featureLane,
                                          code.i64(vector * groupLanes));
  if (width > 1)
    feature = b.create<arith::AddIOp>(
        code.loc, b.create<arith::MulIOp>(code.loc, feature, code.i64(width)),
        code.i64(inVector));
  if (columnBase)
    return {b.create<arith::AddIOp>(code.loc, columnBase, feature), Value()};
  if (width > 1)
    return {feature, Value()};
  if ((part + 1) * groupLanes <= features)
    return {feature, Value()};
  Value valid = b.create<arith::CmpIOp>(code.loc, arith::CmpIPredicate::slt,
                                        feature, code.i64(features));
  return {b.create<arith::MinSIOp>(code.loc, feature, code.i64(features - 1)),
          valid};
}

Components SegmentProgramEmitter::loadSplit(KernelCodeBuilder &code,
                                            Value buffer, Value element,
                                            int64_t features) {
  OpBuilder &b = code.builder;
  Value base =
      b.create<arith::MulIOp>(code.loc, element, code.i64(features));
  int64_t width = program.gpuFeatureVectorWidth(features);
  Components parts;
  for (int64_t part = 0, e = heldFeatures(features); part < e;
       part += width) {
    auto [feature, valid] = splitFeature(code, part, features);
    Value at = b.create<arith::AddIOp>(code.loc, base, feature);
    if (width > 1) {
      Value vector =
          code.loadVector(buffer, program.elementType, at, width,
                          /*alignedToVector=*/true);
      for (int64_t v = 0; v < width; ++v)
        parts.push_back(b.create<LLVM::ExtractElementOp>(
            code.loc, vector,
            b.create<arith::ConstantIntOp>(code.loc, v, 32)));
      continue;
    }
    Value value = code.load(buffer, program.elementType, at);
    if (valid)
      value = b.create<arith::SelectOp>(code.loc, valid, value,
                                        code.zero(program.elementType));
    parts.push_back(value);
  }
  return parts;
}

/// Loads the components of elements [element, element + lanes) of a buffer
/// of `numComponents` components per element: scalars for one lane, else one
/// vector per component (a vector load of the elements, deinterleaved).
static Components loadElement(KernelCodeBuilder &code, Value buffer,
                              Type elementType, Value element,
                              int64_t numComponents, int64_t lanes = 1) {
  Components components;
  if (auto lanesType = dyn_cast<VectorType>(element.getType())) {
    // One element per lane (a vector of segments): scalar loads, gathered.
    OpBuilder &b = code.builder;
    auto vectorType = VectorType::get(lanesType.getShape(), elementType);
    for (int64_t c = 0; c < numComponents; ++c) {
      Value gathered = b.create<LLVM::PoisonOp>(code.loc, vectorType);
      for (int64_t l = 0; l < lanesType.getNumElements(); ++l) {
        Value position = b.create<arith::ConstantIntOp>(code.loc, l, 32);
        Value laneElement =
            b.create<LLVM::ExtractElementOp>(code.loc, element, position);
        Value index = b.create<arith::AddIOp>(
            code.loc,
            b.create<arith::MulIOp>(code.loc, laneElement,
                                    code.i64(numComponents)),
            code.i64(c));
        gathered = b.create<LLVM::InsertElementOp>(
            code.loc, gathered, code.load(buffer, elementType, index),
            position);
      }
      components.push_back(gathered);
    }
    return components;
  }
  Value base = code.builder.create<arith::MulIOp>(code.loc, element,
                                                  code.i64(numComponents));
  if (lanes > 1) {
    Value all =
        code.loadVector(buffer, elementType, base, lanes * numComponents);
    for (int64_t c = 0; c < numComponents; ++c) {
      if (numComponents == 1) {
        components.push_back(all);
        break;
      }
      SmallVector<int32_t> lane;
      for (int64_t l = 0; l < lanes; ++l)
        lane.push_back(l * numComponents + c);
      components.push_back(code.shuffle(all, all, lane));
    }
    return components;
  }
  for (int64_t c = 0; c < numComponents; ++c)
    components.push_back(code.load(
        buffer, elementType,
        code.builder.create<arith::AddIOp>(code.loc, base, code.i64(c))));
  return components;
}

/// Concatenates vectors (shufflevector needs operands of one type: the
/// shorter of two is first widened with repeated lanes).
static Value concatVectors(KernelCodeBuilder &code, ArrayRef<Value> vectors) {
  auto length = [](Value v) {
    return cast<VectorType>(v.getType()).getNumElements();
  };
  auto widen = [&](Value v, int64_t size) {
    if (length(v) == size)
      return v;
    SmallVector<int32_t> mask;
    for (int64_t i = 0; i < size; ++i)
      mask.push_back(i < length(v) ? i : 0);
    return code.shuffle(v, v, mask);
  };
  Value result = vectors.front();
  for (Value next : vectors.drop_front()) {
    int64_t a = length(result), b = length(next), size = std::max(a, b);
    SmallVector<int32_t> mask;
    for (int64_t i = 0; i < a + b; ++i)
      mask.push_back(i < a ? i : size + (i - a));
    result = code.shuffle(widen(result, size), widen(next, size), mask);
  }
  return result;
}

/// Stores the components of elements [element, element + lanes) (scalars
/// for one lane, else one vector per component, interleaved back).
/// Stores an element (`lanes` of them as vectors); with `laneMask` (a
/// vector of i1 per lane) only the lanes set, the others' memory untouched.
static void storeElement(KernelCodeBuilder &code, Value buffer, Value element,
                         ArrayRef<Value> components, int64_t lanes = 1,
                         Value laneMask = {}) {
  int64_t numComponents = components.size();
  Value base = code.builder.create<arith::MulIOp>(code.loc, element,
                                                  code.i64(numComponents));
  if (lanes > 1) {
    Value all = concatVectors(code, components);
    if (numComponents > 1) {
      SmallVector<int32_t> interleaved;
      for (int64_t l = 0; l < lanes; ++l)
        for (int64_t c = 0; c < numComponents; ++c)
          interleaved.push_back(c * lanes + l);
      all = code.shuffle(all, all, interleaved);
    }
    if (!laneMask) {
      code.storeVector(all, buffer, base);
      return;
    }
    // The interleaved vector holds each lane's components together.
    SmallVector<int32_t> laneOfElement;
    for (int64_t l = 0; l < lanes; ++l)
      laneOfElement.append(numComponents, l);
    Value mask = numComponents > 1
                     ? code.shuffle(laneMask, laneMask, laneOfElement)
                     : laneMask;
    code.storeVectorMasked(all, buffer, base, mask);
    return;
  }
  OpBuilder &b = code.builder;
  OpBuilder::InsertionGuard guard(b);
  if (laneMask) {
    // One row per thread: a masked-off thread stores nothing.
    auto ifStore = b.create<scf::IfOp>(code.loc, laneMask, /*withElse=*/false);
    b.setInsertionPointToStart(ifStore.thenBlock());
  }
  for (auto [c, value] : llvm::enumerate(components))
    code.store(value, buffer, b.create<arith::AddIOp>(code.loc, base, code.i64(c)));
}

void SegmentProgramEmitter::storeHeld(KernelCodeBuilder &code, Value value,
                                      Value buffer, Value element,
                                      ArrayRef<Value> components,
                                      int64_t lanes, Value laneMask) {
  if (!featureLane) {
    storeElement(code, buffer, element, components, lanes, laneMask);
    return;
  }
  assert(lanes == 1 && "split rows run a row per lane group");
  OpBuilder &b = code.builder;
  OpBuilder::InsertionGuard guard(b);
  // Conditions, null meaning true.
  auto both = [&](Value first, Value second) -> Value {
    if (!first || !second)
      return first ? first : second;
    return b.create<arith::AndIOp>(code.loc, first, second);
  };
  auto storeIf = [&](Value condition) {
    if (!condition)
      return;
    auto ifStore = b.create<scf::IfOp>(code.loc, condition,
                                       /*withElse=*/false);
    b.setInsertionPointToStart(ifStore.thenBlock());
  };
  // The group that stores: a row's own (its lane mask), a segment's first.
  Value group = laneMask ? laneMask : firstGroup;
  if (!isHeldSplit(value)) {
    // Every lane of the group holds it: its lane 0 stores.
    storeIf(both(group, b.create<arith::CmpIOp>(code.loc,
                                                arith::CmpIPredicate::eq,
                                                featureLane, code.i64(0))));
    storeElement(code, buffer, element, components);
    return;
  }
  int64_t features = program.info(value).numComponents();
  Value base =
      b.create<arith::MulIOp>(code.loc, element, code.i64(features));
  int64_t width = program.gpuFeatureVectorWidth(features);
  for (int64_t part = 0, e = components.size(); part < e; part += width) {
    auto [feature, valid] = splitFeature(code, part, features);
    OpBuilder::InsertionGuard partGuard(b);
    storeIf(both(group, valid));
    Value at = b.create<arith::AddIOp>(code.loc, base, feature);
    if (width == 1) {
      code.store(components[part], buffer, at);
      continue;
    }
    Value vector = b.create<LLVM::PoisonOp>(
        code.loc, VectorType::get({width}, program.elementType));
    for (int64_t v = 0; v < width; ++v)
      vector = b.create<LLVM::InsertElementOp>(
          code.loc, vector, components[part + v],
          b.create<arith::ConstantIntOp>(code.loc, v, 32));
    code.storeVector(vector, buffer, at, /*alignedToVector=*/true);
  }
}

/// Segment values used by the rows of a vector body: one vector per
/// component, every lane the same (values of a vector of segments already
/// are vectors).
static Components splatComponents(KernelCodeBuilder &code,
                                  const Components &values, int64_t lanes) {
  if (lanes == 1)
    return values;
  Components result;
  for (Value value : values)
    result.push_back(
        isa<VectorType>(value.getType()) ? value : code.splat(value, lanes));
  return result;
}

/// Splats a single component over `n` (elementwise ops on a scalar).
static Components broadcast(const Components &values, int64_t n) {
  if (static_cast<int64_t>(values.size()) == n)
    return values;
  return Components(n, values.front());
}

/// The identity of `kind` (0, -inf, +inf) as a scalar or vector constant.
static Value identityValue(OpBuilder &b, Location loc,
                           arith::AtomicRMWKind kind, Type type) {
  auto vector = dyn_cast<VectorType>(type);
  TypedAttr scalar = arith::getIdentityValueAttr(
      kind, vector ? vector.getElementType() : type, b, loc);
  if (!vector)
    return b.create<arith::ConstantOp>(loc, scalar);
  return b.create<arith::ConstantOp>(loc,
                                     SplatElementsAttr::get(vector, scalar));
}

Components SegmentProgramEmitter::elementwise(OpBuilder &b, Location loc,
                                              Operation *op,
                                              ArrayRef<Components> operands) {
  if (auto shapeChange = dyn_cast<ComponentOpInterface>(op))
    return buildHeld(b, loc, op, op->getOperand(0), operands,
                     shapeChange.getComponentCombiningKind(),
                     [&](ArrayRef<Components> held) {
                       SmallVector<Value> result =
                           shapeChange.buildComponents(b, loc, held.front());
                       return Components(result.begin(), result.end());
                     });
  int64_t n = 1;
  for (const Components &operand : operands)
    n = std::max<int64_t>(n, operand.size());
  Components results;
  for (int64_t c = 0; c < n; ++c) {
    SmallVector<Value, 3> args;
    for (const Components &operand : operands)
      args.push_back(broadcast(operand, n)[c]);
    Value result = buildElementwiseOnComponents(b, loc, op, args);
    results.push_back(result);
  }
  return results;
}


Components SegmentProgramEmitter::buildRowCode(
    OpBuilder &b, Location loc, Operation *segmentOp,
    function_ref<Components(Value)> rowValue,
    function_ref<Components(Value)> segmentValue, bool combinePartsLater) {
  auto op = cast<SegmentOpInterface>(segmentOp);
  SmallVector<Value> segmentOperands = op.getSegmentOperands();
  SmallVector<Value> floatOperands;
  SmallVector<Components> storage;
  for (Value operand : op->getOperands()) {
    if (!isa<FloatType>(getElementTypeOrSelf(operand.getType())))
      continue;
    floatOperands.push_back(operand);
    storage.push_back(llvm::is_contained(segmentOperands, operand)
                          ? segmentValue(operand)
                          : rowValue(operand));
  }
  // A dot or a norm of split rows combines its lanes' parts as its rows
  // combine (a sum).
  return buildHeld(b, loc, op, floatOperands, storage, op.getCombiningKind(),
                   [&](ArrayRef<Components> held) {
                     SmallVector<ValueRange> operands(held.begin(),
                                                      held.end());
                     SmallVector<Value> result =
                         op.buildRowComponents(b, loc, operands);
                     return Components(result.begin(), result.end());
                   },
                   /*combineParts=*/!combinePartsLater);
}

bool SegmentProgramEmitter::combinesLanesAfterRows(Operation *op) const {
  if (!featureLane || isHeldSplit(op->getResult(0)))
    return false;
  return llvm::any_of(op->getOperands(),
                      [&](Value operand) { return isHeldSplit(operand); });
}

Components SegmentProgramEmitter::buildHeld(
    OpBuilder &b, Location loc, Operation *op, ArrayRef<Value> operandValues,
    ArrayRef<Components> operands, std::optional<arith::AtomicRMWKind> kind,
    function_ref<Components(ArrayRef<Components>)> build, bool combineParts) {
  if (!featureLane)
    return build(operands);
  bool splitOperand = llvm::any_of(
      operandValues, [&](Value value) { return isHeldSplit(value); });
  Value result = op->getResult(0);
  if (isHeldSplit(result) && !splitOperand)
    // A broadcast of a value every lane holds.
    return Components(heldComponents(result), operands.front().front());
  if (!splitOperand || isHeldSplit(result))
    return build(operands);
  assert(kind && "split rows combine into one value by a known kind");
  // Each lane's part, its padding the combine's identity, then the lanes.
  KernelCodeBuilder code(b, loc);
  SmallVector<Components> parts(operands.begin(), operands.end());
  for (auto [value, components] : llvm::zip_equal(operandValues, parts)) {
    if (!isHeldSplit(value))
      continue;
    int64_t features = program.info(value).numComponents();
    for (auto [part, component] : llvm::enumerate(components))
      if (Value valid = splitFeature(code, part, features).second)
        component = b.create<arith::SelectOp>(
            loc, valid, component,
            identityValue(b, loc, *kind, component.getType()));
  }
  Components combined = build(parts);
  if (combineParts)
    for (Value &value : combined)
      value = combineLanes(b, loc, value, *kind);
  return combined;
}

Components SegmentProgramEmitter::loadRowInput(OpBuilder &b, Location loc,
                                               Value argument, Value row) {
  KernelCodeBuilder code(b, loc);
  return loadElement(code, bufferOf(argument), program.elementType, row,
                     program.info(argument).numComponents());
}

Components SegmentProgramEmitter::segmentValue(OpBuilder &b, Location loc,
                                               Value value) {
  auto it = segmentValues.find(value);
  if (it != segmentValues.end())
    return it->second;
  KernelCodeBuilder code(b, loc);
  Type elementType = program.elementType;
  Components result;
  if (auto it = staged.find(value); it != staged.end()) {
    result = it->second;
  } else if (isHeldSplit(value) && isa<BlockArgument>(value)) {
    result = loadSplit(code, bufferOf(value), segment,
                       program.info(value).numComponents());
  } else if (isa<BlockArgument>(value)) {
    result = loadElement(code, bufferOf(value), elementType, segment,
                         program.info(value).numComponents());
  } else {
    Operation *op = value.getDefiningOp();
    result = TypeSwitch<Operation *, Components>(op)
                 .Case<arith::ConstantOp>([&](arith::ConstantOp constant) {
                   return Components{
                       b.create<arith::ConstantOp>(loc, constant.getValue())};
                 })
                 .Case<tensor::SplatOp>([&](tensor::SplatOp splat) {
                   return Components(heldComponents(value),
                                     segmentValue(b, loc, splat.getInput())[0]);
                 })
                 .Case<SegmentOpInterface>([&](SegmentOpInterface segmentOp) {
                   Components known = segmentOp.buildFromRowCount(
                       b, loc,
                       b.create<arith::SIToFPOp>(loc, elementType, count));
                   assert(!known.empty() &&
                          "a reduction is read before its pass");
                   return known;
                 })
                 .Default([&](Operation *other) {
                   SmallVector<Components> operands;
                   for (Value operand : other->getOperands())
                     operands.push_back(segmentValue(b, loc, operand));
                   return elementwise(b, loc, other, operands);
                 });
  }
  // With a vector of segments, scalars (constants) become vectors too.
  if (segmentLanes > 1)
    result = splatComponents(code, result, segmentLanes);
  segmentValues[value] = result;
  return result;
}

Components SegmentProgramEmitter::rowValue(OpBuilder &b, Location loc,
                                           Value value, Value row,
                                           int64_t lanes,
                                           DenseMap<Value, Components> &memo) {
  auto it = memo.find(value);
  if (it != memo.end())
    return it->second;
  KernelCodeBuilder code(b, loc);
  // Segment values are emitted before the row loop; vector rows splat them.
  auto segment_ = [&](Value v) {
    return splatComponents(code, segmentValue(b, loc, v), lanes);
  };
  Components result;
  if (program.hasInfo(value) && program.info(value).space != ValueSpace::Row) {
    result = segment_(value);
  } else if (auto it = staged.find(value); it != staged.end()) {
    result = it->second;
  } else if (isHeldSplit(value) && isa<BlockArgument>(value)) {
    result = loadSplit(code, bufferOf(value), row,
                       program.info(value).numComponents());
  } else if (isa<BlockArgument>(value)) {
    result = loadElement(code, bufferOf(value), program.elementType, row,
                         program.info(value).numComponents(), lanes);
  } else {
    Operation *op = value.getDefiningOp();
    auto row_ = [&](Value v) { return rowValue(b, loc, v, row, lanes, memo); };
    result =
        TypeSwitch<Operation *, Components>(op)
            .Case<SegmentOpInterface>([&](SegmentOpInterface map) {
              // A row map: its row operands at this row, its segment
              // operands at the row's segment.
              return buildRowCode(b, loc, map, row_, segment_);
            })
            .Case<tensor::SplatOp>([&](tensor::SplatOp splat) {
              return Components(heldComponents(value),
                                segment_(splat.getInput())[0]);
            })
            .Case<GatherRowsOp>([&](GatherRowsOp gather) {
              // The table's rows at j's values for these rows: scalar
              // loads, one per lane (the runtime checked j's range).
              Value j = bufferOf(gather.getJ());
              Value rows =
                  lanes == 1
                      ? code.load(j, b.getI32Type(), row)
                      : code.loadVector(j, b.getI32Type(), row, lanes);
              Type wide = lanes == 1 ? Type(b.getI64Type())
                                     : VectorType::get({lanes}, b.getI64Type());
              rows = b.create<arith::ExtSIOp>(loc, wide, rows);
              auto table = cast<RankedTensorType>(gather.getTable().getType());
              int64_t components = 1;
              for (int64_t d : table.getShape().drop_front())
                components *= d;
              if (isHeldSplit(value))
                return loadSplit(code, bufferOf(gather.getTable()), rows,
                                 components);
              return loadElement(code, bufferOf(gather.getTable()),
                                 program.elementType, rows, components);
            })
            .Case<ScatterSumOp>([&](ScatterSumOp scatter) {
              // The kernel's part of the sum: the rows; the runtime adds
              // them by j.
              return row_(scatter.getX());
            })
            .Default([&](Operation *other) {
              SmallVector<Components> operands;
              for (Value operand : other->getOperands())
                operands.push_back(row_(operand));
              return elementwise(b, loc, other, operands);
            });
  }
  memo[value] = result;
  return result;
}

void SegmentProgramEmitter::emitSegment(OpBuilder &b, Location loc,
                                        Value segmentValue_, Value rowCount,
                                        const RowLoopBuilder &rowLoop,
                                        const CombineBuilder &combine,
                                        Value writeSegmentOutputs,
                                        Value rowOutputMask_) {
  segment = segmentValue_;
  count = rowCount;
  rowOutputMask = rowOutputMask_;
  auto segmentVector = dyn_cast<VectorType>(segment.getType());
  segmentLanes = segmentVector ? segmentVector.getNumElements() : 1;
  segmentValues.clear();
  KernelCodeBuilder code(b, loc);
  Type elementType = program.elementType;
  Block &body = program.func.getBody().front();
  Operation *terminator = body.getTerminator();

  for (pass = 0; pass < program.numPasses; ++pass) {
    // What this pass computes: reductions whose inputs are ready now, and
    // row outputs first computable now.
    SmallVector<Operation *> reductions;
    for (Operation &op : body.without_terminator())
      if (isReductionOp(&op) && program.info(op.getResult(0)).pass == pass + 1)
        reductions.push_back(&op);
    SmallVector<unsigned> rowOutputs;
    for (auto [i, result] : llvm::enumerate(terminator->getOperands()))
      if (program.info(result).space == ValueSpace::Row &&
          program.info(result).pass == pass)
        rowOutputs.push_back(i);

    if (!rowLoop) {
      // An empty segment: every reduction is 0.
      for (Operation *op : reductions)
        segmentValues[op->getResult(0)] = Components(
            heldComponents(op->getResult(0)), code.zero(elementType));
      continue;
    }

    // Segment values the rows of this pass read are computed before the
    // loop, so that they dominate it.
    SmallVector<Value> rowRoots;
    for (Operation *op : reductions)
      llvm::append_range(rowRoots, op->getOperands());
    for (unsigned i : rowOutputs)
      rowRoots.push_back(terminator->getOperand(i));
    SmallVector<Value> worklist(rowRoots);
    DenseSet<Value> seen;
    while (!worklist.empty()) {
      Value value = worklist.pop_back_val();
      if (!seen.insert(value).second || !program.hasInfo(value))
        continue;
      const SegmentProgram::Info &info = program.info(value);
      if (info.space == ValueSpace::Size)
        continue;
      if (info.space == ValueSpace::Segment ||
          info.space == ValueSpace::Scalar) {
        (void)segmentValue(b, loc, value);
        continue;
      }
      if (Operation *op = value.getDefiningOp())
        llvm::append_range(worklist, op->getOperands());
    }

    SmallVector<Value> init;
    for (Operation *op : reductions)
      // One accumulator per component of the reduction's per-segment
      // result, from its combining kind's identity.
      init.append(heldComponents(op->getResult(0)),
                  arith::getIdentityValue(
                      cast<SegmentOpInterface>(op).getCombiningKind(),
                      elementType, b, loc));
    SmallVector<Value> totals = rowLoop(
        b, loc, init,
        [&](OpBuilder &lb, Location ll, Value row, int64_t lanes,
            Value laneMask, ValueRange acc) {
          DenseMap<Value, Components> memo;
          SmallVector<Value> next;
          unsigned position = 0;
          for (Operation *op : reductions) {
            auto reduction = cast<SegmentOpInterface>(op);
            KernelCodeBuilder local(lb, ll);
            Components terms = buildRowCode(
                lb, ll, reduction,
                [&](Value v) -> Components {
                  return rowValue(lb, ll, v, row, lanes, memo);
                },
                [&](Value v) -> Components {
                  return splatComponents(local, segmentValue(lb, ll, v),
                                         lanes);
                },
                /*combinePartsLater=*/true);
            arith::AtomicRMWKind kind = reduction.getCombiningKind();
            for (Value term : terms) {
              // Masked-off lanes add the identity.
              if (laneMask)
                term = lb.create<arith::SelectOp>(
                    ll, laneMask, term,
                    identityValue(lb, ll, kind, term.getType()));
              next.push_back(
                  arith::getReductionOp(kind, lb, ll, acc[position++], term));
            }
          }
          KernelCodeBuilder local(lb, ll);
          for (unsigned i : rowOutputs) {
            Value output = terminator->getOperand(i);
            Components value = rowValue(lb, ll, output, row, lanes, memo);
            if (rowOutputMask)
              for (Value &component : value)
                component =
                    lb.create<arith::SelectOp>(ll, rowOutputMask, component,
                                               local.zero(component.getType()));
            if (rowOutputSink) {
              rowOutputSink(i, value);
              continue;
            }
            // Masked lanes (rows past the segment, which other threads may
            // write) are not stored.
            storeHeld(local, output, outputBuffer(i), row, value, lanes,
                      laneMask);
          }
          return next;
        },
        /*storesRows=*/!rowOutputs.empty());

    // Finalize: combine partial sums, then the per-segment epilogues.
    unsigned position = 0;
    Value countValue = b.create<arith::SIToFPOp>(loc, elementType, count);
    Value hasRows = b.create<arith::CmpIOp>(loc, arith::CmpIPredicate::sgt,
                                            count, code.i64(0));
    Value safeCount = b.create<arith::SelectOp>(
        loc, hasRows, countValue,
        b.create<arith::ConstantOp>(loc, b.getFloatAttr(elementType, 1.0)));
    for (Operation *op : reductions) {
      auto reduction = cast<SegmentOpInterface>(op);
      SmallVector<Value> combined;
      for (int64_t c = 0, e = heldComponents(op->getResult(0)); c < e; ++c)
        combined.push_back(
            combine(b, loc, totals[position++], reduction.getCombiningKind()));
      SmallVector<Value> result =
          reduction.buildEpilogue(b, loc, combined, safeCount, hasRows);
      segmentValues[op->getResult(0)] = Components(result.begin(), result.end());
    }
  }

  // Segment outputs.
  SmallVector<std::tuple<unsigned, Value, Components>> segmentOutputs;
  for (auto [i, result] : llvm::enumerate(terminator->getOperands()))
    if (program.info(result).space == ValueSpace::Segment)
      segmentOutputs.push_back({i, result, segmentValue(b, loc, result)});
  if (segmentOutputs.empty())
    return;
  OpBuilder writer = b;
  if (writeSegmentOutputs) {
    auto ifWriter = b.create<scf::IfOp>(loc, writeSegmentOutputs,
                                        /*withElse=*/false);
    writer = ifWriter.getThenBodyBuilder();
  }
  KernelCodeBuilder store(writer, loc);
  for (auto &[i, result, components] : segmentOutputs)
    storeHeld(store, result, outputBuffer(i), segment, components,
              /*lanes=*/1, /*laneMask=*/Value());
}

void SegmentProgramEmitter::emitZeroRowOutputs(OpBuilder &b, Location loc,
                                               Value row, Value laneMask) {
  KernelCodeBuilder code(b, loc);
  Operation *terminator = program.func.getBody().front().getTerminator();
  for (auto [i, result] : llvm::enumerate(terminator->getOperands())) {
    const SegmentProgram::Info &info = program.info(result);
    if (info.space != ValueSpace::Row)
      continue;
    Components zeros(heldComponents(result), code.zero(program.elementType));
    storeHeld(code, result, outputBuffer(i), row, zeros, /*lanes=*/1,
              laneMask);
  }
}

SmallVector<SegmentProgramEmitter::HeldAccumulator>
SegmentProgramEmitter::heldAccumulators(OpBuilder &b, Location loc,
                                        unsigned forPass) {
  KernelCodeBuilder code(b, loc);
  SmallVector<HeldAccumulator> held;
  int64_t offset = 0;
  for (Operation &op : program.func.getBody().front().without_terminator()) {
    if (!isReductionOp(&op) || program.info(op.getResult(0)).pass != forPass + 1)
      continue;
    Value result = op.getResult(0);
    int64_t components = program.info(result).numComponents();
    if (isHeldSplit(result)) {
      for (int64_t part = 0, e = heldComponents(result); part < e; ++part) {
        auto [feature, valid] = splitFeature(code, part, components);
        held.push_back(
            {b.create<arith::AddIOp>(loc, feature, code.i64(offset)), valid,
             /*split=*/true});
      }
    } else {
      for (int64_t c = 0; c < components; ++c)
        held.push_back({code.i64(offset + c), Value()});
    }
    offset += components;
  }
  return held;
}

SmallVector<arith::AtomicRMWKind>
SegmentProgramEmitter::heldCombiningKinds(unsigned forPass) const {
  SmallVector<arith::AtomicRMWKind> kinds;
  for (Operation &op : program.func.getBody().front().without_terminator())
    if (isReductionOp(&op) && program.info(op.getResult(0)).pass == forPass + 1)
      kinds.append(heldComponents(op.getResult(0)),
                   cast<SegmentOpInterface>(op).getCombiningKind());
  return kinds;
}

SmallVector<Value> SegmentProgramEmitter::combineLaneParts(OpBuilder &b,
                                                           Location loc,
                                                           ValueRange totals) {
  SmallVector<Value> combined(totals);
  if (!featureLane)
    return combined;
  unsigned position = 0;
  for (Operation &op : program.func.getBody().front().without_terminator()) {
    if (!isReductionOp(&op) || program.info(op.getResult(0)).pass != pass + 1)
      continue;
    int64_t held = heldComponents(op.getResult(0));
    if (combinesLanesAfterRows(&op))
      for (int64_t c = 0; c < held; ++c)
        combined[position + c] =
            combineLanes(b, loc, combined[position + c],
                         cast<SegmentOpInterface>(op).getCombiningKind());
    position += held;
  }
  return combined;
}
