// RUN: rm -rf %t && seg-compile %s -o %t --chips=sm_90
// RUN: FileCheck %s < %t/manifest.json

// A kernel that only sums one argument's rows by idx names that argument's
// buffer (sums_rows_of): the runtime may add the rows of an unsorted index
// by chunks instead of sorting them. Anything more computed, or a second
// result, and it does not.

// CHECK-LABEL: "kernels": [
// CHECK: "sums_rows_of": 0,
// CHECK-NEXT: "symbol": "a_sum"
func.func @a_sum(%x: tensor<?x3xf32>, %idx: tensor<?xi32>, %n: index) -> tensor<?x3xf32> {
  %0 = seg.sum %x, %idx, %n : tensor<?x3xf32>, tensor<?xi32> -> tensor<?x3xf32>
  return %0 : tensor<?x3xf32>
}

// segmented_gather's adjoint: the segment count is read from the first
// argument, the rows summed are the third buffer (after idx).
// CHECK: "sums_rows_of": 2,
// CHECK-NEXT: "symbol": "b_gather_adjoint"
func.func @b_gather_adjoint(%y: tensor<?xf64>, %idx: tensor<?xi32>, %g: tensor<?xf64>)
    -> tensor<?xf64> {
  %c0 = arith.constant 0 : index
  %n = tensor.dim %y, %c0 : tensor<?xf64>
  %0 = seg.sum %g, %idx, %n : tensor<?xf64>, tensor<?xi32> -> tensor<?xf64>
  return %0 : tensor<?xf64>
}

// CHECK-NOT: "sums_rows_of"
// CHECK: "symbol": "c_sum_of_squares"
func.func @c_sum_of_squares(%x: tensor<?xf32>, %idx: tensor<?xi32>, %n: index) -> tensor<?xf32> {
  %sq = arith.mulf %x, %x : tensor<?xf32>
  %0 = seg.sum %sq, %idx, %n : tensor<?xf32>, tensor<?xi32> -> tensor<?xf32>
  return %0 : tensor<?xf32>
}

// CHECK-NOT: "sums_rows_of"
// CHECK: "symbol": "d_two_results"
// CHECK-NOT: "sums_rows_of"
func.func @d_two_results(%x: tensor<?xf32>, %idx: tensor<?xi32>, %n: index)
    -> (tensor<?xf32>, tensor<?xf32>) {
  %0 = seg.sum %x, %idx, %n : tensor<?xf32>, tensor<?xi32> -> tensor<?xf32>
  %1 = seg.mean %x, %idx, %n : tensor<?xf32>, tensor<?xi32> -> tensor<?xf32>
  return %0, %1 : tensor<?xf32>, tensor<?xf32>
}
