// RUN: seg-opt %s --seg-differentiate | FileCheck %s
// RUN: seg-opt %s --seg-derive=order=3 --seg-to-host | FileCheck %s --check-prefix=HOST
// RUN: seg-opt %s --seg-derive=order=2 --seg-to-nvvm -split-input-file -verify-diagnostics | FileCheck %s --check-prefix=NVVM

// The pointwise primitives segops' decompositions build on (sin, cos, atan,
// erf, expm1, log1p, floor, remf): each has a derivative rule written in
// primitives again, so any order derives.

// CHECK-LABEL: func.func @trig_grad
// CHECK-DAG: math.cos
// CHECK-DAG: math.sin
// CHECK-DAG: arith.negf
// sin and cos on f32 rows are polynomials in the lowered kernels: no libm call.
// HOST-LABEL: llvm.func @trig(
// HOST-NOT: llvm.call @sinf
// HOST-NOT: llvm.call @cosf
// HOST-LABEL: llvm.func @trig_grad_grad_grad(
// NVVM-LABEL: llvm.func @trig(
// NVVM-NOT: __nv_
func.func @trig(%x: tensor<?xf32>, %idx: tensor<?xi32>, %n: index) -> tensor<?xf32> {
  %s = math.sin %x : tensor<?xf32>
  %c = math.cos %x : tensor<?xf32>
  %p = arith.mulf %s, %c : tensor<?xf32>
  %0 = seg.sum %p, %idx, %n : tensor<?xf32>, tensor<?xi32> -> tensor<?xf32>
  return %0 : tensor<?xf32>
}

// CHECK-LABEL: func.func @special_grad
// atan: 1 / (1 + x^2); erf: 2/sqrt(pi) exp(-x^2)
// CHECK-DAG: arith.divf
// CHECK-DAG: math.exp
// f32: polynomials, on the host and the GPU alike.
// HOST-LABEL: llvm.func @special(
// HOST-NOT: llvm.call
// HOST-LABEL: llvm.func @special_grad(
// NVVM-LABEL: llvm.func @special(
// NVVM-NOT: __nv_
func.func @special(%x: tensor<?xf32>, %idx: tensor<?xi32>, %n: index) -> tensor<?xf32> {
  %a = math.atan %x : tensor<?xf32>
  %e = math.erf %x : tensor<?xf32>
  %m = math.expm1 %x : tensor<?xf32>
  %l = math.log1p %x : tensor<?xf32>
  %ae = arith.addf %a, %e : tensor<?xf32>
  %ml = arith.mulf %m, %l : tensor<?xf32>
  %p = arith.addf %ae, %ml : tensor<?xf32>
  %0 = seg.sum %p, %idx, %n : tensor<?xf32>, tensor<?xi32> -> tensor<?xf32>
  return %0 : tensor<?xf32>
}

// -----

// floor is piecewise constant: no gradient through it; fmod's divisor gets
// -trunc(a / b), as (a - r) / b.
// CHECK-LABEL: func.func @pieces_grad
// CHECK: arith.subf
// CHECK: arith.divf
// CHECK: arith.negf
// HOST-LABEL: llvm.func @pieces(
// HOST: llvm.frem
func.func @pieces(%x: tensor<?xf32>, %y: tensor<?xf32>, %idx: tensor<?xi32>, %n: index) -> tensor<?xf32> {
  %f = math.floor %x : tensor<?xf32>
  // expected-error @+1 {{'arith.remf' (fmod) has no GPU lowering}}
  %r = arith.remf %x, %y : tensor<?xf32>
  %p = arith.mulf %f, %r : tensor<?xf32>
  %0 = seg.sum %p, %idx, %n : tensor<?xf32>, tensor<?xi32> -> tensor<?xf32>
  return %0 : tensor<?xf32>
}

// -----

// On the GPU, floor is integer conversions (no libdevice call).
// NVVM-LABEL: llvm.func @floor(
// NVVM-NOT: __nv_floor
func.func @floor(%x: tensor<?xf32>, %idx: tensor<?xi32>, %n: index) -> tensor<?xf32> {
  %f = math.floor %x : tensor<?xf32>
  %p = arith.mulf %f, %x : tensor<?xf32>
  %0 = seg.sum %p, %idx, %n : tensor<?xf32>, tensor<?xi32> -> tensor<?xf32>
  return %0 : tensor<?xf32>
}
