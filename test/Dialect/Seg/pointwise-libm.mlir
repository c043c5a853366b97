// RUN: seg-opt %s --seg-derive=order=2 --seg-to-host | FileCheck %s
// RUN: seg-opt %s --seg-derive=order=1 --seg-to-nvvm -verify-diagnostics

// f64 erf, atan and log1p have no LLVM intrinsic (and log1p written as
// log(1 + x) loses precision near 0): on the host libm computes them; f64
// expm1 is Kahan's (e^x - 1) x / log(e^x), not e^x - 1. The GPU pipeline,
// which links no libdevice, says it has none.
// CHECK-LABEL: llvm.func @special(
// CHECK-DAG: llvm.call @erf(
// CHECK-DAG: llvm.call @atan(
// CHECK-DAG: llvm.call @log1p(
// CHECK-DAG: llvm.intr.log(
// CHECK-NOT: llvm.call @expm1(
// CHECK-LABEL: llvm.func @special_grad_grad(
func.func @special(%x: tensor<?xf64>, %idx: tensor<?xi32>, %n: index) -> tensor<?xf64> {
  // expected-error @+1 {{'math.atan' on f64 has no GPU lowering}}
  %a = math.atan %x : tensor<?xf64>
  %e = math.erf %x : tensor<?xf64>
  %m = math.expm1 %x : tensor<?xf64>
  %l = math.log1p %x : tensor<?xf64>
  %ae = arith.addf %a, %e : tensor<?xf64>
  %ml = arith.mulf %m, %l : tensor<?xf64>
  %p = arith.addf %ae, %ml : tensor<?xf64>
  %0 = seg.sum %p, %idx, %n : tensor<?xf64>, tensor<?xi32> -> tensor<?xf64>
  return %0 : tensor<?xf64>
}
