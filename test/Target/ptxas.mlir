// REQUIRES: ptxas
// The PTX of every kernel the op library has (forward, derived first and
// second derivatives) is accepted by NVIDIA's own assembler for both targets,
// without register spills: seg-compile --ptxas compiles the kernels ptxas
// would spill in again, asking for one block per SM.
// RUN: rm -rf %t && mkdir -p %t
// RUN: seg-opt %S/../../oplib/segops.mlir --seg-derive=order=2 -o %t/derived.mlir
// RUN: seg-compile %t/derived.mlir -o %t --chips=sm_80,sm_90 --ptxas=%ptxas
// RUN: %ptxas -arch=sm_90 %t/segops_sm_90.ptx -o %t/sm_90.cubin
// RUN: %ptxas -arch=sm_80 %t/segops_sm_80.ptx -o %t/sm_80.cubin
// RUN: %ptxas -arch=sm_90 --verbose %t/segops_sm_90.ptx -o %t/verbose.cubin 2>&1 | FileCheck %s --implicit-check-not='{{[1-9][0-9]*}} bytes spill'
// RUN: %ptxas -arch=sm_80 --verbose %t/segops_sm_80.ptx -o %t/verbose80.cubin 2>&1 | FileCheck %s --check-prefix=SM80 --implicit-check-not='{{[1-9][0-9]*}} bytes spill'

// CHECK-DAG: Compiling entry function 'segmented_sum_f32_w1' for 'sm_90'
// CHECK-DAG: Compiling entry function 'segmented_sum_f64_w3' for 'sm_90'
// CHECK-DAG: Compiling entry function 'segmented_gather_f32_w1' for 'sm_90'
// CHECK-DAG: Compiling entry function 'segmented_rms_norm_f64_w3_grad_grad' for 'sm_90'
// CHECK-DAG: Compiling entry function 'segmented_matvec_f32_w3_grad_grad' for 'sm_90'
// SM80: Compiling entry function 'segmented_sum_f32_w1' for 'sm_80'
