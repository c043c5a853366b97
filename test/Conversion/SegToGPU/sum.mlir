// RUN: seg-opt %s --convert-seg-to-gpu --canonicalize --cse -split-input-file | FileCheck %s

// A vec3 sum becomes one kernel over raw pointers (x, idx, out) plus N and S.
// Warps grid-stride over chunks of 32 rows; a ballot finds the rows where a
// segment starts, and for each the warp zeroes the empty segments before it,
// walks the segment's rows lane-strided while idx stays the same, and sums
// the lanes with a fixed xor butterfly; lane 0 writes the three components.
// CHECK-LABEL: module attributes {gpu.container_module}
// CHECK: gpu.module @seg_kernels
// CHECK: gpu.func @sum_vec3(%[[X:.*]]: !llvm.ptr, %[[IDX:.*]]: !llvm.ptr, %[[OUT:.*]]: !llvm.ptr, %[[N:.*]]: i64, %[[S:.*]]: i64)
// CHECK-SAME: kernel
// CHECK-SAME: known_block_size = array<i32: 256, 1, 1>
// CHECK-NOT: workgroup
// CHECK: %[[LANE:.*]] = arith.andi %{{.*}}, %c31_i64
// CHECK: %[[CHUNKS:.*]] = arith.divui %{{.*}}, %c32_i64
// No rows: the whole grid zeroes every segment.
// CHECK: %[[EMPTY:.*]] = arith.cmpi eq, %[[N]], %c0_i64
// CHECK: scf.if %[[EMPTY]]
// CHECK: llvm.store %cst
// CHECK: scf.for %[[CHUNK:.*]] = %{{.*}} to %[[CHUNKS]] step %{{.*}} : i64
// CHECK: %[[STARTS:.*]] = nvvm.vote.ballot.sync %c-1_i32, %{{.*}} : i32
// CHECK: scf.while (%[[MASK:.*]] = %[[STARTS]]) : (i32) -> i32
// CHECK: "llvm.intr.cttz"
// CHECK: scf.for %{{.*}} step %c32_i64 : i64
// CHECK: llvm.store %cst
// CHECK: %[[VALID:.*]] = arith.andi
// CHECK: scf.if %[[VALID]]
// CHECK: %[[WALK:.*]]:4 = scf.while ({{.*}}) : (i64, f32, f32, f32) -> (i64, f32, f32, f32)
// CHECK: arith.cmpi slt, %{{.*}}, %[[N]]
// CHECK: llvm.getelementptr inbounds %[[IDX]]
// CHECK: scf.condition
// CHECK: arith.addi %{{.*}}, %c32_i64
// CHECK-COUNT-3: llvm.getelementptr inbounds %[[X]]
// CHECK: gpu.shuffle  xor %[[WALK]]#1, %c16_i32, %c32_i32 : f32
// CHECK: gpu.shuffle  xor %{{.*}}, %c8_i32, %c32_i32 : f32
// CHECK: gpu.shuffle  xor %{{.*}}, %c4_i32, %c32_i32 : f32
// CHECK: gpu.shuffle  xor %{{.*}}, %c2_i32, %c32_i32 : f32
// CHECK: gpu.shuffle  xor %{{.*}}, %c1_i32, %c32_i32 : f32
// CHECK: gpu.shuffle  xor %[[WALK]]#2, %c16_i32
// CHECK: gpu.shuffle  xor %[[WALK]]#3, %c16_i32
// CHECK: %[[LANE0:.*]] = arith.cmpi eq, %[[LANE]], %c0_i64
// CHECK: scf.if %[[LANE0]]
// CHECK-COUNT-3: llvm.store
// The warp holding the last row zeroes the segments after it.
// CHECK: arith.subi %[[N]], %c1_i64
// CHECK: scf.if
// CHECK: llvm.store %cst
// CHECK: gpu.return
// CHECK-NOT: func.func @sum_vec3
func.func @sum_vec3(%x: tensor<?x3xf32>, %idx: tensor<?xi32>, %n: index) -> tensor<?x3xf32> {
  %0 = seg.sum %x, %idx, %n : tensor<?x3xf32>, tensor<?xi32> -> tensor<?x3xf32>
  return %0 : tensor<?x3xf32>
}

// -----

// Scalar rows: one accumulator per lane, f64 shuffles.
// CHECK-LABEL: gpu.func @sum_scalar
// CHECK: scf.while ({{.*}}) : (i64, f64) -> (i64, f64)
// CHECK-COUNT-5: gpu.shuffle  xor {{.*}} : f64
// CHECK-NOT: gpu.shuffle
// CHECK: llvm.store %{{.*}}, %{{.*}} : f64, !llvm.ptr
func.func @sum_scalar(%x: tensor<?xf64>, %idx: tensor<?xi32>, %n: index) -> tensor<?xf64> {
  %0 = seg.sum %x, %idx, %n : tensor<?xf64>, tensor<?xi32> -> tensor<?xf64>
  return %0 : tensor<?xf64>
}

// -----

// Gather: one thread per output element; rows whose segment is out of range
// read nothing and produce 0.
// CHECK-LABEL: gpu.func @gather_vec3
// CHECK-SAME: (%[[Y:.*]]: !llvm.ptr, %[[IDX:.*]]: !llvm.ptr, %[[OUT:.*]]: !llvm.ptr, %[[N:.*]]: i64, %[[S:.*]]: i64)
// CHECK-NOT: workgroup
// CHECK: %[[TOTAL:.*]] = arith.muli %[[N]], %c3_i64
// CHECK: scf.for %[[F:.*]] = %{{.*}} to %[[TOTAL]] step %{{.*}} : i64
// CHECK: %[[ROW:.*]] = arith.divui %[[F]], %c3_i64
// CHECK: llvm.getelementptr inbounds %[[IDX]][%[[ROW]]]
// CHECK: %[[LOW:.*]] = arith.cmpi sge, %{{.*}}, %c0_i64
// CHECK: %[[HIGH:.*]] = arith.cmpi slt, %{{.*}}, %[[S]]
// CHECK: %[[VALID:.*]] = arith.andi %[[LOW]], %[[HIGH]]
// CHECK: scf.if %[[VALID]] -> (f64)
// CHECK: llvm.getelementptr inbounds %[[Y]]
// CHECK: } else {
// CHECK: scf.yield %cst
// CHECK: llvm.getelementptr inbounds %[[OUT]][%[[F]]]
func.func @gather_vec3(%y: tensor<?x3xf64>, %idx: tensor<?xi32>) -> tensor<?x3xf64> {
  %0 = seg.gather %y, %idx : tensor<?x3xf64>, tensor<?xi32> -> tensor<?x3xf64>
  return %0 : tensor<?x3xf64>
}

// -----

// Functions without seg ops are left alone, and no GPU module is created.
// CHECK-LABEL: func.func @not_a_kernel
// CHECK-NOT: gpu.module
func.func @not_a_kernel(%a: i64) -> i64 {
  return %a : i64
}
