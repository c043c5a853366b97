//===- Registration.h - everything segops registers -------------*- C++ -*-===//
//
// One place that lists the dialects, passes, pipelines and translations the
// segops tools need, shared by seg-opt and seg-compile.
//
//===----------------------------------------------------------------------===//

#ifndef SEGOPS_REGISTRATION_H
#define SEGOPS_REGISTRATION_H

namespace mlir {
class DialectRegistry;
namespace seg {

/// The seg dialect, the upstream dialects its pipelines produce, the NVVM
/// target interface and the LLVM IR translations.
void registerSegDialects(DialectRegistry &registry);

/// seg passes, the upstream passes the pipelines use, and the pipelines.
void registerSegPassesAndPipelines();

} // namespace seg
} // namespace mlir

#endif // SEGOPS_REGISTRATION_H
