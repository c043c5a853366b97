// RUN: seg-opt %s --seg-derive=order=3 --canonicalize --cse | FileCheck %s
// RUN: seg-opt %s --canonicalize | FileCheck %s --check-prefix=CANON

// Message passing: pos[j] by the unsorted senders j, per-edge work, a sum
// by the sorted receivers i. The gather's adjoint is a scatter_sum by j into
// pos's rows, whose adjoint is a gather_rows again: every order derives.

// CHECK-LABEL: func.func @pair_energy_grad(
// CHECK-SAME: %[[POS:[^:]*]]: tensor<?x3xf32>
// CHECK-SAME: %[[J:[^:]*]]: tensor<?xi32>
// CHECK: seg.gather_rows %[[POS]], %[[J]]
// CHECK: %[[M:.*]] = tensor.dim %[[POS]]
// CHECK: %[[F:.*]] = seg.scatter_sum %{{.*}}, %[[J]], %[[M]] : tensor<?x3xf32>, tensor<?xi32> -> tensor<?x3xf32>
// CHECK: return %[[F]]

// Second order: the cotangent of the scatter's result is gathered by j.
// CHECK-LABEL: func.func @pair_energy_grad_grad(
// CHECK-SAME: %[[POS2:[^:]*]]: tensor<?x3xf32>
// CHECK-SAME: %[[J2:[^:]*]]: tensor<?xi32>
// CHECK-SAME: %[[H:[^:]*]]: tensor<?x3xf32>) -> (tensor<?x3xf32>, tensor<?xf32>)
// CHECK: seg.gather_rows %[[H]], %[[J2]]
// CHECK: seg.scatter_sum %{{.*}}, %[[J2]]

// CHECK-LABEL: func.func @pair_energy_grad_grad_grad(
// CHECK: seg.scatter_sum
func.func @pair_energy(%pos: tensor<?x3xf32>, %j: tensor<?xi32>, %i: tensor<?xi32>,
                       %n: index) -> tensor<?xf32> {
  %pj = seg.gather_rows %pos, %j : tensor<?x3xf32>, tensor<?xi32> -> tensor<?x3xf32>
  %sq = arith.mulf %pj, %pj : tensor<?x3xf32>
  %r2 = seg.component_sum %sq : tensor<?x3xf32> -> tensor<?xf32>
  %e = arith.mulf %r2, %r2 : tensor<?xf32>
  %s = seg.sum %e, %i, %n : tensor<?xf32>, tensor<?xi32> -> tensor<?xf32>
  return %s : tensor<?xf32>
}

// A table gathered twice by one index gets one scatter_sum of the summed
// rows; the length of a gather_rows result is its index's.
// CANON-LABEL: func.func @merge_sums(
// CANON-SAME: %[[A:[^:]*]]: tensor<?xf64>, %[[B:[^:]*]]: tensor<?xf64>, %[[J:[^:]*]]: tensor<?xi32>, %[[M:[^:]*]]: index)
// CANON: %[[ROWS:.*]] = arith.addf %[[A]], %[[B]]
// CANON: %[[S:.*]] = seg.scatter_sum %[[ROWS]], %[[J]], %[[M]]
// CANON-NOT: seg.scatter_sum
// CANON: return %[[S]]
func.func @merge_sums(%a: tensor<?xf64>, %b: tensor<?xf64>, %j: tensor<?xi32>, %m: index)
    -> tensor<?xf64> {
  %0 = seg.scatter_sum %a, %j, %m : tensor<?xf64>, tensor<?xi32> -> tensor<?xf64>
  %1 = seg.scatter_sum %b, %j, %m : tensor<?xf64>, tensor<?xi32> -> tensor<?xf64>
  %2 = arith.addf %0, %1 : tensor<?xf64>
  return %2 : tensor<?xf64>
}

// CANON-LABEL: func.func @dims(
// CANON-SAME: %[[T:[^:]*]]: tensor<?x4xf32>, %[[J:[^:]*]]: tensor<?xi32>, %[[M:[^:]*]]: index)
// CANON: %[[N:.*]] = tensor.dim %[[J]]
// CANON: return %[[N]], %[[M]]
func.func @dims(%t: tensor<?x4xf32>, %j: tensor<?xi32>, %m: index) -> (index, index) {
  %c0 = arith.constant 0 : index
  %g = seg.gather_rows %t, %j : tensor<?x4xf32>, tensor<?xi32> -> tensor<?x4xf32>
  %s = seg.scatter_sum %g, %j, %m : tensor<?x4xf32>, tensor<?xi32> -> tensor<?x4xf32>
  %0 = tensor.dim %g, %c0 : tensor<?x4xf32>
  %1 = tensor.dim %s, %c0 : tensor<?x4xf32>
  return %0, %1 : index, index
}

// CANON-LABEL: func.func @gather_of_zeros(
// CANON-NOT: seg.gather_rows
// CANON: tensor.splat
func.func @gather_of_zeros(%j: tensor<?xi32>, %m: index) -> tensor<?xf32> {
  %zero = arith.constant 0.0 : f32
  %t = tensor.splat %zero[%m] : tensor<?xf32>
  %g = seg.gather_rows %t, %j : tensor<?xf32>, tensor<?xi32> -> tensor<?xf32>
  return %g : tensor<?xf32>
}
