// RUN: seg-opt %s --convert-seg-to-gpu --canonicalize --cse | FileCheck %s

// Rows held a row per lane of at most 8 bytes
// (SegmentProgram::gpuSavesNarrowRowSectors) spend instructions on the
// sectors that a probe or a step from anywhere wastes, an eighth of their
// data or more.

// Windows of more than 4 chunks (the grid capped: long segments) load the
// row before the window and its last row (lanes 0 and 1) before probing a
// sector a chunk; where both hold one segment (and the window holds
// neither row 0 nor the last row), no chunk is probed or runs.
// CHECK-LABEL: gpu.func @sum_scalar(
// CHECK: %[[LARGE:.*]] = arith.cmpi sgt, %{{.*}}, %c4_i64 : i64
// CHECK: scf.for
// CHECK: %[[MAYWORK:.*]] = scf.if %[[LARGE]] -> (i1) {
// CHECK: %[[HELD:.*]] = nvvm.vote.ballot.sync
// CHECK: llvm.intr.ctpop(%[[HELD]])
// CHECK: llvm.load %{{.*}} : !llvm.ptr -> i32
// CHECK: %[[LAST:.*]], %{{.*}} = gpu.shuffle  idx %[[ENDS:.*]], %c1_i32, %c32_i32 : i32
// CHECK: %[[FIRST:.*]], %{{.*}} = gpu.shuffle  idx %[[ENDS]], %c0_i32, %c32_i32 : i32
// CHECK: arith.cmpi eq, %[[FIRST]], %[[LAST]] : i32
// CHECK: } else {
// CHECK-NEXT: scf.yield %true : i1
// CHECK: %[[PROBES:.*]]:2 = scf.if %[[MAYWORK]] -> (i32, i32) {
// CHECK: %[[BUSY:.*]] = nvvm.vote.ballot.sync
// CHECK-NEXT: scf.yield %[[BUSY]], %{{.*}} : i32, i32
// CHECK-NEXT: } else {
// CHECK-NEXT: scf.yield %c0_i32, %c0_i32 : i32, i32
// CHECK: scf.while (%{{.*}} = %[[PROBES]]#0)

// A walk steps from its start's chunk where that takes no more rounds of
// loads (4 steps of 32 rows): the first step peeled, its lanes outside the
// segment masked (reading the start's row), then the loop, unmasked.
// CHECK: %[[CHUNKSTART:.*]] = arith.andi %[[START:.*]], %c-32_i64 : i64
// CHECK: arith.divsi %{{.*}}, %c128_i64 : i64
// CHECK: arith.divsi %{{.*}}, %c128_i64 : i64
// CHECK: %[[SAME:.*]] = arith.cmpi eq
// CHECK: %[[BASE:.*]] = arith.select %[[SAME]], %[[CHUNKSTART]], %[[START]] : i64
// CHECK: %[[HEAD:.*]] = scf.if %{{.*}} -> (f32) {
// CHECK: %[[ROW:.*]] = arith.addi %[[BASE]], %{{.*}} : i64
// CHECK: arith.cmpi sge, %[[ROW]], %[[START]] : i64
// CHECK: arith.maxsi %[[ROW]], %[[START]] : i64
// CHECK: llvm.load %{{.*}} : !llvm.ptr -> f32
// CHECK: arith.select %{{.*}}, %{{.*}}, %cst : f32
// CHECK: arith.addi %[[BASE]], %c32_i64 : i64
// CHECK: scf.for %{{.*}} = %{{.*}} to %{{.*}} step %c32_i64 iter_args(%{{.*}} = %[[HEAD]]) -> (f32)
// CHECK-NEXT: llvm.getelementptr
// CHECK-NEXT: llvm.load %{{.*}} : !llvm.ptr -> f32
// CHECK-NEXT: arith.addf
// CHECK-NEXT: scf.yield
func.func @sum_scalar(%x: tensor<?xf32>, %idx: tensor<?xi32>, %n: index) -> tensor<?xf32> {
  %0 = seg.sum %x, %idx, %n : tensor<?xf32>, tensor<?xi32> -> tensor<?xf32>
  return %0 : tensor<?xf32>
}

// Rows of 12 bytes: every window probes its chunks, and walks step from
// their starts.
// CHECK-LABEL: gpu.func @sum_vec3(
// CHECK-NOT: llvm.intr.ctpop
// CHECK-NOT: %c-32_i64
// CHECK: gpu.return
// CHECK-NEXT: }
// CHECK-NEXT: }
func.func @sum_vec3(%x: tensor<?x3xf32>, %idx: tensor<?xi32>, %n: index) -> tensor<?x3xf32> {
  %0 = seg.sum %x, %idx, %n : tensor<?x3xf32>, tensor<?xi32> -> tensor<?x3xf32>
  return %0 : tensor<?x3xf32>
}
