// RUN: seg-opt %s --convert-seg-to-gpu --canonicalize --cse -split-input-file | FileCheck %s

// A vec3 sum becomes a kernel over raw pointers (x, idx, out) plus N and S,
// and, being a one-pass program (one pass, no row outputs), the partials of its
// tiles. Warps grid-stride over windows of chunks of 32 rows, running the
// chunks where a segment starts; a ballot finds the rows
// where a segment starts; for each, the warp evaluates the empty segments
// before it (zeros for a sum). A segment covering the aligned 1024-row tile
// after its start is long: a 32-way search (a ballot per step) finds its end
// and its tiles' partials are added 32 tiles at a time (a lane each: the
// first tile's head or tail slot, the later tiles' head slots), each 32
// summed by the butterfly and added in order. Otherwise the warp finds the segment's end (lane-strided
// walk over idx and a warp minimum), accumulates its rows lane-strided and
// sums the lanes with a fixed xor butterfly; lane 0 stores.
// CHECK-LABEL: module attributes {gpu.container_module}
// CHECK: gpu.module @seg_kernels
// Trailing arguments are read by name (segrt/KernelABI.h orders them).
// CHECK: gpu.func @sum_vec3(%[[X:[^:]*]]: !llvm.ptr, %[[IDX:[^:]*]]: !llvm.ptr, %[[OUT:[^:]*]]: !llvm.ptr,
// CHECK-DAG: %[[N:arg[0-9]+]]: i64 {seg.param = "num_rows"}
// CHECK-DAG: %[[S:arg[0-9]+]]: i64 {seg.param = "num_segments"}
// CHECK-DAG: %[[PARTIALS:arg[0-9]+]]: !llvm.ptr {seg.param = "scratch"}
// CHECK-SAME: kernel
// CHECK-SAME: known_block_size = array<i32: 256, 1, 1>
// CHECK-NOT: workgroup
// CHECK: %[[LANE:.*]] = arith.andi %{{.*}}, %c31_i64
// No rows: every thread evaluates empty segments.
// CHECK: %[[EMPTY:.*]] = arith.cmpi eq, %[[N]], %c0_i64
// CHECK: scf.if %[[EMPTY]]
// CHECK-COUNT-3: llvm.store %cst
// Warps grid-stride over windows of ceil(chunks / warps) chunks, 4 to 32
// (the loop over their first chunks): lanes below that each load the row
// before their chunk and its last row, a ballot says which chunks have a
// segment start (the two differ) or the last row, and the warp runs those,
// lowest first.
// In 32 bits; from 2^31 chunks, 32.
// CHECK: %[[MANY:.*]] = arith.cmpi sge, %{{.*}}, %c2147483648_i64 : i64
// CHECK: %[[PERWARP:.*]] = arith.divui %{{.*}}, %[[WARPS:.*]] : i32
// CHECK: %[[ATLEAST:.*]] = arith.maxui %[[PERWARP]], %c4_i32
// CHECK: %[[CLAMPED:.*]] = arith.minui %[[ATLEAST]], %c32_i32
// CHECK: %[[WINDOW32:.*]] = arith.select %[[MANY]], %c32_i32, %[[CLAMPED]] : i32
// CHECK: %[[WINDOW:.*]] = arith.extui %[[WINDOW32]] : i32 to i64
// CHECK: %[[HASCHUNK:.*]] = arith.cmpi slt, %[[LANE]], %[[WINDOW]]
// CHECK: scf.for %[[FIRSTCHUNK:.*]] = %{{.*}} to %{{.*}} step %{{.*}} : i64
// CHECK: arith.andi %[[HASCHUNK]], %{{.*}} : i1
// CHECK: %[[BEFORE:.*]] = scf.if %{{.*}} -> (i64) {
// CHECK: %[[LAST:.*]] = scf.if %{{.*}} -> (i64) {
// CHECK: %[[FINALROW:.*]] = arith.subi %[[N]], %c1_i64
// CHECK: arith.cmpi ne, %[[BEFORE]], %[[LAST]]
// CHECK: %[[BUSY:.*]] = nvvm.vote.ballot.sync %c-1_i32, %{{.*}} : i32
// CHECK: scf.while (%[[CHUNKS:.*]] = %[[BUSY]]) : (i32) -> i32
// CHECK: %[[K:.*]] = "llvm.intr.cttz"(%{{.*}}) <{is_zero_poison = false}> : (i32) -> i32
// CHECK: %[[K64:.*]] = arith.extui %[[K]] : i32 to i64
// CHECK: %[[CHUNK:.*]] = arith.addi %[[FIRSTCHUNK]], %[[K64]]
// Three idx loads a lane (its row, the row before, the row 32 after),
// then where the chunk's last row's segment ends in the next chunk: a lane
// per row there, the first that leaves it.
// CHECK-COUNT-3: llvm.load %{{.*}} : !llvm.ptr -> i32
// CHECK-NOT: llvm.load
// CHECK: %{{.*}}, %{{.*}} = gpu.shuffle  idx %{{.*}}, %c31_i32, %c32_i32 : i32
// CHECK: %[[LEAVES:.*]] = nvvm.vote.ballot.sync
// CHECK: %[[TAILEND:.*]] = "llvm.intr.cttz"(%[[LEAVES]])
// CHECK: %[[STARTS:.*]] = nvvm.vote.ballot.sync %c-1_i32, %{{.*}} : i32
// Segments that start and end in the chunk are packed: a lane per row (the
// first packed segment's for lanes outside them), the head lane evaluating
// the empty segments before its own; per component a segmented suffix scan
// (5 shuffles down, an add where the lane `offset` after is in the
// segment) and the head's total to every lane; head lanes store.
// The chunk's last row ends its segment where the next chunk's first row
// leaves it (tail end 0; no load of the row after each lane's). If not, the
// segment from the last start (its a = 32 - h lanes: ctlz + 1) is packed
// too where it ends e <= 3a rows into the next chunk (rows of 3
// components: their rows there a lane each would not load in the chunk's
// first round; packed-tails.mlir).
// CHECK: arith.cmpi eq, %[[TAILEND]], %c0_i32
// CHECK: %[[HEADZEROS:.*]] = "llvm.intr.ctlz"(%[[STARTS]])
// CHECK: %[[TAILLANES:.*]] = arith.addi %[[HEADZEROS]], %c1_i32
// CHECK: arith.cmpi ult, %[[TAILEND]], %c32_i32
// CHECK: %[[TAILROWS:.*]] = arith.muli %[[TAILLANES]], %c3_i32
// CHECK: arith.cmpi ule, %[[TAILEND]], %[[TAILROWS]]
// CHECK: %[[HEADS:.*]] = nvvm.vote.ballot.sync %c-1_i32, %[[ISHEAD:.*]] : i32
// CHECK: %[[INVALID:.*]] = nvvm.vote.ballot.sync
// CHECK: scf.if %[[PACKS:.*]] {
// CHECK: gpu.shuffle  idx %{{.*}}, %{{.*}}, %c32_i32 : i64
// CHECK: scf.if %[[ISHEAD]] {
// A lane's rows from its own, a apart on the tail's lanes (else one), as
// 32-bit offsets.
// CHECK: scf.for %{{.*}} = %{{.*}} to %{{.*}} step %{{.*}} iter_args(%{{.*}}) -> (f32, f32, f32)  : i32 {
// CHECK: llvm.load %{{.*}} : !llvm.ptr -> f32
// CHECK: %[[DOWN1:.*]], %{{.*}} = gpu.shuffle  down %[[ACC:.*]], %c1_i32, %c32_i32 : f32
// CHECK: arith.addf %[[ACC]], %[[DOWN1]] : f32
// CHECK-COUNT-4: gpu.shuffle  down
// CHECK: %[[TOTAL:.*]], %{{.*}} = gpu.shuffle  idx
// CHECK-COUNT-2: gpu.shuffle  idx
// CHECK: scf.if %[[ISHEAD]] {
// CHECK: llvm.store %[[TOTAL]]
// The other starts one at a time: the leader's idx and the row before's,
// the empty segments between them; a start after it in the chunk (or the
// chunk holding the last row) gives its end, and then it is neither walked
// nor long (no load of the tile's last idx).
// CHECK: %[[UNPACKED:.*]] = arith.andi %[[STARTS]], %{{.*}} : i32
// CHECK: scf.while (%[[MASK:.*]] = %[[UNPACKED]]) : (i32) -> i32
// CHECK: %[[LEADER:.*]] = "llvm.intr.cttz"
// CHECK: %[[SEGMENT:.*]] = arith.extsi
// CHECK: scf.for %{{.*}} step %c32_i64 : i64
// CHECK-COUNT-3: llvm.store %cst
// CHECK: %[[AFTERLEADER:.*]] = arith.andi %[[STARTS]], %{{.*}} : i32
// CHECK: %[[STARTAFTER:.*]] = arith.cmpi ne, %[[AFTERLEADER]], %c0_i32
// CHECK: %[[HOLDSEND:.*]] = arith.cmpi sge, %{{.*}}, %[[N]]
// CHECK: %[[ENDKNOWN:.*]] = arith.ori %[[STARTAFTER]], %[[HOLDSEND]]
// CHECK: %[[NEXTSTART:.*]] = "llvm.intr.cttz"(%[[AFTERLEADER]])
// CHECK: %[[KNOWNEND:.*]] = arith.select %[[STARTAFTER]], %{{.*}}, %[[N]] : i64
// CHECK: %[[MAYBELONG:.*]] = arith.xori %[[ENDKNOWN]], %true
// CHECK: %[[UP:.*]] = arith.addi %{{.*}}, %c1023_i64
// CHECK: %[[TILE:.*]] = arith.divui %[[UP]], %c1024_i64
// CHECK: %[[ALIGNED:.*]] = arith.muli %[[TILE]], %c1024_i64
// CHECK: %[[TILELAST:.*]] = arith.addi %[[ALIGNED]], %c1023_i64
// CHECK: %[[TILEIN:.*]] = arith.cmpi slt, %[[TILELAST]], %[[N]]
// CHECK: %[[READS:.*]] = arith.andi %[[TILEIN]], %[[MAYBELONG]]
// CHECK: %[[HOLDS:.*]] = arith.cmpi eq, %{{.*}}, %[[SEGMENT]]
// CHECK: %[[LONG:.*]] = arith.andi %[[READS]], %[[HOLDS]]
// CHECK: scf.if %[[LONG]] {
// CHECK: %[[COVERED:.*]] = arith.addi %[[ALIGNED]], %c1024_i64
// CHECK: %[[FROM:.*]] = arith.minsi %[[COVERED]], %[[N]]
// CHECK: %[[SEARCH:.*]]:2 = scf.while (%{{.*}} = %[[FROM]], %{{.*}} = %[[N]])
// CHECK: nvvm.vote.ballot.sync
// CHECK: "llvm.intr.cttz"
// CHECK: scf.yield
// CHECK: %[[LASTROW:.*]] = arith.subi %[[SEARCH]]#0, %c1_i64
// A segment within one super-tile (32 tiles, 2^15 rows) adds its tiles'
// slots; one spanning several adds the super-tiles', in the same scheme:
// super-tile s's slots follow the tiles' as those of tile numTiles + s.
// CHECK: %[[LASTSUPER:.*]] = arith.shrui %[[LASTROW]], %c15_i64
// CHECK: %[[FIRSTSUPER:.*]] = arith.shrui %[[START:.*]], %c15_i64
// CHECK: %[[SPANS:.*]] = arith.cmpi ne, %[[FIRSTSUPER]], %[[LASTSUPER]]
// CHECK: %[[SHIFT:.*]] = arith.select %[[SPANS]], %c15_i64, %c10_i64
// CHECK: arith.select %[[SPANS]], %c32767_i64, %c1023_i64
// CHECK: %[[NTILES:.*]] = arith.divui %{{.*}}, %c1024_i64
// CHECK: %[[OFFSET:.*]] = arith.select %[[SPANS]], %[[NTILES]], %c0_i64
// CHECK: %[[FIRSTSHIFTED:.*]] = arith.shrui %[[START]], %[[SHIFT]]
// CHECK: %[[FIRSTUNIT:.*]] = arith.addi %[[FIRSTSHIFTED]], %[[OFFSET]]
// CHECK: %[[LASTSHIFTED:.*]] = arith.shrui %[[LASTROW]], %[[SHIFT]]
// CHECK: %[[LASTUNIT:.*]] = arith.addi %[[LASTSHIFTED]], %[[OFFSET]]
// CHECK: %[[UNITEND:.*]] = arith.addi %[[LASTUNIT]], %c1_i64
// 128 units per step: each lane loads 4 (lane, lane + 32, + 64, + 96) and
// adds them in order, then the butterfly.
// CHECK: %[[TILESUMS:.*]]:3 = scf.for {{.*}} = %[[FIRSTUNIT]] to %[[UNITEND]] step %c128_i64 iter_args({{.*}}) -> (f32, f32, f32)
// CHECK: arith.cmpi ule
// CHECK: %[[SLOTVALUE:.*]] = llvm.load
// CHECK: %[[VALUE:.*]] = arith.select %{{.*}}, %[[SLOTVALUE]], %cst
// CHECK: arith.addi %{{.*}}, %c32_i64
// CHECK: %[[SECOND:.*]] = arith.select %{{.*}}, %{{.*}}, %cst : f32
// CHECK: %[[TWO:.*]] = arith.addf %[[VALUE]], %[[SECOND]]
// CHECK: arith.addi %{{.*}}, %c64_i64
// CHECK: %[[THIRD:.*]] = arith.select %{{.*}}, %{{.*}}, %cst : f32
// CHECK: %[[THREE:.*]] = arith.addf %[[TWO]], %[[THIRD]]
// CHECK: arith.addi %{{.*}}, %c96_i64
// CHECK: %[[FOURTH:.*]] = arith.select %{{.*}}, %{{.*}}, %cst : f32
// CHECK: %[[FOUR:.*]] = arith.addf %[[THREE]], %[[FOURTH]]
// CHECK: gpu.shuffle  xor %[[FOUR]], %c16_i32, %c32_i32 : f32
// CHECK-COUNT-14: gpu.shuffle  xor
// CHECK: scf.yield
// The totals are the same in every lane: no butterfly after the loop.
// CHECK-NOT: gpu.shuffle
// CHECK: llvm.store %[[TILESUMS]]#0
// CHECK: } else {
// CHECK: %[[END:.*]] = scf.if %[[ENDKNOWN]] -> (i64) {
// CHECK: scf.yield %[[KNOWNEND]]
// CHECK: } else {
// The walk: rounds of 128 rows from the segment's start rounded down to a
// sector of idx (8 rows), idx of 4 rows a lane (32 apart, clamped below N)
// loaded before the 4 ballots; the first chunk's ballot drops the rows
// before the start (none after the first round); the first leaving row
// ends it.
// CHECK: %[[ALIGNED:.*]] = arith.andi %[[START:.*]], %c-8_i64 : i64
// CHECK: %[[WALK:.*]]:2 = scf.while (%[[BASE:.*]] = %[[ALIGNED]]) : (i64) -> (i64, i64) {
// CHECK-COUNT-4: llvm.load %{{.*}} : !llvm.ptr -> i32
// CHECK-NOT: llvm.load
// CHECK-COUNT-4: nvvm.vote.ballot.sync
// CHECK-NEXT: %[[BEFORE:.*]] = arith.subi %[[START]], %[[BASE]] : i64
// CHECK-NEXT: %[[SKIPPED:.*]] = arith.maxsi %[[BEFORE]], %c0_i64 : i64
// CHECK-NEXT: %[[SHIFT:.*]] = arith.trunci %[[SKIPPED]] : i64 to i32
// CHECK-NEXT: %[[KEPT:.*]] = arith.shli %c-1_i32, %[[SHIFT]] : i32
// CHECK-NEXT: arith.andi %{{.*}}, %[[KEPT]] : i32
// CHECK: %[[FIRST:.*]] = arith.addi %[[BASE]], %{{.*}} : i64
// CHECK: %[[ROUNDEND:.*]] = arith.addi %[[BASE]], %c128_i64 : i64
// CHECK: %[[NOTFOUND:.*]] = arith.cmpi sge, %[[FIRST]], %[[ROUNDEND]] : i64
// CHECK: scf.condition(%[[NOTFOUND]]) %[[BASE]], %[[FIRST]] : i64, i64
// CHECK: } do {
// CHECK: arith.addi %{{.*}}, %c128_i64 : i64
// CHECK: scf.yield %[[WALK]]#1 : i64
// CHECK: scf.if
// CHECK: %[[ACC:.*]]:3 = scf.for %{{.*}} to %[[END]] step %c32_i64 iter_args({{.*}}) -> (f32, f32, f32) : i64
// CHECK-COUNT-3: llvm.getelementptr inbounds %[[X]]
// CHECK: gpu.shuffle  xor %[[ACC]]#0, %c16_i32, %c32_i32 : f32
// CHECK: gpu.shuffle  xor %{{.*}}, %c8_i32, %c32_i32 : f32
// CHECK: gpu.shuffle  xor %{{.*}}, %c4_i32, %c32_i32 : f32
// CHECK: gpu.shuffle  xor %{{.*}}, %c2_i32, %c32_i32 : f32
// CHECK: gpu.shuffle  xor %{{.*}}, %c1_i32, %c32_i32 : f32
// CHECK: gpu.shuffle  xor %[[ACC]]#1, %c16_i32
// CHECK: gpu.shuffle  xor %[[ACC]]#2, %c16_i32
// CHECK: scf.if %{{.*}} {
// CHECK-COUNT-3: llvm.store
// The warp holding the last row evaluates the segments after it.
// CHECK: %[[HOLDSLAST:.*]] = arith.cmpi slt, %[[FINALROW]], %{{.*}}
// CHECK: scf.if %[[HOLDSLAST]]
// CHECK: gpu.return
// The tile kernel: a warp per 1024-row tile. The head segment (of its first
// row) is long if it covers this tile or the one before, the tail segment (of
// its last row, if different) if it covers the next; a 32-way search finds
// where the head ends (only if the tail differs: else at the tile's end) and
// one where the tail starts; then one loop over the
// two pieces (so the program's row code is emitted once) reduces each long
// one's rows lane-strided, sums them with the butterfly and stores them from
// lane 0 into the tile's slot: (2 * tile + slot) * 3 totals. Long-segment
// kernels take the pass they run last (unused by a one-pass program).
// CHECK: gpu.func @sum_vec3__tiles(%[[X:[^:]*]]: !llvm.ptr, %[[IDX:[^:]*]]: !llvm.ptr, %[[OUT:[^:]*]]: !llvm.ptr,
// CHECK-DAG: %[[N:arg[0-9]+]]: i64 {seg.param = "num_rows"}
// CHECK-DAG: %[[S:arg[0-9]+]]: i64 {seg.param = "num_segments"}
// CHECK-DAG: %[[PARTIALS:arg[0-9]+]]: !llvm.ptr {seg.param = "scratch"}
// CHECK-DAG: %[[PASS:arg[0-9]+]]: i64 {seg.param = "pass"}
// CHECK: %[[NTILES:.*]] = arith.divui %{{.*}}, %c1024_i64
// CHECK: scf.for %[[T:.*]] = %{{.*}} to %[[NTILES]] step %{{.*}} : i64
// CHECK: %[[FIRST:.*]] = arith.muli %[[T]], %c1024_i64
// CHECK: %[[FULLEND:.*]] = arith.addi %[[FIRST]], %c1024_i64
// CHECK: %[[END:.*]] = arith.minsi %[[FULLEND]], %[[N]]
// CHECK: %[[HEADLONG:.*]] = arith.ori
// CHECK: %[[DIFFERENT:.*]] = arith.cmpi ne
// CHECK: %[[TAILLONG:.*]] = arith.andi %[[DIFFERENT]]
// CHECK: %[[HEADENDS:.*]] = arith.andi %[[HEADLONG]], %[[DIFFERENT]]
// CHECK: %[[HEADEND:.*]] = scf.if %[[HEADENDS]] -> (i64) {
// CHECK: nvvm.vote.ballot.sync
// CHECK: } else {
// CHECK-NEXT: scf.yield %[[END]] : i64
// CHECK: %[[TAILSTART:.*]] = scf.if %[[TAILLONG]] -> (i64) {
// CHECK: nvvm.vote.ballot.sync
// CHECK: scf.for %[[WHICH:.*]] = %c0_i64 to %c2_i64 step %c1_i64 : i64 {
// CHECK: %[[ISHEAD:.*]] = arith.cmpi eq, %[[WHICH]], %c0_i64
// CHECK: %[[HI:.*]] = arith.select %[[ISHEAD]], %[[HEADEND]], %[[END]]
// CHECK: %[[ISLONG:.*]] = arith.select %[[ISHEAD]], %[[HEADLONG]], %[[TAILLONG]]
// CHECK: scf.if %[[ISLONG]] {
// The piece's 3-vectors are summed striped (striped-reductions.mlir): a
// masked first step, the full steps, a masked last step below HI.
// CHECK: scf.if %{{.*}} -> (f32, f32, f32) {
// CHECK: scf.for %{{.*}} = %{{.*}} to %[[FULLEND:[^ ]*]] step %c32_i64 iter_args({{.*}}) -> (f32, f32, f32)
// CHECK: %[[LAST:.*]] = arith.cmpi slt, %[[FULLEND]], %[[HI]] : i64
// CHECK: scf.if %[[LAST]] -> (f32, f32, f32) {
// CHECK-COUNT-15: gpu.shuffle  xor
// CHECK: %[[TWICE:.*]] = arith.muli %[[T]], %c2_i64
// CHECK: %[[SLOT:.*]] = arith.addi %[[TWICE]], %[[WHICH]]
// CHECK: %[[AT:.*]] = arith.muli %[[SLOT]], %c3_i64
// CHECK: llvm.getelementptr inbounds %[[PARTIALS]][%[[AT]]]
// CHECK-NOT: scf.for
// CHECK: gpu.return
// The super-tile kernel: a warp per 32-tile super-tile (32 tiles of 1,024
// rows: rows held a row per lane).
// The super-tile's head (the segment of its first row) takes the head slots
// of the tiles whose first row holds it; its tail (of its last row) the
// head slot of a tile whose first row holds it, else the tail slot of one
// whose last row does: lanes over tiles find those, and ballots give every
// lane every tile's bits. The slots are read lanes over components (lane l:
// component l % 4 of tiles l / 4, l / 4 + 8, ..., the vec3's fourth lane
// idle), each only where its tile adds to the head or the tail (else the
// identity), all loads before the lane's combines in tile order; then a
// butterfly over the lanes of a component each, and lanes 0 to 2 store
// both slots as those of tile numTiles + s.
// CHECK: gpu.func @sum_vec3__super_tiles(
// CHECK-DAG: %[[N:arg[0-9]+]]: i64 {seg.param = "num_rows"}
// CHECK-DAG: %[[SCRATCH:arg[0-9]+]]: !llvm.ptr {seg.param = "scratch"}
// CHECK-DAG: %[[PASS:arg[0-9]+]]: i64 {seg.param = "pass"}
// CHECK: %[[COUNT:.*]] = arith.select %{{.*}}, %c3_i64, %c0_i64
// CHECK: %[[NTILES:.*]] = arith.divui %{{.*}}, %c1024_i64
// CHECK: %[[UP:.*]] = arith.addi %[[NTILES]], %c31_i64
// CHECK: %[[NSUPER:.*]] = arith.divui %[[UP]], %c32_i64
// CHECK: scf.for %[[SUPER:.*]] = %{{.*}} to %[[NSUPER]] step %{{.*}} : i64 {
// CHECK: %[[SUPERSTART:.*]] = arith.muli %[[SUPER]], %c32768_i64
// CHECK: %[[SUPEREND:.*]] = arith.minsi %{{.*}}, %[[N]]
// CHECK: llvm.getelementptr inbounds %{{.*}}[%[[SUPERSTART]]]
// CHECK: %[[HEAD:.*]] = arith.extsi
// CHECK: %[[TAIL:.*]] = arith.extsi
// Only where a long segment spans it and another super-tile: the row
// before it holds its head and so does the last row of the tile before or
// after its start; or likewise for its tail and its end.
// CHECK: %[[BEFORE:.*]] = scf.if %{{.*}} -> (i64) {
// CHECK: %[[AFTER:.*]] = scf.if %{{.*}} -> (i64) {
// CHECK: %[[HEADBEGAN:.*]] = arith.cmpi eq, %[[BEFORE]], %[[HEAD]]
// CHECK: arith.subi %[[SUPERSTART]], %c1024_i64
// CHECK: arith.addi %[[SUPERSTART]], %c1023_i64
// CHECK: %[[HEADLONG:.*]] = arith.ori
// CHECK: %[[HEADSPANS:.*]] = arith.andi %[[HEADBEGAN]], %[[HEADLONG]]
// CHECK: %[[TAILGOESON:.*]] = arith.cmpi eq, %[[AFTER]], %[[TAIL]]
// CHECK: arith.subi %[[SUPEREND]], %c1024_i64
// CHECK: arith.addi %[[SUPEREND]], %c1023_i64
// CHECK: %[[TAILLONG:.*]] = arith.ori
// CHECK: %[[TAILSPANS:.*]] = arith.andi %[[TAILGOESON]], %[[TAILLONG]]
// CHECK: %[[SPANS:.*]] = arith.ori %[[HEADSPANS]], %[[TAILSPANS]]
// CHECK: scf.if %[[SPANS]] {
// CHECK: %[[TILELANE:.*]] = arith.shrui %[[LANE:.*]], %c2_i64
// CHECK: %[[COMPONENT:.*]] = arith.andi %[[LANE]], %c3_i64
// CHECK: %[[HASCOMPONENT:.*]] = arith.cmpi slt, %[[COMPONENT]], %[[COUNT]]
// CHECK: %[[FIRSTTILE:.*]] = arith.muli %[[SUPER]], %c32_i64
// CHECK: %[[TILE:.*]] = arith.addi %[[FIRSTTILE]], %[[LANE]] : i64
// CHECK: %[[INRANGE:.*]] = arith.cmpi ult, %[[TILE]], %[[NTILES]]
// CHECK: %[[ENDS:.*]]:2 = scf.if %[[INRANGE]] -> (i64, i64) {
// CHECK: %[[HOLDSHEAD:.*]] = arith.cmpi eq, %[[ENDS]]#0, %[[HEAD]]
// CHECK: %[[TOHEAD:.*]] = arith.andi %[[INRANGE]], %[[HOLDSHEAD]]
// CHECK: %[[HEADBITS:.*]] = nvvm.vote.ballot.sync %c-1_i32, %[[TOHEAD]] : i32
// CHECK: arith.cmpi eq, %[[ENDS]]#1, %[[TAIL]]
// CHECK: %[[TAILBITS:.*]] = nvvm.vote.ballot.sync
// CHECK: %[[SLOTBITS:.*]] = nvvm.vote.ballot.sync
// CHECK: %[[POSITION:.*]] = arith.trunci %[[TILELANE]] : i64 to i32
// CHECK: %[[READTILE:.*]] = arith.addi %[[FIRSTTILE]], %[[TILELANE]] : i64
// CHECK: %[[HEADBIT:.*]] = arith.shrui %[[HEADBITS]], %[[POSITION]] : i32
// CHECK: %[[ADDSHEAD:.*]] = arith.trunci %[[HEADBIT]] : i32 to i1
// CHECK: %[[READSHEAD:.*]] = arith.andi %[[HASCOMPONENT]], %[[ADDSHEAD]]
// CHECK: %[[HEADPART:.*]] = scf.if %[[READSHEAD]] -> (f32) {
// CHECK: %[[HEADAT:.*]] = arith.muli %[[READTILE]], %c6_i64
// CHECK: arith.addi %[[HEADAT]], %[[COMPONENT]]
// CHECK: %[[HEADVALUE:.*]] = llvm.load
// CHECK: scf.yield %[[HEADVALUE]] : f32
// CHECK: } else {
// CHECK: scf.yield %cst : f32
// CHECK: arith.shrui %[[SLOTBITS]], %[[POSITION]] : i32
// CHECK: arith.shrui %[[TAILBITS]], %[[POSITION]] : i32
// CHECK: %[[TAILPART:.*]] = scf.if %{{.*}} -> (f32) {
// CHECK: llvm.load
// CHECK: } else {
// CHECK: scf.yield %cst : f32
// Three more tiles a lane: 8 tiles on.
// CHECK: arith.addi %[[TILELANE]], %c8_i64
// CHECK-COUNT-6: scf.if
// CHECK: %[[HEADSUM:.*]] = arith.addf %[[HEADPART]], %cst : f32
// CHECK-COUNT-3: arith.addf
// CHECK: %[[TAILSUM:.*]] = arith.addf %[[TAILPART]], %cst : f32
// CHECK-COUNT-3: arith.addf
// CHECK: gpu.shuffle  xor %{{.*}}, %c16_i32, %c32_i32 : f32
// CHECK: gpu.shuffle  xor %{{.*}}, %c8_i32, %c32_i32 : f32
// CHECK: gpu.shuffle  xor %{{.*}}, %c4_i32, %c32_i32 : f32
// CHECK-NOT: gpu.shuffle  xor %{{.*}}, %c2_i32
// CHECK: gpu.shuffle  xor %{{.*}}, %c16_i32, %c32_i32 : f32
// CHECK-COUNT-2: gpu.shuffle  xor
// CHECK: %[[SUPERSLOT:.*]] = arith.addi %[[NTILES]], %[[SUPER]]
// CHECK: %[[FIRSTOFCOMPONENT:.*]] = arith.cmpi eq, %[[TILELANE]], %c0_i64
// CHECK: %[[STORES:.*]] = arith.andi %[[HASCOMPONENT]], %[[FIRSTOFCOMPONENT]]
// CHECK: scf.if %[[STORES]] {
// CHECK: arith.muli %[[SUPERSLOT]], %c6_i64
// CHECK: llvm.getelementptr inbounds %[[SCRATCH]]
// CHECK: llvm.store
// CHECK: arith.muli %[[SUPERSLOT]], %c2_i64
// CHECK: llvm.getelementptr inbounds %[[SCRATCH]]
// CHECK: llvm.store
// CHECK: gpu.return
// CHECK-NOT: func.func @sum_vec3
func.func @sum_vec3(%x: tensor<?x3xf32>, %idx: tensor<?xi32>, %n: index) -> tensor<?x3xf32> {
  %0 = seg.sum %x, %idx, %n : tensor<?x3xf32>, tensor<?xi32> -> tensor<?x3xf32>
  return %0 : tensor<?x3xf32>
}

// -----

// Scalar rows: one accumulator per lane, f64 shuffles.
// CHECK-LABEL: gpu.func @sum_scalar
// CHECK: scf.for {{.*}} iter_args(%{{.*}} = %cst) -> (f64) : i64
// CHECK-COUNT-5: gpu.shuffle  xor {{.*}} : f64
// CHECK-NOT: gpu.shuffle  xor {{.*}} : f64
// CHECK: llvm.store %{{.*}}, %{{.*}} : f64, !llvm.ptr
func.func @sum_scalar(%x: tensor<?xf64>, %idx: tensor<?xi32>, %n: index) -> tensor<?xf64> {
  %0 = seg.sum %x, %idx, %n : tensor<?xf64>, tensor<?xi32> -> tensor<?xf64>
  return %0 : tensor<?xf64>
}

// -----

// Gather only maps rows, whatever the segments: each thread takes 4 rows
// of its block's 1,024-row tile (rows t, t + 256, t + 512, t + 768;
// grid-stride), loads all 4 idx first, then for each row in range its
// segment's row of y (or 0 if idx is outside [0, S)) and stores it. No
// ballot, no reduction, no tile kernel. (Rows of 3 take another path:
// striped-rows.mlir.)
// CHECK-LABEL: gpu.func @gather_vec2
// CHECK-SAME: (%[[Y:[^:]*]]: !llvm.ptr, %[[IDX:[^:]*]]: !llvm.ptr, %[[OUT:[^:]*]]: !llvm.ptr,
// CHECK-DAG: %[[N:arg[0-9]+]]: i64 {seg.param = "num_rows"}
// CHECK-DAG: %[[S:arg[0-9]+]]: i64 {seg.param = "num_segments"}
// CHECK-NOT: nvvm.vote.ballot.sync
// CHECK: %[[BLOCKROWS:.*]] = arith.muli %{{.*}}, %c1024_i64
// CHECK: %[[FIRSTROW:.*]] = arith.addi %[[BLOCKROWS]]
// CHECK: %[[GRIDROWS:.*]] = arith.muli %{{.*}}, %c1024_i64
// CHECK: scf.for %[[ROW:.*]] = %[[FIRSTROW]] to %[[N]] step %[[GRIDROWS]] : i64
// CHECK: llvm.getelementptr inbounds %[[IDX]][%[[ROW]]]
// CHECK: %[[ROW1:.*]] = arith.addi %[[ROW]], %c256_i64
// CHECK: %[[IN1:.*]] = arith.cmpi slt, %[[ROW1]], %[[N]]
// CHECK: scf.if %[[IN1]]
// CHECK: llvm.getelementptr inbounds %[[IDX]][%[[ROW1]]]
// CHECK: arith.addi %[[ROW]], %c512_i64
// CHECK: llvm.getelementptr inbounds %[[IDX]]
// CHECK: arith.addi %[[ROW]], %c768_i64
// CHECK: llvm.getelementptr inbounds %[[IDX]]
// CHECK-NOT: llvm.getelementptr inbounds %[[Y]]
// CHECK: scf.if %{{.*}} {
// CHECK-COUNT-2: llvm.getelementptr inbounds %[[Y]]
// CHECK: llvm.getelementptr inbounds %[[OUT]]
// CHECK: } else {
// CHECK-COUNT-2: llvm.store %cst
// CHECK: scf.if %[[IN1]] {
// CHECK-COUNT-2: llvm.getelementptr inbounds %[[Y]]
// CHECK-NOT: gpu.shuffle
// CHECK-NOT: gather_vec2__tiles
func.func @gather_vec2(%y: tensor<?x2xf64>, %idx: tensor<?xi32>) -> tensor<?x2xf64> {
  %0 = seg.gather %y, %idx : tensor<?x2xf64>, tensor<?xi32> -> tensor<?x2xf64>
  return %0 : tensor<?x2xf64>
}

// -----

// A fused program (the derived backward of rms_norm): one kernel, two passes
// over each segment's rows: the first reduces sum |x|^2 (one butterfly), the
// per-segment epilogue computes the weight, the second writes x * weight.
// Two passes and row outputs: long segments run in stages, each a warp per
// 1024-row tile, launched before the kernel: __bounds (each long segment's
// first and last row into the scratch), __tiles for pass 0 (the tile's long
// pieces: totals into the tile slots; zero rows for invalid segments),
// __super_tiles for pass 0 (each super-tile's slots from its tiles'),
// __pass_totals for pass 0 (each long segment's pass-0 totals from its tiles'
// or super-tiles' slots, by the warp of the tile it starts in), __tiles for
// pass 1 (the
// weight from those totals, rows stored). The kernel itself gives a long
// segment only its outputs (none here).
// CHECK-LABEL: gpu.func @rms_norm_backward
// CHECK-SAME: (%[[X:[^:]*]]: !llvm.ptr, %[[IDX:[^:]*]]: !llvm.ptr, %[[G:[^:]*]]: !llvm.ptr, %[[OUT:[^:]*]]: !llvm.ptr,
// CHECK-DAG: %[[N:arg[0-9]+]]: i64 {seg.param = "num_rows"}
// CHECK-DAG: %[[S:arg[0-9]+]]: i64 {seg.param = "num_segments"}
// CHECK-DAG: %[[SCRATCH:arg[0-9]+]]: !llvm.ptr {seg.param = "scratch"}
// CHECK-SAME: kernel
// CHECK: arith.cmpi eq
// CHECK: scf.if %{{.*}} {
// CHECK: } else {
// CHECK: %[[PASS1:.*]] = scf.for {{.*}} iter_args({{.*}}) -> (f64) : i64
// CHECK-COUNT-5: gpu.shuffle  xor {{.*}} : f64
// CHECK: llvm.call_intrinsic "llvm.sqrt.f64"
// CHECK: arith.divf
// CHECK: scf.for
// CHECK: arith.mulf
// CHECK: llvm.getelementptr inbounds %[[OUT]]
// CHECK-NOT: seg.
// CHECK: gpu.func @rms_norm_backward__bounds(
// CHECK-DAG: %[[SCRATCH:arg[0-9]+]]: !llvm.ptr {seg.param = "scratch"}
// CHECK-SAME: kernel
// CHECK: scf.while
// CHECK: nvvm.vote.ballot.sync
// CHECK: scf.for %{{.*}} = %c0_i64 to %c2_i64 step %c1_i64
// CHECK: scf.while
// CHECK: nvvm.vote.ballot.sync
// CHECK: llvm.getelementptr inbounds %[[SCRATCH]][%{{.*}}] : (!llvm.ptr, i64) -> !llvm.ptr, i64
// CHECK: llvm.store %{{.*}} : i64, !llvm.ptr
// One tile kernel for every pass: earlier passes' totals are loaded, the
// pass run (the last argument) visits the rows, later passes do nothing.
// CHECK: gpu.func @rms_norm_backward__tiles(
// CHECK-DAG: %[[SCRATCH:arg[0-9]+]]: !llvm.ptr {seg.param = "scratch"}
// CHECK-DAG: %[[PASS:arg[0-9]+]]: i64 {seg.param = "pass"}
// CHECK-SAME: kernel
// CHECK: scf.for %{{.*}} = %c0_i64 to %c2_i64 step %c1_i64
// CHECK: arith.cmpi ugt, %[[PASS]], %c0_i64
// CHECK: arith.cmpi eq, %[[PASS]], %c0_i64
// CHECK: scf.for {{.*}} -> (f64) : i64
// CHECK-COUNT-5: gpu.shuffle  xor {{.*}} : f64
// CHECK: llvm.store {{.*}} : f64, !llvm.ptr
// CHECK: llvm.call_intrinsic "llvm.sqrt.f64"
// CHECK: arith.cmpi eq, %[[PASS]], %c1_i64
// CHECK: scf.for
// CHECK: llvm.store {{.*}} : f64, !llvm.ptr
// CHECK: } else {
// CHECK: llvm.store %cst{{.*}} : f64, !llvm.ptr
// The super-tile kernel combines the slots of the pass it runs (one
// component here, pass 0's).
// CHECK: gpu.func @rms_norm_backward__super_tiles(
// CHECK-DAG: %[[PASS:arg[0-9]+]]: i64 {seg.param = "pass"}
// CHECK: arith.cmpi eq, %[[PASS]], %c0_i64
// CHECK-COUNT-10: gpu.shuffle  xor {{.*}} : f64
// CHECK: gpu.return
// The pass-totals kernel sums the totals of the pass it runs over the segment's
// tiles (a loop over those totals' components).
// It asks for 4 blocks of 256 per SM (nvvm.minctasm = 4): half the SM's
// threads, so ptxas keeps it to 64 registers (50% occupancy) rather than
// aiming at 32 and spilling.
// CHECK: gpu.func @rms_norm_backward__pass_totals(
// CHECK-DAG: %[[SCRATCH:arg[0-9]+]]: !llvm.ptr {seg.param = "scratch"}
// CHECK-DAG: %[[PASS:arg[0-9]+]]: i64 {seg.param = "pass"}
// CHECK-SAME: kernel
// CHECK-SAME: nvvm.minctasm = 4 : i32
// CHECK: arith.cmpi eq, %[[PASS]], %c0_i64
// CHECK: scf.for %[[COMPONENT:.*]] = %{{.*}} to %{{.*}} step %c1_i64
// CHECK: %[[TOTAL:.*]] = scf.for {{.*}} step %c128_i64 iter_args({{.*}}) -> (f64) : i64
// CHECK-COUNT-5: gpu.shuffle  xor {{.*}} : f64
// CHECK: llvm.store %[[TOTAL]], %{{.*}} : f64, !llvm.ptr
// CHECK-NOT: rms_norm_backward__tiles1
func.func @rms_norm_backward(%x: tensor<?x3xf64>, %idx: tensor<?xi32>, %n: index, %g: tensor<?xf64>) -> tensor<?x3xf64> {
  %cst = arith.constant 1.000000e+00 : f64
  %c0 = arith.constant 0 : index
  %cst_0 = arith.constant 0.000000e+00 : f64
  %0 = seg.rms_norm %x, %idx, %n : tensor<?x3xf64>, tensor<?xi32> -> tensor<?xf64>
  %1 = seg.count %idx, %n : tensor<?xi32> -> tensor<?xf64>
  %dim = tensor.dim %0, %c0 : tensor<?xf64>
  %zero = tensor.splat %cst_0[%dim] : tensor<?xf64>
  %one = tensor.splat %cst[%dim] : tensor<?xf64>
  %2 = arith.cmpf ogt, %0, %zero : tensor<?xf64>
  %3 = arith.select %2, %0, %one : tensor<?xi1>, tensor<?xf64>
  %4 = arith.mulf %1, %3 : tensor<?xf64>
  %5 = arith.divf %g, %4 : tensor<?xf64>
  %6 = arith.select %2, %5, %zero : tensor<?xi1>, tensor<?xf64>
  %7 = seg.mul %x, %6, %idx : tensor<?x3xf64>, tensor<?xf64>, tensor<?xi32> -> tensor<?x3xf64>
  return %7 : tensor<?x3xf64>
}

// -----

// The derived backward of mean: two passes (segment counts, from each
// segment's bounds, then the rows) but no reduction. Long segments get
// __bounds and __tiles; with no totals to gather there is no __super_tiles
// or __pass_totals kernel (it was emitted before, though nothing launched it).
// CHECK-LABEL: gpu.func @mean_grad(
// CHECK: gpu.func @mean_grad__bounds(
// CHECK: gpu.func @mean_grad__tiles(
// CHECK-NOT: mean_grad__pass_totals
// CHECK-NOT: mean_grad__super_tiles
func.func @mean_grad(%x: tensor<?xf32> {seg.space = "row"}, %idx: tensor<?xi32>, %n: index,
                     %g: tensor<?xf32> {seg.space = "segment"}) -> tensor<?xf32> {
  %cst = arith.constant 1.000000e+00 : f32
  %count = seg.count %idx, %n : tensor<?xi32> -> tensor<?xf32>
  %ones = tensor.splat %cst[%n] : tensor<?xf32>
  %inverse = arith.divf %ones, %count : tensor<?xf32>
  %gathered = seg.gather %g, %idx : tensor<?xf32>, tensor<?xi32> -> tensor<?xf32>
  %0 = seg.mul %gathered, %inverse, %idx : tensor<?xf32>, tensor<?xf32>, tensor<?xi32> -> tensor<?xf32>
  return %0 : tensor<?xf32>
}

// -----

// The derived backward of mul: one pass storing a row output (g * y[idx])
// and reducing (the dot of g and x), its rows reading nothing of the row
// count: a one-pass program with row outputs. Long segments get __tiles and
// __super_tiles only (no __bounds, no __pass_totals: the kernel adds a long
// segment's tiles' partials itself). __tiles runs each long piece's rows
// lane-strided, storing their row outputs on the way, then the butterfly
// and lane 0's store of the piece's partial into its slot; an invalid
// segment's piece gets zero row outputs.
// CHECK-LABEL: gpu.func @mul_grad(
// CHECK-NOT: gpu.func @mul_grad__bounds(
// CHECK: gpu.func @mul_grad__tiles(%[[X:[^:]*]]: !llvm.ptr, %[[Y:[^:]*]]: !llvm.ptr, %{{[^:]*}}: !llvm.ptr, %[[G:[^:]*]]: !llvm.ptr, %[[GX:[^:]*]]: !llvm.ptr, %{{[^:]*}}: !llvm.ptr, %{{.*}}: i64 {seg.param = "num_rows"}, %{{.*}}: i64 {seg.param = "num_segments"}, %[[SCRATCH:[^:]*]]: !llvm.ptr {seg.param = "scratch"}
// CHECK: %[[YS:.*]] = llvm.load %{{.*}} : !llvm.ptr -> f32
// CHECK: %[[PART:.*]] = scf.for %[[ROW:.*]] = %{{.*}} to %{{.*}} step %c32_i64 iter_args(%{{.*}}) -> (f32)
// CHECK: %[[GROW:.*]] = llvm.load %{{.*}} : !llvm.ptr -> f32
// CHECK: %[[GXROW:.*]] = arith.mulf %[[GROW]], %[[YS]] : f32
// CHECK-NEXT: %[[AT:.*]] = llvm.getelementptr inbounds %[[GX]][%[[ROW]]]
// CHECK-NEXT: llvm.store %[[GXROW]], %[[AT]]
// CHECK: gpu.shuffle  xor %[[PART]], %c16_i32
// CHECK: llvm.getelementptr inbounds %[[SCRATCH]]
// CHECK: } else {
// CHECK: scf.for %[[ZROW:.*]] = %{{.*}} to %{{.*}} step %c32_i64
// CHECK-NEXT: %[[ZAT:.*]] = llvm.getelementptr inbounds %[[GX]][%[[ZROW]]]
// CHECK-NEXT: llvm.store %cst, %[[ZAT]]
// CHECK: gpu.func @mul_grad__super_tiles(
// CHECK-NOT: gpu.func @mul_grad__pass_totals(
// CHECK-NOT: gpu.func @mul_grad__bounds(
func.func @mul_grad(%x: tensor<?xf32> {seg.space = "row"},
                    %y: tensor<?xf32> {seg.space = "segment"},
                    %idx: tensor<?xi32>,
                    %g: tensor<?xf32> {seg.space = "row"}) -> (tensor<?xf32>, tensor<?xf32>) {
  %c0 = arith.constant 0 : index
  %0 = seg.mul %g, %y, %idx : tensor<?xf32>, tensor<?xf32>, tensor<?xi32> -> tensor<?xf32>
  %dim = tensor.dim %y, %c0 : tensor<?xf32>
  %1 = seg.dot %g, %x, %idx, %dim : tensor<?xf32>, tensor<?xf32>, tensor<?xi32> -> tensor<?xf32>
  return %0, %1 : tensor<?xf32>, tensor<?xf32>
}

// -----

// The derived backward of matvec: one pass storing a row output (m g) and
// reducing 9 components (the outer sum of v and g): one-pass too. Its
// kernel combines a long segment's 9 totals from the tiles' slots in a
// loop over the tiles per component (more than kMaxComponentsPerTileLoop:
// all 9 at once kept 36 slot loads in flight, 128 registers at f64).
// CHECK-LABEL: gpu.func @matvec_grad(
// CHECK-COUNT-9: scf.for %{{.*}} step %c128_i64 iter_args(%{{[^,]*}} = %cst{{[_0-9]*}}) -> (f32)
// CHECK-NOT: step %c128_i64
// CHECK: gpu.func @matvec_grad__tiles(
// CHECK: gpu.func @matvec_grad__super_tiles(
// CHECK-NOT: gpu.func @matvec_grad__
func.func @matvec_grad(%v: tensor<?x3xf32> {seg.space = "row"},
                       %m: tensor<?x3x3xf32> {seg.space = "segment"},
                       %idx: tensor<?xi32>,
                       %g: tensor<?x3xf32> {seg.space = "row"})
    -> (tensor<?x3xf32>, tensor<?x3x3xf32>) {
  %c0 = arith.constant 0 : index
  %0 = seg.matvec %g, %m, %idx {transpose = false} : tensor<?x3xf32>, tensor<?x3x3xf32>, tensor<?xi32> -> tensor<?x3xf32>
  %dim = tensor.dim %m, %c0 : tensor<?x3x3xf32>
  %1 = seg.outer_sum %v, %g, %idx, %dim : tensor<?x3xf32>, tensor<?x3xf32>, tensor<?xi32> -> tensor<?x3x3xf32>
  return %0, %1 : tensor<?x3xf32>, tensor<?x3x3xf32>
}

// -----

// Functions without seg ops are left alone, and no GPU module is created.
// CHECK-LABEL: func.func @not_a_kernel
// CHECK-NOT: gpu.module
func.func @not_a_kernel(%a: i64) -> i64 {
  return %a : i64
}
