// RUN: seg-opt %s -seg-inline -split-input-file | FileCheck %s

// A fused kernel calling a private derived function (as segops.fusion links
// them): the call is inlined, the callee dropped, and CSE merges the
// callee's recomputation of the forward max with the caller's.
// CHECK-LABEL: func.func @fused
// CHECK-SAME: (%[[X:.*]]: tensor<?xf32>, %[[IDX:.*]]: tensor<?xi32>, %[[N:.*]]: index, %[[G:.*]]: tensor<?xf32>)
// CHECK-NOT: call
// CHECK: %[[MAX:.*]] = seg.max %[[X]], %[[IDX]], %[[N]]
// CHECK-NOT: seg.max
// CHECK: seg.gather %[[MAX]], %[[IDX]]
// CHECK: return %[[MAX]], %{{.*}}
// CHECK-NOT: func.func private
func.func @fused(%x: tensor<?xf32>, %idx: tensor<?xi32>, %n: index, %g: tensor<?xf32>) -> (tensor<?xf32>, tensor<?xf32>) {
  %max = seg.max %x, %idx, %n : tensor<?xf32>, tensor<?xi32> -> tensor<?xf32>
  %grad = func.call @max_grad(%x, %idx, %n, %g) : (tensor<?xf32>, tensor<?xi32>, index, tensor<?xf32>) -> tensor<?xf32>
  return %max, %grad : tensor<?xf32>, tensor<?xf32>
}
func.func private @max_grad(%x: tensor<?xf32>, %idx: tensor<?xi32>, %n: index, %g: tensor<?xf32>) -> tensor<?xf32> {
  %max = seg.max %x, %idx, %n : tensor<?xf32>, tensor<?xi32> -> tensor<?xf32>
  %rows = seg.gather %max, %idx : tensor<?xf32>, tensor<?xi32> -> tensor<?xf32>
  %hit = arith.cmpf oeq, %x, %rows : tensor<?xf32>
  %zero = arith.constant 0.0 : f32
  %zeros = tensor.splat %zero[%n] : tensor<?xf32>
  %back = seg.gather %g, %idx : tensor<?xf32>, tensor<?xi32> -> tensor<?xf32>
  %picked = arith.select %hit, %back, %rows : tensor<?xi1>, tensor<?xf32>
  return %picked : tensor<?xf32>
}

// -----

// Public functions stay (they are kernels), called or not.
// CHECK-LABEL: func.func @kernel
// CHECK: seg.sum
// CHECK-LABEL: func.func @other_kernel
func.func @kernel(%x: tensor<?x3xf64>, %idx: tensor<?xi32>, %n: index) -> tensor<?x3xf64> {
  %r = func.call @sum(%x, %idx, %n) : (tensor<?x3xf64>, tensor<?xi32>, index) -> tensor<?x3xf64>
  return %r : tensor<?x3xf64>
}
func.func @other_kernel(%x: tensor<?xf64>, %idx: tensor<?xi32>, %n: index) -> tensor<?xf64> {
  %r = seg.mean %x, %idx, %n : tensor<?xf64>, tensor<?xi32> -> tensor<?xf64>
  return %r : tensor<?xf64>
}
func.func private @sum(%x: tensor<?x3xf64>, %idx: tensor<?xi32>, %n: index) -> tensor<?x3xf64> {
  %r = seg.sum %x, %idx, %n : tensor<?x3xf64>, tensor<?xi32> -> tensor<?x3xf64>
  return %r : tensor<?x3xf64>
}
