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

// expected-error @+1 {{'unsupported_op' is not a seg kernel function: 'math.sinh' is not supported in kernel functions}}
func.func @unsupported_op(%x: tensor<?xf32>, %idx: tensor<?xi32>, %n: index) -> tensor<?xf32> {
  // expected-note @+1 {{this operation}}
  %e = math.sinh %x : tensor<?xf32>
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

// expected-error @+1 {{'elementwise_only' is not a seg kernel function: it has no seg operation, and no single integer tensor argument to take as its idx (elementwise tensor code alone has no segments to run over)}}
func.func @elementwise_only(%a: tensor<?xf32>, %b: tensor<?xf32>) -> tensor<?xf32> {
  %0 = arith.addf %a, %b : tensor<?xf32>
  return %0 : tensor<?xf32>
}

// -----

// D2: one element type per kernel; mixing f32 and f64 miscompiled before.
// expected-error @+1 {{'mixed_types' is not a seg kernel function: it mixes float element types (f32 and f64): every float value of a kernel function must have one}}
func.func @mixed_types(%x: tensor<?xf32>, %y: tensor<?xf64>, %idx: tensor<?xi32>, %n: index) -> (tensor<?xf32>, tensor<?xf64>) {
  // expected-note @-1 {{a value of type 'f32'}}
  // expected-note @-2 {{a value of type 'f64'}}
  %0 = seg.sum %x, %idx, %n : tensor<?xf32>, tensor<?xi32> -> tensor<?xf32>
  %1 = seg.sum %y, %idx, %n : tensor<?xf64>, tensor<?xi32> -> tensor<?xf64>
  return %0, %1 : tensor<?xf32>, tensor<?xf64>
}

// -----

// D2: a splat of another element type than the data.
// expected-error @+1 {{'mixed_splat' is not a seg kernel function: it mixes float element types (f32 and f64)}}
func.func @mixed_splat(%x: tensor<?xf32>, %idx: tensor<?xi32>, %n: index) -> tensor<?xf32> {
  // expected-note @-1 {{a value of type 'f32'}}
  // expected-note @+1 {{a value of type 'f64'}}
  %c = arith.constant 2.0 : f64
  %0 = seg.sum %x, %idx, %n : tensor<?xf32>, tensor<?xi32> -> tensor<?xf32>
  return %0 : tensor<?xf32>
}

// -----

// D3: results are tensors (this cast<RankedTensorType> asserted).
// expected-error @+1 {{'index_result' is not a seg kernel function: result #1 is not a tensor (it has type index)}}
func.func @index_result(%x: tensor<?xf32>, %idx: tensor<?xi32>, %n: index) -> (tensor<?xf32>, index) {
  %s = seg.sum %x, %idx, %n : tensor<?xf32>, tensor<?xi32> -> tensor<?xf32>
  return %s, %n : tensor<?xf32>, index
}

// -----

// A declaration has no body to compile (LLVM translation failed on it).
// expected-error @+1 {{'declared' is not a seg kernel function: it is a declaration (a kernel function needs a body)}}
func.func private @declared(%x: tensor<?xf32>) -> tensor<?xf32>

// -----

// Without seg ops, the one integer tensor argument is idx; with two, none is.
// expected-error @+1 {{'two_indices' is not a seg kernel function: it has no seg operation, and no single integer tensor argument to take as its idx}}
func.func @two_indices(%x: tensor<?xf32> {seg.space = "row"}, %a: tensor<?xi32>, %b: tensor<?xi32>) -> tensor<?xf32> {
  %0 = arith.mulf %x, %x : tensor<?xf32>
  return %0 : tensor<?xf32>
}


// -----

// A table is read at random rows: it must be in memory, an argument.
// expected-error @+1 {{'gather_computed' is not a seg kernel function: seg.gather_rows reads its table at random rows, so the table must be a function argument}}
func.func @gather_computed(%x: tensor<?xf32>, %j: tensor<?xi32>, %idx: tensor<?xi32>, %n: index) -> tensor<?xf32> {
  %t = arith.mulf %x, %x : tensor<?xf32>
  %g = seg.gather_rows %t, %j : tensor<?xf32>, tensor<?xi32> -> tensor<?xf32>
  %0 = seg.sum %g, %idx, %n : tensor<?xf32>, tensor<?xi32> -> tensor<?xf32>
  return %0 : tensor<?xf32>
}

// -----

// The runtime sums a scatter_sum's rows after the kernel: nothing in the
// kernel can use the sums.
// expected-error @+1 {{'scatter_used' is not a seg kernel function: seg.scatter_sum's result must be returned as it is (the kernel writes the rows to sum, the runtime sums them)}}
func.func @scatter_used(%x: tensor<?xf32>, %t: tensor<?xf32>, %j: tensor<?xi32>, %idx: tensor<?xi32>) -> tensor<?xf32> {
  %c0 = arith.constant 0 : index
  %m = tensor.dim %t, %c0 : tensor<?xf32>
  %0 = seg.scatter_sum %x, %j, %m : tensor<?xf32>, tensor<?xi32> -> tensor<?xf32>
  %1 = arith.mulf %0, %0 : tensor<?xf32>
  return %1 : tensor<?xf32>
}

// -----

// expected-error @+1 {{'scatter_count' is not a seg kernel function: seg.scatter_sum's num_rows must be the length of a tensor argument}}
func.func @scatter_count(%x: tensor<?xf32>, %j: tensor<?xi32>, %idx: tensor<?xi32>, %m: index) -> tensor<?xf32> {
  %0 = seg.scatter_sum %x, %j, %m : tensor<?xf32>, tensor<?xi32> -> tensor<?xf32>
  return %0 : tensor<?xf32>
}
