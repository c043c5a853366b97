// RUN: seg-opt %s --seg-approximate-math | FileCheck %s
// RUN: seg-opt %s --seg-approximate-math=expand-floor=true | FileCheck %s --check-prefix=GPU

// f32 transcendental functions (scalars and vectors) become arith: no libm
// calls on the host, no libdevice on the GPU.
// CHECK-LABEL: func.func @f32_functions
// CHECK-NOT: math.exp
// CHECK-NOT: math.log
// CHECK-NOT: math.tanh
// CHECK: arith.mulf
// CHECK: return
func.func @f32_functions(%x: f32, %v: vector<8xf32>) -> (f32, f32, vector<8xf32>) {
  %e = math.exp %x : f32
  %l = math.log %e : f32
  %t = math.tanh %v : vector<8xf32>
  return %e, %l, %t : f32, f32, vector<8xf32>
}

// f64 exp and log stay (the host calls libm); tanh, which LLVM has no
// intrinsic for, becomes exp.
// CHECK-LABEL: func.func @f64_functions
// CHECK: math.exp
// CHECK: math.log
// CHECK-NOT: math.tanh
// CHECK: return
func.func @f64_functions(%x: f64) -> (f64, f64, f64) {
  %e = math.exp %x : f64
  %l = math.log %x : f64
  %t = math.tanh %x : f64
  return %e, %l, %t : f64, f64, f64
}

// For the GPU, floor (which the approximations use) and absf are expanded
// too; the host keeps them as instructions.
// CHECK-LABEL: func.func @floor_abs
// CHECK: math.floor
// CHECK: math.absf
// GPU-LABEL: func.func @floor_abs
// GPU-NOT: math.floor
// GPU: arith.fptosi
// GPU: arith.sitofp
// GPU-NOT: math.absf
// GPU: arith.andi
func.func @floor_abs(%x: f32, %y: f64) -> (f32, f64) {
  %f = math.floor %x : f32
  %a = math.absf %y : f64
  return %f, %a : f32, f64
}
