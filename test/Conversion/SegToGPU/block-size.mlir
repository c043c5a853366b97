// RUN: seg-opt %s --convert-seg-to-gpu=block-size=96 | FileCheck %s
// RUN: not seg-opt %s --convert-seg-to-gpu=block-size=100 2>&1 | FileCheck %s --check-prefix=BAD

// The tree starts at half the block size.
// CHECK-LABEL: gpu.func @sum
// CHECK-SAME: memref<96xf32, #gpu.address_space<workgroup>>
// CHECK-SAME: known_block_size = array<i32: 96, 1, 1>
// CHECK: arith.constant 48 : i64
// CHECK-NOT: arith.constant 96 : i64
// BAD: error: block-size must be 3 * 2^k between 6 and 1536, but got 100
func.func @sum(%x: tensor<?xf32>, %idx: tensor<?xi32>, %n: index) -> tensor<?xf32> {
  %0 = seg.sum %x, %idx, %n : tensor<?xf32>, tensor<?xi32> -> tensor<?xf32>
  return %0 : tensor<?xf32>
}
