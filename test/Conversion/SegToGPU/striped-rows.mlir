// RUN: seg-opt %s --convert-seg-to-gpu --canonicalize --cse | FileCheck %s

// Row maps of rows of an odd number of components (3-vectors) move them a
// warp at a time (SegmentProgram::gpuStripesRowMap): load k of lane l reads
// value 32k + l of the warp's rows, shuffles hand each lane its row, and
// row outputs go back the same way. The loop is the warp's (from its first
// row), 2 rows a thread (512 a block of 256). The segment input is read
// for the warp's segments together where the lanes' segments lie within
// the window from lane 0's (32 for scalars), else a lane each.
// CHECK-LABEL: gpu.func @mul_vec3(
// CHECK: %[[LANE:.*]] = arith.andi %{{.*}}, %c31_i64 : i64
// CHECK: %[[WARPTHREAD:.*]] = arith.subi %{{.*}}, %[[LANE]] : i64
// CHECK: %[[FIRST:.*]] = arith.addi %{{.*}}, %[[WARPTHREAD]] : i64
// CHECK: scf.for %[[BASE:.*]] = %[[FIRST]] to %{{.*}} step
// Both rows' idx loads come first.
// CHECK: %[[SEG0:.*]] = scf.if %{{.*}} -> (i64) {
// CHECK: llvm.load %{{.*}} : !llvm.ptr -> i32
// CHECK: scf.if %{{.*}} -> (i64) {
// CHECK: llvm.load %{{.*}} : !llvm.ptr -> i32
// CHECK: %[[LANE0:.*]], %{{.*}} = gpu.shuffle  idx %{{.*}}, %c0_i32, %c32_i32 : i32
// CHECK: arith.cmpi slt, %{{.*}}, %c32_i64 : i64
// CHECK: %[[FITS:.*]] = nvvm.vote.ballot.sync %c-1_i32, %{{.*}} : i32
// CHECK: %[[TOGETHER:.*]] = arith.cmpi eq, %[[FITS]], %c-1_i32 : i32
// Three loads of 32 consecutive values of x.
// CHECK-COUNT-3: llvm.load %{{.*}} : !llvm.ptr -> f32
// CHECK: scf.if %[[TOGETHER]] -> (f32) {
// CHECK: llvm.load %{{.*}} : !llvm.ptr -> f32
// CHECK: gpu.shuffle  idx %{{.*}}, %{{.*}}, %c32_i32 : f32
// CHECK: } else {
// CHECK: llvm.load %{{.*}} : !llvm.ptr -> f32
// The lane's row: which load holds each component (32 is invertible mod 3).
// CHECK: arith.remui %{{.*}}, %c3_i32 : i32
// CHECK-COUNT-3: gpu.shuffle  idx %{{.*}}, %{{.*}}, %c32_i32 : f32
// CHECK: %[[ROW:.*]]:3 = scf.if %{{.*}} -> (f32, f32, f32) {
// CHECK: arith.mulf
// CHECK: } else {
// CHECK-NEXT: scf.yield %cst, %cst, %cst : f32, f32, f32
// And back: three shuffles, three stores of 32 consecutive values.
// CHECK: gpu.shuffle  idx %[[ROW]]#0, %{{.*}}, %c32_i32 : f32
// CHECK: gpu.shuffle  idx %[[ROW]]#1, %{{.*}}, %c32_i32 : f32
// CHECK: gpu.shuffle  idx %[[ROW]]#2, %{{.*}}, %c32_i32 : f32
// CHECK-COUNT-3: llvm.store %{{.*}} : f32, !llvm.ptr
// The second row of the thread, 256 rows on.
// CHECK: %{{.*}}, %{{.*}} = gpu.shuffle  idx %{{.*}}, %c0_i32, %c32_i32 : i32
// CHECK: gpu.return
func.func @mul_vec3(%x: tensor<?x3xf32>, %y: tensor<?xf32>, %idx: tensor<?xi32>) -> tensor<?x3xf32> {
  %0 = seg.mul %x, %y, %idx : tensor<?x3xf32>, tensor<?xf32>, tensor<?xi32> -> tensor<?x3xf32>
  return %0 : tensor<?x3xf32>
}

// Scalar rows are read whole sectors a lane each already, and rows of an
// even width (2) have no such shuffles (32 is not invertible mod 2): a
// thread per row, 4 rows a thread (1,024 a block), no shuffles.
// CHECK-LABEL: gpu.func @gather_scalar(
// CHECK: arith.muli %{{.*}}, %c1024_i64 : i64
// CHECK-NOT: gpu.shuffle
// CHECK: gpu.return
func.func @gather_scalar(%y: tensor<?xf32>, %idx: tensor<?xi32>) -> tensor<?xf32> {
  %0 = seg.gather %y, %idx : tensor<?xf32>, tensor<?xi32> -> tensor<?xf32>
  return %0 : tensor<?xf32>
}

// CHECK-LABEL: gpu.func @gather_vec2(
// CHECK: arith.muli %{{.*}}, %c1024_i64 : i64
// CHECK-NOT: gpu.shuffle
// CHECK: gpu.return
func.func @gather_vec2(%y: tensor<?x2xf64>, %idx: tensor<?xi32>) -> tensor<?x2xf64> {
  %0 = seg.gather %y, %idx : tensor<?x2xf64>, tensor<?xi32> -> tensor<?x2xf64>
  return %0 : tensor<?x2xf64>
}
