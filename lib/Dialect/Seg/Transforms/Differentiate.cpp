//===- Differentiate.cpp - reverse-mode differentiation of seg functions --===//

#include "segops/Dialect/Seg/Transforms/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/SymbolTable.h"
#include "segops/Dialect/Seg/Analysis/ValueSpaces.h"
#include "segops/Dialect/Seg/IR/SegOps.h"
#include "llvm/ADT/BitVector.h"

namespace mlir {
namespace seg {
#define GEN_PASS_DEF_SEGDIFFERENTIATE
#include "segops/Dialect/Seg/Transforms/Passes.h.inc"
} // namespace seg
} // namespace mlir

using namespace mlir;
using namespace mlir::seg;

/// Values that carry derivatives: floating-point tensors and scalars.
static bool isDifferentiableType(Type type) {
  if (auto tensor = dyn_cast<RankedTensorType>(type))
    return isa<FloatType>(tensor.getElementType());
  return isa<FloatType>(type);
}

/// The values that some result of `func` depends on.
static DenseSet<Value> valuesAffectingResults(func::FuncOp func) {
  DenseSet<Value> affecting;
  SmallVector<Value> worklist(
      func.getBody().front().getTerminator()->getOperands());
  while (!worklist.empty()) {
    Value value = worklist.pop_back_val();
    if (!affecting.insert(value).second)
      continue;
    if (Operation *op = value.getDefiningOp())
      llvm::append_range(worklist, op->getOperands());
  }
  return affecting;
}

/// The arguments to differentiate: `wrt`, or by default every
/// floating-point tensor argument, except one that no result depends on and
/// whose space (per row or per segment) nothing tells: its zero gradient
/// could not be given a length.
static SmallVector<unsigned> chooseArguments(func::FuncOp func,
                                             ArrayRef<unsigned> wrt) {
  if (!wrt.empty())
    return SmallVector<unsigned>(wrt);
  FunctionType type = func.getFunctionType();
  SmallVector<unsigned> chosen;
  DenseSet<Value> affecting = valuesAffectingResults(func);
  for (unsigned i = 0; i < type.getNumInputs(); ++i) {
    if (!isDifferentiableType(type.getInput(i)))
      continue;
    auto tensor = dyn_cast<RankedTensorType>(type.getInput(i));
    bool placeable = affecting.contains(func.getArgument(i)) ||
                     func.getArgAttr(i, kSpaceAttrName) ||
                     (tensor && tensor.getRank() == 3);
    if (placeable)
      chosen.push_back(i);
  }
  return chosen;
}

/// Records on the gradient function's arguments (and the primal's) whether
/// each lives per row or per segment, as far as the primal function tells: a
/// zero gradient may leave an argument connected to no seg op in the
/// gradient function.
static void annotateSpaces(func::FuncOp primal, func::FuncOp grad,
                           ArrayRef<unsigned> differentiableResults) {
  FailureOr<DenseMap<Value, ValueSpace>> spaces = failure();
  {
    // Best effort: a primal that is not a kernel function is not an error
    // here.
    ScopedDiagnosticHandler silence(primal.getContext(),
                                    [](Diagnostic &) { return success(); });
    spaces = inferValueSpaces(
        primal, [&](const Twine &why) { return primal.emitError(why); });
  }
  if (failed(spaces))
    return;
  Builder b(primal.getContext());
  auto annotate = [&](func::FuncOp func, unsigned position, Value value) {
    auto it = spaces->find(value);
    if (it == spaces->end() ||
        (it->second != ValueSpace::Row && it->second != ValueSpace::Segment))
      return;
    func.setArgAttr(position, kSpaceAttrName,
                    b.getStringAttr(stringifyValueSpace(it->second)));
  };
  Block &body = primal.getBody().front();
  for (BlockArgument arg : body.getArguments()) {
    annotate(grad, arg.getArgNumber(), arg);
    // The primal keeps them too: canonicalization may erase the seg ops
    // that told them (a seg result nobody uses).
    annotate(primal, arg.getArgNumber(), arg);
  }
  // The arguments after the primal's (saved results, if any, then
  // cotangents) take the differentiable results in turn: each lives where
  // its result does.
  Operation *terminator = body.getTerminator();
  for (unsigned position = body.getNumArguments();
       position < grad.getNumArguments(); ++position) {
    unsigned k =
        (position - body.getNumArguments()) % differentiableResults.size();
    annotate(grad, position, terminator->getOperand(differentiableResults[k]));
  }
}

/// Marks the saved results `grad` reads (its arguments from `firstSaved`,
/// one per differentiable result) with the result each is, and erases the
/// others: a caller saves only what the gradient reads, and the gradient's
/// own gradient is derived on saved results in turn.
static void keepReadSavedResults(func::FuncOp grad, unsigned firstSaved,
                                 ArrayRef<unsigned> differentiableResults) {
  Builder b(grad.getContext());
  llvm::BitVector unread(grad.getNumArguments());
  for (auto [k, result] : llvm::enumerate(differentiableResults)) {
    unsigned position = firstSaved + k;
    if (grad.getArgument(position).use_empty())
      unread.set(position);
    else
      grad.setArgAttr(position, kSavedResultAttrName,
                      b.getI64IntegerAttr(result));
  }
  grad.eraseArguments(unread);
  grad->setAttr(kSavedResultsAttrName, b.getUnitAttr());
}

namespace {
/// The adjoint of every value reached so far in the reverse sweep; a value
/// used several times accumulates the sum of its uses' contributions.
class AdjointMap {
public:
  explicit AdjointMap(OpBuilder &builder) : builder(builder) {}

  Value lookup(Value value) const { return adjoints.lookup(value); }

  void accumulate(Location loc, Value value, Value contribution) {
    Value &slot = adjoints[value];
    slot =
        slot
            ? builder.create<arith::AddFOp>(loc, slot, contribution).getResult()
            : contribution;
  }

private:
  OpBuilder &builder;
  DenseMap<Value, Value> adjoints;
};
} // namespace

FailureOr<func::FuncOp> mlir::seg::differentiateFunction(func::FuncOp func,
                                                         ArrayRef<unsigned> wrt,
                                                         StringRef name,
                                                         bool savedResults) {
  if (func.isExternal() || !func.getBody().hasOneBlock())
    return func.emitError("seg-differentiate needs a function with a body of "
                          "one block");
  savedResults |= func->hasAttr(kSavedResultsAttrName);
  FunctionType type = func.getFunctionType();
  SmallVector<unsigned> chosen = chooseArguments(func, wrt);
  if (chosen.empty())
    return func.emitError() << "seg-differentiate: no argument of '"
                            << func.getSymName()
                            << "' gets a gradient (it has no floating-point "
                               "argument that a result depends on)";
  for (unsigned i : chosen) {
    if (i >= type.getNumInputs())
      return func.emitError()
             << "seg-differentiate: argument #" << i << " does not exist";
    if (!isDifferentiableType(type.getInput(i)))
      return func.emitError() << "seg-differentiate: argument #" << i
                              << " of type " << type.getInput(i)
                              << " is not floating-point and gets no gradient";
  }

  // Signature: the original arguments, (with savedResults) the
  // differentiable results, a cotangent per differentiable result; the
  // gradients of the chosen arguments.
  SmallVector<Type> inputs(type.getInputs());
  SmallVector<unsigned> differentiableResults;
  for (auto [i, resultType] : llvm::enumerate(type.getResults()))
    if (isDifferentiableType(resultType))
      differentiableResults.push_back(i);
  unsigned copies = savedResults ? 2 : 1;
  for (unsigned copy = 0; copy < copies; ++copy)
    for (unsigned i : differentiableResults)
      inputs.push_back(type.getResult(i));
  unsigned cotangentsFrom =
      type.getNumInputs() + (savedResults ? differentiableResults.size() : 0);
  SmallVector<Type> outputs;
  for (unsigned i : chosen)
    outputs.push_back(type.getInput(i));

  OpBuilder builder(func);
  builder.setInsertionPointAfter(func);
  Location loc = func.getLoc();
  auto grad = builder.create<func::FuncOp>(
      loc, name, builder.getFunctionType(inputs, outputs));
  Block *entry = grad.addEntryBlock();
  annotateSpaces(func, grad, differentiableResults);
  builder.setInsertionPointToStart(entry);

  // Recompute the primal values; canonicalization later drops what the
  // reverse sweep does not use.
  Block &body = func.getBody().front();
  IRMapping primal;
  for (auto [arg, newArg] :
       llvm::zip(body.getArguments(), entry->getArguments()))
    primal.map(arg, newArg);
  SmallVector<Operation *> clones;
  // Diagnostics name the primal op: the clones die with `grad` on failure.
  DenseMap<Operation *, Operation *> originals;
  for (Operation &op : body.without_terminator()) {
    clones.push_back(builder.clone(op, primal));
    originals[clones.back()] = &op;
  }

  // Activity: values that depend on a chosen argument.
  DenseSet<Value> active;
  for (unsigned i : chosen)
    active.insert(entry->getArgument(i));
  SmallVector<Operation *> sweep;
  for (Operation *clone : clones) {
    bool anyActive = llvm::any_of(clone->getOperands(), [&](Value operand) {
      return active.contains(operand);
    });
    if (!anyActive)
      continue;
    sweep.push_back(clone);
    for (Value result : clone->getResults())
      if (isDifferentiableType(result.getType()))
        active.insert(result);
  }

  // Seed the results with the cotangent arguments.
  AdjointMap adjoints(builder);
  auto ret = cast<func::ReturnOp>(body.getTerminator());
  SmallVector<Value> recomputedResults;
  for (unsigned resultIndex : differentiableResults)
    recomputedResults.push_back(
        primal.lookupOrDefault(ret.getOperand(resultIndex)));
  for (auto [k, result] : llvm::enumerate(recomputedResults)) {
    if (active.contains(result))
      adjoints.accumulate(loc, result, entry->getArgument(cotangentsFrom + k));
  }

  // The reverse sweep.
  for (Operation *op : llvm::reverse(sweep)) {
    SmallVector<Value> resultAdjoints;
    bool anyAdjoint = false;
    for (Value result : op->getResults()) {
      resultAdjoints.push_back(adjoints.lookup(result));
      anyAdjoint |= resultAdjoints.back() != nullptr;
    }
    if (!anyAdjoint)
      continue; // Zero cotangent: nothing flows back through this op.
    auto rule = dyn_cast<ReverseDifferentiableOpInterface>(op);
    if (!rule) {
      Operation *original = originals.lookup(op);
      original->emitError() << "seg-differentiate: '" << original->getName()
                            << "' has no derivative rule";
      grad.erase();
      return failure();
    }
    SmallVector<Value> operandAdjoints;
    if (failed(rule.buildAdjoints(builder, resultAdjoints, operandAdjoints))) {
      grad.erase();
      return failure();
    }
    for (auto [operand, adjoint] :
         llvm::zip(op->getOperands(), operandAdjoints))
      if (adjoint && active.contains(operand))
        adjoints.accumulate(op->getLoc(), operand, adjoint);
  }

  // The rules (and the primal ops after a result) read the saved results:
  // the recomputation of a result that nothing else uses drops out. A
  // result that is an argument is that argument already.
  if (savedResults)
    for (auto [k, recomputed] : llvm::enumerate(recomputedResults))
      if (recomputed.getDefiningOp())
        recomputed.replaceAllUsesWith(
            entry->getArgument(type.getNumInputs() + k));

  SmallVector<Value> gradients;
  for (unsigned i : chosen) {
    Value arg = entry->getArgument(i);
    Value adjoint = adjoints.lookup(arg);
    gradients.push_back(adjoint ? adjoint
                                : createSplatLike(builder, loc, arg, 0.0));
  }
  builder.create<func::ReturnOp>(loc, gradients);
  if (savedResults)
    keepReadSavedResults(grad, type.getNumInputs(), differentiableResults);
  return grad;
}

namespace {
struct SegDifferentiatePass
    : public seg::impl::SegDifferentiateBase<SegDifferentiatePass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    SmallVector<func::FuncOp> targets;
    for (auto func : module.getOps<func::FuncOp>()) {
      StringRef name = func.getSymName();
      bool selected;
      if (!function.empty())
        selected = name == function;
      else if (!onlySuffix.empty())
        selected = name.ends_with(onlySuffix) && isKernelFunction(func);
      else
        selected = !name.ends_with(suffix) && isKernelFunction(func);
      if (selected)
        targets.push_back(func);
    }
    if (!function.empty() && targets.empty()) {
      module.emitError() << "seg-differentiate: no function named '" << function
                         << "'";
      return signalPassFailure();
    }
    SymbolTable symbols(module);
    for (func::FuncOp func : targets) {
      // Unless asked for by name, a function whose arguments get no
      // gradient (seg.count of idx alone, say) has no derivative to emit.
      if (function.empty() && chooseArguments(func, wrt).empty())
        continue;
      std::string name = (func.getSymName() + suffix).str();
      if (symbols.lookup(name)) {
        func.emitError() << "seg-differentiate: '" << name
                         << "' already exists";
        return signalPassFailure();
      }
      if (failed(differentiateFunction(func, wrt, name, savedResults)))
        return signalPassFailure();
    }
  }

  /// Seg ops, or arguments placed per row or per segment (a derived
  /// function whose seg ops canonicalized away is still one).
  static bool isKernelFunction(func::FuncOp func) {
    if (func.isExternal())
      return false;
    for (unsigned i = 0; i < func.getNumArguments(); ++i)
      if (func.getArgAttr(i, kSpaceAttrName))
        return true;
    bool found = false;
    func.walk(
        [&](Operation *op) { found |= isa<SegDialect>(op->getDialect()); });
    return found;
  }
};
} // namespace
