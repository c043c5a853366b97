// RUN: seg-opt %s --seg-differentiate --canonicalize --cse \
// RUN:   --seg-differentiate=function=rms_grad --seg-differentiate=function=matvec_grad \
// RUN:   --seg-differentiate=function=sum_grad --canonicalize --cse \
// RUN:   --seg-differentiate=function=rms_grad_grad --seg-differentiate=function=matvec_grad_grad \
// RUN:   --canonicalize --cse | FileCheck %s

// Gradient functions are seg functions themselves, so they differentiate
// again: second order takes (x, idx, n, ḡ, h) with h the cotangent of x̄.

// CHECK-LABEL: func.func @rms_grad_grad
// CHECK-SAME: (%[[X:.*]]: tensor<?x3xf64>{{( \{[^}]*\})?}}, %[[IDX:.*]]: tensor<?xi32>{{( \{[^}]*\})?}}, %[[N:.*]]: index, %[[G:.*]]: tensor<?xf64>{{( \{[^}]*\})?}}, %[[H:.*]]: tensor<?x3xf64>{{( \{[^}]*\})?}}) -> (tensor<?x3xf64>{{( \{[^}]*\})?}}, tensor<?xf64>{{( \{[^}]*\})?}})
// The weight's own adjoint is dot(h, x) per segment ...
// CHECK: seg.dot %[[H]], %[[X]], %[[IDX]]
// ... and the forward rms flows back through rms_norm's rule again.
// CHECK: seg.mul %[[X]], %{{.*}}, %[[IDX]]
// CHECK: return
// Third order exists and verifies.
// CHECK-LABEL: func.func @rms_grad_grad_grad
// CHECK-SAME: -> (tensor<?x3xf64>, tensor<?xf64>, tensor<?x3xf64>)
func.func @rms(%x: tensor<?x3xf64>, %idx: tensor<?xi32>, %n: index) -> tensor<?xf64> {
  %0 = seg.rms_norm %x, %idx, %n : tensor<?x3xf64>, tensor<?xi32> -> tensor<?xf64>
  return %0 : tensor<?xf64>
}

// matvec: second order is linear in the cotangents.
// CHECK-LABEL: func.func @matvec_grad_grad
// CHECK-SAME: (%[[V:.*]]: tensor<?x3xf32>{{( \{[^}]*\})?}}, %[[M:.*]]: tensor<?x3x3xf32>{{( \{[^}]*\})?}}, %[[IDX:.*]]: tensor<?xi32>{{( \{[^}]*\})?}}, %[[G:.*]]: tensor<?x3xf32>{{( \{[^}]*\})?}}, %[[HV:.*]]: tensor<?x3xf32>{{( \{[^}]*\})?}}, %[[HM:.*]]: tensor<?x3x3xf32>{{( \{[^}]*\})?}})
// CHECK-DAG: %[[DV:.*]] = seg.matvec %[[G]], %[[HM]], %[[IDX]] {transpose = false}
// CHECK-DAG: %[[DM:.*]] = seg.outer_sum %[[HV]], %[[G]], %[[IDX]]
// CHECK-DAG: %[[A:.*]] = seg.matvec %[[V]], %[[HM]], %[[IDX]] :
// CHECK-DAG: %[[B:.*]] = seg.matvec %[[HV]], %[[M]], %[[IDX]] :
// CHECK-DAG: %[[DG:.*]] = arith.addf %[[A]], %[[B]]
// CHECK: return %[[DV]], %[[DM]], %[[DG]]
// CHECK-LABEL: func.func @matvec_grad_grad_grad
func.func @matvec(%v: tensor<?x3xf32>, %m: tensor<?x3x3xf32>, %idx: tensor<?xi32>) -> tensor<?x3xf32> {
  %0 = seg.matvec %v, %m, %idx : tensor<?x3xf32>, tensor<?x3x3xf32>, tensor<?xi32> -> tensor<?x3xf32>
  return %0 : tensor<?x3xf32>
}

// sum: the gradient does not depend on x, so x̄ of second order is zeros.
// CHECK-LABEL: func.func @sum_grad_grad
// CHECK-SAME: (%[[X:.*]]: tensor<?xf32>{{( \{[^}]*\})?}}, %[[IDX:.*]]: tensor<?xi32>{{( \{[^}]*\})?}}, %[[N:.*]]: index, %[[G:.*]]: tensor<?xf32>{{( \{[^}]*\})?}}, %[[H:.*]]: tensor<?xf32>{{( \{[^}]*\})?}})
// CHECK-DAG: %[[ZERO:.*]] = tensor.splat %{{.*}}[%{{.*}}] : tensor<?xf32>
// CHECK-DAG: %[[DG:.*]] = seg.sum %[[H]], %[[IDX]]
// CHECK: return %[[ZERO]], %[[DG]]
func.func @sum(%x: tensor<?xf32>, %idx: tensor<?xi32>, %n: index) -> tensor<?xf32> {
  %0 = seg.sum %x, %idx, %n : tensor<?xf32>, tensor<?xi32> -> tensor<?xf32>
  return %0 : tensor<?xf32>
}
