//===- SegKernelABI.h - the segops kernel ABI -------------------*- C++ -*-===//
//
// A *kernel function* is a `func.func` whose body is one seg operation applied
// to the function's arguments. This header describes how such a function maps
// onto a compiled kernel: its raw-pointer parameters, their shapes in terms of
// the row count N and segment count S, and how work is distributed. The GPU
// and host lowerings and the op-library manifest all derive from it, so the
// three cannot disagree.
//
//===----------------------------------------------------------------------===//

#ifndef SEGOPS_CONVERSION_SEGKERNELABI_H
#define SEGOPS_CONVERSION_SEGKERNELABI_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/SmallVector.h"
#include <string>

namespace mlir {
namespace seg {

/// How a kernel's work items are defined.
enum class KernelStrategy {
  /// One work item per segment: reductions such as seg.sum. GPU: one thread
  /// block per segment; host: a call covers a range of segments.
  SegmentReduction,
  /// One work item per row: seg.gather. GPU: one thread per output element;
  /// host: a call covers a range of rows.
  RowMap,
};

/// One pointer parameter of a kernel.
struct KernelBuffer {
  std::string name;
  bool isOutput = false;
  /// f32, f64 or i32.
  Type elementType;
  /// Symbolic shape: each entry is "N", "S" or a decimal extent.
  SmallVector<std::string, 3> shape;
};

/// The compiled form of one kernel function.
struct KernelInterface {
  // Op handles are cheap value types whose accessors are not const.
  mutable func::FuncOp func;
  Operation *op = nullptr;
  KernelStrategy strategy = KernelStrategy::SegmentReduction;
  /// Pointer parameters in ABI order: the function's tensor arguments, then
  /// its results. Two i64 parameters follow them: N (rows) and S (segments).
  SmallVector<KernelBuffer, 4> buffers;
  /// Floating-point element type of the kernel's data.
  Type elementType;
  /// Row width of the operation's row operand (1 or 3).
  int64_t width = 1;

  StringRef getName() const { return func.getSymName(); }
  /// Number of leading parameters that are pointers.
  unsigned getNumBuffers() const { return buffers.size(); }
  /// Position of the pointer parameter bound to `value` (a function argument
  /// or the kernel's result).
  unsigned getBufferIndex(Value value) const;
};

/// Checks that `func` is a kernel function and describes its ABI, or emits an
/// error on `func` saying why it is not one.
FailureOr<KernelInterface> analyzeKernelFunction(func::FuncOp func);

/// Returns true if `func` contains seg operations, i.e. is meant as a kernel.
bool isKernelFunctionCandidate(func::FuncOp func);

/// Builds the scalar code shared by the GPU and host lowerings.
class KernelCodeBuilder {
public:
  KernelCodeBuilder(OpBuilder &builder, Location loc)
      : builder(builder), loc(loc) {}

  Value i64(int64_t value);
  /// Loads `elementType` from `base[index]`.
  Value load(Value base, Type elementType, Value index);
  /// Stores `value` to `base[index]`.
  void store(Value value, Value base, Value index);
  /// First row r in [lo, hi) with idx[r] >= segment, or hi (binary search;
  /// terminates and stays in [lo, hi] for any content of idx).
  Value lowerBound(Value idx, Value lo, Value hi, Value segment);
  /// 1 if 0 <= segment < numSegments.
  Value isValidSegment(Value segment, Value numSegments);
  /// Loads idx[row] and sign-extends it to i64.
  Value loadSegment(Value idx, Value row);
  /// Loads `base[index]` where `condition` holds and yields 0 elsewhere,
  /// without touching memory then.
  Value loadOrZero(Value condition, Value base, Type elementType, Value index);
  /// The floating-point zero of `type`.
  Value zero(Type type);

  OpBuilder &builder;
  Location loc;
};

} // namespace seg
} // namespace mlir

#endif // SEGOPS_CONVERSION_SEGKERNELABI_H
