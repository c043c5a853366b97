// RUN: seg-opt %s --convert-seg-to-gpu -split-input-file -verify-diagnostics
// RUN: seg-opt %s --seg-to-host | FileCheck %s --check-prefix=HOST
// RUN: seg-opt %s --seg-to-gpu-simulator | FileCheck %s --check-prefix=SIM

// The GPU pipeline has no f64 exp (no libdevice): a diagnostic, not an
// illegal intrinsic after lowering. The host calls libm, and so do the
// simulator's GPU kernels (convert-seg-to-gpu{allow-f64-math}).
// HOST-LABEL: llvm.func @f64_exp(
// HOST: llvm.intr.exp
// SIM-LABEL: llvm.func @f64_exp(
// SIM: llvm.intr.exp
func.func @f64_exp(%x: tensor<?xf64>, %idx: tensor<?xi32>, %n: index) -> tensor<?xf64> {
  // expected-error @+1 {{'math.exp' on f64 has no GPU lowering (the GPU pipeline approximates f32 only and links no libdevice); compute it in f32 or on the host}}
  %e = math.exp %x : tensor<?xf64>
  %0 = seg.sum %e, %idx, %n : tensor<?xf64>, tensor<?xi32> -> tensor<?xf64>
  return %0 : tensor<?xf64>
}
