// RUN: seg-opt %s --convert-seg-to-gpu=block-size=128 | FileCheck %s
// RUN: not seg-opt %s --convert-seg-to-gpu=block-size=100 2>&1 | FileCheck %s --check-prefix=BAD

// Four warps per block of 128 threads.
// CHECK-LABEL: gpu.func @sum
// CHECK-SAME: known_block_size = array<i32: 128, 1, 1>
// CHECK: arith.constant 4 : i64
// CHECK: arith.constant 128 : i64
// BAD: error: block-size must be a multiple of 32 between 32 and 1024, but got 100
func.func @sum(%x: tensor<?xf32>, %idx: tensor<?xi32>, %n: index) -> tensor<?xf32> {
  %0 = seg.sum %x, %idx, %n : tensor<?xf32>, tensor<?xi32> -> tensor<?xf32>
  return %0 : tensor<?xf32>
}
