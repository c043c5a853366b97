// RUN: seg-opt %s | seg-opt | FileCheck %s
// RUN: seg-opt %s --mlir-print-op-generic | seg-opt | FileCheck %s

// CHECK-LABEL: func.func @reductions
func.func @reductions(%x: tensor<?x3xf32>, %s: tensor<?xf64>, %idx: tensor<?xi32>, %n: index)
    -> (tensor<?x3xf32>, tensor<?xf64>, tensor<?x3xf32>, tensor<?xf32>) {
  // CHECK: seg.sum %{{.*}}, %{{.*}}, %{{.*}} : tensor<?x3xf32>, tensor<?xi32> -> tensor<?x3xf32>
  %0 = seg.sum %x, %idx, %n : tensor<?x3xf32>, tensor<?xi32> -> tensor<?x3xf32>
  // CHECK: seg.sum %{{.*}} : tensor<?xf64>, tensor<?xi32> -> tensor<?xf64>
  %1 = seg.sum %s, %idx, %n : tensor<?xf64>, tensor<?xi32> -> tensor<?xf64>
  // CHECK: seg.mean %{{.*}} : tensor<?x3xf32>, tensor<?xi32> -> tensor<?x3xf32>
  %2 = seg.mean %x, %idx, %n : tensor<?x3xf32>, tensor<?xi32> -> tensor<?x3xf32>
  // CHECK: seg.rms_norm %{{.*}} : tensor<?x3xf32>, tensor<?xi32> -> tensor<?xf32>
  %3 = seg.rms_norm %x, %idx, %n : tensor<?x3xf32>, tensor<?xi32> -> tensor<?xf32>
  return %0, %1, %2, %3 : tensor<?x3xf32>, tensor<?xf64>, tensor<?x3xf32>, tensor<?xf32>
}

// CHECK-LABEL: func.func @dot_and_mul
func.func @dot_and_mul(%x: tensor<?x3xf64>, %y: tensor<?x3xf64>, %w: tensor<?xf64>,
                       %idx: tensor<?xi32>, %n: index) -> (tensor<?xf64>, tensor<?x3xf64>) {
  // CHECK: seg.dot %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} : tensor<?x3xf64>, tensor<?x3xf64>, tensor<?xi32> -> tensor<?xf64>
  %0 = seg.dot %x, %y, %idx, %n : tensor<?x3xf64>, tensor<?x3xf64>, tensor<?xi32> -> tensor<?xf64>
  // CHECK: seg.mul %{{.*}}, %{{.*}}, %{{.*}} : tensor<?x3xf64>, tensor<?xf64>, tensor<?xi32> -> tensor<?x3xf64>
  %1 = seg.mul %x, %w, %idx : tensor<?x3xf64>, tensor<?xf64>, tensor<?xi32> -> tensor<?x3xf64>
  return %0, %1 : tensor<?xf64>, tensor<?x3xf64>
}

// CHECK-LABEL: func.func @matvec
func.func @matvec(%v: tensor<?x3xf32>, %m: tensor<?x3x3xf32>, %idx: tensor<?xi32>)
    -> (tensor<?x3xf32>, tensor<?x3xf32>) {
  // CHECK: seg.matvec %{{.*}}, %{{.*}}, %{{.*}} : tensor<?x3xf32>, tensor<?x3x3xf32>, tensor<?xi32> -> tensor<?x3xf32>
  %0 = seg.matvec %v, %m, %idx : tensor<?x3xf32>, tensor<?x3x3xf32>, tensor<?xi32> -> tensor<?x3xf32>
  // CHECK: seg.matvec %{{.*}} {transpose = false} : tensor<?x3xf32>
  %1 = seg.matvec %v, %m, %idx {transpose = false} : tensor<?x3xf32>, tensor<?x3x3xf32>, tensor<?xi32> -> tensor<?x3xf32>
  return %0, %1 : tensor<?x3xf32>, tensor<?x3xf32>
}

// CHECK-LABEL: func.func @gradient_ops
func.func @gradient_ops(%v: tensor<?x3xf32>, %g: tensor<?x3xf32>, %y: tensor<?x3xf32>,
                        %idx: tensor<?xi32>, %n: index)
    -> (tensor<?x3xf32>, tensor<?x3x3xf32>, tensor<?xf32>) {
  // CHECK: seg.gather %{{.*}}, %{{.*}} : tensor<?x3xf32>, tensor<?xi32> -> tensor<?x3xf32>
  %0 = seg.gather %y, %idx : tensor<?x3xf32>, tensor<?xi32> -> tensor<?x3xf32>
  // CHECK: seg.outer_sum %{{.*}} : tensor<?x3xf32>, tensor<?x3xf32>, tensor<?xi32> -> tensor<?x3x3xf32>
  %1 = seg.outer_sum %v, %g, %idx, %n : tensor<?x3xf32>, tensor<?x3xf32>, tensor<?xi32> -> tensor<?x3x3xf32>
  // CHECK: seg.count %{{.*}}, %{{.*}} : tensor<?xi32> -> tensor<?xf32>
  %2 = seg.count %idx, %n : tensor<?xi32> -> tensor<?xf32>
  return %0, %1, %2 : tensor<?x3xf32>, tensor<?x3x3xf32>, tensor<?xf32>
}

// Static shapes are accepted where they agree.
// CHECK-LABEL: func.func @static_shapes
func.func @static_shapes(%x: tensor<4x3xf32>, %idx: tensor<4xi32>) -> tensor<2x3xf32> {
  %n = arith.constant 2 : index
  // CHECK: seg.sum %{{.*}} : tensor<4x3xf32>, tensor<4xi32> -> tensor<2x3xf32>
  %0 = seg.sum %x, %idx, %n : tensor<4x3xf32>, tensor<4xi32> -> tensor<2x3xf32>
  return %0 : tensor<2x3xf32>
}
