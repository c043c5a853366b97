//===- autograd.h - the one autograd implementation of segops' operators -*- C++ -*-===//
//
// Every differentiable segops operator (a library op's level, a jit_call
// program's level) is differentiated the same way: its backward is the next
// level, called on the float arguments it reads, the outputs it reads
// (OperatorLevel::savedResults), the output cotangents, idx and S. Only
// where the arguments sit on the dispatcher's stack differs, and that is the
// one thing an operator kind says (LevelCall).
//
//===----------------------------------------------------------------------===//

#ifndef SEGOPS_PYTHON_AUTOGRAD_H
#define SEGOPS_PYTHON_AUTOGRAD_H

#include "torch_ops.h"

#include <torch/csrc/autograd/function.h>

#include <functional>
#include <vector>

namespace segops_torch {

/// One call of a differentiable level, read from the dispatcher's stack by
/// its operator kind.
struct LevelCall {
  /// Every tensor argument in order, idx at `idxPosition`; integer ones
  /// other than idx (second indices) get no gradient.
  std::vector<at::Tensor> tensors;
  size_t idxPosition = 0;
  c10::SymInt numSegments;
  /// The backward node's name (what autograd's graph shows).
  std::string nodeName;
  /// The level (which float arguments its backward reads), or null: all.
  const OperatorLevel *level = nullptr;
  /// Puts a replacement for idx on the stack (the int32 index narrowed once
  /// for the forward and every backward level).
  std::function<void(torch::jit::Stack &, at::Tensor)> replaceIndex;
  /// Calls the next level on `tensors` (the saved arguments, idx at
  /// `idxPosition`, then the saved outputs it reads and the cotangents) and
  /// returns its outputs: the gradients of the float arguments (saved
  /// outputs included), in order.
  std::function<std::vector<at::Tensor>(std::vector<at::Tensor> tensors,
                                        size_t idxPosition,
                                        const c10::SymInt &numSegments)>
      callNext;
};

/// The autograd kernel's work for `call` on `stack`: runs the level below
/// autograd and, where a float argument requires a gradient, records the
/// backward node on its outputs (every tensor it returned).
void differentiate(const c10::OperatorHandle &op, c10::DispatchKeySet keys,
                   torch::jit::Stack *stack, LevelCall call);

/// Runs the level below autograd: what an autograd kernel does when no
/// argument requires a gradient (checked first, so that such calls build
/// no LevelCall: no allocation).
void runBelowAutograd(const c10::OperatorHandle &op, c10::DispatchKeySet keys,
                      torch::jit::Stack *stack);

/// Whether a gradient is wanted of any of `tensors` (grad mode on).
inline bool wantsGradient(const c10::List<at::Tensor> &tensors) {
  if (!at::GradMode::is_enabled())
    return false;
  for (size_t i = 0; i < tensors.size(); ++i)
    if (tensors.get(i).requires_grad())
      return true;
  return false;
}

} // namespace segops_torch

#endif // SEGOPS_PYTHON_AUTOGRAD_H
