// RUN: seg-opt %s --seg-derive="saved-results=1" | FileCheck %s
// RUN: seg-opt %s --seg-derive="order=2 saved-results=1" | FileCheck %s --check-prefix=SECOND
// RUN: seg-opt %s --seg-derive | FileCheck %s --check-prefix=RECOMPUTED
// RUN: seg-opt %s --seg-derive=order=3 | FileCheck %s --check-prefix=ATTRIBUTE

// With saved-results, f_grad takes f's float results that its rules read
// between its arguments and the cotangents, each marked with the result it
// is (seg.saved_result); the others are not arguments. rms_norm's backward
// keeps only the count and the row map (one read of x), max's the sum of
// hits.

// CHECK-LABEL: func.func @rms_grad
// CHECK-SAME: (%[[X:[^:]+]]: tensor<?x16xf32> {seg.space = "row"}, %{{[^:]+}}: tensor<?xi32>, %{{[^:]+}}: index, %[[R:[^:]+]]: tensor<?xf32> {seg.saved_result = 0 : i64, seg.space = "segment"}, %[[G:[^:]+]]: tensor<?xf32> {seg.space = "segment"}) -> tensor<?x16xf32> attributes {seg.saved_results}
// CHECK-NOT: seg.rms_norm
// CHECK: seg.count
// CHECK: arith.mulf %{{.*}}, %[[R]]
// CHECK: arith.divf %[[G]]
// CHECK: seg.mul %[[X]]
// CHECK-NOT: seg.rms_norm
// CHECK: return

// RECOMPUTED-LABEL: func.func @rms_grad
// RECOMPUTED-SAME: (%{{[^:]+}}: tensor<?x16xf32> {seg.space = "row"}, %{{[^:]+}}: tensor<?xi32>, %{{[^:]+}}: index, %{{[^:]+}}: tensor<?xf32> {seg.space = "segment"}) -> tensor<?x16xf32>
// RECOMPUTED: seg.rms_norm
func.func @rms(%x: tensor<?x16xf32>, %idx: tensor<?xi32>, %n: index) -> tensor<?xf32> {
  %0 = seg.rms_norm %x, %idx, %n : tensor<?x16xf32>, tensor<?xi32> -> tensor<?xf32>
  return %0 : tensor<?xf32>
}

// CHECK-LABEL: func.func @max_grad
// CHECK-SAME: (%{{[^:]+}}: tensor<?xf64> {seg.space = "row"}, %{{[^:]+}}: tensor<?xi32>, %{{[^:]+}}: index, %[[M:[^:]+]]: tensor<?xf64> {seg.saved_result = 0 : i64, seg.space = "segment"}, %{{[^:]+}}: tensor<?xf64> {seg.space = "segment"}) -> tensor<?xf64>
// CHECK-NOT: seg.max
// CHECK: seg.gather %[[M]]
// CHECK: seg.sum
// CHECK-NOT: seg.max
// CHECK: return

// The second level is derived on saved results too: its arguments are x,
// idx, n, the max, the cotangent and the gradient's cotangent (the first
// level's result, the gradient of x, is read by no rule and is not one);
// it returns the gradients of x, the max and the cotangent.
// SECOND-LABEL: func.func @max_grad_grad
// SECOND-SAME: (%{{[^:]+}}: tensor<?xf64> {seg.space = "row"}, %{{[^:]+}}: tensor<?xi32>, %{{[^:]+}}: index, %{{[^:]+}}: tensor<?xf64> {seg.space = "segment"}, %{{[^:]+}}: tensor<?xf64> {seg.space = "segment"}, %{{[^:]+}}: tensor<?xf64> {seg.space = "row"}) -> (tensor<?xf64>, tensor<?xf64>, tensor<?xf64>)
// SECOND-NOT: seg.max
// SECOND: return
func.func @max(%x: tensor<?xf64>, %idx: tensor<?xi32>, %n: index) -> tensor<?xf64> {
  %0 = seg.max %x, %idx, %n : tensor<?xf64>, tensor<?xi32> -> tensor<?xf64>
  return %0 : tensor<?xf64>
}

// A result that is an argument is read as that argument (its cotangent adds
// to x's gradient) and is not saved; the other, result #1, is.
// CHECK-LABEL: func.func @both_grad
// CHECK-SAME: (%[[BX:[^:]+]]: tensor<?x3xf32> {seg.space = "row"}, %{{[^:]+}}: tensor<?xi32>, %{{[^:]+}}: index, %[[BR:[^:]+]]: tensor<?xf32> {seg.saved_result = 1 : i64, seg.space = "segment"}, %[[GX:[^:]+]]: tensor<?x3xf32> {seg.space = "row"}, %{{[^:]+}}: tensor<?xf32> {seg.space = "segment"}) -> tensor<?x3xf32>
// CHECK-NOT: seg.rms_norm
// CHECK: arith.mulf %{{.*}}, %[[BR]]
// CHECK: %[[ROWS:.+]] = seg.mul %[[BX]]
// CHECK: arith.addf %[[GX]], %[[ROWS]]
// CHECK: return
func.func @both(%x: tensor<?x3xf32>, %idx: tensor<?xi32>, %n: index) -> (tensor<?x3xf32>, tensor<?xf32>) {
  %0 = seg.rms_norm %x, %idx, %n : tensor<?x3xf32>, tensor<?xi32> -> tensor<?xf32>
  return %x, %0 : tensor<?x3xf32>, tensor<?xf32>
}

// Without the option, a function with seg.saved_results is derived on saved
// results to every order: its third level takes the second's result #2
// (the max's gradient) and no other. A result no rule reads (sum's) is
// never an argument, and a function without the attribute recomputes.
// ATTRIBUTE-LABEL: func.func @marked_grad(
// ATTRIBUTE-SAME: %{{[^:]+}}: tensor<?xf32> {seg.saved_result = 0 : i64, seg.space = "segment"}, %{{[^:]+}}: tensor<?xf32> {seg.space = "segment"}) -> tensor<?xf32> attributes {seg.saved_results}
// ATTRIBUTE-LABEL: func.func @marked_grad_grad_grad(
// ATTRIBUTE-NOT: seg.saved_result = 0
// ATTRIBUTE-SAME: seg.saved_result = 2 : i64
// ATTRIBUTE-NOT: seg.saved_result
// ATTRIBUTE-SAME: -> (
func.func @marked(%x: tensor<?xf32>, %idx: tensor<?xi32>, %n: index) -> tensor<?xf32> attributes {seg.saved_results} {
  %0 = seg.rms_norm %x, %idx, %n : tensor<?xf32>, tensor<?xi32> -> tensor<?xf32>
  return %0 : tensor<?xf32>
}

// ATTRIBUTE-LABEL: func.func @summed_grad(
// ATTRIBUTE-SAME: %{{[^:]+}}: index, %{{[^:]+}}: tensor<?x3xf32> {seg.space = "segment"}) -> tensor<?x3xf32> attributes {seg.saved_results}
func.func @summed(%x: tensor<?x3xf32>, %idx: tensor<?xi32>, %n: index) -> tensor<?x3xf32> attributes {seg.saved_results} {
  %0 = seg.sum %x, %idx, %n : tensor<?x3xf32>, tensor<?xi32> -> tensor<?x3xf32>
  return %0 : tensor<?x3xf32>
}

// ATTRIBUTE-LABEL: func.func @unmarked_grad(
// ATTRIBUTE-SAME: %{{[^:]+}}: index, %{{[^:]+}}: tensor<?xf32> {seg.space = "segment"}) -> tensor<?xf32> {
// ATTRIBUTE: seg.rms_norm
func.func @unmarked(%x: tensor<?xf32>, %idx: tensor<?xi32>, %n: index) -> tensor<?xf32> {
  %0 = seg.rms_norm %x, %idx, %n : tensor<?xf32>, tensor<?xi32> -> tensor<?xf32>
  return %0 : tensor<?xf32>
}
