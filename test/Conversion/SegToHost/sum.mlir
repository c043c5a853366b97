// RUN: seg-opt %s --convert-seg-to-host --canonicalize --cse -split-input-file | FileCheck %s

// Host kernels take the GPU kernel's parameters plus the range of segments
// [begin, end), clamped to what exists, and walk segments in order: one
// binary search for the first row, then a forward scan per boundary.
// CHECK-LABEL: func.func @sum_vec3
// CHECK-SAME: (%[[X:.*]]: !llvm.ptr, %[[IDX:.*]]: !llvm.ptr, %[[OUT:.*]]: !llvm.ptr, %[[N:.*]]: i64, %[[S:.*]]: i64, %[[B:.*]]: i64, %[[E:.*]]: i64)
// CHECK: %[[B0:.*]] = arith.maxsi %[[B]], %c0_i64
// CHECK: %[[BEGIN:.*]] = arith.minsi %[[B0]], %[[S]]
// CHECK: %[[E0:.*]] = arith.maxsi %[[E]], %c0_i64
// CHECK: %[[END:.*]] = arith.minsi %[[E0]], %[[S]]
// CHECK: %[[FIRST:.*]]:2 = scf.while
// CHECK: scf.for %[[SEG:.*]] = %[[BEGIN]] to %[[END]] step %c1_i64 iter_args(%[[ROW:.*]] = %[[FIRST]]#0) -> (i64) : i64
// The segment's end: a scan from the previous boundary probing the last row
// of each 16-row block, then a binary search in the block it stopped at.
// CHECK: %[[SCAN:.*]] = scf.while (%{{.*}} = %[[ROW]]) : (i64) -> i64
// CHECK: arith.addi %{{.*}}, %c15_i64
// CHECK: %[[BLOCKEND:.*]] = arith.addi %[[SCAN]], %c16_i64
// CHECK: %[[UPPER:.*]] = arith.minsi %[[BLOCKEND]], %[[N]]
// CHECK: %[[NEXT:.*]]:2 = scf.while (%{{.*}} = %[[SCAN]], %{{.*}} = %[[UPPER]])
// Rows are summed in 4 interleaved partial sums (4 rows per iteration),
// the tail continues the first, and the partials are added pairwise.
// CHECK: %[[MAIN:.*]]:12 = scf.for %{{.*}} = %[[ROW]] to %{{.*}} step %c4_i64 iter_args({{.*}}) -> (f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32) : i64
// CHECK-COUNT-12: llvm.getelementptr inbounds %[[X]]
// CHECK: %[[TAIL:.*]]:3 = scf.for %{{.*}} to %[[NEXT]]#0 step %c1_i64 iter_args(%{{.*}} = %[[MAIN]]#0, %{{.*}} = %[[MAIN]]#1, %{{.*}} = %[[MAIN]]#2) -> (f32, f32, f32) : i64
// CHECK: %[[A0:.*]] = arith.addf %[[TAIL]]#0, %[[MAIN]]#6
// CHECK: %[[B0:.*]] = arith.addf %[[MAIN]]#3, %[[MAIN]]#9
// CHECK: %[[S0:.*]] = arith.addf %[[A0]], %[[B0]]
// CHECK: llvm.store %[[S0]]
// CHECK: scf.yield %[[NEXT]]#0 : i64
// CHECK: return
func.func @sum_vec3(%x: tensor<?x3xf32>, %idx: tensor<?xi32>, %n: index) -> tensor<?x3xf32> {
  %0 = seg.sum %x, %idx, %n : tensor<?x3xf32>, tensor<?xi32> -> tensor<?x3xf32>
  return %0 : tensor<?x3xf32>
}

// -----

// Gather only maps rows: a call computes rows [begin, end) (clamped to
// [0, N], not to [0, S]), with no segment search; each row reads its own
// segment's row, and rows whose segment is outside [0, S) get 0.
// CHECK-LABEL: func.func @gather_scalar
// CHECK-SAME: (%[[Y:.*]]: !llvm.ptr, %[[IDX:.*]]: !llvm.ptr, %[[OUT:.*]]: !llvm.ptr, %[[N:.*]]: i64, %[[S:.*]]: i64, %[[B:.*]]: i64, %[[E:.*]]: i64)
// CHECK: %[[B0:.*]] = arith.maxsi %[[B]], %c0_i64
// CHECK: %[[FIRST:.*]] = arith.minsi %[[B0]], %[[N]]
// CHECK: %[[E0:.*]] = arith.maxsi %[[E]], %c0_i64
// CHECK: %[[LAST:.*]] = arith.minsi %[[E0]], %[[N]]
// CHECK-NOT: scf.while
// CHECK: scf.for %[[ROW:.*]] = %[[FIRST]] to %[[LAST]] step %c1_i64 : i64
// CHECK: %[[SEGMENT:.*]] = arith.extsi
// CHECK: scf.if
// CHECK: llvm.getelementptr inbounds %[[Y]][%[[SEGMENT]]]
// CHECK: llvm.getelementptr inbounds %[[OUT]][%[[ROW]]]
// CHECK: } else {
// CHECK: llvm.store %cst
// CHECK-NOT: scf.for
// Row outputs: no tile kernel.
// CHECK-NOT: @gather_scalar__rows
func.func @gather_scalar(%y: tensor<?xf32>, %idx: tensor<?xi32>) -> tensor<?xf32> {
  %0 = seg.gather %y, %idx : tensor<?xf32>, tensor<?xi32> -> tensor<?xf32>
  return %0 : tensor<?xf32>
}

// -----

// mean: one pass, then division by the row count (1 for an empty segment,
// whose sum is 0).
// CHECK-LABEL: func.func @mean
// CHECK: %[[MAIN:.*]]:4 = scf.for {{.*}} -> (f64, f64, f64, f64)
// CHECK: %[[TAIL:.*]] = scf.for {{.*}} -> (f64)
// CHECK: %[[A:.*]] = arith.addf %[[TAIL]], %[[MAIN]]#2
// CHECK: %[[B:.*]] = arith.addf %[[MAIN]]#1, %[[MAIN]]#3
// CHECK: %[[ACC:.*]] = arith.addf %[[A]], %[[B]]
// CHECK: %[[COUNT:.*]] = arith.sitofp %{{.*}} : i64 to f64
// CHECK: %[[SOME:.*]] = arith.cmpi sgt
// CHECK: %[[SAFE:.*]] = arith.select %[[SOME]], %[[COUNT]], %cst
// CHECK: arith.divf %[[ACC]], %[[SAFE]]
// A single-pass reduction also gets a tile kernel (the raw totals of rows
// [begin, end) of one segment, for splitting long segments across
// threads) and a finish kernel (the segment's result from its totals).
// CHECK-LABEL: func.func @mean__rows
// CHECK-SAME: (%{{.*}}: !llvm.ptr, %[[TIDX:.*]]: !llvm.ptr, %{{.*}}: !llvm.ptr, %[[TN:.*]]: i64, %[[TS:.*]]: i64, %{{.*}}: i64, %{{.*}}: i64, %[[TOTALS:.*]]: !llvm.ptr)
// CHECK: llvm.store %cst, %[[TOTALS]] : f64
// CHECK: scf.if
// CHECK: %[[TILE:.*]]:4 = scf.for {{.*}} -> (f64, f64, f64, f64)
// CHECK: %[[TAILT:.*]] = scf.for
// CHECK: %[[P:.*]] = arith.addf %[[TAILT]], %[[TILE]]#2
// CHECK: %[[Q:.*]] = arith.addf %[[TILE]]#1, %[[TILE]]#3
// CHECK: %[[RAW:.*]] = arith.addf %[[P]], %[[Q]]
// CHECK-NOT: arith.divf
// CHECK: llvm.store %[[RAW]], %[[TOTALS]] : f64
// CHECK-LABEL: func.func @mean__finish
// CHECK-SAME: %[[SEG:[^:]*]]: i64, %[[COUNTF:[^:]*]]: i64, %[[FTOTALS:[^:]*]]: !llvm.ptr)
// CHECK: scf.if
// CHECK: %[[T:.*]] = llvm.load %[[FTOTALS]] : !llvm.ptr -> f64
// CHECK: arith.sitofp %[[COUNTF]]
// CHECK: arith.divf %[[T]]
func.func @mean(%x: tensor<?xf64>, %idx: tensor<?xi32>, %n: index) -> tensor<?xf64> {
  %0 = seg.mean %x, %idx, %n : tensor<?xf64>, tensor<?xi32> -> tensor<?xf64>
  return %0 : tensor<?xf64>
}
