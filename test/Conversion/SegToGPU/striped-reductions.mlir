// RUN: seg-opt %s --convert-seg-to-gpu --canonicalize --cse -split-input-file | FileCheck %s

// One-pass programs whose every reduction reduces a row input as it is
// (sum, mean, max, min), of 1 or an odd number of components, one at least
// 3 (SegmentProgram::gpuStripedReductions): the tile kernel reduces a long
// piece's rows striped. A step of 32 rows loads an input of F components
// as F loads of 32 consecutive values (load k of lane l: value 32k + l of
// the step's, component (32k + l) mod 3), each lane keeping F accumulators
// of F different components; the first and the last step are masked (a
// word outside the piece counts as the identity), the full steps between
// are not. After the rows, selects put each lane's accumulators in
// component order, and the butterfly combines them.
// CHECK-LABEL: gpu.func @max_vec3__tiles(
// CHECK-SAME: %[[X:[^:]*]]: !llvm.ptr
// CHECK: %[[NEGINF:.*]] = arith.constant 0xFFF0000000000000 : f64
// CHECK: scf.for %{{.*}} = %c0_i64 to %c2_i64 step %c1_i64 : i64 {
// CHECK: scf.if %{{.*}} -> (f64, f64, f64) {
// CHECK: arith.trunci %{{.*}} : i64 to i32
// CHECK: arith.cmpi ult, %{{.*}}, %{{.*}} : i32
// CHECK: scf.if %{{.*}} -> (f64) {
// CHECK: llvm.getelementptr inbounds %[[X]]
// CHECK: } else {
// CHECK-NEXT: scf.yield %[[NEGINF]] : f64
// CHECK-COUNT-2: arith.cmpi ult, %{{.*}}, %{{.*}} : i32
// CHECK: scf.for %[[ROW:.*]] = %{{.*}} to %[[FULLEND:[^ ]*]] step %c32_i64 iter_args({{.*}}) -> (f64, f64, f64)
// CHECK: %[[ROWWORD:.*]] = arith.muli %[[ROW]], %c3_i64 : i64
// CHECK: %[[WORD0:.*]] = arith.addi %[[ROWWORD]], %{{.*}} : i64
// CHECK: llvm.getelementptr inbounds %[[X]][%[[WORD0]]]
// CHECK: arith.maximumf
// CHECK: %[[WORD1:.*]] = arith.addi %[[WORD0]], %c32_i64 : i64
// CHECK: llvm.getelementptr inbounds %[[X]][%[[WORD1]]]
// CHECK: arith.maximumf
// CHECK: %[[WORD2:.*]] = arith.addi %[[WORD0]], %c64_i64 : i64
// CHECK: llvm.getelementptr inbounds %[[X]][%[[WORD2]]]
// CHECK: arith.maximumf
// CHECK-NOT: arith.cmpi
// CHECK: scf.yield
// CHECK: %[[LAST:.*]] = arith.cmpi slt, %[[FULLEND]], %{{.*}} : i64
// CHECK: scf.if %[[LAST]] -> (f64, f64, f64) {
// CHECK-COUNT-3: arith.cmpi ult, %{{.*}}, %{{.*}} : i32
// CHECK: arith.remui %{{.*}}, %c3_i32 : i32
// CHECK-COUNT-6: arith.select %{{.*}}, %{{.*}}, %{{.*}} : f64
// CHECK-COUNT-15: gpu.shuffle  xor
// CHECK: gpu.return
func.func @max_vec3(%x: tensor<?x3xf64>, %idx: tensor<?xi32>, %n: index) -> tensor<?x3xf64> {
  %0 = seg.max %x, %idx, %n : tensor<?x3xf64>, tensor<?xi32> -> tensor<?x3xf64>
  return %0 : tensor<?x3xf64>
}

// -----

// Several inputs: a step loads each (1 + 5 loads), and only the 5-vector's
// accumulators need putting in order.
// CHECK-LABEL: gpu.func @sums_of_a_scalar_and_a_vec5__tiles(
// CHECK: scf.for %{{.*}} step %c32_i64 iter_args({{.*}}) -> (f32, f32, f32, f32, f32, f32)
// CHECK-COUNT-6: llvm.load %{{.*}} : !llvm.ptr -> f32
// CHECK-NOT: llvm.load
// CHECK: scf.yield
// CHECK: arith.remui %{{.*}}, %c5_i32 : i32
// CHECK-COUNT-20: arith.select %{{.*}}, %{{.*}}, %{{.*}} : f32
// CHECK-COUNT-30: gpu.shuffle  xor
// CHECK: gpu.return
func.func @sums_of_a_scalar_and_a_vec5(%s: tensor<?xf32>, %v: tensor<?x5xf32>, %idx: tensor<?xi32>, %n: index) -> (tensor<?xf32>, tensor<?x5xf32>) {
  %0 = seg.sum %s, %idx, %n : tensor<?xf32>, tensor<?xi32> -> tensor<?xf32>
  %1 = seg.sum %v, %idx, %n : tensor<?x5xf32>, tensor<?xi32> -> tensor<?x5xf32>
  return %0, %1 : tensor<?xf32>, tensor<?x5xf32>
}

// -----

// Not striped: an even width (32 is not invertible modulo 2), and a row
// term that is not the input as it is. A lane reduces its own rows.
// CHECK-LABEL: gpu.func @sum_vec2__tiles(
// CHECK: scf.for %{{.*}} = %c0_i64 to %c2_i64 step %c1_i64 : i64 {
// CHECK: scf.for %{{.*}} step %c32_i64 iter_args({{.*}}) -> (f32, f32)
// CHECK-NOT: arith.remui
// CHECK: gpu.return
func.func @sum_vec2(%x: tensor<?x2xf32>, %idx: tensor<?xi32>, %n: index) -> tensor<?x2xf32> {
  %0 = seg.sum %x, %idx, %n : tensor<?x2xf32>, tensor<?xi32> -> tensor<?x2xf32>
  return %0 : tensor<?x2xf32>
}

// -----

// CHECK-LABEL: gpu.func @sum_of_squares_vec3__tiles(
// CHECK: scf.for %{{.*}} = %c0_i64 to %c2_i64 step %c1_i64 : i64 {
// CHECK: scf.for %{{.*}} step %c32_i64 iter_args({{.*}}) -> (f32, f32, f32)
// CHECK-COUNT-3: arith.mulf
// CHECK-NOT: arith.remui
// CHECK: gpu.return
func.func @sum_of_squares_vec3(%x: tensor<?x3xf32>, %idx: tensor<?xi32>, %n: index) -> tensor<?x3xf32> {
  %squares = arith.mulf %x, %x : tensor<?x3xf32>
  %0 = seg.sum %squares, %idx, %n : tensor<?x3xf32>, tensor<?xi32> -> tensor<?x3xf32>
  return %0 : tensor<?x3xf32>
}
