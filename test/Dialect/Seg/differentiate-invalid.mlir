// RUN: seg-opt %s --seg-differentiate -split-input-file -verify-diagnostics

func.func @no_rule(%x: tensor<?xf32>, %idx: tensor<?xi32>, %n: index) -> tensor<?xf32> {
  // expected-error @+1 {{seg-differentiate: 'math.sinh' has no derivative rule}}
  %e = math.sinh %x : tensor<?xf32>
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

// -----

// D1: the error names the primal op, which outlives the erased gradient
// function (its clone did not: a use after free).
func.func @no_rule_cos(%x: tensor<?xf32>, %idx: tensor<?xi32>, %n: index) -> tensor<?xf32> {
  %0 = seg.sum %x, %idx, %n : tensor<?xf32>, tensor<?xi32> -> tensor<?xf32>
  // expected-error @+1 {{seg-differentiate: 'math.cosh' has no derivative rule}}
  %1 = math.cosh %0 : tensor<?xf32>
  return %1 : tensor<?xf32>
}

// -----

func.func @no_rule_extf(%x: tensor<?xf32>, %idx: tensor<?xi32>, %n: index) -> tensor<?xf64> {
  // expected-error @+1 {{seg-differentiate: 'arith.extf' has no derivative rule}}
  %e = arith.extf %x : tensor<?xf32> to tensor<?xf64>
  %0 = seg.sum %e, %idx, %n : tensor<?xf64>, tensor<?xi32> -> tensor<?xf64>
  return %0 : tensor<?xf64>
}
