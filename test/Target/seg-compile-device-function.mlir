// RUN: rm -rf %t && seg-compile %s -o %t --chips=sm_90
// RUN: FileCheck %s < %t/segops_sm_90.ptx

// seg-compile compiles a module's kernels in groups, which needs every
// function in the kernel module to be a kernel. A kernel module given in the
// input (convert-seg-to-gpu adds its kernels to a `seg_kernels` module it
// finds) may hold other functions: then it is compiled whole, device
// function and kernels in one PTX text.
// CHECK: .target sm_90
// CHECK-DAG: .visible .func  (.param .b32 func_retval0) twice(
// CHECK-DAG: .visible .entry sum_scalar(
// CHECK-DAG: .visible .entry sum_scalar__tiles(
gpu.module @seg_kernels {
  llvm.func @twice(%a: f32) -> f32 {
    %0 = llvm.fadd %a, %a : f32
    llvm.return %0 : f32
  }
}

func.func @sum_scalar(%x: tensor<?xf32>, %idx: tensor<?xi32>, %n: index) -> tensor<?xf32> {
  %0 = seg.sum %x, %idx, %n : tensor<?xf32>, tensor<?xi32> -> tensor<?xf32>
  return %0 : tensor<?xf32>
}
