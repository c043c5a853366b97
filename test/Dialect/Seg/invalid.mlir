// RUN: seg-opt %s -split-input-file -verify-diagnostics

func.func @sum_bad_rank(%x: tensor<?x3x3xf32>, %idx: tensor<?xi32>, %n: index) {
  // expected-error @+1 {{'seg.sum' op expects x to have shape (N) or (N,F) with a static F >= 1, but got 'tensor<?x3x3xf32>'}}
  %0 = seg.sum %x, %idx, %n : tensor<?x3x3xf32>, tensor<?xi32> -> tensor<?x3xf32>
  return
}

// -----

func.func @sum_zero_width(%x: tensor<?x0xf32>, %idx: tensor<?xi32>, %n: index) {
  // expected-error @+1 {{expects x to have shape (N) or (N,F) with a static F >= 1, but got 'tensor<?x0xf32>'}}
  %0 = seg.sum %x, %idx, %n : tensor<?x0xf32>, tensor<?xi32> -> tensor<?x0xf32>
  return
}

// -----

func.func @sum_dynamic_width(%x: tensor<?x?xf32>, %idx: tensor<?xi32>, %n: index) {
  // expected-error @+1 {{expects x to have shape (N) or (N,F) with a static F >= 1, but got 'tensor<?x?xf32>'}}
  %0 = seg.sum %x, %idx, %n : tensor<?x?xf32>, tensor<?xi32> -> tensor<?x3xf32>
  return
}

// -----

func.func @sum_bad_result_shape(%x: tensor<?x3xf32>, %idx: tensor<?xi32>, %n: index) {
  // expected-error @+1 {{expects result to have the row width of x (3), but got 2}}
  %0 = seg.sum %x, %idx, %n : tensor<?x3xf32>, tensor<?xi32> -> tensor<?x2xf32>
  return
}

// -----

func.func @sum_width_mismatch(%x: tensor<?x3xf32>, %idx: tensor<?xi32>, %n: index) {
  // expected-error @+1 {{expects result to have the row width of x (3), but got 1}}
  %0 = seg.sum %x, %idx, %n : tensor<?x3xf32>, tensor<?xi32> -> tensor<?xf32>
  return
}

// -----

func.func @sum_element_type_mismatch(%x: tensor<?xf32>, %idx: tensor<?xi32>, %n: index) {
  // expected-error @+1 {{expects x and result to have the same element type, but got 'f32' and 'f64'}}
  %0 = seg.sum %x, %idx, %n : tensor<?xf32>, tensor<?xi32> -> tensor<?xf64>
  return
}

// -----

func.func @sum_f16(%x: tensor<?xf16>, %idx: tensor<?xi32>, %n: index) {
  // expected-error @+1 {{operand #0 must be ranked tensor of 32-bit float or 64-bit float values, but got 'tensor<?xf16>'}}
  %0 = seg.sum %x, %idx, %n : tensor<?xf16>, tensor<?xi32> -> tensor<?xf16>
  return
}

// -----

func.func @sum_i64_index(%x: tensor<?xf32>, %idx: tensor<?xi64>, %n: index) {
  // expected-error @+1 {{operand #1 must be 1D tensor of 32-bit signless integer values, but got 'tensor<?xi64>'}}
  %0 = seg.sum %x, %idx, %n : tensor<?xf32>, tensor<?xi64> -> tensor<?xf32>
  return
}

// -----

func.func @sum_2d_index(%x: tensor<?xf32>, %idx: tensor<?x1xi32>, %n: index) {
  // expected-error @+1 {{operand #1 must be 1D tensor of 32-bit signless integer values, but got 'tensor<?x1xi32>'}}
  %0 = seg.sum %x, %idx, %n : tensor<?xf32>, tensor<?x1xi32> -> tensor<?xf32>
  return
}

// -----

func.func @sum_length_mismatch(%x: tensor<5xf32>, %idx: tensor<4xi32>, %n: index) {
  // expected-error @+1 {{expects x and idx to have the same leading dimension, but got 5 and 4}}
  %0 = seg.sum %x, %idx, %n : tensor<5xf32>, tensor<4xi32> -> tensor<?xf32>
  return
}

// -----

func.func @sum_segment_count_mismatch(%x: tensor<?xf32>, %idx: tensor<?xi32>) {
  %n = arith.constant 3 : index
  // expected-error @+1 {{expects result to have num_segments (3) rows, but got 4}}
  %0 = seg.sum %x, %idx, %n : tensor<?xf32>, tensor<?xi32> -> tensor<4xf32>
  return
}

// -----

func.func @sum_negative_segments(%x: tensor<?xf32>, %idx: tensor<?xi32>) {
  %n = arith.constant -1 : index
  // expected-error @+1 {{expects num_segments to be non-negative, but got -1}}
  %0 = seg.sum %x, %idx, %n : tensor<?xf32>, tensor<?xi32> -> tensor<?xf32>
  return
}

// -----

func.func @mean_width_mismatch(%x: tensor<?xf64>, %idx: tensor<?xi32>, %n: index) {
  // expected-error @+1 {{'seg.mean' op expects result to have the row width of x (1), but got 3}}
  %0 = seg.mean %x, %idx, %n : tensor<?xf64>, tensor<?xi32> -> tensor<?x3xf64>
  return
}

// -----

func.func @rms_norm_vector_result(%x: tensor<?x3xf32>, %idx: tensor<?xi32>, %n: index) {
  // expected-error @+1 {{'seg.rms_norm' op expects result to have shape (S), but got 'tensor<?x3xf32>'}}
  %0 = seg.rms_norm %x, %idx, %n : tensor<?x3xf32>, tensor<?xi32> -> tensor<?x3xf32>
  return
}

// -----

func.func @rms_norm_element_type(%x: tensor<?x3xf32>, %idx: tensor<?xi32>, %n: index) {
  // expected-error @+1 {{expects x and result to have the same element type, but got 'f32' and 'f64'}}
  %0 = seg.rms_norm %x, %idx, %n : tensor<?x3xf32>, tensor<?xi32> -> tensor<?xf64>
  return
}

// -----

func.func @dot_width_mismatch(%x: tensor<?x3xf32>, %y: tensor<?xf32>, %idx: tensor<?xi32>, %n: index) {
  // expected-error @+1 {{'seg.dot' op expects x and y to have the same row width, but got 3 and 1}}
  %0 = seg.dot %x, %y, %idx, %n : tensor<?x3xf32>, tensor<?xf32>, tensor<?xi32> -> tensor<?xf32>
  return
}

// -----

func.func @dot_vector_result(%x: tensor<?x3xf32>, %y: tensor<?x3xf32>, %idx: tensor<?xi32>, %n: index) {
  // expected-error @+1 {{'seg.dot' op expects result to have shape (S), but got 'tensor<?x3xf32>'}}
  %0 = seg.dot %x, %y, %idx, %n : tensor<?x3xf32>, tensor<?x3xf32>, tensor<?xi32> -> tensor<?x3xf32>
  return
}

// -----

func.func @dot_element_types(%x: tensor<?x3xf32>, %y: tensor<?x3xf64>, %idx: tensor<?xi32>, %n: index) {
  // expected-error @+1 {{expects x and y to have the same element type, but got 'f32' and 'f64'}}
  %0 = seg.dot %x, %y, %idx, %n : tensor<?x3xf32>, tensor<?x3xf64>, tensor<?xi32> -> tensor<?xf32>
  return
}

// -----

func.func @dot_length_mismatch(%x: tensor<4xf32>, %y: tensor<5xf32>, %idx: tensor<?xi32>, %n: index) {
  // expected-error @+1 {{expects x and y to have the same leading dimension, but got 4 and 5}}
  %0 = seg.dot %x, %y, %idx, %n : tensor<4xf32>, tensor<5xf32>, tensor<?xi32> -> tensor<?xf32>
  return
}

// -----

func.func @mul_vector_scale(%x: tensor<?x3xf32>, %y: tensor<?x3xf32>, %idx: tensor<?xi32>) {
  // expected-error @+1 {{'seg.mul' op expects y to have shape (S), but got 'tensor<?x3xf32>'}}
  %0 = seg.mul %x, %y, %idx : tensor<?x3xf32>, tensor<?x3xf32>, tensor<?xi32> -> tensor<?x3xf32>
  return
}

// -----

func.func @mul_result_shape(%x: tensor<?x3xf32>, %y: tensor<?xf32>, %idx: tensor<?xi32>) {
  // expected-error @+1 {{'seg.mul' op expects result to have the shape of x, but got 'tensor<?xf32>' for x of type 'tensor<?x3xf32>'}}
  %0 = seg.mul %x, %y, %idx : tensor<?x3xf32>, tensor<?xf32>, tensor<?xi32> -> tensor<?xf32>
  return
}

// -----

func.func @matvec_scalar_rows(%v: tensor<?xf32>, %m: tensor<?x3x3xf32>, %idx: tensor<?xi32>) {
  // expected-error @+1 {{'seg.matvec' op expects v to have shape (N,3), but got 'tensor<?xf32>'}}
  %0 = seg.matvec %v, %m, %idx : tensor<?xf32>, tensor<?x3x3xf32>, tensor<?xi32> -> tensor<?x3xf32>
  return
}

// -----

func.func @matvec_bad_matrix(%v: tensor<?x3xf32>, %m: tensor<?x3x2xf32>, %idx: tensor<?xi32>) {
  // expected-error @+1 {{'seg.matvec' op expects m to have shape (S,3,3), but got 'tensor<?x3x2xf32>'}}
  %0 = seg.matvec %v, %m, %idx : tensor<?x3xf32>, tensor<?x3x2xf32>, tensor<?xi32> -> tensor<?x3xf32>
  return
}

// -----

func.func @matvec_element_types(%v: tensor<?x3xf64>, %m: tensor<?x3x3xf32>, %idx: tensor<?xi32>) {
  // expected-error @+1 {{expects v and m to have the same element type, but got 'f64' and 'f32'}}
  %0 = seg.matvec %v, %m, %idx : tensor<?x3xf64>, tensor<?x3x3xf32>, tensor<?xi32> -> tensor<?x3xf64>
  return
}

// -----

func.func @matvec_result_rows(%v: tensor<4x3xf32>, %m: tensor<?x3x3xf32>, %idx: tensor<4xi32>) {
  // expected-error @+1 {{expects v and result to have the same leading dimension, but got 4 and 5}}
  %0 = seg.matvec %v, %m, %idx : tensor<4x3xf32>, tensor<?x3x3xf32>, tensor<4xi32> -> tensor<5x3xf32>
  return
}

// -----

func.func @gather_width(%y: tensor<?x3xf32>, %idx: tensor<?xi32>) {
  // expected-error @+1 {{'seg.gather' op expects result to have the row width of y (3), but got 1}}
  %0 = seg.gather %y, %idx : tensor<?x3xf32>, tensor<?xi32> -> tensor<?xf32>
  return
}

// -----

func.func @gather_rows(%y: tensor<?xf32>, %idx: tensor<4xi32>) {
  // expected-error @+1 {{expects result and idx to have the same leading dimension, but got 5 and 4}}
  %0 = seg.gather %y, %idx : tensor<?xf32>, tensor<4xi32> -> tensor<5xf32>
  return
}

// -----

func.func @gather_bad_source(%y: tensor<?x2x2xf32>, %idx: tensor<?xi32>) {
  // expected-error @+1 {{expects y to have shape (S) or (S,F) with a static F >= 1, but got 'tensor<?x2x2xf32>'}}
  %0 = seg.gather %y, %idx : tensor<?x2x2xf32>, tensor<?xi32> -> tensor<?x4xf32>
  return
}

// -----

func.func @outer_sum_result(%v: tensor<?x3xf32>, %g: tensor<?x3xf32>, %idx: tensor<?xi32>, %n: index) {
  // expected-error @+1 {{'seg.outer_sum' op expects result to have shape (S,3,3), but got 'tensor<?x3xf32>'}}
  %0 = seg.outer_sum %v, %g, %idx, %n : tensor<?x3xf32>, tensor<?x3xf32>, tensor<?xi32> -> tensor<?x3xf32>
  return
}

// -----

func.func @outer_sum_scalar_rows(%v: tensor<?x3xf32>, %g: tensor<?xf32>, %idx: tensor<?xi32>, %n: index) {
  // expected-error @+1 {{'seg.outer_sum' op expects g to have shape (N,3), but got 'tensor<?xf32>'}}
  %0 = seg.outer_sum %v, %g, %idx, %n : tensor<?x3xf32>, tensor<?xf32>, tensor<?xi32> -> tensor<?x3x3xf32>
  return
}

// -----

func.func @outer_sum_lengths(%v: tensor<4x3xf32>, %g: tensor<5x3xf32>, %idx: tensor<?xi32>, %n: index) {
  // expected-error @+1 {{expects v and g to have the same leading dimension, but got 4 and 5}}
  %0 = seg.outer_sum %v, %g, %idx, %n : tensor<4x3xf32>, tensor<5x3xf32>, tensor<?xi32> -> tensor<?x3x3xf32>
  return
}

// -----

func.func @count_vector(%idx: tensor<?xi32>, %n: index) {
  // expected-error @+1 {{'seg.count' op expects result to have shape (S), but got 'tensor<?x3xf32>'}}
  %0 = seg.count %idx, %n : tensor<?xi32> -> tensor<?x3xf32>
  return
}

// -----

func.func @count_rows(%idx: tensor<?xi32>) {
  %n = arith.constant 2 : index
  // expected-error @+1 {{'seg.count' op expects result to have num_segments (2) rows, but got 3}}
  %0 = seg.count %idx, %n : tensor<?xi32> -> tensor<3xf64>
  return
}

// -----

func.func @malformed(%x: tensor<?xf32>, %idx: tensor<?xi32>, %n: index) {
  // expected-error @+1 {{expected ','}}
  %0 = seg.sum %x %idx, %n : tensor<?xf32>, tensor<?xi32> -> tensor<?xf32>
  return
}

// -----

func.func @broadcast_of_vector(%x: tensor<?x3xf32>) -> tensor<?x3xf32> {
  // expected-error @+1 {{'seg.broadcast' op expects x to have shape (L), but got 'tensor<?x3xf32>'}}
  %0 = seg.broadcast %x : tensor<?x3xf32> -> tensor<?x3xf32>
  return %0 : tensor<?x3xf32>
}

// -----

func.func @component_sum_of_scalar(%x: tensor<?xf32>) -> tensor<?xf32> {
  // expected-error @+1 {{'seg.component_sum' op expects x to have shape (L,F) with a static F >= 1, but got 'tensor<?xf32>'}}
  %0 = seg.component_sum %x : tensor<?xf32> -> tensor<?xf32>
  return %0 : tensor<?xf32>
}

// -----

func.func @max_width(%x: tensor<?x3xf32>, %idx: tensor<?xi32>, %n: index) -> tensor<?xf32> {
  // expected-error @+1 {{'seg.max' op expects result to have the row width of x (3), but got 1}}
  %0 = seg.max %x, %idx, %n : tensor<?x3xf32>, tensor<?xi32> -> tensor<?xf32>
  return %0 : tensor<?xf32>
}

// -----

func.func @component_max_of_scalar(%x: tensor<?xf32>) -> tensor<?xf32> {
  // expected-error @+1 {{'seg.component_max' op expects x to have shape (L,F) with a static F >= 1, but got 'tensor<?xf32>'}}
  %0 = seg.component_max %x : tensor<?xf32> -> tensor<?xf32>
  return %0 : tensor<?xf32>
}

// -----

func.func @broadcast_to_dynamic_width(%x: tensor<?xf32>) -> tensor<?x?xf32> {
  // expected-error @+1 {{'seg.broadcast' op expects result to have shape (L,F) with a static F >= 1, but got 'tensor<?x?xf32>'}}
  %0 = seg.broadcast %x : tensor<?xf32> -> tensor<?x?xf32>
  return %0 : tensor<?x?xf32>
}

// -----

func.func @gather_rows_width(%t: tensor<?x3xf32>, %j: tensor<?xi32>) {
  // expected-error @+1 {{'seg.gather_rows' op expects result to have the row width of table (3), but got 4}}
  %0 = seg.gather_rows %t, %j : tensor<?x3xf32>, tensor<?xi32> -> tensor<?x4xf32>
  return
}

// -----

func.func @gather_rows_table_rank(%t: tensor<?x3x3xf32>, %j: tensor<?xi32>) {
  // expected-error @+1 {{'seg.gather_rows' op expects table to have shape (M) or (M,F) with a static F >= 1, but got 'tensor<?x3x3xf32>'}}
  %0 = seg.gather_rows %t, %j : tensor<?x3x3xf32>, tensor<?xi32> -> tensor<?x3xf32>
  return
}

// -----

func.func @gather_rows_rows(%t: tensor<?xf32>, %j: tensor<5xi32>) {
  // expected-error @+1 {{'seg.gather_rows' op expects result and j to have the same leading dimension, but got 4 and 5}}
  %0 = seg.gather_rows %t, %j : tensor<?xf32>, tensor<5xi32> -> tensor<4xf32>
  return
}

// -----

func.func @scatter_sum_type(%x: tensor<?xf32>, %j: tensor<?xi32>, %m: index) {
  // expected-error @+1 {{'seg.scatter_sum' op expects x and result to have the same element type, but got 'f32' and 'f64'}}
  %0 = seg.scatter_sum %x, %j, %m : tensor<?xf32>, tensor<?xi32> -> tensor<?xf64>
  return
}

// -----

func.func @scatter_sum_rows(%x: tensor<?x3xf32>, %j: tensor<?xi32>) {
  %m = arith.constant 4 : index
  // expected-error @+1 {{'seg.scatter_sum' op expects result to have num_rows (4) rows, but got 5}}
  %0 = seg.scatter_sum %x, %j, %m : tensor<?x3xf32>, tensor<?xi32> -> tensor<5x3xf32>
  return
}
