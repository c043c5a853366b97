// RUN: seg-opt %s --seg-approximate-math --split-input-file --verify-diagnostics

// Math on tensors (seg IR before lowering) is rejected: the approximations
// are for the scalar and vector code of lowered kernels.
func.func @tensor_exp(%x: tensor<?xf32>) -> tensor<?xf32> {
  // expected-error @+1 {{'math.exp' op on tensors: seg-approximate-math rewrites scalar and vector math of lowered kernels}}
  %e = math.exp %x : tensor<?xf32>
  return %e : tensor<?xf32>
}

// -----

func.func @tensor_tanh(%x: tensor<?x3xf64>) -> tensor<?x3xf64> {
  // expected-error @+1 {{'math.tanh' op on tensors}}
  %t = math.tanh %x : tensor<?x3xf64>
  return %t : tensor<?x3xf64>
}
