// RUN: seg-opt %s --convert-seg-to-gpu --canonicalize --cse -split-input-file | FileCheck %s

// A vec3 sum becomes one kernel: raw pointers (x, idx, out) plus N and S, a
// shared buffer of one value per thread, a grid-stride loop over segments,
// two binary searches for the segment's rows, a flat strided accumulation,
// and a fixed-order tree over strides that are multiples of 3.
// CHECK-LABEL: module attributes {gpu.container_module}
// CHECK: gpu.module @seg_kernels
// CHECK: gpu.func @sum_vec3(%[[X:.*]]: !llvm.ptr, %[[IDX:.*]]: !llvm.ptr, %[[OUT:.*]]: !llvm.ptr, %[[N:.*]]: i64, %[[S:.*]]: i64)
// CHECK-SAME: workgroup(%[[SHARED:.*]] : memref<192xf32, #gpu.address_space<workgroup>>)
// CHECK-SAME: kernel
// CHECK-SAME: known_block_size = array<i32: 192, 1, 1>
// CHECK: %[[BID:.*]] = arith.index_cast %block_id_x
// CHECK: %[[GRID:.*]] = arith.index_cast %grid_dim_x
// CHECK: scf.for %[[SEG:.*]] = %[[BID]] to %[[S]] step %[[GRID]] : i64
// CHECK: %[[BEGIN:.*]]:2 = scf.while
// CHECK: llvm.load %{{.*}} : !llvm.ptr -> i32
// CHECK: %[[END:.*]]:2 = scf.while (%{{.*}} = %[[BEGIN]]#0, %{{.*}} = %[[N]])
// CHECK: %[[FLAT_END:.*]] = arith.muli %[[END]]#0, %c3_i64
// CHECK: %[[PARTIAL:.*]] = scf.for %[[F:.*]] = %{{.*}} to %[[FLAT_END]] step %c192_i64 iter_args(%{{.*}} = %cst) -> (f32) : i64
// CHECK: llvm.getelementptr inbounds %[[X]][%[[F]]] : (!llvm.ptr, i64) -> !llvm.ptr, f32
// CHECK: arith.addf
// CHECK: memref.store %[[PARTIAL]], %[[SHARED]]
// CHECK: gpu.barrier
// CHECK: arith.cmpi slt, %{{.*}}, %c96_i64
// CHECK: gpu.barrier
// CHECK: arith.cmpi slt, %{{.*}}, %c48_i64
// CHECK: arith.cmpi slt, %{{.*}}, %c24_i64
// CHECK: arith.cmpi slt, %{{.*}}, %c12_i64
// CHECK: arith.cmpi slt, %{{.*}}, %c6_i64
// CHECK: arith.cmpi slt, %{{.*}}, %c3_i64
// CHECK: scf.if
// CHECK: llvm.getelementptr inbounds %[[OUT]]
// CHECK: llvm.store
// CHECK: gpu.barrier
// CHECK: gpu.return
// CHECK-NOT: func.func @sum_vec3
func.func @sum_vec3(%x: tensor<?x3xf32>, %idx: tensor<?xi32>, %n: index) -> tensor<?x3xf32> {
  %0 = seg.sum %x, %idx, %n : tensor<?x3xf32>, tensor<?xi32> -> tensor<?x3xf32>
  return %0 : tensor<?x3xf32>
}

// -----

// Scalar rows: thread 0 adds the three residue totals in a fixed order.
// CHECK-LABEL: gpu.func @sum_scalar
// CHECK-SAME: workgroup(%[[SHARED:.*]] : memref<192xf64, #gpu.address_space<workgroup>>)
// CHECK: scf.for
// CHECK: %[[WRITER:.*]] = arith.cmpi eq, %{{.*}}, %c0_i64
// CHECK: scf.if %[[WRITER]]
// CHECK: %[[P0:.*]] = memref.load %[[SHARED]][%c0]
// CHECK: %[[P1:.*]] = memref.load %[[SHARED]][%c1]
// CHECK: %[[S01:.*]] = arith.addf %[[P0]], %[[P1]] : f64
// CHECK: %[[P2:.*]] = memref.load %[[SHARED]][%c2]
// CHECK: %[[TOTAL:.*]] = arith.addf %[[S01]], %[[P2]] : f64
// CHECK: llvm.store %[[TOTAL]]
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
