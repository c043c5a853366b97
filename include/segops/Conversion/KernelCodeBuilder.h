//===- KernelCodeBuilder.h - scalar helpers for kernel code -----*- C++ -*-===//
//
// Small builders for the scalar code that both lowerings emit over raw
// pointers: constants, loads and stores through llvm.getelementptr, and a
// binary search over the segment index.
//
//===----------------------------------------------------------------------===//

#ifndef SEGOPS_CONVERSION_KERNELCODEBUILDER_H
#define SEGOPS_CONVERSION_KERNELCODEBUILDER_H

#include "mlir/IR/Builders.h"

namespace mlir {
namespace seg {

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
  /// Like lowerBound, but probing lo, lo+1, lo+3, lo+7, ... first: cost
  /// O(log(answer - lo)) rather than O(log(hi - lo)), for walking short
  /// segments in order.
  Value gallopingLowerBound(Value idx, Value lo, Value hi, Value segment);
  /// 1 if 0 <= segment < numSegments.
  Value isValidSegment(Value segment, Value numSegments);
  /// Loads idx[row] and sign-extends it to i64.
  Value loadSegment(Value idx, Value row);
  /// The floating-point zero of `type`.
  Value zero(Type type);

  OpBuilder &builder;
  Location loc;
};

} // namespace seg
} // namespace mlir

#endif // SEGOPS_CONVERSION_KERNELCODEBUILDER_H
