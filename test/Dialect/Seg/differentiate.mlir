// RUN: seg-opt %s --seg-differentiate --canonicalize --cse -split-input-file | FileCheck %s

// sum: x̄ = gather(ḡ)
// CHECK-LABEL: func.func @sum_grad
// CHECK-SAME: (%[[X:.*]]: tensor<?x3xf32>{{( \{[^}]*\})?}}, %[[IDX:.*]]: tensor<?xi32>{{( \{[^}]*\})?}}, %[[N:.*]]: index, %[[G:.*]]: tensor<?x3xf32>{{( \{[^}]*\})?}}) -> tensor<?x3xf32>
// CHECK-NEXT: %[[R:.*]] = seg.gather %[[G]], %[[IDX]] : tensor<?x3xf32>, tensor<?xi32> -> tensor<?x3xf32>
// CHECK-NEXT: return %[[R]]
func.func @sum(%x: tensor<?x3xf32>, %idx: tensor<?xi32>, %n: index) -> tensor<?x3xf32> {
  %0 = seg.sum %x, %idx, %n : tensor<?x3xf32>, tensor<?xi32> -> tensor<?x3xf32>
  return %0 : tensor<?x3xf32>
}

// -----

// mean: x̄ = mul(gather(ḡ), 1 / count); the forward value is not recomputed.
// CHECK-LABEL: func.func @mean_grad
// CHECK-SAME: (%[[X:.*]]: tensor<?xf64>{{( \{[^}]*\})?}}, %[[IDX:.*]]: tensor<?xi32>{{( \{[^}]*\})?}}, %[[N:.*]]: index, %[[G:.*]]: tensor<?xf64>{{( \{[^}]*\})?}})
// CHECK-NOT: seg.mean
// CHECK: %[[C:.*]] = seg.count %[[IDX]], %[[N]] : tensor<?xi32> -> tensor<?xf64>
// CHECK: %[[ONE:.*]] = tensor.splat
// CHECK: %[[RC:.*]] = arith.divf %[[ONE]], %[[C]]
// CHECK: %[[SPREAD:.*]] = seg.gather %[[G]], %[[IDX]]
// CHECK: %[[R:.*]] = seg.mul %[[SPREAD]], %[[RC]], %[[IDX]]
// CHECK: return %[[R]]
func.func @mean(%x: tensor<?xf64>, %idx: tensor<?xi32>, %n: index) -> tensor<?xf64> {
  %0 = seg.mean %x, %idx, %n : tensor<?xf64>, tensor<?xi32> -> tensor<?xf64>
  return %0 : tensor<?xf64>
}

// -----

// rms_norm: x̄ = mul(x, select(r > 0, ḡ / (count * r), 0)), no epsilon; the
// denominator is 1 where r == 0.
// CHECK-LABEL: func.func @rms_norm_grad
// CHECK-SAME: (%[[X:.*]]: tensor<?x3xf64> {seg.space = "row"}, %[[IDX:.*]]: tensor<?xi32>, %[[N:.*]]: index, %[[G:.*]]: tensor<?xf64> {seg.space = "segment"})
// CHECK: %[[RMS:.*]] = seg.rms_norm %[[X]], %[[IDX]], %[[N]]
// CHECK: %[[C:.*]] = seg.count %[[IDX]], %[[N]]
// CHECK: %[[POS:.*]] = arith.cmpf ogt, %[[RMS]], %{{.*}} : tensor<?xf64>
// CHECK: %[[PROD:.*]] = arith.mulf %[[C]], %[[RMS]]
// CHECK: %[[DEN:.*]] = arith.select %[[POS]], %[[PROD]], %{{.*}}
// CHECK: %[[Q:.*]] = arith.divf %[[G]], %[[DEN]]
// CHECK: %[[W:.*]] = arith.select %[[POS]], %[[Q]], %{{.*}}
// CHECK: %[[R:.*]] = seg.mul %[[X]], %[[W]], %[[IDX]]
// CHECK: return %[[R]]
func.func @rms_norm(%x: tensor<?x3xf64>, %idx: tensor<?xi32>, %n: index) -> tensor<?xf64> {
  %0 = seg.rms_norm %x, %idx, %n : tensor<?x3xf64>, tensor<?xi32> -> tensor<?xf64>
  return %0 : tensor<?xf64>
}

// -----

// dot: x̄ = mul(y, ḡ), ȳ = mul(x, ḡ)
// CHECK-LABEL: func.func @dot_grad
// CHECK-SAME: (%[[X:.*]]: tensor<?x3xf32>{{( \{[^}]*\})?}}, %[[Y:.*]]: tensor<?x3xf32>{{( \{[^}]*\})?}}, %[[IDX:.*]]: tensor<?xi32>{{( \{[^}]*\})?}}, %[[N:.*]]: index, %[[G:.*]]: tensor<?xf32>{{( \{[^}]*\})?}})
// CHECK-NOT: seg.dot
// CHECK-DAG: %[[DX:.*]] = seg.mul %[[Y]], %[[G]], %[[IDX]]
// CHECK-DAG: %[[DY:.*]] = seg.mul %[[X]], %[[G]], %[[IDX]]
// CHECK: return %[[DX]], %[[DY]]
func.func @dot(%x: tensor<?x3xf32>, %y: tensor<?x3xf32>, %idx: tensor<?xi32>, %n: index) -> tensor<?xf32> {
  %0 = seg.dot %x, %y, %idx, %n : tensor<?x3xf32>, tensor<?x3xf32>, tensor<?xi32> -> tensor<?xf32>
  return %0 : tensor<?xf32>
}

// -----

// mul: x̄ = mul(ḡ, y), ȳ = dot(ḡ, x) over y's segments
// CHECK-LABEL: func.func @mul_grad
// CHECK-SAME: (%[[X:.*]]: tensor<?x3xf32>{{( \{[^}]*\})?}}, %[[Y:.*]]: tensor<?xf32>{{( \{[^}]*\})?}}, %[[IDX:.*]]: tensor<?xi32>{{( \{[^}]*\})?}}, %[[G:.*]]: tensor<?x3xf32>{{( \{[^}]*\})?}})
// CHECK-DAG: %[[DX:.*]] = seg.mul %[[G]], %[[Y]], %[[IDX]]
// CHECK-DAG: %[[S:.*]] = tensor.dim %[[Y]], %c0
// CHECK-DAG: %[[DY:.*]] = seg.dot %[[G]], %[[X]], %[[IDX]], %[[S]]
// CHECK: return %[[DX]], %[[DY]]
func.func @mul(%x: tensor<?x3xf32>, %y: tensor<?xf32>, %idx: tensor<?xi32>) -> tensor<?x3xf32> {
  %0 = seg.mul %x, %y, %idx : tensor<?x3xf32>, tensor<?xf32>, tensor<?xi32> -> tensor<?x3xf32>
  return %0 : tensor<?x3xf32>
}

// -----

// matvec (mᵀv): v̄ = m ḡ, m̄ = Σ v ḡᵀ
// CHECK-LABEL: func.func @matvec_grad
// CHECK-SAME: (%[[V:.*]]: tensor<?x3xf32>{{( \{[^}]*\})?}}, %[[M:.*]]: tensor<?x3x3xf32>{{( \{[^}]*\})?}}, %[[IDX:.*]]: tensor<?xi32>{{( \{[^}]*\})?}}, %[[G:.*]]: tensor<?x3xf32>{{( \{[^}]*\})?}})
// CHECK-DAG: %[[DV:.*]] = seg.matvec %[[G]], %[[M]], %[[IDX]] {transpose = false}
// CHECK-DAG: %[[S:.*]] = tensor.dim %[[M]], %c0
// CHECK-DAG: %[[DM:.*]] = seg.outer_sum %[[V]], %[[G]], %[[IDX]], %[[S]]
// CHECK: return %[[DV]], %[[DM]]
func.func @matvec(%v: tensor<?x3xf32>, %m: tensor<?x3x3xf32>, %idx: tensor<?xi32>) -> tensor<?x3xf32> {
  %0 = seg.matvec %v, %m, %idx : tensor<?x3xf32>, tensor<?x3x3xf32>, tensor<?xi32> -> tensor<?x3xf32>
  return %0 : tensor<?x3xf32>
}

// -----

// matvec (m v): v̄ = mᵀ ḡ, m̄ = Σ ḡ vᵀ
// CHECK-LABEL: func.func @matvec_plain_grad
// CHECK-SAME: (%[[V:.*]]: tensor<?x3xf64>{{( \{[^}]*\})?}}, %[[M:.*]]: tensor<?x3x3xf64>{{( \{[^}]*\})?}}, %[[IDX:.*]]: tensor<?xi32>{{( \{[^}]*\})?}}, %[[G:.*]]: tensor<?x3xf64>{{( \{[^}]*\})?}})
// CHECK-DAG: %[[DV:.*]] = seg.matvec %[[G]], %[[M]], %[[IDX]] :
// CHECK-DAG: %[[DM:.*]] = seg.outer_sum %[[G]], %[[V]], %[[IDX]]
// CHECK: return %[[DV]], %[[DM]]
func.func @matvec_plain(%v: tensor<?x3xf64>, %m: tensor<?x3x3xf64>, %idx: tensor<?xi32>) -> tensor<?x3xf64> {
  %0 = seg.matvec %v, %m, %idx {transpose = false} : tensor<?x3xf64>, tensor<?x3x3xf64>, tensor<?xi32> -> tensor<?x3xf64>
  return %0 : tensor<?x3xf64>
}

// -----

// gather: ȳ = sum(ḡ) over y's segments
// CHECK-LABEL: func.func @gather_grad
// CHECK-SAME: (%[[Y:.*]]: tensor<?xf32>{{( \{[^}]*\})?}}, %[[IDX:.*]]: tensor<?xi32>{{( \{[^}]*\})?}}, %[[G:.*]]: tensor<?xf32>{{( \{[^}]*\})?}})
// CHECK: %[[S:.*]] = tensor.dim %[[Y]], %c0
// CHECK: %[[R:.*]] = seg.sum %[[G]], %[[IDX]], %[[S]]
// CHECK: return %[[R]]
func.func @gather(%y: tensor<?xf32>, %idx: tensor<?xi32>) -> tensor<?xf32> {
  %0 = seg.gather %y, %idx : tensor<?xf32>, tensor<?xi32> -> tensor<?xf32>
  return %0 : tensor<?xf32>
}

// -----

// outer_sum: v̄ = M̄ g, ḡ = M̄ᵀ v
// CHECK-LABEL: func.func @outer_sum_grad
// CHECK-SAME: (%[[V:.*]]: tensor<?x3xf32>{{( \{[^}]*\})?}}, %[[W:.*]]: tensor<?x3xf32>{{( \{[^}]*\})?}}, %[[IDX:.*]]: tensor<?xi32>{{( \{[^}]*\})?}}, %[[N:.*]]: index, %[[G:.*]]: tensor<?x3x3xf32>{{( \{[^}]*\})?}})
// CHECK-DAG: %[[DV:.*]] = seg.matvec %[[W]], %[[G]], %[[IDX]] {transpose = false}
// CHECK-DAG: %[[DW:.*]] = seg.matvec %[[V]], %[[G]], %[[IDX]] :
// CHECK: return %[[DV]], %[[DW]]
func.func @outer_sum(%v: tensor<?x3xf32>, %w: tensor<?x3xf32>, %idx: tensor<?xi32>, %n: index) -> tensor<?x3x3xf32> {
  %0 = seg.outer_sum %v, %w, %idx, %n : tensor<?x3xf32>, tensor<?x3xf32>, tensor<?xi32> -> tensor<?x3x3xf32>
  return %0 : tensor<?x3x3xf32>
}

// -----

// A composition with a value used twice: adjoints add up (CSE merges the
// two identical contributions), and idx and n never receive one.
// CHECK-LABEL: func.func @composite_grad
// CHECK-SAME: (%[[X:.*]]: tensor<?x3xf64>{{( \{[^}]*\})?}}, %[[IDX:.*]]: tensor<?xi32>{{( \{[^}]*\})?}}, %[[N:.*]]: index, %[[G:.*]]: tensor<?xf64>{{( \{[^}]*\})?}})
// CHECK: %[[SUM:.*]] = seg.sum %[[X]], %[[IDX]], %[[N]]
// CHECK: %[[PART:.*]] = seg.mul %[[SUM]], %[[G]], %[[IDX]]
// CHECK: %[[BOTH:.*]] = arith.addf %[[PART]], %[[PART]]
// CHECK: %[[DX:.*]] = seg.gather %[[BOTH]], %[[IDX]]
// CHECK: return %[[DX]]
func.func @composite(%x: tensor<?x3xf64>, %idx: tensor<?xi32>, %n: index) -> tensor<?xf64> {
  %s = seg.sum %x, %idx, %n : tensor<?x3xf64>, tensor<?xi32> -> tensor<?x3xf64>
  %d = seg.dot %s, %s, %idx, %n : tensor<?x3xf64>, tensor<?x3xf64>, tensor<?xi32> -> tensor<?xf64>
  return %d : tensor<?xf64>
}
