//===- KernelCodeBuilder.h - scalar helpers for kernel code -----*- C++ -*-===//
//
// Small builders for the code that both lowerings emit over raw pointers:
// constants, scalar and vector loads and stores through llvm.getelementptr,
// vector shuffles and sums, and searches over the segment index.
//
//===----------------------------------------------------------------------===//

#ifndef SEGOPS_CONVERSION_KERNELCODEBUILDER_H
#define SEGOPS_CONVERSION_KERNELCODEBUILDER_H

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/IR/Builders.h"

#include <utility>

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
  /// A search narrowing [lo, hi): while lo < hi, `step` gives the next
  /// (lo, hi) from the current ones. Returns the final lo.
  using NarrowStep = function_ref<std::pair<Value, Value>(OpBuilder &, Location,
                                                          Value lo, Value hi)>;
  Value narrowRange(Value lo, Value hi, NarrowStep step);
  /// First row r in [lo, hi) with idx[r] >= segment, or hi (binary search;
  /// terminates and stays in [lo, hi] for any content of idx).
  Value lowerBound(Value idx, Value lo, Value hi, Value segment);
  /// The values a row loop returns when one pass of a segment runs at a
  /// time (`runningPass`, an i64): for passes before it the segment's totals
  /// (`earlier`, computed already), for the running pass the rows'
  /// (`current`),
  /// for later passes `init` unchanged. `pass` is the emitter's pass.
  using PassValues = function_ref<SmallVector<Value>(OpBuilder &, Location)>;
  SmallVector<Value> selectByRunningPass(Value runningPass, unsigned pass,
                                         ValueRange init, PassValues earlier,
                                         PassValues current);
  /// The rows of segment `segment` from row `lo` (where it begins): counts
  /// forward kCountingBlock rows at a time, a block's rows below
  /// `segment + 1` counted with one vector compare (no branch per row),
  /// stopping at the first block not wholly below; the last rows (fewer
  /// than a block before `hi`) one at a time. Returns the first row at or
  /// after lo whose value is above `segment` (or hi), and an i1 that is true
  /// if a row it looked at breaks sortedness: a row of the segment below
  /// `segment`, or, in a block, a row below `segment + 1` after one above.
  /// `segment` must lie in [0, INT32_MAX) (the blocks are compared in i32;
  /// callers clamp S). For any content of idx and any segment it
  /// terminates, stays in [lo, hi], and reads only rows in [lo, hi).
  /// `onBlock(row)`, if given, is emitted for each
  /// whole block the scan reads (rows [row, row + kCountingBlock)).
  using BlockHook = function_ref<void(OpBuilder &, Location, Value row)>;
  std::pair<Value, Value> scanSegment(Value idx, Value lo, Value hi,
                                      Value segment,
                                      BlockHook onBlock = nullptr);
  /// An i1: true if a row in [lo, hi) does not hold `segment`, which must
  /// be a value of idx (an i32, sign-extended) (a straight vector loop,
  /// kCountingBlock rows per step, then single rows).
  Value anyRowOutside(Value idx, Value lo, Value hi, Value segment);
  static constexpr int64_t kCountingBlock = 16;
  /// The negation of an i1 or a vector of i1.
  Value logicalNot(Value value);
  /// 1 if 0 <= segment < numSegments.
  Value isValidSegment(Value segment, Value numSegments);
  /// Loads idx[row] and sign-extends it to i64.
  Value loadSegment(Value idx, Value row);
  /// The floating-point zero of `type` (a scalar or vector type).
  Value zero(Type type);

  /// Loads `lanes` consecutive `elementType`s from `base[index]` as one
  /// vector, aligned to the element only, or with `alignedToVector` to the
  /// vector's size (one vector instruction on the GPU; the caller vouches
  /// for the address).
  Value loadVector(Value base, Type elementType, Value index, int64_t lanes,
                   bool alignedToVector = false);
  /// Stores a vector to `base[index]`, `base[index + 1]`, ... (aligned as
  /// loadVector's).
  void storeVector(Value vector, Value base, Value index,
                   bool alignedToVector = false);
  /// Stores the lanes of a vector where `mask` (a vector of i1 of its
  /// length) is set; the others' memory is not touched.
  void storeVectorMasked(Value vector, Value base, Value index, Value mask);
  /// A vector of `lanes` copies of a scalar.
  Value splat(Value scalar, int64_t lanes);
  /// llvm.shufflevector of two vectors of the same type.
  Value shuffle(Value first, Value second, ArrayRef<int32_t> mask);
  /// The combination (`kind`: addf, maximumf...) of a vector's lanes, in a
  /// fixed order (halves, pairwise), so it is the same on every call.
  Value horizontalReduce(Value vector,
                         arith::AtomicRMWKind kind = arith::AtomicRMWKind::addf);

  OpBuilder &builder;
  Location loc;
};

} // namespace seg
} // namespace mlir

#endif // SEGOPS_CONVERSION_KERNELCODEBUILDER_H
