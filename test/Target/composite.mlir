// A composition of several public ops differentiates (to second order),
// verifies, and every function, derived ones included, lowers to one PTX
// kernel that ptxas accepts, and to host code.
// RUN: seg-opt %s --seg-derive=order=2 | FileCheck %s --check-prefix=DERIVE
// RUN: seg-opt %s --seg-derive=order=2 --seg-to-ptx | FileCheck %s --check-prefix=PTX
// RUN: seg-opt %s --seg-derive=order=2 --seg-to-host | FileCheck %s --check-prefix=HOST
// RUN: %if ptxas %{ rm -rf %t && mkdir -p %t && seg-opt %s --seg-derive=order=2 -o %t/derived.mlir %}
// RUN: %if ptxas %{ seg-compile %t/derived.mlir -o %t --chips=sm_90 && %ptxas -arch=sm_90 %t/segops_sm_90.ptx -o %t/out.cubin %}

// DERIVE-LABEL: func.func @energy(
// DERIVE-LABEL: func.func @energy_grad(
// DERIVE-SAME: -> (tensor<?x3xf32>, tensor<?x3x3xf32>)
// DERIVE-LABEL: func.func @energy_grad_grad(
// PTX: .visible .entry energy(
// PTX: .visible .entry energy_grad(
// PTX: .visible .entry energy_grad_grad(
// HOST: llvm.func @energy(
// HOST: llvm.func @energy_grad(
// HOST: llvm.func @energy_grad_grad(

func.func @energy(%x: tensor<?x3xf32>, %m: tensor<?x3x3xf32>, %idx: tensor<?xi32>, %n: index) -> tensor<?x3xf32> {
  %rot = seg.matvec %x, %m, %idx : tensor<?x3xf32>, tensor<?x3x3xf32>, tensor<?xi32> -> tensor<?x3xf32>
  %rms = seg.rms_norm %rot, %idx, %n : tensor<?x3xf32>, tensor<?xi32> -> tensor<?xf32>
  %dot = seg.dot %x, %rot, %idx, %n : tensor<?x3xf32>, tensor<?x3xf32>, tensor<?xi32> -> tensor<?xf32>
  %w = arith.addf %rms, %dot : tensor<?xf32>
  %scaled = seg.mul %rot, %w, %idx : tensor<?x3xf32>, tensor<?xf32>, tensor<?xi32> -> tensor<?x3xf32>
  %total = seg.sum %scaled, %idx, %n : tensor<?x3xf32>, tensor<?xi32> -> tensor<?x3xf32>
  %mean = seg.mean %x, %idx, %n : tensor<?x3xf32>, tensor<?xi32> -> tensor<?x3xf32>
  %out = arith.subf %total, %mean : tensor<?x3xf32>
  return %out : tensor<?x3xf32>
}
