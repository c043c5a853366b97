// RUN: seg-opt %s --convert-gpu-to-simulator | FileCheck %s

// Every global load and store is reported to the simulator's memory trace
// first: its address, its bytes (from the data layout: 4 for f32, 8 for
// i64, 16 for a vector of 4 f32) and whether it stores, each at a site of
// its own (numbered with the collectives).
// CHECK-DAG: func.func private @segsim_access(i64, i32, i32, i32)
// CHECK-LABEL: func.func @copy(
// CHECK-SAME: %[[IN:[^:]*]]: !llvm.ptr, %[[OUT:[^:]*]]: !llvm.ptr
// CHECK: %[[A:.*]] = llvm.ptrtoint %[[IN]] : !llvm.ptr to i64
// CHECK: call @segsim_access(%[[A]], %c4_i32, %c0_i32, %c0_i32{{[_0-9]*}}) : (i64, i32, i32, i32) -> ()
// CHECK: %[[V:.*]] = llvm.load %[[IN]] : !llvm.ptr -> f32
// CHECK: %[[B:.*]] = llvm.ptrtoint %[[OUT]] : !llvm.ptr to i64
// CHECK: call @segsim_access(%[[B]], %c4_i32{{[_0-9]*}}, %c1_i32, %c1_i32{{[_0-9]*}})
// CHECK: llvm.store %[[V]], %[[OUT]] : f32, !llvm.ptr
// CHECK: call @segsim_access(%{{.*}}, %c8_i32, %c0_i32{{[_0-9]*}}, %c2_i32)
// CHECK: llvm.load %{{.*}} : !llvm.ptr -> i64
// CHECK: call @segsim_access(%{{.*}}, %c16_i32, %c1_i32{{[_0-9]*}}, %c3_i32)
// CHECK: llvm.store %{{.*}} : vector<4xf32>, !llvm.ptr
// CHECK: return
module attributes {gpu.container_module} {
  gpu.module @kernels {
    gpu.func @copy(%in: !llvm.ptr, %out: !llvm.ptr, %wide: !llvm.ptr) kernel {
      %v = llvm.load %in : !llvm.ptr -> f32
      llvm.store %v, %out : f32, !llvm.ptr
      %i = llvm.load %wide : !llvm.ptr -> i64
      %z = arith.constant dense<0.0> : vector<4xf32>
      llvm.store %z, %wide : vector<4xf32>, !llvm.ptr
      gpu.return
    }
  }
}
