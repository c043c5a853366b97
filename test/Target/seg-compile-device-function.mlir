// RUN: rm -rf %t && seg-compile %s -o %t --chips=sm_90
// RUN: FileCheck %s < %t/segops_sm_90.ptx
// RUN: rm -rf %t.ladder %t.log && env PTXAS_LOG=%t.log seg-compile %s -o %t.ladder --chips=sm_90 --ptxas=%S/Inputs/spilling-ptxas.sh
// RUN: FileCheck %s --check-prefix=LADDER < %t.ladder/segops_sm_90.ptx
// RUN: FileCheck %s --check-prefix=RUNS < %t.log

// seg-compile compiles a module's kernels in groups, which needs every
// function in the kernel module to be a kernel. A kernel module given in the
// input (convert-seg-to-gpu adds its kernels to a `seg_kernels` module it
// finds) may hold other functions: then it is compiled whole, device
// function and kernels in one PTX text.
// CHECK: .target sm_90
// CHECK-DAG: .visible .func  (.param .b32 func_retval0) twice(
// CHECK-DAG: .visible .entry sum_scalar(
// CHECK-DAG: .visible .entry sum_scalar__tiles(

// ptxas's register ladder (a stand-in ptxas: spills_* kernels spill below
// 128 registers, the others use 48 and fit in 40, the occupancy step
// below) is given the whole text again, not the re-capped kernels alone,
// where the text holds more than kernels: the kernels may call its
// functions.
// LADDER: .visible .func  (.param .b32 func_retval0) twice(
// LADDER-LABEL: .visible .entry spills_sum(
// LADDER: .maxnreg 128
// LADDER-LABEL: .visible .entry sum_scalar(
// LADDER: .maxnreg 40
// LADDER: ret;
// RUNS-COUNT-8: {{^}}spills_sum spills_sum__tiles spills_sum__super_tiles sum_scalar sum_scalar__tiles sum_scalar__super_tiles{{$}}
// RUNS-NOT: {{.}}
gpu.module @seg_kernels {
  llvm.func @twice(%a: f32) -> f32 {
    %0 = llvm.fadd %a, %a : f32
    llvm.return %0 : f32
  }
}

func.func @spills_sum(%x: tensor<?xf32>, %idx: tensor<?xi32>, %n: index) -> tensor<?xf32> {
  %0 = seg.sum %x, %idx, %n : tensor<?xf32>, tensor<?xi32> -> tensor<?xf32>
  return %0 : tensor<?xf32>
}

func.func @sum_scalar(%x: tensor<?xf32>, %idx: tensor<?xi32>, %n: index) -> tensor<?xf32> {
  %0 = seg.sum %x, %idx, %n : tensor<?xf32>, tensor<?xi32> -> tensor<?xf32>
  return %0 : tensor<?xf32>
}
