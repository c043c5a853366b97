//===- KernelSignature.h - kernel signatures from the call contract -*- C++ -*-===//
//
// The lowerings' side of segrt/KernelABI.h: a kernel's parameter types, and
// its trailing arguments by meaning, so that no lowering counts positions.
//
//===----------------------------------------------------------------------===//

#ifndef SEGOPS_CONVERSION_KERNELSIGNATURE_H
#define SEGOPS_CONVERSION_KERNELSIGNATURE_H

#include "mlir/IR/Block.h"
#include "mlir/IR/ValueRange.h"
#include "mlir/IR/Types.h"
#include "mlir/Interfaces/FunctionInterfaces.h"
#include "segrt/KernelABI.h"

namespace mlir {
namespace seg {

/// A pointer per buffer (`numBuffers`), then the trailing parameters of
/// `entry`: i64s and LLVM pointers.
SmallVector<Type> kernelParameterTypes(MLIRContext *context,
                                       unsigned numBuffers,
                                       segrt::abi::Entry entry);

/// Names each trailing argument of `kernel` (an entry point of kind `entry`
/// after `numBuffers` buffers) with a `seg.param` argument attribute, so
/// that IR (and its tests) read them by meaning. Lowering to LLVM IR drops
/// it.
void nameTrailingArguments(FunctionOpInterface kernel, unsigned numBuffers,
                           segrt::abi::Entry entry);

/// The result types of `entry` (none, or one integer).
SmallVector<Type> kernelResultTypes(MLIRContext *context,
                                    segrt::abi::Entry entry);

/// The arguments of a kernel's entry block: its buffers, and its trailing
/// arguments by meaning.
class KernelArguments {
public:
  KernelArguments(Block &entryBlock, unsigned numBuffers,
                  segrt::abi::Entry entry)
      : arguments(entryBlock.getArguments()), numBuffers(numBuffers),
        signature(segrt::abi::signature(entry)) {}

  ValueRange buffers() const { return arguments.take_front(numBuffers); }
  /// The trailing argument `param` (which the entry must take).
  Value get(segrt::abi::Param param) const;
  /// The trailing argument `param`, or a null value if the entry lacks it.
  Value lookup(segrt::abi::Param param) const;

private:
  Block::BlockArgListType arguments;
  unsigned numBuffers;
  segrt::abi::Signature signature;
};

} // namespace seg
} // namespace mlir

#endif // SEGOPS_CONVERSION_KERNELSIGNATURE_H
