//===- segops_deploy.h - registering an exported model's segops programs ---===//
//
// A C++ process that runs an AOTInductor package of a segops model loads
// libsegops_ops.so (linked, or dlopen'ed), which defines every segops
// operator, and registers the jit_call programs the package calls: the
// directory segops.export.package wrote beside it (model.segops/). This is
// the one call for that, through the dispatcher (nothing to link but
// libtorch); setting SEGOPS_PROGRAMS=<directory> does the same lazily.
//
//===----------------------------------------------------------------------===//

#ifndef SEGOPS_DEPLOY_H
#define SEGOPS_DEPLOY_H

#include <ATen/core/dispatch/Dispatcher.h>

#include <cstdint>
#include <string>

namespace segops {

/// Registers the program levels under `directory` with segops::jit_call;
/// returns how many. Throws c10::Error if libsegops_ops.so is not loaded or
/// the directory holds no programs.
inline int64_t loadPrograms(const std::string &directory) {
  static auto op = c10::Dispatcher::singleton()
                       .findSchemaOrThrow("segops::load_programs", "")
                       .typed<int64_t(std::string)>();
  return op.call(directory);
}

} // namespace segops

#endif // SEGOPS_DEPLOY_H
