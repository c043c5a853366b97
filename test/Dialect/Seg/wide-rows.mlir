// RUN: seg-opt %s --seg-differentiate | FileCheck %s
// RUN: seg-opt %s --seg-derive=order=2 --seg-to-host | FileCheck %s --check-prefix=HOST
// RUN: seg-opt %s --seg-derive=order=2 --seg-to-nvvm | FileCheck %s --check-prefix=NVVM

// Rows of any static width F: the derivative rules are the narrow ones,
// at the operand's type.
// CHECK-LABEL: func.func @sum_wide_grad
// CHECK: seg.gather %{{.*}}, %{{.*}} : tensor<?x64xf32>, tensor<?xi32> -> tensor<?x64xf32>
// The host kernel of 64 features walks a segment's rows one at a time (no
// vectors of rows: its features are the vector).
// HOST-LABEL: llvm.func @sum_wide(
// HOST-NOT: vector<{{[0-9]+}}xf32>
// HOST: llvm.return
// NVVM-LABEL: llvm.func @sum_wide(
func.func @sum_wide(%x: tensor<?x64xf32>, %idx: tensor<?xi32>, %n: index) -> tensor<?x64xf32> {
  %0 = seg.sum %x, %idx, %n : tensor<?x64xf32>, tensor<?xi32> -> tensor<?x64xf32>
  return %0 : tensor<?x64xf32>
}

// A per-row scalar broadcast against 5 features, and a per-row maximum of
// the features. component_max's adjoint shares the cotangent among the
// components attaining the maximum: a mask, its count, a broadcast.
// CHECK-LABEL: func.func @features_grad
// CHECK-DAG: arith.cmpf oeq
// CHECK-DAG: seg.component_sum %{{.*}} : tensor<?x5xf64> -> tensor<?xf64>
// CHECK-DAG: seg.broadcast %{{.*}} : tensor<?xf64> -> tensor<?x5xf64>
// HOST-LABEL: llvm.func @features(
// HOST: llvm.fcmp "ugt"
// NVVM-LABEL: llvm.func @features(
func.func @features(%h: tensor<?x5xf64>, %w: tensor<?xf64>, %idx: tensor<?xi32>, %n: index) -> tensor<?x5xf64> {
  %b = seg.broadcast %w : tensor<?xf64> -> tensor<?x5xf64>
  %p = arith.mulf %b, %h : tensor<?x5xf64>
  %m = seg.component_max %p : tensor<?x5xf64> -> tensor<?xf64>
  %l = seg.component_min %h : tensor<?x5xf64> -> tensor<?xf64>
  %d = arith.subf %m, %l : tensor<?xf64>
  %e = seg.broadcast %d : tensor<?xf64> -> tensor<?x5xf64>
  %q = arith.mulf %e, %h : tensor<?x5xf64>
  %0 = seg.mean %q, %idx, %n : tensor<?x5xf64>, tensor<?xi32> -> tensor<?x5xf64>
  return %0 : tensor<?x5xf64>
}
