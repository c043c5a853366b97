// The segops op library: every kernel function that the runtime loads.
// seg-compile turns each function into a GPU kernel (PTX per architecture)
// and a host kernel of the same name; see docs/architecture.md for the ABI.
// Names are <op>_<dtype>_w<row width>.

func.func @segmented_sum_f32_w1(%x: tensor<?xf32>, %idx: tensor<?xi32>, %n: index) -> tensor<?xf32> {
  %0 = seg.sum %x, %idx, %n : tensor<?xf32>, tensor<?xi32> -> tensor<?xf32>
  return %0 : tensor<?xf32>
}

func.func @segmented_sum_f32_w3(%x: tensor<?x3xf32>, %idx: tensor<?xi32>, %n: index) -> tensor<?x3xf32> {
  %0 = seg.sum %x, %idx, %n : tensor<?x3xf32>, tensor<?xi32> -> tensor<?x3xf32>
  return %0 : tensor<?x3xf32>
}

func.func @segmented_sum_f64_w1(%x: tensor<?xf64>, %idx: tensor<?xi32>, %n: index) -> tensor<?xf64> {
  %0 = seg.sum %x, %idx, %n : tensor<?xf64>, tensor<?xi32> -> tensor<?xf64>
  return %0 : tensor<?xf64>
}

func.func @segmented_sum_f64_w3(%x: tensor<?x3xf64>, %idx: tensor<?xi32>, %n: index) -> tensor<?x3xf64> {
  %0 = seg.sum %x, %idx, %n : tensor<?x3xf64>, tensor<?xi32> -> tensor<?x3xf64>
  return %0 : tensor<?x3xf64>
}

func.func @segmented_gather_f32_w1(%y: tensor<?xf32>, %idx: tensor<?xi32>) -> tensor<?xf32> {
  %0 = seg.gather %y, %idx : tensor<?xf32>, tensor<?xi32> -> tensor<?xf32>
  return %0 : tensor<?xf32>
}

func.func @segmented_gather_f32_w3(%y: tensor<?x3xf32>, %idx: tensor<?xi32>) -> tensor<?x3xf32> {
  %0 = seg.gather %y, %idx : tensor<?x3xf32>, tensor<?xi32> -> tensor<?x3xf32>
  return %0 : tensor<?x3xf32>
}

func.func @segmented_gather_f64_w1(%y: tensor<?xf64>, %idx: tensor<?xi32>) -> tensor<?xf64> {
  %0 = seg.gather %y, %idx : tensor<?xf64>, tensor<?xi32> -> tensor<?xf64>
  return %0 : tensor<?xf64>
}

func.func @segmented_gather_f64_w3(%y: tensor<?x3xf64>, %idx: tensor<?xi32>) -> tensor<?x3xf64> {
  %0 = seg.gather %y, %idx : tensor<?x3xf64>, tensor<?xi32> -> tensor<?x3xf64>
  return %0 : tensor<?x3xf64>
}
