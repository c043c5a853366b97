// RUN: seg-opt %s --seg-differentiate | FileCheck %s
// RUN: seg-opt %s --seg-derive=order=2 --seg-to-host | FileCheck %s --check-prefix=HOST
// RUN: seg-opt %s --seg-derive=order=2 --seg-to-nvvm | FileCheck %s --check-prefix=NVVM

// seg.max: the cotangent split evenly among the rows attaining the maximum;
// NaN in every row of a segment whose maximum is NaN (as torch.amax's).
// CHECK-LABEL: func.func @max_grad
// CHECK: %[[M:.*]] = seg.max
// CHECK: %[[G:.*]] = seg.gather %[[M]]
// CHECK: %[[HIT:.*]] = arith.cmpf oeq, %{{.*}}, %[[G]]
// CHECK: seg.sum
// CHECK: arith.divf
// CHECK: seg.gather
// CHECK: %[[NAN:.*]] = arith.cmpf uno, %[[G]], %[[G]]
// CHECK: %[[SHARE:.*]] = arith.mulf
// CHECK: arith.select %[[NAN]], %{{.*}}, %[[SHARE]]
// HOST-LABEL: llvm.func @max(
// maximumf is compares and selects on the host (NaN-propagating).
// HOST-NOT: llvm.intr.maximum
// HOST: llvm.fcmp "ugt"
// HOST: llvm.fcmp "uno"
// HOST-LABEL: llvm.func @max_grad(
// NVVM-LABEL: llvm.func @max(
// NVVM: llvm.intr.maximum
// NVVM: nvvm.shfl.sync
func.func @max(%x: tensor<?x3xf32>, %idx: tensor<?xi32>, %n: index) -> tensor<?x3xf32> {
  %0 = seg.max %x, %idx, %n : tensor<?x3xf32>, tensor<?xi32> -> tensor<?x3xf32>
  return %0 : tensor<?x3xf32>
}

// CHECK-LABEL: func.func @min_grad
// CHECK: seg.min
// CHECK: arith.cmpf oeq
// HOST-LABEL: llvm.func @min(
// HOST-NOT: llvm.intr.minimum
// HOST: llvm.fcmp "ult"
// HOST: llvm.fcmp "uno"
func.func @min(%x: tensor<?xf64>, %idx: tensor<?xi32>, %n: index) -> tensor<?xf64> {
  %0 = seg.min %x, %idx, %n : tensor<?xf64>, tensor<?xi32> -> tensor<?xf64>
  return %0 : tensor<?xf64>
}

// Elementwise rules: exp (ḡ r), log (ḡ / a), tanh (ḡ (1 - r²)), abs, and
// broadcast / component_sum as each other's adjoints.
// CHECK-LABEL: func.func @elementwise_grad
// CHECK-DAG: math.exp
// CHECK-DAG: math.log
// CHECK-DAG: math.tanh
// CHECK-DAG: seg.broadcast
// CHECK-DAG: seg.component_sum
// HOST-LABEL: llvm.func @elementwise(
// HOST-NOT: llvm.call @expf
// HOST-NOT: math.
// NVVM-LABEL: llvm.func @elementwise(
// NVVM-NOT: llvm.intr.exp
func.func @elementwise(%x: tensor<?x3xf32>, %w: tensor<?xf32>, %idx: tensor<?xi32>, %n: index) -> tensor<?xf32> {
  %e = math.exp %w : tensor<?xf32>
  %l = math.log %e : tensor<?xf32>
  %t = math.tanh %l : tensor<?xf32>
  %a = math.absf %t : tensor<?xf32>
  %b = seg.broadcast %a : tensor<?xf32> -> tensor<?x3xf32>
  %p = arith.mulf %b, %x : tensor<?x3xf32>
  %s = seg.component_sum %p : tensor<?x3xf32> -> tensor<?xf32>
  %m = arith.maximumf %s, %w : tensor<?xf32>
  %0 = seg.sum %m, %idx, %n : tensor<?xf32>, tensor<?xi32> -> tensor<?xf32>
  return %0 : tensor<?xf32>
}
