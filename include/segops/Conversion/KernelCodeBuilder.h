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
  /// Like lowerBound, but scanning forward from lo a block of `block` rows
  /// at a time (one probe per block: its last row), then searching the
  /// block that holds the answer. For walking segments in order: the probes
  /// read idx sequentially, which hardware prefetchers stream, where a
  /// galloping search's doubling probes each miss the cache on long segments.
  Value scanningLowerBound(Value idx, Value lo, Value hi, Value segment,
                           int64_t block = 16);
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
