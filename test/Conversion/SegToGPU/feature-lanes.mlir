// RUN: seg-opt %s --convert-seg-to-gpu --canonicalize --cse -split-input-file | FileCheck %s

// Rows of 32 features or more hold them over a warp's lanes (rows of 8 to
// 31 over groups of 8 or 16 lanes, below): lane l holds features l and
// l + 32 of a 40-feature row, the second masked past the
// last feature (its index clamped to 39, its value 0). A warp walks a
// segment's rows one at a time (step 1), each lane adding its own two
// features, so no combine follows the loop; every lane stores its features
// (the padded one under its mask). No packing: no ballot of heads after
// those of the window's chunks with work and the chunk's starts.
// CHECK-LABEL: gpu.func @sum_w40(
// CHECK: %[[LANE:.*]] = arith.andi %{{.*}}, %c31_i64
// CHECK: nvvm.vote.ballot.sync
// CHECK: nvvm.vote.ballot.sync
// CHECK-NOT: nvvm.vote.ballot.sync %c-1_i32, %{{.*}} : i32
// CHECK: scf.while
// CHECK: %[[SUMS:.*]]:2 = scf.for %[[ROW:.*]] = %{{.*}} to %{{.*}} step %c1_i64 iter_args(%[[A:.*]] = %cst, %[[B:.*]] = %cst) -> (f32, f32)
// CHECK-NEXT: %[[BASE:.*]] = arith.muli %[[ROW]], %c40_i64
// CHECK-NEXT: %[[FIRST:.*]] = arith.addi %[[BASE]], %[[LANE]]
// CHECK-NEXT: %[[P0:.*]] = llvm.getelementptr inbounds %arg0[%[[FIRST]]]
// CHECK-NEXT: %[[X0:.*]] = llvm.load %[[P0]]
// CHECK-NEXT: %[[F1:.*]] = arith.addi %[[LANE]], %c32_i64
// CHECK-NEXT: %[[IN:.*]] = arith.cmpi slt, %[[F1]], %c40_i64
// CHECK-NEXT: %[[CLAMPED:.*]] = arith.minsi %[[F1]], %c39_i64
// CHECK: %[[X1:.*]] = llvm.load
// CHECK-NEXT: %[[MASKED:.*]] = arith.select %[[IN]], %[[X1]], %cst
// CHECK-NEXT: arith.addf %[[A]], %[[X0]]
// CHECK-NEXT: arith.addf %[[B]], %[[MASKED]]
// CHECK-NEXT: scf.yield
// CHECK-NEXT: }
// CHECK-NOT: gpu.shuffle
// CHECK: llvm.store %[[SUMS]]#0
// CHECK: scf.if %{{.*}} {
// CHECK: llvm.store %[[SUMS]]#1
// The tile kernel: a warp's rows of a tile one at a time, each lane storing
// its features' partials. Split rows take tiles of 256 rows
// (kGPUSplitRowTileRows), not 1,024, and a long segment covers 256 rows
// starting at a multiple of 128 (gpuLongSpanAlignment): the head (the
// segment of the tile's first row, lane 0's probe) is long if it holds
// row -256 (the tile before), rows -128 and 127 (the span across the tile's
// start) or row 255 (this tile); a different tail (lane 1's, the tile's
// last row) if it holds rows 128 and 383 or row 511. Lane j loads the
// segment of probe j, one load for all, and shuffles give them to every
// lane.
// CHECK-LABEL: gpu.func @sum_w40__tiles(
// CHECK-NOT: %c1024_i64
// CHECK: arith.divui %{{.*}}, %c256_i64
// CHECK: %[[TILE:.*]] = arith.muli %{{.*}}, %c256_i64
// CHECK: %[[FULLEND:.*]] = arith.addi %[[TILE]], %c256_i64
// CHECK: %[[END:.*]] = arith.minsi %[[FULLEND]], %[[N:.*]] : i64
// CHECK: %[[LASTROW:.*]] = arith.subi %[[END]], %c1_i64
// CHECK: arith.select %{{.*}}, %c-256_i64, %c0_i64
// CHECK: arith.select %{{.*}}, %c-128_i64,
// CHECK: arith.select %{{.*}}, %c127_i64,
// CHECK: arith.select %{{.*}}, %c255_i64,
// CHECK: arith.select %{{.*}}, %c128_i64,
// CHECK: arith.select %{{.*}}, %c383_i64,
// CHECK: %[[OFFSET:.*]] = arith.select %{{.*}}, %c511_i64,
// CHECK: %[[PROBE:.*]] = arith.addi %[[TILE]], %[[OFFSET]]
// CHECK: %[[ROW:.*]] = arith.select %{{.*}}, %[[LASTROW]], %[[PROBE]]
// CHECK: %[[FEW:.*]] = arith.cmpi slt, %{{.*}}, %c9_i64
// CHECK: scf.if
// CHECK-NEXT: llvm.getelementptr inbounds %{{.*}}[%[[ROW]]]
// CHECK-NEXT: llvm.load
// CHECK-NOT: llvm.load
// CHECK: %[[HEAD:.*]], %{{.*}} = gpu.shuffle  idx %[[SEGMENTS:.*]], %c0_i32, %c32_i32
// CHECK: %[[TAIL:.*]], %{{.*}} = gpu.shuffle  idx %[[SEGMENTS]], %c1_i32, %c32_i32
// CHECK-COUNT-4: gpu.shuffle  idx %[[SEGMENTS]], %c{{[2-5]}}_i32, %c32_i32
// CHECK: arith.cmpi ne, %[[TAIL]], %[[HEAD]]
// CHECK-COUNT-3: gpu.shuffle  idx %[[SEGMENTS]], %c{{[6-8]}}_i32, %c32_i32
// CHECK: scf.for %{{.*}} step %c1_i64 iter_args(%{{.*}} = %cst, %{{.*}} = %cst) -> (f32, f32)
// CHECK-NOT: gpu.shuffle
// CHECK: llvm.store
// Super-tiles keep 32,768 rows: 128 of these tiles, 32 at a time (a loop
// of 4): lanes over the 32 find where each adds (two idx loads, three
// ballots), then lanes over components (4) and tiles (8) read the slots,
// four tiles a lane, eight loads, then the lane's combines in tile order;
// the butterflies after the loop, over lanes 4 apart.
// Ten warps share a super-tile's 40 components, warp p (of unit u:
// super-tile u / 10, p = u % 10) components [4p, 4p + 4); for the others
// its slots are not read.
// CHECK-LABEL: gpu.func @sum_w40__super_tiles(
// CHECK: %[[NTILES:.*]] = arith.divui %{{.*}}, %c256_i64
// CHECK: %[[UP:.*]] = arith.addi %[[NTILES]], %c127_i64
// CHECK: %[[NSUPER:.*]] = arith.divui %[[UP]], %c128_i64
// CHECK: %[[UNITS:.*]] = arith.muli %[[NSUPER]], %c10_i64
// CHECK: scf.for %[[UNIT:.*]] = %{{.*}} to %[[UNITS]]
// CHECK: %[[SUPER:.*]] = arith.divui %[[UNIT]], %c10_i64
// CHECK: %[[PART:.*]] = arith.remui %[[UNIT]], %c10_i64
// CHECK: %[[PARTFIRST:.*]] = arith.muli %[[PART]], %c4_i64
// CHECK: %[[PARTEND:.*]] = arith.addi %[[PARTFIRST]], %c4_i64
// CHECK: %[[PARTLAST:.*]] = arith.minsi %{{.*}}, %[[PARTEND]]
// CHECK: arith.muli %[[SUPER]], %c32768_i64
// CHECK: %[[HASPART:.*]] = arith.cmpi slt, %[[PARTFIRST]], %{{.*}}
// CHECK: %[[SPANS:.*]] = arith.andi %{{.*}}, %[[HASPART]]
// CHECK: scf.if %[[SPANS]]
// CHECK: %[[TILELANE:.*]] = arith.shrui %[[LANE:.*]], %c2_i64
// CHECK: %[[INWARP:.*]] = arith.andi %[[LANE]], %c3_i64
// CHECK: %[[COMPONENT:.*]] = arith.addi %[[PARTFIRST]], %[[INWARP]]
// CHECK: %[[HASCOMPONENT:.*]] = arith.cmpi slt, %[[COMPONENT]], %[[PARTLAST]]
// CHECK: %[[FIRSTTILE:.*]] = arith.muli %[[SUPER]], %c128_i64
// CHECK: scf.for %[[GROUP:.*]] = %c0_i64 to %c4_i64 step %c1_i64 iter_args({{.*}}) -> (f32, f32)
// CHECK: %[[GROUPOFFSET:.*]] = arith.muli %[[GROUP]], %c32_i64
// CHECK: %[[GROUPTILE:.*]] = arith.addi %[[FIRSTTILE]], %[[GROUPOFFSET]]
// CHECK: arith.addi %[[GROUPTILE]], %[[LANE]] : i64
// CHECK-COUNT-2: llvm.load
// CHECK-COUNT-3: nvvm.vote.ballot.sync
// CHECK: %[[READTILE:.*]] = arith.addi %[[GROUPTILE]], %[[TILELANE]]
// CHECK: arith.muli %[[READTILE]], %c80_i64
// CHECK: arith.addi %{{.*}}, %[[COMPONENT]]
// CHECK-COUNT-2: llvm.load
// CHECK: arith.addi %[[TILELANE]], %c8_i64
// CHECK-COUNT-6: llvm.load
// CHECK-NOT: gpu.shuffle
// CHECK-COUNT-8: arith.addf
// CHECK: scf.yield
// CHECK: gpu.shuffle  xor %{{.*}}, %c16_i32, %c32_i32 : f32
// CHECK: gpu.shuffle  xor %{{.*}}, %c8_i32, %c32_i32 : f32
// CHECK: gpu.shuffle  xor %{{.*}}, %c4_i32, %c32_i32 : f32
// CHECK-NOT: gpu.shuffle  xor %{{.*}}, %c2_i32
func.func @sum_w40(%x: tensor<?x40xf32>, %idx: tensor<?xi32>, %n: index) -> tensor<?x40xf32> {
  %0 = seg.sum %x, %idx, %n : tensor<?x40xf32>, tensor<?xi32> -> tensor<?x40xf32>
  return %0 : tensor<?x40xf32>
}

// -----

// A dot of split rows: each lane adds its part of every row (its padded
// product 0) in the row loop; one butterfly over the lanes after the rows
// (not one per row) gives every lane the segment's dot; lane 0 stores it.
// CHECK-LABEL: gpu.func @dot_w40(
// CHECK: %[[LANE:.*]] = arith.andi %{{.*}}, %c31_i64
// CHECK: %[[PARTS:.*]] = scf.for %{{.*}} step %c1_i64 iter_args(%[[ACC:.*]] = %cst) -> (f32)
// CHECK: %[[P0:.*]] = arith.mulf
// CHECK-NEXT: %[[P1:.*]] = arith.mulf
// CHECK-NEXT: %[[PART:.*]] = arith.addf %[[P0]], %[[P1]]
// CHECK-NEXT: %[[NEXT:.*]] = arith.addf %[[ACC]], %[[PART]]
// CHECK-NEXT: scf.yield %[[NEXT]]
// CHECK-NEXT: }
// CHECK-NEXT: %[[S16:.*]], %{{.*}} = gpu.shuffle  xor %[[PARTS]], %c16_i32, %c32_i32 : f32
// CHECK-COUNT-4: gpu.shuffle  xor
// CHECK: %[[ISZERO:.*]] = arith.cmpi eq, %[[LANE]], %c0_i64
// CHECK-NEXT: scf.if %[[ISZERO]] {
// CHECK: llvm.store
func.func @dot_w40(%x: tensor<?x40xf32>, %y: tensor<?x40xf32>, %idx: tensor<?xi32>, %n: index) -> tensor<?xf32> {
  %0 = seg.dot %x, %y, %idx, %n : tensor<?x40xf32>, tensor<?x40xf32>, tensor<?xi32> -> tensor<?xf32>
  return %0 : tensor<?xf32>
}

// -----

// Below the threshold (7 features) a lane holds a row: rows lane-strided.
// CHECK-LABEL: gpu.func @sum_w7(
// CHECK: scf.for %{{.*}} step %c32_i64 iter_args(
// CHECK-SAME: -> (f32, f32, f32, f32, f32, f32, f32)
func.func @sum_w7(%x: tensor<?x7xf32>, %idx: tensor<?xi32>, %n: index) -> tensor<?x7xf32> {
  %0 = seg.sum %x, %idx, %n : tensor<?x7xf32>, tensor<?xi32> -> tensor<?x7xf32>
  return %0 : tensor<?x7xf32>
}

// -----

// 12 features: groups of 8 lanes (lane % 8 the feature lane, lane / 8 the
// group), 4 rows a step, a group past the segment's end reading its last
// row masked (terms 0); the groups' sums combined by the butterfly's two
// upper steps (xor 16, 8); the first group stores.
// CHECK-LABEL: gpu.func @sum_w12(
// CHECK: %[[LANE:.*]] = arith.andi %{{.*}}, %c31_i64
// CHECK: %[[FLANE:.*]] = arith.andi %[[LANE]], %c7_i64
// CHECK-NEXT: %[[GROUP:.*]] = arith.divui %[[LANE]], %c8_i64
// CHECK-NEXT: %[[FIRST:.*]] = arith.cmpi ult, %[[LANE]], %c8_i64
// CHECK: %[[SUMS:.*]]:2 = scf.for %[[BASE:.*]] = %{{.*}} to %[[END:.*]] step %c4_i64 iter_args(
// CHECK-NEXT: %[[ROW:.*]] = arith.addi %[[BASE]], %[[GROUP]]
// CHECK-NEXT: %[[INSIDE:.*]] = arith.cmpi slt, %[[ROW]], %[[END]]
// CHECK: arith.minsi %[[ROW]]
// CHECK: arith.select %[[INSIDE]]
// CHECK: scf.yield
// CHECK-NEXT: }
// CHECK-NEXT: gpu.shuffle  xor %[[SUMS]]#0, %c16_i32, %c32_i32
// CHECK: gpu.shuffle  xor %{{.*}}, %c8_i32, %c32_i32
// CHECK-NOT: %c4_i32
// CHECK: scf.if %[[FIRST]] {
// CHECK-NEXT: arith.addi %{{.*}}, %[[FLANE]]
func.func @sum_w12(%x: tensor<?x12xf32>, %idx: tensor<?xi32>, %n: index) -> tensor<?x12xf32> {
  %0 = seg.sum %x, %idx, %n : tensor<?x12xf32>, tensor<?xi32> -> tensor<?x12xf32>
  return %0 : tensor<?x12xf32>
}

// -----

// 128 features over 32 lanes are whole pairs (gpuFeatureVectorWidth):
// lane l holds features 2l, 2l + 1, 2l + 64 and 2l + 65, a row's in two
// 8-byte loads, and stores its segment's four in two.
// CHECK-LABEL: gpu.func @sum_w128(
// CHECK: %[[LANE:.*]] = arith.andi %{{.*}}, %c31_i64
// CHECK: %[[SUMS:.*]]:4 = scf.for %[[ROW:.*]] = %{{.*}} to %{{.*}} step %c1_i64 iter_args({{.*}}) -> (f32, f32, f32, f32)
// CHECK-NEXT: %[[BASE:.*]] = arith.muli %[[ROW]], %c128_i64
// CHECK-NEXT: %[[FEATURE:.*]] = arith.muli %[[LANE]], %c2_i64
// CHECK-NEXT: %[[AT:.*]] = arith.addi %[[BASE]], %[[FEATURE]]
// CHECK-NEXT: %[[P:.*]] = llvm.getelementptr inbounds %arg0[%[[AT]]]
// CHECK-NEXT: %[[X:.*]] = llvm.load %[[P]] {alignment = 8 : i64} : !llvm.ptr -> vector<2xf32>
// CHECK-COUNT-2: llvm.extractelement %[[X]]
// CHECK: %[[SECOND:.*]] = arith.addi %[[LANE]], %c32_i64
// CHECK-NEXT: %[[FEATURE2:.*]] = arith.muli %[[SECOND]], %c2_i64
// CHECK: llvm.load %{{.*}} {alignment = 8 : i64} : !llvm.ptr -> vector<2xf32>
// CHECK-COUNT-2: llvm.extractelement
// CHECK-COUNT-4: arith.addf
// CHECK-NEXT: scf.yield
// CHECK: llvm.store %{{.*}}, %{{.*}} {alignment = 8 : i64} : vector<2xf32>, !llvm.ptr
// CHECK: llvm.store %{{.*}}, %{{.*}} {alignment = 8 : i64} : vector<2xf32>, !llvm.ptr
func.func @sum_w128(%x: tensor<?x128xf32>, %idx: tensor<?xi32>, %n: index) -> tensor<?x128xf32> {
  %0 = seg.sum %x, %idx, %n : tensor<?x128xf32>, tensor<?xi32> -> tensor<?x128xf32>
  return %0 : tensor<?x128xf32>
}

// -----

// A dot of 128 features folds each row into one value: its rows keep a
// feature a load (gpuFeatureVectorWidth), 4 a lane.
// CHECK-LABEL: gpu.func @dot_w128(
// CHECK-NOT: vector<2x
// CHECK: gpu.return
func.func @dot_w128(%x: tensor<?x128xf32>, %y: tensor<?x128xf32>, %idx: tensor<?xi32>, %n: index) -> tensor<?xf32> {
  %0 = seg.dot %x, %y, %idx, %n : tensor<?x128xf32>, tensor<?x128xf32>, tensor<?xi32> -> tensor<?xf32>
  return %0 : tensor<?xf32>
}

// -----

// 96 features over 32 lanes (3 a lane) are no whole vectors of 2: lane l
// holds features l, l + 32 and l + 64, each loaded alone.
// CHECK-LABEL: gpu.func @sum_w96(
// CHECK-NOT: vector<
// CHECK: scf.for %{{.*}} step %c1_i64 iter_args({{.*}}) -> (f32, f32, f32)
// CHECK-COUNT-3: llvm.load %{{.*}} : !llvm.ptr -> f32
// CHECK-NOT: vector<
// CHECK: gpu.return
func.func @sum_w96(%x: tensor<?x96xf32>, %idx: tensor<?xi32>, %n: index) -> tensor<?x96xf32> {
  %0 = seg.sum %x, %idx, %n : tensor<?x96xf32>, tensor<?xi32> -> tensor<?x96xf32>
  return %0 : tensor<?x96xf32>
}

// -----

// A row map of split rows: a warp per row, each lane copying its two
// features, consecutive ones (2l, 2l + 1: 64 features are whole vectors of
// 2 over 32 lanes), in one 16-byte load and store; a warp takes 4 rows of
// its block's 32-row tile (8 warps: rows w, w + 8, w + 16, w + 24;
// grid-stride), their idx loaded first.
// CHECK-LABEL: gpu.func @gather_w64(
// CHECK: %[[LANE:.*]] = arith.andi %{{.*}}, %c31_i64
// CHECK: %[[WARP:.*]] = arith.shrui %{{.*}}, %c5_i64
// CHECK: %[[BLOCKROWS:.*]] = arith.muli %{{.*}}, %c32_i64 : i64
// CHECK: %[[FIRST:.*]] = arith.addi %[[BLOCKROWS]], %[[WARP]] : i64
// CHECK: %[[GRIDROWS:.*]] = arith.muli %{{.*}}, %c32_i64 : i64
// CHECK: scf.for %[[ROW:.*]] = %[[FIRST]] to %{{.*}} step %[[GRIDROWS]] : i64
// CHECK-COUNT-4: llvm.load %{{.*}} : !llvm.ptr -> i32
// CHECK-NOT: llvm.load %{{.*}} : !llvm.ptr -> i32
// CHECK: %[[TABLEROW:.*]] = arith.muli %{{.*}}, %c64_i64 : i64
// CHECK: %[[FEATURE:.*]] = arith.muli %[[LANE]], %c2_i64 : i64
// CHECK: %[[AT:.*]] = arith.addi %[[TABLEROW]], %[[FEATURE]] : i64
// CHECK: %[[ADDRESS:.*]] = llvm.getelementptr inbounds %{{.*}}[%[[AT]]]
// CHECK-NOT: llvm.load
// CHECK: llvm.load %[[ADDRESS]] {alignment = 16 : i64} : !llvm.ptr -> vector<2xf64>
// CHECK-NOT: llvm.load
// CHECK: llvm.store %{{.*}}, %{{.*}} {alignment = 16 : i64} : vector<2xf64>, !llvm.ptr
func.func @gather_w64(%y: tensor<?x64xf64>, %idx: tensor<?xi32>) -> tensor<?x64xf64> {
  %0 = seg.gather %y, %idx : tensor<?x64xf64>, tensor<?xi32> -> tensor<?x64xf64>
  return %0 : tensor<?x64xf64>
}

// -----

// A row map of 16 f64 features (a pair of f64 is wider than rows of one
// feature a lane take pairs in): a group of 16 lanes per row, two rows at a
// time. A warp takes 32 consecutive rows a step (grid-stride, 256 rows a
// block of 8 warps): lane l loads the idx of row l, then group g runs rows
// g, g + 2, ..., g + 30, each row's segment shuffled from its lane, all 16
// shuffles before the first row. Each lane copies its feature of a row; a
// group stores its own rows (no first-group mask).
// CHECK-LABEL: gpu.func @gather_w16(
// CHECK: %[[LANE:.*]] = arith.andi %{{.*}}, %c31_i64
// CHECK: %[[WARP:.*]] = arith.addi
// CHECK: %[[FEATURE:.*]] = arith.andi %[[LANE]], %c15_i64
// CHECK: %[[GROUP:.*]] = arith.divui %[[LANE]], %c16_i64
// CHECK: %[[FIRST:.*]] = arith.muli %[[WARP]], %c32_i64 : i64
// CHECK: %[[GRIDROWS:.*]] = arith.muli %{{.*}}, %c256_i64 : i64
// CHECK: scf.for %[[BASE:.*]] = %[[FIRST]] to %{{.*}} step %[[GRIDROWS]] : i64
// CHECK: %[[OWN:.*]] = arith.addi %[[BASE]], %[[LANE]]
// CHECK: llvm.load %{{.*}} : !llvm.ptr -> i32
// CHECK-NOT: llvm.load
// CHECK: %[[SOURCE0:.*]] = arith.trunci %[[GROUP]] : i64 to i32
// CHECK: gpu.shuffle  idx %{{.*}}, %[[SOURCE0]], %c32_i32 : i32
// CHECK-NOT: llvm.load
// CHECK: %[[SOURCE1:.*]] = arith.addi %[[GROUP]], %c2_i64
// CHECK-COUNT-15: gpu.shuffle  idx
// CHECK-NOT: gpu.shuffle
// CHECK: %[[SEGMENT:.*]] = arith.muli %{{.*}}, %c16_i64
// CHECK-NEXT: %[[ADDR:.*]] = arith.addi %[[SEGMENT]], %[[FEATURE]]
// CHECK-NEXT: %[[P:.*]] = llvm.getelementptr inbounds %arg0[%[[ADDR]]]
// CHECK-NEXT: %[[Y:.*]] = llvm.load %[[P]] : !llvm.ptr -> f64
// CHECK-NEXT: %[[OUT:.*]] = arith.muli %{{.*}}, %c16_i64
// CHECK-NEXT: %[[TARGET:.*]] = arith.addi %[[OUT]], %[[FEATURE]]
// CHECK-NEXT: %[[Q:.*]] = llvm.getelementptr inbounds %arg2[%[[TARGET]]]
// CHECK-NEXT: llvm.store %[[Y]], %[[Q]]
// CHECK-COUNT-15: llvm.load %{{.*}} : !llvm.ptr -> f64
// CHECK-NOT: gpu.shuffle
// CHECK: gpu.return
func.func @gather_w16(%y: tensor<?x16xf64>, %idx: tensor<?xi32>) -> tensor<?x16xf64> {
  %0 = seg.gather %y, %idx : tensor<?x16xf64>, tensor<?xi32> -> tensor<?x16xf64>
  return %0 : tensor<?x16xf64>
}

// -----

// A row map of 16 f32 features: whole pairs over 8 lanes, so a group of 8
// lanes per row, four rows at a time, lane l of a group copying features
// 2l and 2l + 1 in one 8-byte load and store. A warp takes 32 consecutive
// rows a step: group g runs rows g, g + 4, ..., g + 28, each row's segment
// shuffled from its lane, all 8 shuffles before the first row.
// CHECK-LABEL: gpu.func @gather_w16_pairs(
// CHECK: %[[LANE:.*]] = arith.andi %{{.*}}, %c31_i64
// CHECK: %[[GROUPLANE:.*]] = arith.andi %[[LANE]], %c7_i64
// CHECK: %[[GROUP:.*]] = arith.divui %[[LANE]], %c8_i64
// CHECK: scf.for
// CHECK: llvm.load %{{.*}} : !llvm.ptr -> i32
// CHECK-NOT: llvm.load
// CHECK: %[[SOURCE0:.*]] = arith.trunci %[[GROUP]] : i64 to i32
// CHECK: gpu.shuffle  idx %{{.*}}, %[[SOURCE0]], %c32_i32 : i32
// CHECK: arith.addi %[[GROUP]], %c4_i64
// CHECK-COUNT-7: gpu.shuffle  idx
// CHECK-NOT: gpu.shuffle
// CHECK: %[[SEGMENT:.*]] = arith.muli %{{.*}}, %c16_i64
// CHECK-NEXT: %[[FEATURE:.*]] = arith.muli %[[GROUPLANE]], %c2_i64
// CHECK-NEXT: %[[ADDR:.*]] = arith.addi %[[SEGMENT]], %[[FEATURE]]
// CHECK-NEXT: %[[P:.*]] = llvm.getelementptr inbounds %arg0[%[[ADDR]]]
// CHECK-NEXT: llvm.load %[[P]] {alignment = 8 : i64} : !llvm.ptr -> vector<2xf32>
// CHECK: llvm.store %{{.*}}, %{{.*}} {alignment = 8 : i64} : vector<2xf32>, !llvm.ptr
// CHECK-COUNT-7: llvm.load %{{.*}} {alignment = 8 : i64} : !llvm.ptr -> vector<2xf32>
// CHECK-NOT: gpu.shuffle
// CHECK: gpu.return
func.func @gather_w16_pairs(%y: tensor<?x16xf32>, %idx: tensor<?xi32>) -> tensor<?x16xf32> {
  %0 = seg.gather %y, %idx : tensor<?x16xf32>, tensor<?xi32> -> tensor<?x16xf32>
  return %0 : tensor<?x16xf32>
}

// -----

// A row map combining a row's features (a component sum) below 32
// features: the groups of a warp would part ways at the butterfly, so a
// thread runs a row (4 of its block's 1,024-row tile) and no lane
// shuffles.
// CHECK-LABEL: gpu.func @project_w16(
// CHECK: %[[BLOCKROWS:.*]] = arith.muli %{{.*}}, %c1024_i64 : i64
// CHECK: scf.for
// CHECK-NOT: gpu.shuffle
// CHECK: gpu.return
func.func @project_w16(%x: tensor<?x16xf32>, %w: tensor<?x16xf32>, %idx: tensor<?xi32>) -> tensor<?x16xf32> {
  %g = seg.gather %w, %idx : tensor<?x16xf32>, tensor<?xi32> -> tensor<?x16xf32>
  %p = arith.mulf %x, %g : tensor<?x16xf32>
  %s = seg.component_sum %p : tensor<?x16xf32> -> tensor<?xf32>
  %b = seg.broadcast %s : tensor<?xf32> -> tensor<?x16xf32>
  %r = arith.mulf %b, %x : tensor<?x16xf32>
  return %r : tensor<?x16xf32>
}

// -----

// Rows of more than 8 features a lane run as column blocks
// (gpuColumnBlocks): 512 f32 features, 16 a lane over 32 lanes, in 2
// blocks of 256. Of a grid of G blocks, block b of the segment and tile
// kernels runs block b / C' of G / C' (C' = min(2, G)) on column blocks
// b % C', b % C' + C', ...; the rest of the kernel in that loop, each
// lane's 4 pairs at the column block's base. Blocks past C' (G / C') idle
// (their loop starts at 2). The super-tile kernel holds no rows and runs
// whole.
// CHECK-LABEL: gpu.func @sum_w512(
// CHECK: %[[BLOCK:.*]] = arith.index_cast %block_id_x : index to i64
// CHECK: %[[GRID:.*]] = arith.index_cast %grid_dim_x : index to i64
// CHECK: %[[STEP:.*]] = arith.minui %[[GRID]], %c2_i64
// CHECK: %[[ROWGRID:.*]] = arith.divui %[[GRID]], %[[STEP]]
// CHECK: %[[ROWBLOCK:.*]] = arith.divui %[[BLOCK]], %[[STEP]]
// CHECK: %[[IDLE:.*]] = arith.cmpi uge, %[[ROWBLOCK]], %[[ROWGRID]]
// CHECK: %[[OWN:.*]] = arith.remui %[[BLOCK]], %[[STEP]]
// CHECK: %[[FIRST:.*]] = arith.select %[[IDLE]], %c2_i64, %[[OWN]]
// CHECK: scf.for %[[COLUMN:.*]] = %[[FIRST]] to %c2_i64 step %[[STEP]]
// CHECK: %[[BASE:.*]] = arith.muli %[[COLUMN]], %c256_i64
// CHECK: %[[PAIR:.*]] = arith.muli %{{.*}}, %c2_i64
// CHECK-NEXT: %[[FEATURE:.*]] = arith.addi %[[BASE]], %[[PAIR]]
// CHECK: scf.for %{{.*}} iter_args({{.*}}) -> (f32, f32, f32, f32, f32, f32, f32, f32)
// CHECK-COUNT-4: llvm.load %{{.*}} {alignment = 8 : i64} : !llvm.ptr -> vector<2xf32>
// CHECK-NOT: llvm.load %{{.*}} -> vector<2xf32>
// CHECK: arith.addf
// CHECK: gpu.return
// CHECK-LABEL: gpu.func @sum_w512__tiles(
// CHECK: arith.minui %{{.*}}, %c2_i64
// CHECK: scf.for %{{.*}} = %{{.*}} to %c2_i64 step
// CHECK-LABEL: gpu.func @sum_w512__super_tiles(
// CHECK-NOT: arith.minui %{{.*}}, %c2_i64
// CHECK: gpu.return
func.func @sum_w512(%x: tensor<?x512xf32>, %idx: tensor<?xi32>, %n: index) -> tensor<?x512xf32> {
  %0 = seg.sum %x, %idx, %n : tensor<?x512xf32>, tensor<?xi32> -> tensor<?x512xf32>
  return %0 : tensor<?x512xf32>
}

// -----

// A program that folds its rows (a dot) needs every feature in one block:
// 512 features run whole, 16 a lane.
// CHECK-LABEL: gpu.func @dot_w512(
// CHECK-NOT: arith.minui %{{.*}}, %c2_i64
// CHECK: gpu.return
func.func @dot_w512(%x: tensor<?x512xf32>, %y: tensor<?x512xf32>, %idx: tensor<?xi32>, %n: index) -> tensor<?xf32> {
  %0 = seg.dot %x, %y, %idx, %n : tensor<?x512xf32>, tensor<?x512xf32>, tensor<?xi32> -> tensor<?xf32>
  return %0 : tensor<?xf32>
}
