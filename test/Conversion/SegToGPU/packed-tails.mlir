// RUN: seg-opt %s --convert-seg-to-gpu --canonicalize --cse | FileCheck %s

// A packed chunk's tail (the segment of its last start, ending in the next
// chunk) takes its rows in the next chunk in one of two ways.

// A one-pass program whose rows read no segment values: each lane runs
// its row and the row 32 after it before the chunk's shuffles; the tail
// packs wherever it ends in the next chunk (e < 32).
// CHECK-LABEL: gpu.func @sum_scalar(
// CHECK: %[[LANE:.*]] = arith.andi %{{.*}}, %c31_i64
// The window's probes (where the check of large windows, narrow-rows.mlir,
// finds work): each chunk's last row a lane, lane 0's row before the
// window; the row before chunk k from lane k - 1 by a shuffle.
// CHECK: %[[PROBES:.*]]:2 = scf.if %{{.*}} -> (i32, i32) {
// CHECK: scf.if %{{.*}} -> (i64) {
// CHECK: llvm.load %{{.*}} : !llvm.ptr -> i32
// CHECK: scf.if %{{.*}} -> (i64) {
// CHECK: llvm.load %{{.*}} : !llvm.ptr -> i32
// CHECK: gpu.shuffle  up %{{.*}}, %c1_i32, %c32_i32 : i32
// CHECK: %[[BEFORE:.*]] = arith.select
// CHECK: %[[BUSY:.*]] = nvvm.vote.ballot.sync
// CHECK: scf.yield %[[BUSY]], %[[BEFORE]] : i32, i32
// A busy chunk takes the row before it from the probes, then its loads,
// all before its first shuffle (one round): idx of each lane's row and of
// the row 32 after it, then the lane's row and (lanes 0 to 30) the row 32
// after it.
// CHECK: %[[K:.*]] = "llvm.intr.cttz"(%arg{{[0-9]+}})
// CHECK: %[[ROWBEFORE:.*]], %{{.*}} = gpu.shuffle  idx %[[PROBES]]#1, %[[K]], %c32_i32 : i32
// CHECK: %[[INRANGE:.*]] = arith.cmpi slt, %[[ROW:.*]], %[[N:.*]] : i64
// CHECK: scf.if %[[INRANGE]] -> (i64) {
// CHECK: llvm.load %{{.*}} : !llvm.ptr -> i32
// CHECK: %[[NEXTROW:.*]] = arith.addi %[[ROW]], %c32_i64
// CHECK: %[[NEXTIN:.*]] = arith.cmpi slt, %[[NEXTROW]], %[[N]]
// CHECK: llvm.load %{{.*}} : !llvm.ptr -> i32
// CHECK: %[[ISLAST:.*]] = arith.cmpi eq, %[[LANE]], %c31_i64
// CHECK-NOT: llvm.load %{{.*}} : !llvm.ptr -> i32
// CHECK: %[[TAKESNEXT:.*]] = arith.andi %[[NEXTIN]], %{{.*}} : i1
// CHECK: %[[OWN:.*]] = scf.if %[[INRANGE]] -> (f32) {
// CHECK: llvm.load %{{.*}} : !llvm.ptr -> f32
// CHECK: %[[NEXT:.*]] = scf.if %[[TAKESNEXT]] -> (f32) {
// CHECK: llvm.load %{{.*}} : !llvm.ptr -> f32
// CHECK-NOT: llvm.load
// Where the tail ends in the next chunk, the row before each lane's (lane
// 0: the row before the chunk, on lane 31), the starts; the tail packs
// wherever it ends there (e < 32: no limit of rows a lane).
// CHECK: gpu.shuffle  idx %{{.*}}, %c31_i32, %c32_i32 : i32
// CHECK: %[[TAILEND:.*]] = "llvm.intr.cttz"
// CHECK: gpu.shuffle  idx %{{.*}}, %{{.*}}, %c32_i32 : i32
// CHECK: nvvm.vote.ballot.sync
// CHECK-NOT: %c3_i32
// CHECK: arith.cmpi ult, %[[TAILEND]], %c32_i32
// CHECK: %[[HEADS:.*]] = nvvm.vote.ballot.sync %c-1_i32, %[[ISHEAD:.*]] : i32
// The tail's rows in the next chunk (lanes below its end there) summed by
// the butterfly and added to lane 31's row before the packed segments'
// suffix scan; heads of a chunk that packs store.
// CHECK: %[[BELOW:.*]] = arith.cmpi ult, %{{.*}}, %[[TAILEND]] : i32
// CHECK: %[[INNEXT:.*]] = arith.andi %[[TAILPACKS:.*]], %[[BELOW]] : i1
// CHECK: %[[ADDS:.*]] = arith.andi %[[ISLAST]], %[[TAILPACKS]] : i1
// CHECK: arith.select %[[INNEXT]], %[[NEXT]], %cst : f32
// CHECK-COUNT-5: gpu.shuffle  xor
// CHECK: %[[WITHTAIL:.*]] = arith.addf %[[OWN]], %{{.*}} : f32
// CHECK: %[[ACC:.*]] = arith.select %[[ADDS]], %[[WITHTAIL]], %[[OWN]] : f32
// CHECK: %[[WRITES:.*]] = arith.andi %[[ISHEAD]], %{{.*}} : i1
// CHECK-NOT: scf.for {{.*}} : i32
// CHECK: gpu.shuffle  down %[[ACC]], %c1_i32, %c32_i32 : f32
// CHECK-COUNT-4: gpu.shuffle  down
// CHECK: %[[TOTAL:.*]], %{{.*}} = gpu.shuffle  idx
// CHECK: scf.if %[[WRITES]] {
// CHECK: llvm.store %[[TOTAL]]
func.func @sum_scalar(%x: tensor<?xf32>, %idx: tensor<?xi32>, %n: index) -> tensor<?xf32> {
  %0 = seg.sum %x, %idx, %n : tensor<?xf32>, tensor<?xi32> -> tensor<?xf32>
  return %0 : tensor<?xf32>
}

// Rows reading a segment value (here a gathered weight) run with their
// segment's values, so a lane cannot take a row of another segment: the
// tail's a lanes here (from the last start h to lane 31: a = ctlz + 1)
// take its rows start + j, + a, + 2a, ... where that is at most 4 rows a
// lane (e <= 3a), a loop of 32-bit offsets inside the packed chunk's
// branch; every row loads after the chunk's ballots.
// CHECK-LABEL: gpu.func @weighted_sum(
// CHECK: gpu.shuffle  idx %{{.*}}, %c31_i32, %c32_i32 : i32
// CHECK: %[[TAILEND:.*]] = "llvm.intr.cttz"
// CHECK: %[[STARTS:.*]] = nvvm.vote.ballot.sync
// CHECK-NOT: -> f32
// CHECK: %[[ZEROS:.*]] = "llvm.intr.ctlz"(%[[STARTS]])
// CHECK: %[[TAILLANES:.*]] = arith.addi %[[ZEROS]], %c1_i32
// CHECK: %[[TAILROWS:.*]] = arith.muli %[[TAILLANES]], %c3_i32
// CHECK: arith.cmpi ule, %[[TAILEND]], %[[TAILROWS]]
// CHECK: scf.if %[[PACKS:.*]] {
// The segment's weight, then its rows.
// CHECK: llvm.load %{{.*}} : !llvm.ptr -> f32
// CHECK: scf.for %{{.*}} = %{{.*}} to %{{.*}} step %{{.*}} iter_args(%{{.*}}) -> (f32)  : i32 {
// CHECK: llvm.load %{{.*}} : !llvm.ptr -> f32
// CHECK: gpu.shuffle  down
func.func @weighted_sum(%x: tensor<?xf32>, %w: tensor<?xf32>, %idx: tensor<?xi32>, %n: index) -> tensor<?xf32> {
  %0 = seg.gather %w, %idx : tensor<?xf32>, tensor<?xi32> -> tensor<?xf32>
  %1 = arith.mulf %x, %0 : tensor<?xf32>
  %2 = seg.sum %1, %idx, %n : tensor<?xf32>, tensor<?xi32> -> tensor<?xf32>
  return %2 : tensor<?xf32>
}
