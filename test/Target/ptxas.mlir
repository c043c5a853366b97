// REQUIRES: ptxas
// The PTX of every kernel the op library has is accepted by NVIDIA's own
// assembler for both targets.
// RUN: rm -rf %t && seg-compile %S/../../oplib/segops.mlir -o %t --chips=sm_80,sm_90
// RUN: %ptxas -arch=sm_90 %t/segops_sm_90.ptx -o %t/sm_90.cubin
// RUN: %ptxas -arch=sm_80 %t/segops_sm_80.ptx -o %t/sm_80.cubin
// RUN: %ptxas -arch=sm_90 --verbose %t/segops_sm_90.ptx -o %t/verbose.cubin 2>&1 | FileCheck %s

// CHECK-DAG: Compiling entry function 'segmented_sum_f32_w1' for 'sm_90'
// CHECK-DAG: Compiling entry function 'segmented_sum_f64_w3' for 'sm_90'
// CHECK-DAG: Compiling entry function 'segmented_gather_f32_w1' for 'sm_90'
// CHECK-NOT: {{[1-9][0-9]*}} bytes spill stores
