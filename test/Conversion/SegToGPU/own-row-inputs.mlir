// RUN: seg-opt %s --convert-seg-to-gpu --canonicalize --cse -split-input-file | FileCheck %s

// Programs of several passes whose row inputs come to two components or
// more (SegmentProgram::gpuCachesOwnRowInputs): in a packed chunk, each
// lane loads its own row's inputs once, before the first pass; every pass
// runs the lane's own row from them, then loops over a packed tail's other
// rows (own offset + step onwards: none on the other lanes), which load.
// CHECK-LABEL: gpu.func @variance_vec3(
// CHECK-SAME: %[[X:[^:]*]]: !llvm.ptr
// CHECK: %[[X0:.*]] = llvm.load %{{.*}} : !llvm.ptr -> f32
// CHECK-NEXT: %[[C1:.*]] = arith.addi %[[OWN:.*]], %c1_i64 : i64
// CHECK-NEXT: llvm.getelementptr inbounds %[[X]][%[[C1]]]
// CHECK-NEXT: %[[X1:.*]] = llvm.load %{{.*}} : !llvm.ptr -> f32
// CHECK: %[[X2:.*]] = llvm.load %{{.*}} : !llvm.ptr -> f32
// CHECK-NOT: llvm.load
// CHECK: %[[STEP:.*]] = arith.shrui %{{.*}}, %c8_i32 : i32
// CHECK-NEXT: %[[FIRST:.*]] = arith.addi %{{.*}}, %[[STEP]] : i32
// CHECK: scf.for %{{.*}} = %[[FIRST]] to %[[END:.*]] step %[[STEP]] iter_args({{.*}}) -> (f32, f32, f32)
// CHECK-COUNT-3: llvm.load %{{.*}} : !llvm.ptr -> f32
// CHECK: scf.yield
// The second pass: the own row's deviations from the cached values, no
// load before its tail loop.
// CHECK-NOT: llvm.load
// CHECK: arith.subf %[[X0]], %{{.*}} : f32
// CHECK-NEXT: arith.subf %[[X1]], %{{.*}} : f32
// CHECK-NEXT: arith.subf %[[X2]], %{{.*}} : f32
// CHECK-NOT: llvm.load
// CHECK: scf.for %{{.*}} = %[[FIRST]] to %[[END]] step %[[STEP]] iter_args({{.*}}) -> (f32, f32, f32)
// CHECK-COUNT-3: llvm.load %{{.*}} : !llvm.ptr -> f32
// CHECK: scf.yield
func.func @variance_vec3(%x: tensor<?x3xf32>, %idx: tensor<?xi32>, %n: index) -> tensor<?x3xf32> {
  %m = seg.mean %x, %idx, %n : tensor<?x3xf32>, tensor<?xi32> -> tensor<?x3xf32>
  %g = seg.gather %m, %idx : tensor<?x3xf32>, tensor<?xi32> -> tensor<?x3xf32>
  %d = arith.subf %x, %g : tensor<?x3xf32>
  %sq = arith.mulf %d, %d : tensor<?x3xf32>
  %s = seg.sum %sq, %idx, %n : tensor<?x3xf32>, tensor<?xi32> -> tensor<?x3xf32>
  return %s : tensor<?x3xf32>
}

// -----

// One row input of one component: each pass loads the lane's rows from its
// own offset, the own row included.
// CHECK-LABEL: gpu.func @variance(
// CHECK: %[[STEP:.*]] = arith.shrui %{{.*}}, %c8_i32 : i32
// CHECK-NOT: arith.addi %{{.*}}, %[[STEP]] : i32
// CHECK: scf.for %{{.*}} = %[[OWN:[^ ]*]] to %[[END:.*]] step %[[STEP]] iter_args({{.*}}) -> (f64)
// CHECK-NEXT: arith.extui
// CHECK: llvm.load %{{.*}} : !llvm.ptr -> f64
// CHECK: scf.yield
// CHECK: scf.for %{{.*}} = %[[OWN]] to %[[END]] step %[[STEP]] iter_args({{.*}}) -> (f64)
// CHECK: llvm.load %{{.*}} : !llvm.ptr -> f64
func.func @variance(%x: tensor<?xf64>, %idx: tensor<?xi32>, %n: index) -> tensor<?xf64> {
  %m = seg.mean %x, %idx, %n : tensor<?xf64>, tensor<?xi32> -> tensor<?xf64>
  %g = seg.gather %m, %idx : tensor<?xf64>, tensor<?xi32> -> tensor<?xf64>
  %d = arith.subf %x, %g : tensor<?xf64>
  %sq = arith.mulf %d, %d : tensor<?xf64>
  %s = seg.sum %sq, %idx, %n : tensor<?xf64>, tensor<?xi32> -> tensor<?xf64>
  return %s : tensor<?xf64>
}
