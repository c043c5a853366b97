//===- jit_call.h - segops::jit_call's programs -------------------*- C++ -*-===//

#ifndef SEGOPS_PYTHON_JIT_CALL_H
#define SEGOPS_PYTHON_JIT_CALL_H

#include "torch_ops.h"

#include <functional>
#include <string>

namespace segops_torch {

/// One registered program level: the level (its one variant, "jit"), and
/// where idx is among its tensor arguments.
struct JitProgram {
  std::shared_ptr<const OperatorLevel> level;
  size_t idxPosition = 0;
};

/// compile(program) compiles a level and registers it (registerJitProgram),
/// or raises why it cannot.
using JitCompileHook = std::function<void(const std::string &program)>;
void setJitCompileHook(JitCompileHook hook);

void registerJitProgram(const std::string &name, JitProgram program);

/// Defines segops::jit_call in `library`, with its CPU, CUDA (where built)
/// and autograd kernels.
void defineJitCall(torch::Library &library);

} // namespace segops_torch

#endif // SEGOPS_PYTHON_JIT_CALL_H
