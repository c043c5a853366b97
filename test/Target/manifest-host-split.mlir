// RUN: rm -rf %t && seg-compile %s -o %t --chips=sm_90
// RUN: FileCheck %s < %t/manifest.json

// The host split entry records how the runtime combines the tiles' partial
// totals of a long segment, one kind per total in total order, and the
// totals' element type (a f64 program's totals are f64).

// CHECK-LABEL: "kernels": [
// Kernels are listed by name; "finish_symbol" tells whose entry a check reads.
// A program whose later pass reads an earlier pass's max (the backward of
// max: which rows attain it): totals of both passes, each by its kind.
// CHECK: "split": {
// CHECK-NEXT: "combine": [
// CHECK-NEXT: "max",
// CHECK-NEXT: "add"
// CHECK-NEXT: ],
// CHECK-NEXT: "finish_symbol": "argmax_count__finish",
// CHECK-NEXT: "pass_totals": [
// CHECK-NEXT: 1,
// CHECK-NEXT: 1
// CHECK-NEXT: ],
// CHECK: "totals_dtype": "f32"
func.func @argmax_count(%q: tensor<?xf32>, %idx: tensor<?xi32>, %n: index) -> tensor<?xf32> {
  %m = seg.max %q, %idx, %n : tensor<?xf32>, tensor<?xi32> -> tensor<?xf32>
  %g = seg.gather %m, %idx : tensor<?xf32>, tensor<?xi32> -> tensor<?xf32>
  %e = arith.cmpf oeq, %q, %g : tensor<?xf32>
  %one = arith.constant 1.0 : f32
  %zero = arith.constant 0.0 : f32
  %c0 = arith.constant 0 : index
  %len = tensor.dim %q, %c0 : tensor<?xf32>
  %ones = tensor.splat %one[%len] : tensor<?xf32>
  %zeros = tensor.splat %zero[%len] : tensor<?xf32>
  %hit = arith.select %e, %ones, %zeros : tensor<?xi1>, tensor<?xf32>
  %c = seg.sum %hit, %idx, %n : tensor<?xf32>, tensor<?xi32> -> tensor<?xf32>
  return %c : tensor<?xf32>
}

// CHECK: "host": {
// CHECK-NEXT: "range": "segments",
// CHECK-NEXT: "split": {
// CHECK-NEXT: "combine": [
// CHECK-NEXT: "max",
// CHECK-NEXT: "max",
// CHECK-NEXT: "max",
// CHECK-NEXT: "add",
// CHECK-NEXT: "min"
// CHECK-NEXT: ],
// CHECK-NEXT: "finish_symbol": "max_and_sum__finish",
// CHECK-NEXT: "pass_totals": [
// CHECK-NEXT: 5
// CHECK-NEXT: ],
// CHECK-NEXT: "rows_symbol": "max_and_sum__rows",
// CHECK-NEXT: "totals": 5,
// CHECK-NEXT: "totals_dtype": "f64"
func.func @max_and_sum(%x: tensor<?x3xf64>, %q: tensor<?xf64>, %idx: tensor<?xi32>, %n: index)
    -> (tensor<?x3xf64>, tensor<?xf64>, tensor<?xf64>) {
  %0 = seg.max %x, %idx, %n : tensor<?x3xf64>, tensor<?xi32> -> tensor<?x3xf64>
  %1 = seg.sum %q, %idx, %n : tensor<?xf64>, tensor<?xi32> -> tensor<?xf64>
  %2 = seg.min %q, %idx, %n : tensor<?xf64>, tensor<?xi32> -> tensor<?xf64>
  return %0, %1, %2 : tensor<?x3xf64>, tensor<?xf64>, tensor<?xf64>
}
