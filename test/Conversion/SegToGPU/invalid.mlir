// RUN: seg-opt %s --convert-seg-to-gpu -split-input-file -verify-diagnostics
// RUN: seg-opt %s --convert-seg-to-host -split-input-file -verify-diagnostics

// A reduction's result is per segment; summing it again over rows is not.
// expected-error @+1 {{'sum_of_sum' is not a seg kernel function: a value is used both per row and per segment}}
func.func @sum_of_sum(%x: tensor<?xf32>, %idx: tensor<?xi32>, %n: index) -> tensor<?xf32> {
  // expected-note @+1 {{this value}}
  %0 = seg.sum %x, %idx, %n : tensor<?xf32>, tensor<?xi32> -> tensor<?xf32>
  %1 = seg.sum %0, %idx, %n : tensor<?xf32>, tensor<?xi32> -> tensor<?xf32>
  return %1 : tensor<?xf32>
}

// -----

// A returned argument whose space nothing tells cannot be copied.
// expected-error @+1 {{'returns_argument' is not a seg kernel function: cannot tell whether result #1 is per row or per segment}}
func.func @returns_argument(%x: tensor<?xf32>, %idx: tensor<?xi32>, %n: index, %z: tensor<?xf32>) -> (tensor<?xf32>, tensor<?xf32>) {
  %0 = seg.sum %x, %idx, %n : tensor<?xf32>, tensor<?xi32> -> tensor<?xf32>
  return %0, %z : tensor<?xf32>, tensor<?xf32>
}

// -----

// Sizes come from the caller at run time, never from constants in the body.
// expected-error @+1 {{'constant_segments' is not a seg kernel function: every segment count must be the same index argument or the length of a per-segment value}}
func.func @constant_segments(%x: tensor<?xf32>, %idx: tensor<?xi32>) -> tensor<?xf32> {
  %n = arith.constant 4 : index
  %0 = seg.sum %x, %idx, %n : tensor<?xf32>, tensor<?xi32> -> tensor<?xf32>
  return %0 : tensor<?xf32>
}

// -----

// expected-error @+1 {{'two_counts' is not a seg kernel function: every segment count must be the same index argument or the length of a per-segment value}}
func.func @two_counts(%x: tensor<?xf32>, %idx: tensor<?xi32>, %n: index, %m: index) -> (tensor<?xf32>, tensor<?xf32>) {
  %0 = seg.sum %x, %idx, %n : tensor<?xf32>, tensor<?xi32> -> tensor<?xf32>
  %1 = seg.sum %x, %idx, %m : tensor<?xf32>, tensor<?xi32> -> tensor<?xf32>
  return %0, %1 : tensor<?xf32>, tensor<?xf32>
}

// -----

// expected-error @+1 {{'two_indices' is not a seg kernel function: all seg operations must share one idx}}
func.func @two_indices(%x: tensor<?xf32>, %i: tensor<?xi32>, %j: tensor<?xi32>, %n: index) -> (tensor<?xf32>, tensor<?xf32>) {
  %0 = seg.sum %x, %i, %n : tensor<?xf32>, tensor<?xi32> -> tensor<?xf32>
  %1 = seg.sum %x, %j, %n : tensor<?xf32>, tensor<?xi32> -> tensor<?xf32>
  return %0, %1 : tensor<?xf32>, tensor<?xf32>
}

// -----

// expected-error @+1 {{'scalar_argument' is not a seg kernel function: arguments must be ranked tensors or index}}
func.func @scalar_argument(%x: tensor<?xf32>, %idx: tensor<?xi32>, %n: index, %f: f32) -> tensor<?xf32> {
  %0 = seg.sum %x, %idx, %n : tensor<?xf32>, tensor<?xi32> -> tensor<?xf32>
  return %0 : tensor<?xf32>
}

// -----

// expected-error @+1 {{'unsupported_op' is not a seg kernel function: 'math.exp' is not supported in kernel functions}}
func.func @unsupported_op(%x: tensor<?xf32>, %idx: tensor<?xi32>, %n: index) -> tensor<?xf32> {
  // expected-note @+1 {{this operation}}
  %e = math.exp %x : tensor<?xf32>
  %0 = seg.sum %e, %idx, %n : tensor<?xf32>, tensor<?xi32> -> tensor<?xf32>
  return %0 : tensor<?xf32>
}

// -----

// A constant tensor of unknown length cannot be placed.
// expected-error @+1 {{'unanchored' is not a seg kernel function: cannot tell whether result #1 is per row or per segment}}
func.func @unanchored(%x: tensor<?xf32>, %idx: tensor<?xi32>, %n: index, %len: index) -> (tensor<?xf32>, tensor<?xf32>) {
  %c = arith.constant 0.0 : f32
  %0 = seg.sum %x, %idx, %n : tensor<?xf32>, tensor<?xi32> -> tensor<?xf32>
  %z = tensor.splat %c[%len] : tensor<?xf32>
  return %0, %z : tensor<?xf32>, tensor<?xf32>
}

// -----

// expected-error @+1 {{'elementwise_only' is not a seg kernel function: it has no seg operation (elementwise tensor code alone has no segments to run over)}}
func.func @elementwise_only(%a: tensor<?xf32>, %b: tensor<?xf32>) -> tensor<?xf32> {
  %0 = arith.addf %a, %b : tensor<?xf32>
  return %0 : tensor<?xf32>
}
