// The segops op library: the forward kernel function of every public op,
// per element type and row width, named <op>_<dtype>_w<row width>. The
// build derives their derivatives to order 3 with seg-derive (functions
// <name>_grad, <name>_grad_grad, ...) and compiles all of them with
// seg-compile: PTX per architecture and host code, one fused kernel per
// function.
//
// Generated from the op table (python/segops/_op_table.py) by
// `python scripts/generate_oplib.py`: edit the table, not this file.

func.func @segmented_sum_f32_w1(%x: tensor<?xf32>, %idx: tensor<?xi32>, %n: index) -> tensor<?xf32> attributes {seg.saved_results} {
  %0 = seg.sum %x, %idx, %n : tensor<?xf32>, tensor<?xi32> -> tensor<?xf32>
  return %0 : tensor<?xf32>
}

func.func @segmented_mean_f32_w1(%x: tensor<?xf32>, %idx: tensor<?xi32>, %n: index) -> tensor<?xf32> attributes {seg.saved_results} {
  %0 = seg.mean %x, %idx, %n : tensor<?xf32>, tensor<?xi32> -> tensor<?xf32>
  return %0 : tensor<?xf32>
}

func.func @segmented_rms_norm_f32_w1(%x: tensor<?xf32>, %idx: tensor<?xi32>, %n: index) -> tensor<?xf32> attributes {seg.saved_results} {
  %0 = seg.rms_norm %x, %idx, %n : tensor<?xf32>, tensor<?xi32> -> tensor<?xf32>
  return %0 : tensor<?xf32>
}

func.func @segmented_dot_f32_w1(%x: tensor<?xf32>, %y: tensor<?xf32>, %idx: tensor<?xi32>, %n: index) -> tensor<?xf32> attributes {seg.saved_results} {
  %0 = seg.dot %x, %y, %idx, %n : tensor<?xf32>, tensor<?xf32>, tensor<?xi32> -> tensor<?xf32>
  return %0 : tensor<?xf32>
}

func.func @segmented_mul_f32_w1(%x: tensor<?xf32>, %y: tensor<?xf32>, %idx: tensor<?xi32>) -> tensor<?xf32> attributes {seg.saved_results} {
  %0 = seg.mul %x, %y, %idx : tensor<?xf32>, tensor<?xf32>, tensor<?xi32> -> tensor<?xf32>
  return %0 : tensor<?xf32>
}

func.func @segmented_gather_f32_w1(%y: tensor<?xf32>, %idx: tensor<?xi32>) -> tensor<?xf32> attributes {seg.saved_results} {
  %0 = seg.gather %y, %idx : tensor<?xf32>, tensor<?xi32> -> tensor<?xf32>
  return %0 : tensor<?xf32>
}

func.func @segmented_max_f32_w1(%x: tensor<?xf32>, %idx: tensor<?xi32>, %n: index) -> tensor<?xf32> attributes {seg.saved_results} {
  %0 = seg.max %x, %idx, %n : tensor<?xf32>, tensor<?xi32> -> tensor<?xf32>
  return %0 : tensor<?xf32>
}

func.func @segmented_min_f32_w1(%x: tensor<?xf32>, %idx: tensor<?xi32>, %n: index) -> tensor<?xf32> attributes {seg.saved_results} {
  %0 = seg.min %x, %idx, %n : tensor<?xf32>, tensor<?xi32> -> tensor<?xf32>
  return %0 : tensor<?xf32>
}

func.func @segmented_sum_f32_w3(%x: tensor<?x3xf32>, %idx: tensor<?xi32>, %n: index) -> tensor<?x3xf32> attributes {seg.saved_results} {
  %0 = seg.sum %x, %idx, %n : tensor<?x3xf32>, tensor<?xi32> -> tensor<?x3xf32>
  return %0 : tensor<?x3xf32>
}

func.func @segmented_mean_f32_w3(%x: tensor<?x3xf32>, %idx: tensor<?xi32>, %n: index) -> tensor<?x3xf32> attributes {seg.saved_results} {
  %0 = seg.mean %x, %idx, %n : tensor<?x3xf32>, tensor<?xi32> -> tensor<?x3xf32>
  return %0 : tensor<?x3xf32>
}

func.func @segmented_rms_norm_f32_w3(%x: tensor<?x3xf32>, %idx: tensor<?xi32>, %n: index) -> tensor<?xf32> attributes {seg.saved_results} {
  %0 = seg.rms_norm %x, %idx, %n : tensor<?x3xf32>, tensor<?xi32> -> tensor<?xf32>
  return %0 : tensor<?xf32>
}

func.func @segmented_dot_f32_w3(%x: tensor<?x3xf32>, %y: tensor<?x3xf32>, %idx: tensor<?xi32>, %n: index) -> tensor<?xf32> attributes {seg.saved_results} {
  %0 = seg.dot %x, %y, %idx, %n : tensor<?x3xf32>, tensor<?x3xf32>, tensor<?xi32> -> tensor<?xf32>
  return %0 : tensor<?xf32>
}

func.func @segmented_mul_f32_w3(%x: tensor<?x3xf32>, %y: tensor<?xf32>, %idx: tensor<?xi32>) -> tensor<?x3xf32> attributes {seg.saved_results} {
  %0 = seg.mul %x, %y, %idx : tensor<?x3xf32>, tensor<?xf32>, tensor<?xi32> -> tensor<?x3xf32>
  return %0 : tensor<?x3xf32>
}

func.func @segmented_matvec_f32_w3(%v: tensor<?x3xf32>, %m: tensor<?x3x3xf32>, %idx: tensor<?xi32>) -> tensor<?x3xf32> attributes {seg.saved_results} {
  %0 = seg.matvec %v, %m, %idx : tensor<?x3xf32>, tensor<?x3x3xf32>, tensor<?xi32> -> tensor<?x3xf32>
  return %0 : tensor<?x3xf32>
}

func.func @segmented_gather_f32_w3(%y: tensor<?x3xf32>, %idx: tensor<?xi32>) -> tensor<?x3xf32> attributes {seg.saved_results} {
  %0 = seg.gather %y, %idx : tensor<?x3xf32>, tensor<?xi32> -> tensor<?x3xf32>
  return %0 : tensor<?x3xf32>
}

func.func @segmented_max_f32_w3(%x: tensor<?x3xf32>, %idx: tensor<?xi32>, %n: index) -> tensor<?x3xf32> attributes {seg.saved_results} {
  %0 = seg.max %x, %idx, %n : tensor<?x3xf32>, tensor<?xi32> -> tensor<?x3xf32>
  return %0 : tensor<?x3xf32>
}

func.func @segmented_min_f32_w3(%x: tensor<?x3xf32>, %idx: tensor<?xi32>, %n: index) -> tensor<?x3xf32> attributes {seg.saved_results} {
  %0 = seg.min %x, %idx, %n : tensor<?x3xf32>, tensor<?xi32> -> tensor<?x3xf32>
  return %0 : tensor<?x3xf32>
}

func.func @segmented_sum_f64_w1(%x: tensor<?xf64>, %idx: tensor<?xi32>, %n: index) -> tensor<?xf64> attributes {seg.saved_results} {
  %0 = seg.sum %x, %idx, %n : tensor<?xf64>, tensor<?xi32> -> tensor<?xf64>
  return %0 : tensor<?xf64>
}

func.func @segmented_mean_f64_w1(%x: tensor<?xf64>, %idx: tensor<?xi32>, %n: index) -> tensor<?xf64> attributes {seg.saved_results} {
  %0 = seg.mean %x, %idx, %n : tensor<?xf64>, tensor<?xi32> -> tensor<?xf64>
  return %0 : tensor<?xf64>
}

func.func @segmented_rms_norm_f64_w1(%x: tensor<?xf64>, %idx: tensor<?xi32>, %n: index) -> tensor<?xf64> attributes {seg.saved_results} {
  %0 = seg.rms_norm %x, %idx, %n : tensor<?xf64>, tensor<?xi32> -> tensor<?xf64>
  return %0 : tensor<?xf64>
}

func.func @segmented_dot_f64_w1(%x: tensor<?xf64>, %y: tensor<?xf64>, %idx: tensor<?xi32>, %n: index) -> tensor<?xf64> attributes {seg.saved_results} {
  %0 = seg.dot %x, %y, %idx, %n : tensor<?xf64>, tensor<?xf64>, tensor<?xi32> -> tensor<?xf64>
  return %0 : tensor<?xf64>
}

func.func @segmented_mul_f64_w1(%x: tensor<?xf64>, %y: tensor<?xf64>, %idx: tensor<?xi32>) -> tensor<?xf64> attributes {seg.saved_results} {
  %0 = seg.mul %x, %y, %idx : tensor<?xf64>, tensor<?xf64>, tensor<?xi32> -> tensor<?xf64>
  return %0 : tensor<?xf64>
}

func.func @segmented_gather_f64_w1(%y: tensor<?xf64>, %idx: tensor<?xi32>) -> tensor<?xf64> attributes {seg.saved_results} {
  %0 = seg.gather %y, %idx : tensor<?xf64>, tensor<?xi32> -> tensor<?xf64>
  return %0 : tensor<?xf64>
}

func.func @segmented_max_f64_w1(%x: tensor<?xf64>, %idx: tensor<?xi32>, %n: index) -> tensor<?xf64> attributes {seg.saved_results} {
  %0 = seg.max %x, %idx, %n : tensor<?xf64>, tensor<?xi32> -> tensor<?xf64>
  return %0 : tensor<?xf64>
}

func.func @segmented_min_f64_w1(%x: tensor<?xf64>, %idx: tensor<?xi32>, %n: index) -> tensor<?xf64> attributes {seg.saved_results} {
  %0 = seg.min %x, %idx, %n : tensor<?xf64>, tensor<?xi32> -> tensor<?xf64>
  return %0 : tensor<?xf64>
}

func.func @segmented_sum_f64_w3(%x: tensor<?x3xf64>, %idx: tensor<?xi32>, %n: index) -> tensor<?x3xf64> attributes {seg.saved_results} {
  %0 = seg.sum %x, %idx, %n : tensor<?x3xf64>, tensor<?xi32> -> tensor<?x3xf64>
  return %0 : tensor<?x3xf64>
}

func.func @segmented_mean_f64_w3(%x: tensor<?x3xf64>, %idx: tensor<?xi32>, %n: index) -> tensor<?x3xf64> attributes {seg.saved_results} {
  %0 = seg.mean %x, %idx, %n : tensor<?x3xf64>, tensor<?xi32> -> tensor<?x3xf64>
  return %0 : tensor<?x3xf64>
}

func.func @segmented_rms_norm_f64_w3(%x: tensor<?x3xf64>, %idx: tensor<?xi32>, %n: index) -> tensor<?xf64> attributes {seg.saved_results} {
  %0 = seg.rms_norm %x, %idx, %n : tensor<?x3xf64>, tensor<?xi32> -> tensor<?xf64>
  return %0 : tensor<?xf64>
}

func.func @segmented_dot_f64_w3(%x: tensor<?x3xf64>, %y: tensor<?x3xf64>, %idx: tensor<?xi32>, %n: index) -> tensor<?xf64> attributes {seg.saved_results} {
  %0 = seg.dot %x, %y, %idx, %n : tensor<?x3xf64>, tensor<?x3xf64>, tensor<?xi32> -> tensor<?xf64>
  return %0 : tensor<?xf64>
}

func.func @segmented_mul_f64_w3(%x: tensor<?x3xf64>, %y: tensor<?xf64>, %idx: tensor<?xi32>) -> tensor<?x3xf64> attributes {seg.saved_results} {
  %0 = seg.mul %x, %y, %idx : tensor<?x3xf64>, tensor<?xf64>, tensor<?xi32> -> tensor<?x3xf64>
  return %0 : tensor<?x3xf64>
}

func.func @segmented_matvec_f64_w3(%v: tensor<?x3xf64>, %m: tensor<?x3x3xf64>, %idx: tensor<?xi32>) -> tensor<?x3xf64> attributes {seg.saved_results} {
  %0 = seg.matvec %v, %m, %idx : tensor<?x3xf64>, tensor<?x3x3xf64>, tensor<?xi32> -> tensor<?x3xf64>
  return %0 : tensor<?x3xf64>
}

func.func @segmented_gather_f64_w3(%y: tensor<?x3xf64>, %idx: tensor<?xi32>) -> tensor<?x3xf64> attributes {seg.saved_results} {
  %0 = seg.gather %y, %idx : tensor<?x3xf64>, tensor<?xi32> -> tensor<?x3xf64>
  return %0 : tensor<?x3xf64>
}

func.func @segmented_max_f64_w3(%x: tensor<?x3xf64>, %idx: tensor<?xi32>, %n: index) -> tensor<?x3xf64> attributes {seg.saved_results} {
  %0 = seg.max %x, %idx, %n : tensor<?x3xf64>, tensor<?xi32> -> tensor<?x3xf64>
  return %0 : tensor<?x3xf64>
}

func.func @segmented_min_f64_w3(%x: tensor<?x3xf64>, %idx: tensor<?xi32>, %n: index) -> tensor<?x3xf64> attributes {seg.saved_results} {
  %0 = seg.min %x, %idx, %n : tensor<?x3xf64>, tensor<?xi32> -> tensor<?x3xf64>
  return %0 : tensor<?x3xf64>
}
