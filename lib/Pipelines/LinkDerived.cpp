//===- LinkDerived.cpp - derived functions linked into a kernel -----------===//

#include "segops/Pipelines/LinkDerived.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/OperationSupport.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "segops/Pipelines/Pipelines.h"

using namespace mlir;

/// Makes `derivative` take the results of `primal` (on its leading
/// arguments, which are primal's) as new trailing arguments: primal's body
/// is cloned at derivative's entry, derivative's own recomputation of it
/// (equal ops on equal operands, in order) is replaced by the clone, and the
/// clone's results by the new arguments.
static void passForwardResults(func::FuncOp primal, func::FuncOp derivative) {
  Block &entry = derivative.getBody().front();
  IRMapping mapping;
  for (auto [from, to] :
       llvm::zip(primal.getArguments(), entry.getArguments()))
    mapping.map(from, to);
  OpBuilder builder = OpBuilder::atBlockBegin(&entry);
  SmallVector<Operation *> clones;
  Block &primalBody = primal.getBody().front();
  for (Operation &op : primalBody.without_terminator())
    clones.push_back(builder.clone(op, mapping));
  for (Operation *clone : clones) {
    for (Operation &op : llvm::make_early_inc_range(
             llvm::make_range(std::next(clone->getIterator()), entry.end()))) {
      if (llvm::is_contained(clones, &op) ||
          !OperationEquivalence::isEquivalentTo(
              clone, &op, OperationEquivalence::IgnoreLocations))
        continue;
      op.replaceAllUsesWith(clone);
      op.erase();
    }
  }
  for (Value result : primalBody.getTerminator()->getOperands()) {
    Value recomputed = mapping.lookup(result);
    unsigned position = derivative.getNumArguments();
    derivative.insertArgument(position, recomputed.getType(), {},
                              derivative.getLoc());
    if (!isa<BlockArgument>(recomputed))
      recomputed.replaceAllUsesWith(derivative.getArgument(position));
  }
  for (Operation *clone : llvm::reverse(clones))
    if (isOpTriviallyDead(clone))
      clone->erase();
}

func::FuncOp seg::lookupDerivedFunction(ModuleOp derived, StringRef function,
                                        unsigned level) {
  return derived.lookupSymbol<func::FuncOp>(
      derivativeFunctionName(function, level));
}

LogicalResult seg::linkDerivedFunction(ModuleOp module, ModuleOp derived,
                                       StringRef function, unsigned level,
                                       StringRef symbol, bool takesForward) {
  func::FuncOp derivative = lookupDerivedFunction(derived, function, level);
  if (!derivative)
    return module.emitError() << "no function '"
                              << derivativeFunctionName(function, level)
                              << "' after seg-derive";
  if (takesForward && level == 0)
    return module.emitError()
           << "@" << symbol
           << ": only a derivative (level 1 or more) takes its forward's "
              "results";
  if (takesForward)
    passForwardResults(lookupDerivedFunction(derived, function, 0),
                       derivative);
  auto builder = OpBuilder::atBlockEnd(module.getBody());
  auto linked = cast<func::FuncOp>(builder.clone(*derivative));
  linked.setSymName(symbol);
  linked.setPrivate();
  return success();
}
