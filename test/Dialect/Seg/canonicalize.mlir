// RUN: seg-opt %s -canonicalize -split-input-file | FileCheck %s

// mul(mul(x, a, idx), a, idx) => mul(x, a * a, idx)
// CHECK-LABEL: func.func @nested_mul_same_scale
// CHECK-SAME: (%[[X:.*]]: tensor<?x3xf32>, %[[A:.*]]: tensor<?xf32>, %[[IDX:.*]]: tensor<?xi32>)
// CHECK: %[[SCALE:.*]] = arith.mulf %[[A]], %[[A]] : tensor<?xf32>
// CHECK: %[[R:.*]] = seg.mul %[[X]], %[[SCALE]], %[[IDX]]
// CHECK-NOT: seg.mul
// CHECK: return %[[R]]
func.func @nested_mul_same_scale(%x: tensor<?x3xf32>, %a: tensor<?xf32>, %idx: tensor<?xi32>) -> tensor<?x3xf32> {
  %0 = seg.mul %x, %a, %idx : tensor<?x3xf32>, tensor<?xf32>, tensor<?xi32> -> tensor<?x3xf32>
  %1 = seg.mul %0, %a, %idx : tensor<?x3xf32>, tensor<?xf32>, tensor<?xi32> -> tensor<?x3xf32>
  return %1 : tensor<?x3xf32>
}

// -----

// Equal static lengths: the scales combine.
// CHECK-LABEL: func.func @nested_mul_static
// CHECK: arith.mulf %{{.*}}, %{{.*}} : tensor<4xf64>
// CHECK-COUNT-1: seg.mul
// CHECK-NOT: seg.mul
func.func @nested_mul_static(%x: tensor<?xf64>, %a: tensor<4xf64>, %b: tensor<4xf64>, %idx: tensor<?xi32>) -> tensor<?xf64> {
  %0 = seg.mul %x, %a, %idx : tensor<?xf64>, tensor<4xf64>, tensor<?xi32> -> tensor<?xf64>
  %1 = seg.mul %0, %b, %idx : tensor<?xf64>, tensor<4xf64>, tensor<?xi32> -> tensor<?xf64>
  return %1 : tensor<?xf64>
}

// -----

// Dynamic scales of possibly different lengths are left alone.
// CHECK-LABEL: func.func @nested_mul_dynamic_scales
// CHECK-NOT: arith.mulf
// CHECK-COUNT-2: seg.mul
func.func @nested_mul_dynamic_scales(%x: tensor<?xf32>, %a: tensor<?xf32>, %b: tensor<?xf32>, %idx: tensor<?xi32>) -> tensor<?xf32> {
  %0 = seg.mul %x, %a, %idx : tensor<?xf32>, tensor<?xf32>, tensor<?xi32> -> tensor<?xf32>
  %1 = seg.mul %0, %b, %idx : tensor<?xf32>, tensor<?xf32>, tensor<?xi32> -> tensor<?xf32>
  return %1 : tensor<?xf32>
}

// -----

// Different segment indices are left alone.
// CHECK-LABEL: func.func @nested_mul_other_index
// CHECK-COUNT-2: seg.mul
func.func @nested_mul_other_index(%x: tensor<?xf32>, %a: tensor<?xf32>, %i: tensor<?xi32>, %j: tensor<?xi32>) -> tensor<?xf32> {
  %0 = seg.mul %x, %a, %i : tensor<?xf32>, tensor<?xf32>, tensor<?xi32> -> tensor<?xf32>
  %1 = seg.mul %0, %a, %j : tensor<?xf32>, tensor<?xf32>, tensor<?xi32> -> tensor<?xf32>
  return %1 : tensor<?xf32>
}

// -----

// Unused seg ops are pure and disappear.
// CHECK-LABEL: func.func @dead_sum
// CHECK-NOT: seg.sum
func.func @dead_sum(%x: tensor<?xf32>, %idx: tensor<?xi32>, %n: index) {
  %0 = seg.sum %x, %idx, %n : tensor<?xf32>, tensor<?xi32> -> tensor<?xf32>
  return
}

// -----

// The length of a seg result comes from its operands.
// CHECK-LABEL: func.func @dim_of_results
// CHECK-SAME: (%[[X:.*]]: tensor<?x3xf32>, %[[IDX:.*]]: tensor<?xi32>, %[[N:.*]]: index)
// CHECK: %[[ROWS:.*]] = tensor.dim %[[IDX]], %c0
// CHECK: return %[[N]], %[[ROWS]]
func.func @dim_of_results(%x: tensor<?x3xf32>, %idx: tensor<?xi32>, %n: index) -> (index, index) {
  %c0 = arith.constant 0 : index
  %s = seg.sum %x, %idx, %n : tensor<?x3xf32>, tensor<?xi32> -> tensor<?x3xf32>
  %g = seg.gather %s, %idx : tensor<?x3xf32>, tensor<?xi32> -> tensor<?x3xf32>
  %d0 = tensor.dim %s, %c0 : tensor<?x3xf32>
  %d1 = tensor.dim %g, %c0 : tensor<?x3xf32>
  return %d0, %d1 : index, index
}

// -----

// Structural zeros (splats of 0, as seg-differentiate writes for gradients
// that do not flow) through linear seg ops give zeros.
// CHECK-LABEL: func.func @zero_operands
// CHECK-SAME: (%[[X:.*]]: tensor<?x3xf64>, %[[IDX:.*]]: tensor<?xi32>, %[[N:.*]]: index)
// CHECK-DAG: %[[ZERO:.*]] = arith.constant 0.000000e+00 : f64
// CHECK-DAG: %[[ROWS:.*]] = tensor.dim %[[IDX]], %c0
// CHECK-DAG: %[[SEGS:.*]] = tensor.splat %[[ZERO]][%[[N]]] : tensor<?xf64>
// CHECK-DAG: %[[ROWZ:.*]] = tensor.splat %[[ZERO]][%[[ROWS]]] : tensor<?x3xf64>
// CHECK-NOT: seg.
// CHECK: return %[[SEGS]], %[[ROWZ]]
func.func @zero_operands(%x: tensor<?x3xf64>, %idx: tensor<?xi32>, %n: index) -> (tensor<?xf64>, tensor<?x3xf64>) {
  %c0 = arith.constant 0.0 : f64
  %c0i = arith.constant 0 : index
  %len = tensor.dim %x, %c0i : tensor<?x3xf64>
  %zeros = tensor.splat %c0[%n] : tensor<?xf64>
  %rows = tensor.splat %c0[%len] : tensor<?x3xf64>
  %d = seg.dot %x, %rows, %idx, %n : tensor<?x3xf64>, tensor<?x3xf64>, tensor<?xi32> -> tensor<?xf64>
  %m = seg.mul %x, %zeros, %idx : tensor<?x3xf64>, tensor<?xf64>, tensor<?xi32> -> tensor<?x3xf64>
  return %d, %m : tensor<?xf64>, tensor<?x3xf64>
}

// -----

// rms_norm is not linear: a zero input still goes through it.
// CHECK-LABEL: func.func @rms_of_zeros
// CHECK: seg.rms_norm
func.func @rms_of_zeros(%idx: tensor<?xi32>, %n: index, %len: index) -> tensor<?xf32> {
  %c0 = arith.constant 0.0 : f32
  %rows = tensor.splat %c0[%len] : tensor<?x3xf32>
  %r = seg.rms_norm %rows, %idx, %n : tensor<?x3xf32>, tensor<?xi32> -> tensor<?xf32>
  return %r : tensor<?xf32>
}

// -----

// Every segment op's result length folds, max and min included (read from
// SegmentOpInterface::buildResultLength).
// CHECK-LABEL: func.func @dim_of_every_op
// CHECK-SAME: (%[[X:.*]]: tensor<?x3xf32>, %[[W:.*]]: tensor<?xf32>, %[[M:.*]]: tensor<?x3x3xf32>, %[[IDX:.*]]: tensor<?xi32>, %[[N:.*]]: index)
// CHECK: %[[R0:.*]] = tensor.dim %[[IDX]], %c0
// CHECK: %[[R1:.*]] = tensor.dim %[[IDX]], %c0
// CHECK: %[[R2:.*]] = tensor.dim %[[IDX]], %c0
// CHECK-NOT: seg.
// CHECK: return %[[N]], %[[N]], %[[N]], %[[N]], %[[N]], %[[N]], %[[N]], %[[N]], %[[R0]], %[[R1]], %[[R2]]
func.func @dim_of_every_op(%x: tensor<?x3xf32>, %w: tensor<?xf32>, %m: tensor<?x3x3xf32>, %idx: tensor<?xi32>, %n: index)
    -> (index, index, index, index, index, index, index, index, index, index, index) {
  %c0 = arith.constant 0 : index
  %sum = seg.sum %x, %idx, %n : tensor<?x3xf32>, tensor<?xi32> -> tensor<?x3xf32>
  %mean = seg.mean %x, %idx, %n : tensor<?x3xf32>, tensor<?xi32> -> tensor<?x3xf32>
  %max = seg.max %x, %idx, %n : tensor<?x3xf32>, tensor<?xi32> -> tensor<?x3xf32>
  %min = seg.min %x, %idx, %n : tensor<?x3xf32>, tensor<?xi32> -> tensor<?x3xf32>
  %rms = seg.rms_norm %x, %idx, %n : tensor<?x3xf32>, tensor<?xi32> -> tensor<?xf32>
  %dot = seg.dot %x, %x, %idx, %n : tensor<?x3xf32>, tensor<?x3xf32>, tensor<?xi32> -> tensor<?xf32>
  %outer = seg.outer_sum %x, %x, %idx, %n : tensor<?x3xf32>, tensor<?x3xf32>, tensor<?xi32> -> tensor<?x3x3xf32>
  %count = seg.count %idx, %n : tensor<?xi32> -> tensor<?xf32>
  %mul = seg.mul %x, %w, %idx : tensor<?x3xf32>, tensor<?xf32>, tensor<?xi32> -> tensor<?x3xf32>
  %mv = seg.matvec %x, %m, %idx : tensor<?x3xf32>, tensor<?x3x3xf32>, tensor<?xi32> -> tensor<?x3xf32>
  %gather = seg.gather %w, %idx : tensor<?xf32>, tensor<?xi32> -> tensor<?xf32>
  %d0 = tensor.dim %sum, %c0 : tensor<?x3xf32>
  %d1 = tensor.dim %mean, %c0 : tensor<?x3xf32>
  %d2 = tensor.dim %max, %c0 : tensor<?x3xf32>
  %d3 = tensor.dim %min, %c0 : tensor<?x3xf32>
  %d4 = tensor.dim %rms, %c0 : tensor<?xf32>
  %d5 = tensor.dim %dot, %c0 : tensor<?xf32>
  %d6 = tensor.dim %outer, %c0 : tensor<?x3x3xf32>
  %d7 = tensor.dim %count, %c0 : tensor<?xf32>
  %d8 = tensor.dim %mul, %c0 : tensor<?x3xf32>
  %d9 = tensor.dim %mv, %c0 : tensor<?x3xf32>
  %d10 = tensor.dim %gather, %c0 : tensor<?xf32>
  return %d0, %d1, %d2, %d3, %d4, %d5, %d6, %d7, %d8, %d9, %d10 : index, index, index, index, index, index, index, index, index, index, index
}

// -----

// max and min are not linear: a zero input still goes through them.
// CHECK-LABEL: func.func @extrema_of_zeros
// CHECK: seg.max
// CHECK: seg.min
func.func @extrema_of_zeros(%idx: tensor<?xi32>, %n: index, %len: index) -> (tensor<?xf32>, tensor<?xf32>) {
  %c0 = arith.constant 0.0 : f32
  %rows = tensor.splat %c0[%len] : tensor<?xf32>
  %max = seg.max %rows, %idx, %n : tensor<?xf32>, tensor<?xi32> -> tensor<?xf32>
  %min = seg.min %rows, %idx, %n : tensor<?xf32>, tensor<?xi32> -> tensor<?xf32>
  return %max, %min : tensor<?xf32>, tensor<?xf32>
}
