//===- autograd.cpp - the one autograd implementation of segops' operators -===//

#include "autograd.h"

#include <ATen/Parallel.h>
#include <torch/csrc/autograd/functions/utils.h>

namespace segops_torch {
namespace {
using torch::autograd::Node;
using torch::autograd::SavedVariable;
using torch::autograd::variable_list;

/// The backward of one level: the next level on the saved arguments, the
/// saved outputs it reads and the output cotangents (through the
/// dispatcher, so that it is differentiable in turn: a saved output's
/// gradient flows back through the node that made it).
struct SegmentBackward final : Node {
  std::string nodeName;
  std::vector<SavedVariable> tensors; // idx at idxPosition
  std::vector<bool> isFloat;          // per tensor: gets a gradient
  std::vector<SavedVariable> results; // OperatorLevel::savedResults
  size_t idxPosition = 0;
  c10::SymInt numSegments;
  decltype(LevelCall::callNext) callNext;

  variable_list apply(variable_list &&grads) override {
    std::vector<at::Tensor> inputs;
    for (const SavedVariable &saved : tensors)
      inputs.push_back(saved.unpack());
    for (const SavedVariable &saved : results)
      inputs.push_back(saved.unpack(nodePointer(this)));
    for (size_t i = 0; i < grads.size(); ++i)
      inputs.push_back(grads[i].defined() ? grads[i]
                                          : input_metadata(i).zeros_like());
    std::vector<at::Tensor> result =
        callNext(std::move(inputs), idxPosition, numSegments);
    // One gradient per argument but idx (the edges' order); a second index
    // gets none.
    variable_list gradients;
    size_t next = 0;
    for (size_t i = 0; i < tensors.size(); ++i) {
      if (i == idxPosition)
        continue;
      gradients.push_back(!isFloat[i] || next == result.size()
                              ? at::Tensor()
                              : result[next++]);
    }
    return gradients;
  }

  // As PyTorch's own nodes do: a second backward through the node then
  // fails in unpack with PyTorch's message, rather than calling the next
  // level on missing tensors.
  void release_variables() override {
    for (SavedVariable &saved : tensors)
      saved.reset_data();
    for (SavedVariable &saved : results)
      saved.reset_data();
  }
  std::string name() const override { return nodeName; }
};

/// The keys of `tensor` below autograd: only its backend's for a plain
/// tensor; more for a fake, functional or batched one (a trace's).
c10::DispatchKeySet dataKeys(const at::Tensor &tensor) {
  return tensor.key_set() - c10::autograd_dispatch_keyset_with_ADInplaceOrView -
         c10::autocast_dispatch_keyset;
}

/// `idx` narrowed to int32 and checked, if it is an int64 index of plain
/// CPU tensors (not fake, functional or batched ones, whose data cannot be
/// read here) that passes the check; else an undefined tensor, and the
/// forward's kernel narrows idx (or reports what is wrong with it) as
/// without autograd.
at::Tensor narrowedForBackward(const at::Tensor &idx,
                               const c10::SymInt &numSegments) {
  std::optional<int64_t> segments = numSegments.maybe_as_int();
  if (!segments || idx.scalar_type() != at::kLong || idx.dim() != 1 ||
      dataKeys(idx) != c10::DispatchKeySet(c10::DispatchKey::CPU))
    return {};
  return narrowedIndex(idx, *segments, at::get_num_threads());
}

/// A row-less stand-in of `tensor` (same dtype and features): what is saved
/// of an argument the backward never reads, in place of a plain tensor. A
/// traced one (torch.export's) is saved itself: a tensor made here would
/// be a constant the trace cannot place.
at::Tensor standIn(const at::Tensor &tensor) {
  c10::DispatchKeySet keys = dataKeys(tensor);
  if (keys != c10::DispatchKeySet(c10::DispatchKey::CPU) &&
      keys != c10::DispatchKeySet(c10::DispatchKey::CUDA))
    return tensor;
  c10::SymDimVector shape(tensor.sym_sizes().begin(), tensor.sym_sizes().end());
  shape[0] = 0;
  return tensor.new_empty_symint(shape);
}
} // namespace

void runBelowAutograd(const c10::OperatorHandle &op, c10::DispatchKeySet keys,
                      torch::jit::Stack *stack) {
  at::AutoDispatchBelowADInplaceOrView guard;
  op.redispatchBoxed(keys & c10::after_ADInplaceOrView_keyset, stack);
}

void differentiate(const c10::OperatorHandle &op, c10::DispatchKeySet keys,
                   torch::jit::Stack *stack, LevelCall call) {
  std::vector<at::Tensor> floats; // the edges: every argument but idx
  bool requiresGrad = false;
  for (size_t i = 0; i < call.tensors.size(); ++i) {
    if (i == call.idxPosition)
      continue;
    floats.push_back(call.tensors[i]);
    requiresGrad |= call.tensors[i].requires_grad();
  }
  requiresGrad &= at::GradMode::is_enabled();
  if (requiresGrad) {
    // The backward reads the int32 index the forward's kernel reads: narrow
    // it once here, for the forward and every backward level.
    at::Tensor &idx = call.tensors[call.idxPosition];
    if (at::Tensor narrowed = narrowedForBackward(idx, call.numSegments);
        narrowed.defined()) {
      idx = narrowed;
      call.replaceIndex(*stack, std::move(narrowed));
    }
  }
  size_t outputsFrom = stack->size() - op.schema().arguments().size();
  runBelowAutograd(op, keys, stack);
  if (!requiresGrad)
    return;

  auto node = makeNode<SegmentBackward>();
  auto *backward = static_cast<SegmentBackward *>(node.get());
  backward->nodeName = std::move(call.nodeName);
  backward->idxPosition = call.idxPosition;
  backward->numSegments = call.numSegments;
  backward->callNext = std::move(call.callNext);
  const Variant *variant =
      call.level && !floats.empty()
          ? findVariant(*call.level, variantKey(floats.front()))
          : nullptr;
  size_t argument = 0;
  for (size_t i = 0; i < call.tensors.size(); ++i) {
    const at::Tensor &tensor = call.tensors[i];
    bool saved = i == call.idxPosition || !variant ||
                 variant->savedForBackward[argument];
    if (i != call.idxPosition)
      ++argument;
    backward->tensors.emplace_back(saved ? tensor : standIn(tensor),
                                   /*is_output=*/false);
    backward->isFloat.push_back(at::isFloatingType(tensor.scalar_type()));
  }
  node->set_next_edges(
      torch::autograd::collect_next_edges(at::TensorList(floats)));
  std::vector<at::Tensor> outputs;
  for (size_t i = outputsFrom; i < stack->size(); ++i) {
    c10::IValue &output = (*stack)[i];
    if (output.isTensor())
      outputs.push_back(output.toTensor());
    else
      for (const at::Tensor &tensor : output.toTensorVector())
        outputs.push_back(tensor);
  }
  for (at::Tensor &output : outputs)
    torch::autograd::set_history(output, node);
  // Saved after set_history, as outputs: the node holds them without
  // holding itself.
  if (call.level)
    for (size_t k : call.level->savedResults)
      backward->results.emplace_back(outputs.at(k), /*is_output=*/true);
}

} // namespace segops_torch
