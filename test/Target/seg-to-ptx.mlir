// RUN: seg-opt %s --seg-to-ptx | FileCheck %s
// RUN: seg-opt %s --seg-to-ptx=chip=sm_80 | FileCheck %s --check-prefix=SM80
// RUN: seg-opt %s --seg-to-nvvm | FileCheck %s --check-prefix=NVVM

// The whole module becomes one gpu.binary holding PTX text for sm_90.
// CHECK-LABEL: module attributes {gpu.container_module}
// CHECK: gpu.binary @seg_kernels
// CHECK-SAME: #nvvm.target<O = 3, chip = "sm_90", features = "+ptx80">
// CHECK-SAME: .target sm_90
// CHECK-SAME: .visible .entry sum_vec3(
// CHECK-SAME: .maxntid 256, 1, 1
// CHECK-SAME: vote.sync.ballot.b32
// CHECK-SAME: shfl.sync.bfly.b32
// CHECK-SAME: .visible .entry sum_vec3__tiles(
// CHECK-SAME: .visible .entry gather_scalar(
// CHECK-NOT: func.func
// SM80: .target sm_80

// NVVM-LABEL: gpu.module @seg_kernels [#nvvm.target<O = 3, chip = "sm_90", features = "+ptx80">]
// NVVM: llvm.func @sum_vec3(%{{.*}}: !llvm.ptr, %{{.*}}: !llvm.ptr, %{{.*}}: !llvm.ptr, %{{.*}}: i64, %{{.*}}: i64, %{{.*}}: !llvm.ptr)
// NVVM-SAME: gpu.kernel
// NVVM-SAME: nvvm.kernel
// NVVM-SAME: nvvm.maxntid = array<i32: 256, 1, 1>
// NVVM: nvvm.read.ptx.sreg.ctaid.x
// NVVM: nvvm.vote.ballot.sync
// NVVM: nvvm.shfl.sync bfly
// NVVM: llvm.func @sum_vec3__tiles(
// NVVM: llvm.func @gather_scalar

func.func @sum_vec3(%x: tensor<?x3xf32>, %idx: tensor<?xi32>, %n: index) -> tensor<?x3xf32> {
  %0 = seg.sum %x, %idx, %n : tensor<?x3xf32>, tensor<?xi32> -> tensor<?x3xf32>
  return %0 : tensor<?x3xf32>
}

func.func @gather_scalar(%y: tensor<?xf64>, %idx: tensor<?xi32>) -> tensor<?xf64> {
  %0 = seg.gather %y, %idx : tensor<?xf64>, tensor<?xi32> -> tensor<?xf64>
  return %0 : tensor<?xf64>
}
