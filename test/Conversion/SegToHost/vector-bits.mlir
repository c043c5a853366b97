// RUN: seg-opt %s --convert-seg-to-host=vector-bits=256 --canonicalize --cse | FileCheck %s
// RUN: seg-opt %s --seg-to-host=vector-bits=512 | FileCheck %s --check-prefix=AVX512
// RUN: not seg-opt %s --convert-seg-to-host=vector-bits=96 2>&1 | FileCheck %s --check-prefix=BAD

// With 256-bit vectors (AVX2) row bodies take 8 f32 rows: a short segment's
// 16-row block is 2 vector loads of 8 vec3 rows (24 floats, deinterleaved
// into 8 lanes per component), masked by an 8-lane compare; the general
// loop steps 32 rows (4 interleaved vectors of 8), then 8.
// CHECK-LABEL: func.func @sum_vec3
// CHECK: scf.if %{{.*}} -> (f32, f32, f32)
// CHECK-COUNT-2: llvm.load %{{.*}} {alignment = 4 : i64} : !llvm.ptr -> vector<24xf32>
// CHECK: arith.select %{{.*}} : vector<8xi1>, vector<8xf32>
// CHECK: llvm.shufflevector %{{.*}} [4, 5, 6, 7] : vector<8xf32>
// CHECK: } else {
// CHECK: scf.for %{{.*}} step %c32_i64 iter_args({{.*}}) -> (vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>)
// CHECK: scf.for %{{.*}} step %c8_i64 iter_args({{.*}}) -> (vector<8xf32>, vector<8xf32>, vector<8xf32>)
// The tile kernel of long segments uses the same vectors.
// CHECK-LABEL: func.func @sum_vec3__rows
// CHECK: step %c32_i64 iter_args({{.*}}) -> (vector<8xf32>, vector<8xf32>
func.func @sum_vec3(%x: tensor<?x3xf32>, %idx: tensor<?xi32>, %n: index) -> tensor<?x3xf32> {
  %0 = seg.sum %x, %idx, %n : tensor<?x3xf32>, tensor<?xi32> -> tensor<?x3xf32>
  return %0 : tensor<?x3xf32>
}

// Row maps take a vector of idx of the same width: 4 f64 rows at 256 bits
// (8 at 512: the pipeline passes vector-bits on).
// CHECK-LABEL: func.func @gather_f64
// CHECK: llvm.load %{{.*}} {alignment = 4 : i64} : !llvm.ptr -> vector<4xi32>
// CHECK: llvm.store %{{.*}} {alignment = 8 : i64} : vector<4xf64>, !llvm.ptr
// AVX512-LABEL: llvm.func @gather_f64
// AVX512: llvm.load %{{.*}} {alignment = 4 : i64} : !llvm.ptr -> vector<8xi32>
// AVX512: llvm.store %{{.*}} {alignment = 8 : i64} : vector<8xf64>, !llvm.ptr
func.func @gather_f64(%y: tensor<?xf64>, %idx: tensor<?xi32>) -> tensor<?xf64> {
  %0 = seg.gather %y, %idx : tensor<?xf64>, tensor<?xi32> -> tensor<?xf64>
  return %0 : tensor<?xf64>
}

// BAD: error: vector-bits must be 128, 256 or 512, got 96
