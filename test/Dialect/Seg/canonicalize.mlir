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
