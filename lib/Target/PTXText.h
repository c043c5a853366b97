//===- PTXText.h - PTX text of kernels, as the NVPTX back end prints it ---===//
//
// Shared by PTX.cpp (joining the PTX of groups of kernels) and
// RegisterCaps.cpp (ptxas's register ladder, which edits the text).
//
//===----------------------------------------------------------------------===//

#ifndef SEGOPS_LIB_TARGET_PTXTEXT_H
#define SEGOPS_LIB_TARGET_PTXTEXT_H

#include "mlir/IR/Location.h"
#include "mlir/Support/LogicalResult.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringRef.h"
#include <string>

namespace mlir {
namespace seg {

/// A PTX module's text: its header (version, target) and each kernel's
/// definition.
struct PTXText {
  llvm::StringRef header;
  llvm::SmallVector<std::pair<llvm::StringRef, llvm::StringRef>>
      kernels; // name, text
};

/// Splits the NVPTX back end's output at the `// .globl NAME` line opening
/// each kernel; fails on text holding anything else between kernels.
FailureOr<PTXText> splitPTX(llvm::StringRef ptx);

/// Runs `ptxas` (a path, or a name looked up on PATH) for `chip` over `ptx`
/// and sets the kernels' register caps (`.maxnreg`): a kernel ptxas spills
/// in gets caps from the occupancy its registers allow down, two a step,
/// until one spills nothing or it has 255 registers; a kernel ptxas leaves
/// below half occupancy without spilling is capped at half occupancy where
/// it then spills nothing. `blockSize` is the kernels' block size (their `.maxntid`).
FailureOr<std::string> capRegisters(Location loc, std::string ptx,
                                    llvm::StringRef ptxas,
                                    llvm::StringRef chip, int64_t blockSize);

} // namespace seg
} // namespace mlir

#endif // SEGOPS_LIB_TARGET_PTXTEXT_H
