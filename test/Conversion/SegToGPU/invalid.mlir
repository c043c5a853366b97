// RUN: seg-opt %s --convert-seg-to-gpu -split-input-file -verify-diagnostics
// RUN: seg-opt %s --convert-seg-to-host -split-input-file -verify-diagnostics

// expected-error @+1 {{'two_ops' is not a seg kernel function: its body must be one seg operation and a return}}
func.func @two_ops(%x: tensor<?xf32>, %idx: tensor<?xi32>, %n: index) -> tensor<?xf32> {
  %0 = seg.sum %x, %idx, %n : tensor<?xf32>, tensor<?xi32> -> tensor<?xf32>
  %1 = seg.sum %0, %idx, %n : tensor<?xf32>, tensor<?xi32> -> tensor<?xf32>
  return %1 : tensor<?xf32>
}

// -----

// expected-error @+1 {{'not_returned' is not a seg kernel function: its body must be one seg operation whose result is returned}}
func.func @not_returned(%x: tensor<?xf32>, %y: tensor<?xf32>, %idx: tensor<?xi32>, %n: index) -> tensor<?xf32> {
  %0 = seg.sum %x, %idx, %n : tensor<?xf32>, tensor<?xi32> -> tensor<?xf32>
  return %y : tensor<?xf32>
}

// -----

// Sizes come from the caller at run time, never from constants in the body.
// expected-error @+1 {{'constant_segments' is not a seg kernel function: its body must be one seg operation and a return}}
func.func @constant_segments(%x: tensor<?xf32>, %idx: tensor<?xi32>) -> tensor<?xf32> {
  %n = arith.constant 4 : index
  %0 = seg.sum %x, %idx, %n : tensor<?xf32>, tensor<?xi32> -> tensor<?xf32>
  return %0 : tensor<?xf32>
}

// -----

// expected-error @+1 {{'unused_argument' is not a seg kernel function: tensor argument #1 is not used by the operation}}
func.func @unused_argument(%x: tensor<?xf32>, %unused: tensor<?xf32>, %idx: tensor<?xi32>, %n: index) -> tensor<?xf32> {
  %0 = seg.sum %x, %idx, %n : tensor<?xf32>, tensor<?xi32> -> tensor<?xf32>
  return %0 : tensor<?xf32>
}

// -----

// expected-error @+1 {{'scalar_argument' is not a seg kernel function: arguments must be ranked tensors or index}}
func.func @scalar_argument(%x: tensor<?xf32>, %idx: tensor<?xi32>, %n: index, %f: f32) -> tensor<?xf32> {
  %0 = seg.sum %x, %idx, %n : tensor<?xf32>, tensor<?xi32> -> tensor<?xf32>
  return %0 : tensor<?xf32>
}

// -----

// expected-error @+1 {{'no_lowering' is not a seg kernel function: 'seg.outer_sum' has no kernel lowering yet}}
func.func @no_lowering(%v: tensor<?x3xf32>, %g: tensor<?x3xf32>, %idx: tensor<?xi32>, %n: index) -> tensor<?x3x3xf32> {
  %0 = seg.outer_sum %v, %g, %idx, %n : tensor<?x3xf32>, tensor<?x3xf32>, tensor<?xi32> -> tensor<?x3x3xf32>
  return %0 : tensor<?x3x3xf32>
}
