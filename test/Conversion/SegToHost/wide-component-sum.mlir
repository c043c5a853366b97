// RUN: seg-opt %s --convert-seg-to-host --canonicalize --cse -split-input-file | FileCheck %s

// A sum over a wide row's features (8 or more) is one ordered vector
// reduction of the features from -0: the same additions in the same order
// as a scalar chain, and a vector that seeds LLVM's SLP vectoriser, so that
// the features' row code (an exp per feature) runs as vectors.
// CHECK-LABEL: func.func @energy_of_wide_rows
// CHECK-COUNT-8: llvm.insertelement {{.*}} : vector<8xf32>
// CHECK: "llvm.intr.vector.reduce.fadd"(%{{.*}}, %{{.*}}) <{fastmathFlags = #llvm.fastmath<none>}> : (f32, vector<8xf32>) -> f32
func.func @energy_of_wide_rows(%x: tensor<?x8xf32>, %idx: tensor<?xi32>,
                               %n: index) -> tensor<?xf32> {
  %e = math.exp %x : tensor<?x8xf32>
  %r = seg.component_sum %e : tensor<?x8xf32> -> tensor<?xf32>
  %s = seg.sum %r, %idx, %n : tensor<?xf32>, tensor<?xi32> -> tensor<?xf32>
  return %s : tensor<?xf32>
}

// -----

// Narrow rows (a vec3) keep the scalar chain, which their row vectors
// (several rows per vector) need.
// CHECK-LABEL: func.func @energy_of_vec3_rows
// CHECK-NOT: llvm.intr.vector.reduce.fadd
// CHECK: return
func.func @energy_of_vec3_rows(%x: tensor<?x3xf32>, %idx: tensor<?xi32>,
                               %n: index) -> tensor<?xf32> {
  %r = seg.component_sum %x : tensor<?x3xf32> -> tensor<?xf32>
  %s = seg.sum %r, %idx, %n : tensor<?xf32>, tensor<?xi32> -> tensor<?xf32>
  return %s : tensor<?xf32>
}
