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

/// A program level over one kernel variant (its float arguments and outputs
/// are the kernel's buffers), idx at `idxPosition` of its tensors, whose
/// errors for bad arguments `validator` raises (if given).
JitProgram makeJitProgram(const std::string &name, Variant variant,
                          size_t idxPosition,
                          OperatorLevel::Validator validator = nullptr);

/// Registers every program level stored under `directory` (one
/// subdirectory per level, as segops.export.package writes them beside an
/// AOTInductor package: program_store.cpp); returns how many. Throws
/// c10::Error naming what is missing or malformed.
int64_t loadPrograms(const std::string &directory);

/// loadPrograms for each directory in SEGOPS_PROGRAMS (':'-separated);
/// jit_call calls it once, on the first program it does not know.
void loadProgramsFromEnvironment();

/// Defines segops::jit_call in `library`, with its CPU, CUDA (where built),
/// autograd and Meta kernels.
void defineJitCall(torch::Library &library);

} // namespace segops_torch

#endif // SEGOPS_PYTHON_JIT_CALL_H
