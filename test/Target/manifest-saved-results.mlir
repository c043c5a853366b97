// RUN: rm -rf %t && seg-opt %s --seg-derive=order=1 -o %t.mlir
// RUN: seg-compile %t.mlir -o %t --chips=sm_90
// RUN: FileCheck %s < %t/manifest.json

// A level derived on saved results records, per buffer that is a result of
// the level below, which result it is (saved_result): the operator library
// saves those outputs for it. Other buffers have none.

// The forward's buffers (each kernel's come before its name):
// CHECK-LABEL: "kernels": [
// CHECK-NOT: "saved_result"
// CHECK: "name": "rms",
// rms_grad's: x, idx, the saved norm, the cotangent, the gradient.
// CHECK: "name": "arg0",
// CHECK-NOT: "saved_result"
// CHECK: "name": "arg3",
// CHECK-NEXT: "read": true,
// CHECK-NEXT: "role": "input",
// CHECK-NEXT: "saved_result": 0,
// CHECK-NEXT: "shape": [
// CHECK-NEXT: "S"
// CHECK-NOT: "saved_result"
// CHECK: "name": "rms_grad",
func.func @rms(%x: tensor<?x3xf32>, %idx: tensor<?xi32>, %n: index) -> tensor<?xf32>
    attributes {seg.saved_results} {
  %0 = seg.rms_norm %x, %idx, %n : tensor<?x3xf32>, tensor<?xi32> -> tensor<?xf32>
  return %0 : tensor<?xf32>
}
