// RUN: seg-opt %s --seg-differentiate -split-input-file -verify-diagnostics

func.func @no_rule(%x: tensor<?xf32>, %idx: tensor<?xi32>, %n: index) -> tensor<?xf32> {
  // expected-error @+1 {{seg-differentiate: 'math.exp' has no derivative rule}}
  %e = math.exp %x : tensor<?xf32>
  %0 = seg.sum %e, %idx, %n : tensor<?xf32>, tensor<?xi32> -> tensor<?xf32>
  return %0 : tensor<?xf32>
}

// -----

// expected-error @+1 {{seg-differentiate: 'taken_grad' already exists}}
func.func @taken(%x: tensor<?xf32>, %idx: tensor<?xi32>, %n: index) -> tensor<?xf32> {
  %0 = seg.sum %x, %idx, %n : tensor<?xf32>, tensor<?xi32> -> tensor<?xf32>
  return %0 : tensor<?xf32>
}
func.func @taken_grad() {
  return
}
