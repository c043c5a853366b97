// RUN: rm -rf %t && seg-compile %s -o %t --chips=sm_90
// RUN: FileCheck %s < %t/manifest.json

// A kernel reading a table by a second index names the pair (index buffer,
// table buffer) for the runtime to check j's range; a scatter_sum's output
// holds the N rows the kernel writes, summed by j into as many rows as the
// table has.

// CHECK-LABEL: "kernels": [
// CHECK: "name": "arg0",
// CHECK-NEXT: "read": true,
// CHECK-NEXT: "role": "input",
// CHECK-NEXT: "shape": [
// CHECK-NEXT: "?",
// CHECK-NEXT: "3"
// CHECK: "name": "arg1",
// CHECK-NEXT: "read": true,
// CHECK-NEXT: "role": "input",
// CHECK-NEXT: "shape": [
// CHECK-NEXT: "N"
// CHECK: "gathers": [
// CHECK-NEXT: {
// CHECK-NEXT: "index": 1,
// CHECK-NEXT: "table": 0
// CHECK: "name": "edges_forward"
func.func @edges_forward(%pos: tensor<?x3xf32>, %j: tensor<?xi32>, %i: tensor<?xi32>, %n: index)
    -> tensor<?xf32> {
  %pj = seg.gather_rows %pos, %j : tensor<?x3xf32>, tensor<?xi32> -> tensor<?x3xf32>
  %sq = arith.mulf %pj, %pj : tensor<?x3xf32>
  %r2 = seg.component_sum %sq : tensor<?x3xf32> -> tensor<?xf32>
  %s = seg.sum %r2, %i, %n : tensor<?xf32>, tensor<?xi32> -> tensor<?xf32>
  return %s : tensor<?xf32>
}

// CHECK: "into_rows_of": 0,
// CHECK-NEXT: "name": "result0",
// CHECK-NEXT: "role": "output",
// CHECK-NEXT: "shape": [
// CHECK-NEXT: "N",
// CHECK-NEXT: "3"
// CHECK-NEXT: ],
// CHECK-NEXT: "sums_by": 1
// CHECK: "gathers": [],
// CHECK: "name": "forces"
func.func @forces(%pos: tensor<?x3xf32>, %j: tensor<?xi32>, %i: tensor<?xi32>, %g: tensor<?x3xf32>)
    -> tensor<?x3xf32> {
  %c0 = arith.constant 0 : index
  %m = tensor.dim %pos, %c0 : tensor<?x3xf32>
  %f = seg.scatter_sum %g, %j, %m : tensor<?x3xf32>, tensor<?xi32> -> tensor<?x3xf32>
  return %f : tensor<?x3xf32>
}
