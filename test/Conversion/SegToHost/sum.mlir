// RUN: seg-opt %s --convert-seg-to-host --canonicalize --cse -split-input-file | FileCheck %s

// Host kernels take the GPU kernel's parameters plus the range of segments
// [begin, end), clamped to what exists, and the first row of `begin` if the
// caller knows it (else a binary search finds it), and walk segments in
// order: a forward count per boundary, which checks the rows it counts.
// CHECK-LABEL: func.func @sum_vec3
// Trailing arguments are read by name (segrt/KernelABI.h orders them).
// CHECK-SAME: (%[[X:[^:]*]]: !llvm.ptr, %[[IDX:[^:]*]]: !llvm.ptr, %[[OUT:[^:]*]]: !llvm.ptr,
// CHECK-DAG: %[[N:arg[0-9]+]]: i64 {seg.param = "num_rows"}
// CHECK-DAG: %[[S:arg[0-9]+]]: i64 {seg.param = "num_segments"}
// CHECK-DAG: %[[B:arg[0-9]+]]: i64 {seg.param = "begin"}
// CHECK-DAG: %[[E:arg[0-9]+]]: i64 {seg.param = "end"}
// CHECK-DAG: %[[HINT:arg[0-9]+]]: i64 {seg.param = "first_row"}
// CHECK-SAME: -> i64
// S is clamped to INT32_MAX (idx is i32: segments past it hold no rows), so
// that every segment walked and its successor fit i32.
// CHECK: %[[S32:.*]] = arith.minsi %[[S]], %c2147483647_i64
// CHECK: %[[B0:.*]] = arith.maxsi %[[B]], %c0_i64
// CHECK: %[[BEGIN:.*]] = arith.minsi %[[B0]], %[[S32]]
// CHECK: %[[E0:.*]] = arith.maxsi %[[E]], %c0_i64
// CHECK: %[[END:.*]] = arith.minsi %[[E0]], %[[S32]]
// CHECK: %[[HINTED:.*]] = arith.cmpi sge, %[[HINT]], %c0_i64
// CHECK: %[[FIRST:.*]] = scf.if %[[HINTED]] -> (i64) {
// CHECK: arith.minsi %[[HINT]], %[[N]]
// CHECK: } else {
// CHECK: scf.while
// CHECK: %[[LOOP:.*]]:2 = scf.for %[[SEG:.*]] = %[[BEGIN]] to %[[END]] step %c1_i64 iter_args(%[[ROW:.*]] = %[[FIRST]], %[[SEEN:.*]] = %false) -> (i64, i1) : i64
// The segment's end: count forward from the previous boundary, 16 rows of
// idx per step (a vector compare with the next segment, a mask and a
// popcount), until a block is not wholly below the next segment; one row at
// a time over the last rows. The rows counted are checked: none below the
// segment, and the rows below the next one a prefix of the block.
// CHECK: %[[NEXTSEG:.*]] = arith.addi %[[SEG]], %c1_i64
// CHECK: %[[SCAN:.*]]:2 = scf.while (%[[P:.*]] = %[[ROW]], %{{.*}} = %false) : (i64, i1) -> (i64, i1)
// A reduction whose row inputs take at most 3 cache lines per block (16 f32
// vec3 rows: 192 bytes) prefetches the next block's rows while it scans.
// CHECK: %[[AHEAD:.*]] = arith.addi %[[P]], %c16_i64
// CHECK: %[[ELEMENT:.*]] = arith.muli %[[AHEAD]], %c3_i64
// CHECK: %[[LINE0:.*]] = llvm.getelementptr %[[X]][%[[ELEMENT]]] : (!llvm.ptr, i64) -> !llvm.ptr, f32
// CHECK: "llvm.intr.prefetch"(%[[LINE0]]) <{cache = 1 : i32, hint = 3 : i32, rw = 0 : i32}>
// CHECK: %[[LINE1:.*]] = llvm.getelementptr %[[LINE0]][64]
// CHECK: "llvm.intr.prefetch"(%[[LINE1]])
// CHECK: %[[LINE2:.*]] = llvm.getelementptr %[[LINE0]][128]
// CHECK: "llvm.intr.prefetch"(%[[LINE2]])
// CHECK-NOT: llvm.intr.prefetch
// CHECK: %[[BLOCK:.*]] = llvm.load %{{.*}} {alignment = 4 : i64} : !llvm.ptr -> vector<16xi32>
// CHECK: %[[BELOW:.*]] = arith.cmpi slt, %[[BLOCK]], %{{.*}} : vector<16xi32>
// CHECK: %[[NEXTBITS:.*]] = llvm.bitcast %[[BELOW]] : vector<16xi1> to i16
// CHECK: %[[BELOWSEG:.*]] = arith.cmpi slt, %[[BLOCK]], %{{.*}} : vector<16xi32>
// CHECK: %[[PLUSONE:.*]] = arith.addi %[[NEXTBITS]], %c1_i16
// CHECK: %[[CARRY:.*]] = arith.andi %[[NEXTBITS]], %[[PLUSONE]]
// CHECK: %[[NOTPREFIX:.*]] = arith.cmpi ne, %[[CARRY]], %c0_i16
// CHECK: llvm.intr.ctpop(%[[NEXTBITS]])
// CHECK: } else {
// CHECK: scf.while
// CHECK: arith.cmpi slt, %{{.*}}, %[[NEXTSEG]] : i64
// CHECK: arith.cmpi slt, %{{.*}}, %[[SEG]] : i64
// CHECK: %[[NOWSEEN:.*]] = arith.ori %[[SEEN]], %[[SCAN]]#1
// CHECK: %[[COUNT:.*]] = arith.subi %[[SCAN]]#0, %[[ROW]]
// A short segment (<= 16 rows, its 16-row block within N): the block runs
// as 4 vectors of 4 rows (each a vector load of 12 floats, deinterleaved),
// the terms of rows past the segment's end replaced by 0, the vectors added
// pairwise, then their lanes.
// CHECK: %[[SHORT:.*]] = arith.cmpi sle, %[[COUNT]], %c16_i64
// CHECK: %[[FITS:.*]] = arith.cmpi sle, %{{.*}}, %[[N]]
// CHECK: %[[SHORTFITS:.*]] = arith.andi %[[SHORT]], %[[FITS]]
// CHECK: %[[TOTAL:.*]]:3 = scf.if %[[SHORTFITS]] -> (f32, f32, f32)
// CHECK-COUNT-4: llvm.load %{{.*}} {alignment = 4 : i64} : !llvm.ptr -> vector<12xf32>
// CHECK: arith.select %{{.*}} : vector<4xi1>, vector<4xf32>
// CHECK: llvm.shufflevector %{{.*}} [2, 3] : vector<4xf32>
// CHECK: } else {
// Else rows go 16 at a time into 4 interleaved vector partial sums per
// component, then 4 at a time into the first, then the last rows as one
// masked vector into it where 4 rows from there lie within N (else one at
// a time, after the partials are added pairwise and their lanes summed).
// CHECK: %[[MAIN:.*]]:12 = scf.for %{{.*}} = %[[ROW]] to %{{.*}} step %c16_i64 iter_args({{.*}}) -> (vector<4xf32>, vector<4xf32>, vector<4xf32>, vector<4xf32>, vector<4xf32>, vector<4xf32>, vector<4xf32>, vector<4xf32>, vector<4xf32>, vector<4xf32>, vector<4xf32>, vector<4xf32>)
// CHECK-COUNT-4: llvm.load %{{.*}} {alignment = 4 : i64} : !llvm.ptr -> vector<12xf32>
// CHECK: %[[VEC:.*]]:3 = scf.for %{{.*}} = %{{.*}} to %[[VECEND:.*]] step %c4_i64 iter_args(%{{.*}} = %[[MAIN]]#0, %{{.*}} = %[[MAIN]]#1, %{{.*}} = %[[MAIN]]#2) -> (vector<4xf32>, vector<4xf32>, vector<4xf32>)
// CHECK: %[[LEFT:.*]] = arith.subi %[[SCAN]]#0, %[[VECEND]] : i64
// CHECK: %[[PAST:.*]] = arith.addi %[[VECEND]], %c4_i64 : i64
// CHECK: arith.cmpi sle, %[[PAST]], %[[N]] : i64
// CHECK: %[[TAILFITS:.*]] = arith.andi
// CHECK: %[[MASKED:.*]]:3 = scf.if %[[TAILFITS]] -> (vector<4xf32>, vector<4xf32>, vector<4xf32>)
// CHECK: %[[MASK:.*]] = arith.cmpi sgt, %{{.*}}, %{{.*}} : vector<4xi32>
// CHECK: llvm.load %{{.*}} {alignment = 4 : i64} : !llvm.ptr -> vector<12xf32>
// CHECK: %[[TERM:.*]] = arith.select %[[MASK]], %{{.*}}, %{{.*}} : vector<4xi1>, vector<4xf32>
// CHECK: arith.addf %[[VEC]]#0, %[[TERM]] : vector<4xf32>
// CHECK: } else {
// CHECK: scf.yield %[[VEC]]#0, %[[VEC]]#1, %[[VEC]]#2
// CHECK: %[[SCALARBEGIN:.*]] = arith.select %[[TAILFITS]], %[[SCAN]]#0, %[[VECEND]] : i64
// CHECK: %[[A0:.*]] = arith.addf %[[MASKED]]#0, %[[MAIN]]#6
// CHECK: %[[B0:.*]] = arith.addf %[[MAIN]]#3, %[[MAIN]]#9
// CHECK: %[[S0:.*]] = arith.addf %[[A0]], %[[B0]]
// CHECK: %[[HIGH:.*]] = llvm.shufflevector %[[S0]], %[[S0]] [2, 3]
// CHECK: %[[LOW:.*]] = llvm.shufflevector %[[S0]], %[[S0]] [0, 1]
// CHECK: arith.addf %[[LOW]], %[[HIGH]] : vector<2xf32>
// CHECK: %[[TAIL:.*]]:3 = scf.for %{{.*}} = %[[SCALARBEGIN]] to %[[SCAN]]#0 step %c1_i64 iter_args({{.*}}) -> (f32, f32, f32)
// CHECK: scf.yield %[[TAIL]]#0, %[[TAIL]]#1, %[[TAIL]]#2
// CHECK: llvm.store %[[TOTAL]]#0
// CHECK: scf.yield %[[SCAN]]#0, %[[NOWSEEN]] : i64, i1
// The result: the row after the call's rows, or -1 if a problem was seen.
// CHECK: %[[RESULT:.*]] = arith.select %[[LOOP]]#1, %c-1_i64, %[[LOOP]]#0 : i64
// CHECK: return %[[RESULT]] : i64
func.func @sum_vec3(%x: tensor<?x3xf32>, %idx: tensor<?xi32>, %n: index) -> tensor<?x3xf32> {
  %0 = seg.sum %x, %idx, %n : tensor<?x3xf32>, tensor<?xi32> -> tensor<?x3xf32>
  return %0 : tensor<?x3xf32>
}

// -----

// Gather only maps rows: a call computes rows [begin, end) (clamped to
// [0, N], not to [0, S]), with no segment search. Rows go 4 at a time while
// S > 0: a vector of idx, each lane's row of y loaded by itself (lanes
// outside [0, S) read row 0), invalid lanes replaced by 0, one vector store;
// then single rows, each reading its own segment's row or storing 0.
// CHECK-LABEL: func.func @gather_scalar
// CHECK-SAME: (%[[Y:[^:]*]]: !llvm.ptr, %[[IDX:[^:]*]]: !llvm.ptr, %[[OUT:[^:]*]]: !llvm.ptr,
// CHECK-DAG: %[[N:arg[0-9]+]]: i64 {seg.param = "num_rows"}
// CHECK-DAG: %[[S:arg[0-9]+]]: i64 {seg.param = "num_segments"}
// CHECK-DAG: %[[B:arg[0-9]+]]: i64 {seg.param = "begin"}
// CHECK-DAG: %[[E:arg[0-9]+]]: i64 {seg.param = "end"}
// CHECK: %[[B0:.*]] = arith.maxsi %[[B]], %c0_i64
// CHECK: %[[FIRST:.*]] = arith.minsi %[[B0]], %[[N]]
// CHECK: %[[E0:.*]] = arith.maxsi %[[E]], %c0_i64
// CHECK: %[[LAST:.*]] = arith.minsi %[[E0]], %[[N]]
// CHECK: %[[SOME:.*]] = arith.cmpi sgt, %[[S]], %c0_i64
// CHECK: %[[VROWS:.*]] = arith.select %[[SOME]], %{{.*}}, %c0_i64
// CHECK: %[[VEND:.*]] = arith.addi %[[FIRST]], %[[VROWS]]
// CHECK-NOT: scf.while
// The kernel checks the rows it computes, in i32, for range only (a row
// map takes any order): the problems seen are carried along; one unsigned
// compare with min(S, 2^31) tests the range.
// CHECK-NOT: scf.if
// CHECK: %[[LIMIT64:.*]] = arith.minsi %[[S]], %c2147483648_i64
// CHECK: %[[LIMIT:.*]] = arith.trunci %[[LIMIT64]] : i64 to i32
// CHECK: %[[VLOOP:.*]] = scf.for %[[VROW:.*]] = %[[FIRST]] to %[[VEND]] step %c4_i64 iter_args(%[[SEEN:.*]] = %{{.*}}) -> (vector<4xi1>)
// CHECK: %[[VALUES:.*]] = llvm.load %{{.*}} {alignment = 4 : i64} : !llvm.ptr -> vector<4xi32>
// CHECK: %[[VALID:.*]] = arith.cmpi ult, %[[VALUES]], %{{.*}} : vector<4xi32>
// CHECK-NOT: arith.cmpi slt
// CHECK: %[[INVALID:.*]] = arith.xori %[[VALID]]
// CHECK: %[[NOWSEEN:.*]] = arith.ori %[[SEEN]], %[[INVALID]]
// CHECK: %[[SAFE:.*]] = arith.select %[[VALID]], %{{.*}}, %cst{{.*}} : vector<4xi1>, vector<4xi64>
// One component per segment: loaded lane by lane, no branch.
// CHECK-NOT: scf.if
// CHECK-COUNT-4: llvm.extractelement %[[SAFE]]
// CHECK: %[[VALUES:.*]] = llvm.insertelement
// CHECK: %[[MASKED:.*]] = arith.select %[[VALID]], %[[VALUES]], %{{.*}} : vector<4xi1>, vector<4xf32>
// CHECK: %[[AT:.*]] = llvm.getelementptr inbounds %[[OUT]][%[[VROW]]]
// CHECK: llvm.store %[[MASKED]], %[[AT]] {alignment = 4 : i64} : vector<4xf32>, !llvm.ptr
// CHECK: scf.yield %[[NOWSEEN]]
// CHECK: %[[BITS:.*]] = llvm.bitcast %[[VLOOP]] : vector<4xi1> to i4
// CHECK: %[[ANY:.*]] = arith.cmpi ne, %[[BITS]], %c0_i4
// CHECK: %[[SLOOP:.*]] = scf.for %[[ROW:.*]] = %[[VEND]] to %[[LAST]] step %c1_i64 iter_args(%{{.*}} = %[[ANY]]) -> (i1)
// CHECK: %[[SEGMENT:.*]] = arith.extsi
// CHECK: scf.if
// CHECK: llvm.getelementptr inbounds %[[Y]][%[[SEGMENT]]]
// CHECK: llvm.getelementptr inbounds %[[OUT]][%[[ROW]]]
// CHECK: } else {
// CHECK: llvm.store %cst
// CHECK-NOT: scf.for
// CHECK: %[[RESULT:.*]] = arith.select %[[SLOOP]], %c-1_i64, %c0_i64 : i64
// CHECK: return %[[RESULT]] : i64
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
// f64: vectors of 2 rows; the short-segment block is 8 of them.
// CHECK: %[[SHORTSUM:.*]] = scf.if %{{.*}} -> (f64)
// CHECK-COUNT-8: llvm.load %{{.*}} {alignment = 8 : i64} : !llvm.ptr -> vector<2xf64>
// CHECK: } else {
// CHECK: %[[MAIN:.*]]:4 = scf.for {{.*}} step %c8_i64 {{.*}} -> (vector<2xf64>, vector<2xf64>, vector<2xf64>, vector<2xf64>)
// CHECK: %[[VEC:.*]] = scf.for {{.*}} step %c2_i64 {{.*}} -> (vector<2xf64>)
// CHECK: %[[MASKED:.*]] = scf.if %{{.*}} -> (vector<2xf64>)
// CHECK: arith.select %{{.*}} : vector<2xi1>, vector<2xf64>
// CHECK: } else {
// CHECK: scf.yield %[[VEC]] : vector<2xf64>
// CHECK: %[[A:.*]] = arith.addf %[[MASKED]], %[[MAIN]]#2
// CHECK: %[[B:.*]] = arith.addf %[[MAIN]]#1, %[[MAIN]]#3
// CHECK: %[[ACC:.*]] = arith.addf %[[A]], %[[B]]
// CHECK: %[[TAIL:.*]] = scf.for {{.*}} step %c1_i64 {{.*}} -> (f64)
// CHECK: scf.yield %[[TAIL]]
// CHECK: %[[COUNT:.*]] = arith.sitofp %{{.*}} : i64 to f64
// CHECK: %[[SOME:.*]] = arith.cmpi sgt
// CHECK: %[[SAFE:.*]] = arith.select %[[SOME]], %[[COUNT]], %cst
// CHECK: arith.divf %[[SHORTSUM]], %[[SAFE]]
// A division alone is not worth batching the epilogues (see @rms_norm).
// CHECK-NOT: llvm.alloca
// Segment programs also get a tile kernel (one pass of one segment on
// rows [begin, end): the pass's raw totals, row outputs stored; for
// splitting long segments across threads) and a finish kernel (the
// segment's result from its totals). The tile kernel checks that its rows
// all hold the (valid) segment of its first row and returns 1 if not.
// CHECK-LABEL: func.func @mean__rows
// CHECK-SAME: (%{{[^:]*}}: !llvm.ptr, %[[TIDX:[^:]*]]: !llvm.ptr, %{{[^:]*}}: !llvm.ptr,
// CHECK-DAG: %[[TN:arg[0-9]+]]: i64 {seg.param = "num_rows"}
// CHECK-DAG: %[[TS:arg[0-9]+]]: i64 {seg.param = "num_segments"}
// CHECK-DAG: %[[TPASS:arg[0-9]+]]: i64 {seg.param = "pass"}
// CHECK-DAG: %[[TOTALS:arg[0-9]+]]: !llvm.ptr {seg.param = "partials"}
// CHECK-SAME: -> i32
// CHECK: llvm.store %[[ZERO:.*]], %[[TOTALS]] : f64
// CHECK: %[[TILEPROBLEM:.*]] = scf.if %{{.*}} -> (i1)
// CHECK: %[[INVALID:.*]] = arith.xori
// CHECK: %[[BLOCKS:.*]] = scf.for %{{.*}} step %c16_i64 iter_args(%{{.*}} = %{{.*}}) -> (vector<16xi1>)
// CHECK: %[[OTHER:.*]] = arith.cmpi ne, %{{.*}}, %{{.*}} : vector<16xi32>
// CHECK: arith.ori %{{.*}}, %[[OTHER]] : vector<16xi1>
// CHECK: %[[ROWS:.*]] = scf.for %{{.*}} step %c1_i64 iter_args(%{{.*}} = %{{.*}}) -> (i1)
// CHECK: arith.ori %[[ROWS]], %[[INVALID]]
// CHECK: scf.if
// CHECK: arith.cmpi eq, %[[TPASS]], %c0_i64
// CHECK: scf.if
// Tiles are long: no short-segment block.
// CHECK-NOT: scf.if {{.*}} -> (f64)
// CHECK: %[[TILE:.*]]:4 = scf.for {{.*}} -> (vector<2xf64>, vector<2xf64>, vector<2xf64>, vector<2xf64>)
// CHECK: %[[VECT:.*]] = scf.for {{.*}} -> (vector<2xf64>)
// CHECK: %[[P:.*]] = arith.addf %[[VECT]], %[[TILE]]#2
// CHECK: %[[Q:.*]] = arith.addf %[[TILE]]#1, %[[TILE]]#3
// CHECK: arith.addf %[[P]], %[[Q]]
// CHECK: %[[RAW:.*]] = scf.for {{.*}} -> (f64)
// CHECK-NOT: arith.divf
// CHECK: llvm.store %[[RAW]], %[[TOTALS]] : f64
// CHECK: %[[TRESULT:.*]] = arith.extui %[[TILEPROBLEM]] : i1 to i32
// CHECK: return %[[TRESULT]] : i32
// CHECK-LABEL: func.func @mean__finish
// CHECK-DAG: %[[SEG:arg[0-9]+]]: i64 {seg.param = "segment"}
// CHECK-DAG: %[[COUNTF:arg[0-9]+]]: i64 {seg.param = "count"}
// CHECK-DAG: %[[FTOTALS:arg[0-9]+]]: !llvm.ptr {seg.param = "totals"}
// CHECK: scf.if
// CHECK: %[[T:.*]] = llvm.load %[[FTOTALS]] : !llvm.ptr -> f64
// CHECK: arith.sitofp %[[COUNTF]]
// CHECK: arith.divf %[[T]]
func.func @mean(%x: tensor<?xf64>, %idx: tensor<?xi32>, %n: index) -> tensor<?xf64> {
  %0 = seg.mean %x, %idx, %n : tensor<?xf64>, tensor<?xi32> -> tensor<?xf64>
  return %0 : tensor<?xf64>
}

// -----

// rms_norm: an epilogue with a square root, so segments go in batches of
// 16: their row counts and raw totals are kept on the stack (each segment's
// row loop as for @mean), then a second loop computes and stores the batch's
// outputs, back to back.
// CHECK-LABEL: func.func @rms_norm
// CHECK-SAME: (%{{[^:]*}}: !llvm.ptr, %{{[^:]*}}: !llvm.ptr, %[[OUT:[^:]*]]: !llvm.ptr,
// CHECK-DAG: %[[BEGIN:arg[0-9]+]]: i64 {seg.param = "begin"}
// CHECK-DAG: %[[TOTALS:.*]] = llvm.alloca %c16_i64 x f32
// CHECK-DAG: %[[COUNTS:.*]] = llvm.alloca %c16_i64 x i64
// CHECK: %[[BATCHES:.*]]:2 = scf.for %[[BATCH:.*]] = %{{.*}} to %[[END:.*]] step %c16_i64 iter_args
// CHECK: %[[BATCHEND:.*]] = arith.minsi %{{.*}}, %[[END]]
// CHECK: %[[WALK:.*]]:2 = scf.for %[[SEG:.*]] = %[[BATCH]] to %[[BATCHEND]] step %c1_i64
// CHECK: %[[SLOT:.*]] = arith.subi %[[SEG]], %[[BATCH]]
// CHECK: %[[COUNTADDR:.*]] = llvm.getelementptr inbounds %[[COUNTS]][%[[SLOT]]]
// CHECK: llvm.store %{{.*}}, %[[COUNTADDR]] : i64
// CHECK-NOT: math.sqrt
// CHECK: %[[TOTALADDR:.*]] = llvm.getelementptr inbounds %[[TOTALS]][%[[SLOT]]]
// CHECK: llvm.store %{{.*}}, %[[TOTALADDR]] : f32
// CHECK: scf.yield
// CHECK: scf.for %[[FSEG:.*]] = %[[BATCH]] to %[[BATCHEND]] step %c1_i64
// CHECK: %[[FSLOT:.*]] = arith.subi %[[FSEG]], %[[BATCH]]
// CHECK: llvm.getelementptr inbounds %[[COUNTS]][%[[FSLOT]]]
// CHECK: %[[TOTAL:.*]] = llvm.load %{{.*}} : !llvm.ptr -> f32
// CHECK: %[[MEANSQ:.*]] = arith.divf %[[TOTAL]]
// CHECK: %[[RMS:.*]] = math.sqrt %[[MEANSQ]] : f32
// CHECK: %[[OUTADDR:.*]] = llvm.getelementptr inbounds %[[OUT]][%[[FSEG]]]
// CHECK: llvm.store %[[RMS]], %[[OUTADDR]] : f32
// CHECK: scf.yield %[[WALK]]#0, %[[WALK]]#1
// CHECK: arith.select %[[BATCHES]]#1, %c-1_i64, %[[BATCHES]]#0
func.func @rms_norm(%x: tensor<?xf32>, %idx: tensor<?xi32>, %n: index) -> tensor<?xf32> {
  %0 = seg.rms_norm %x, %idx, %n : tensor<?xf32>, tensor<?xi32> -> tensor<?xf32>
  return %0 : tensor<?xf32>
}

// -----

// Two passes, the second storing rows (x minus its segment's mean). Short
// segments take the 16-row block in the first pass; in the second, a block
// would store 12 vectors (16 rows of 3 components), too many to pay off:
// it runs the vector loop, storing 4 rows of 3 components at a time
// (interleaved back into one vector of 12), then single rows.
// CHECK-LABEL: func.func @center_vec3
// Kernels storing rows do not prefetch (see emitHostKernel).
// CHECK-NOT: llvm.intr.prefetch
// CHECK-SAME: (%[[X:[^:]*]]: !llvm.ptr, %[[IDX:[^:]*]]: !llvm.ptr, %[[OUT:[^:]*]]: !llvm.ptr,
// CHECK-DAG: %[[N:arg[0-9]+]]: i64 {seg.param = "num_rows"}
// CHECK: scf.if %{{.*}} -> (f32, f32, f32)
// CHECK: arith.select %{{.*}} : vector<4xi1>, vector<4xf32>
// CHECK: arith.divf
// CHECK-NOT: scf.if
// CHECK: scf.for %{{.*}} step %c16_i64
// CHECK: %[[D0:.*]] = arith.subf %{{.*}} : vector<4xf32>
// CHECK: %[[D1:.*]] = arith.subf %{{.*}} : vector<4xf32>
// CHECK: %[[D2:.*]] = arith.subf %{{.*}} : vector<4xf32>
// CHECK-NOT: arith.select
// CHECK: %[[D01:.*]] = llvm.shufflevector %[[D0]], %[[D1]] [0, 1, 2, 3, 4, 5, 6, 7] : vector<4xf32>
// CHECK: %[[D2W:.*]] = llvm.shufflevector %[[D2]], %[[D2]] [0, 1, 2, 3, 0, 0, 0, 0] : vector<4xf32>
// CHECK: %[[ALL:.*]] = llvm.shufflevector %[[D01]], %[[D2W]] [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11] : vector<8xf32>
// CHECK: %[[ROWS:.*]] = llvm.shufflevector %[[ALL]], %[[ALL]] [0, 4, 8, 1, 5, 9, 2, 6, 10, 3, 7, 11] : vector<12xf32>
// CHECK: %[[AT:.*]] = llvm.getelementptr inbounds %[[OUT]]
// CHECK: llvm.store %[[ROWS]], %[[AT]] {alignment = 4 : i64} : vector<12xf32>, !llvm.ptr
// A long segment runs in tiles pass by pass: the tile kernel takes the
// pass, the segment's row count and totals. Pass 0 stores its tile's sums
// in the partials; pass 1 loads pass 0's totals (the segment's sums),
// divides by the count and stores its rows.
// CHECK-LABEL: func.func @center_vec3__rows
// CHECK-DAG: %[[PASS:arg[0-9]+]]: i64 {seg.param = "pass"}
// CHECK-DAG: %[[CCOUNT:arg[0-9]+]]: i64 {seg.param = "count"}
// CHECK-DAG: %[[CTOTALS:arg[0-9]+]]: !llvm.ptr {seg.param = "totals"}
// CHECK-DAG: %[[CPARTIALS:arg[0-9]+]]: !llvm.ptr {seg.param = "partials"}
// CHECK: %[[EARLIER:.*]] = arith.cmpi ugt, %[[PASS]], %c0_i64
// CHECK: scf.if %[[EARLIER]] -> (f32, f32, f32) {
// CHECK: llvm.load %[[CTOTALS]] : !llvm.ptr -> f32
// CHECK: } else {
// CHECK: arith.cmpi eq, %[[PASS]], %c0_i64
// CHECK: llvm.store %{{.*}}, %[[CPARTIALS]] : f32, !llvm.ptr
// CHECK: arith.sitofp %{{.*}} : i64 to f32
// CHECK: arith.divf
// CHECK: arith.cmpi eq, %[[PASS]], %c1_i64
// CHECK: llvm.store %{{.*}} : vector<12xf32>, !llvm.ptr
// CHECK-LABEL: func.func @center_vec3__finish
func.func @center_vec3(%x: tensor<?x3xf32>, %idx: tensor<?xi32>, %n: index) -> tensor<?x3xf32> {
  %mean = seg.mean %x, %idx, %n : tensor<?x3xf32>, tensor<?xi32> -> tensor<?x3xf32>
  %rows = seg.gather %mean, %idx : tensor<?x3xf32>, tensor<?xi32> -> tensor<?x3xf32>
  %centered = arith.subf %x, %rows : tensor<?x3xf32>
  return %centered : tensor<?x3xf32>
}

// -----

// The same with scalar rows: a short block stores 4 vectors, so the second
// pass takes it too. Its block must end within N, like any masked vector,
// whatever rows the call covers: rows past the segment are masked off by
// masked stores (they are not written; other threads may be writing them),
// so no second binary search for the call's own rows is needed.
// CHECK-LABEL: func.func @center_scalar
// CHECK-SAME: (%[[X:[^:]*]]: !llvm.ptr, %[[IDX:[^:]*]]: !llvm.ptr, %[[OUT:[^:]*]]: !llvm.ptr,
// CHECK-DAG: %[[N:arg[0-9]+]]: i64 {seg.param = "num_rows"}
// CHECK: arith.cmpi sle, %{{.*}}, %c16_i64 : i64
// CHECK-NEXT: %[[END:.*]] = arith.addi
// CHECK-NEXT: %[[FITS:.*]] = arith.cmpi sle, %[[END]], %[[N]] : i64
// CHECK-NEXT: %[[SHORT:.*]] = arith.andi %{{.*}}, %[[FITS]] : i1
// CHECK: scf.if %[[SHORT]] -> (f32)
// CHECK: arith.divf
// CHECK: scf.if %[[SHORT]] {
// CHECK-NOT: arith.select
// CHECK-COUNT-4: llvm.intr.masked.store %{{.*}} {alignment = 4 : i32} : vector<4xf32>, vector<4xi1> into !llvm.ptr
// CHECK: } else {
// CHECK: scf.for %{{.*}} step %c16_i64
func.func @center_scalar(%x: tensor<?xf32>, %idx: tensor<?xi32>, %n: index) -> tensor<?xf32> {
  %mean = seg.mean %x, %idx, %n : tensor<?xf32>, tensor<?xi32> -> tensor<?xf32>
  %rows = seg.gather %mean, %idx : tensor<?xf32>, tensor<?xi32> -> tensor<?xf32>
  %centered = arith.subf %x, %rows : tensor<?xf32>
  return %centered : tensor<?xf32>
}

// -----

// matvec reads a 3x3 matrix per segment: a vector of rows whose lanes share
// one segment loads its 9 entries once; otherwise lane by lane.
// CHECK-LABEL: func.func @matvec
// CHECK-SAME: (%[[V:.*]]: !llvm.ptr, %[[M:.*]]: !llvm.ptr, %[[IDX:.*]]: !llvm.ptr, %[[OUT:.*]]: !llvm.ptr,
// CHECK: scf.for %{{.*}} step %c4_i64
// CHECK: %[[SAFE:.*]] = arith.select %{{.*}} : vector<4xi1>, vector<4xi64>
// CHECK: %[[LANE0:.*]] = llvm.extractelement %[[SAFE]][%c0_i32 : i32]
// CHECK: %[[SAME:.*]] = arith.cmpi eq, %[[SAFE]], %{{.*}} : vector<4xi64>
// CHECK: %[[BITS:.*]] = llvm.bitcast %[[SAME]] : vector<4xi1> to i4
// CHECK: %[[UNIFORM:.*]] = arith.cmpi eq, %[[BITS]], %c-1_i4
// CHECK: scf.if %[[UNIFORM]] {
// CHECK-COUNT-9: llvm.load %{{.*}} : !llvm.ptr -> f32
// CHECK-NOT: llvm.extractelement
// CHECK: llvm.store %{{.*}} {alignment = 4 : i64} : vector<12xf32>, !llvm.ptr
// CHECK: } else {
// CHECK-COUNT-36: llvm.load %{{.*}} : !llvm.ptr -> f32
// CHECK: llvm.store %{{.*}} {alignment = 4 : i64} : vector<12xf32>, !llvm.ptr
func.func @matvec(%v: tensor<?x3xf32>, %m: tensor<?x3x3xf32>, %idx: tensor<?xi32>) -> tensor<?x3xf32> {
  %0 = seg.matvec %v, %m, %idx : tensor<?x3xf32>, tensor<?x3x3xf32>, tensor<?xi32> -> tensor<?x3xf32>
  return %0 : tensor<?x3xf32>
}
