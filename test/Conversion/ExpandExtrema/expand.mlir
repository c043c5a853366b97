// RUN: seg-opt %s --seg-expand-extrema | FileCheck %s

// maximumf: a where a > b or a is NaN (ugt), or where the two are equal
// and b has its sign bit set (max(-0, +0) = +0 in either order); b where b
// is NaN.
// CHECK-LABEL: func.func @max_scalar
// CHECK-SAME: (%[[A:.*]]: f32, %[[B:.*]]: f32)
// CHECK-NOT: arith.maximumf
// CHECK-DAG: %[[GT:.*]] = arith.cmpf ugt, %[[A]], %[[B]] : f32
// CHECK-DAG: %[[EQ:.*]] = arith.cmpf oeq, %[[A]], %[[B]] : f32
// CHECK-DAG: %[[BBITS:.*]] = arith.bitcast %[[B]] : f32 to i32
// CHECK-DAG: %[[BNEG:.*]] = arith.cmpi slt, %[[BBITS]], %{{.*}} : i32
// CHECK-DAG: %[[TIE:.*]] = arith.andi %[[EQ]], %[[BNEG]] : i1
// CHECK-DAG: %[[PICK:.*]] = arith.ori %[[GT]], %[[TIE]] : i1
// CHECK-DAG: %[[SEL:.*]] = arith.select %[[PICK]], %[[A]], %[[B]] : f32
// CHECK-DAG: %[[NAN:.*]] = arith.cmpf uno, %[[B]], %[[B]] : f32
// CHECK: %[[R:.*]] = arith.select %[[NAN]], %[[B]], %[[SEL]] : f32
// CHECK: return %[[R]]
func.func @max_scalar(%a: f32, %b: f32) -> f32 {
  %0 = arith.maximumf %a, %b : f32
  return %0 : f32
}

// minimumf on vectors: ult, and the tie picks a where a is -0.
// CHECK-LABEL: func.func @min_vector
// CHECK-SAME: (%[[A:.*]]: vector<8xf64>, %[[B:.*]]: vector<8xf64>)
// CHECK-NOT: arith.minimumf
// CHECK-DAG: arith.cmpf ult, %[[A]], %[[B]] : vector<8xf64>
// CHECK-DAG: arith.bitcast %[[A]] : vector<8xf64> to vector<8xi64>
// CHECK-DAG: arith.cmpf uno, %[[B]], %[[B]] : vector<8xf64>
// CHECK: return
func.func @min_vector(%a: vector<8xf64>, %b: vector<8xf64>) -> vector<8xf64> {
  %0 = arith.minimumf %a, %b : vector<8xf64>
  return %0 : vector<8xf64>
}

// Tensors (seg IR before lowering) are left alone.
// CHECK-LABEL: func.func @tensor_untouched
// CHECK: arith.maximumf
func.func @tensor_untouched(%a: tensor<?xf32>, %b: tensor<?xf32>) -> tensor<?xf32> {
  %0 = arith.maximumf %a, %b : tensor<?xf32>
  return %0 : tensor<?xf32>
}
