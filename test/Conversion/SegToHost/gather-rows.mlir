// RUN: seg-opt %s --convert-seg-to-host=vector-bits=128 --canonicalize --cse | FileCheck %s
// RUN: seg-opt %s --convert-seg-to-gpu --canonicalize --cse | FileCheck %s --check-prefix=GPU

// seg.gather_rows in a row body: j's values for the body's rows (one
// vector of i32 for two f64 rows), widened, then each lane's table row
// loaded where it is used; nothing is written for the gathered rows.
// CHECK-LABEL: func.func @gathered_norms(
// CHECK-SAME: %[[T:[^:]*]]: !llvm.ptr, %[[J:[^:]*]]: !llvm.ptr, %[[IDX:[^:]*]]: !llvm.ptr
// CHECK: %[[JP:.*]] = llvm.getelementptr inbounds %[[J]][%{{.*}}] : (!llvm.ptr, i64) -> !llvm.ptr, i32
// CHECK: %[[JV:.*]] = llvm.load %[[JP]] {{.*}} -> vector<2xi32>
// CHECK: %[[JW:.*]] = arith.extsi %[[JV]] : vector<2xi32> to vector<2xi64>
// CHECK: %[[J0:.*]] = llvm.extractelement %[[JW]]
// CHECK: %[[E0:.*]] = arith.muli %[[J0]], %{{.*}} : i64
// CHECK: llvm.getelementptr inbounds %[[T]][%[[E0]]] : (!llvm.ptr, i64) -> !llvm.ptr, f64
// CHECK-NOT: llvm.store {{.*}} vector<2xf64>
// CHECK: return

// On GPUs, one row per lane: j[row], then the table row it names.
// GPU-LABEL: gpu.func @gathered_norms(
// GPU-SAME: %[[T:[^:]*]]: !llvm.ptr, %[[J:[^:]*]]: !llvm.ptr
// GPU: %[[JP:.*]] = llvm.getelementptr inbounds %[[J]][%{{.*}}] : (!llvm.ptr, i64) -> !llvm.ptr, i32
// GPU: %[[JV:.*]] = llvm.load %[[JP]] : !llvm.ptr -> i32
// GPU: %[[JW:.*]] = arith.extsi %[[JV]] : i32 to i64
// GPU: %[[E0:.*]] = arith.muli %[[JW]], %{{.*}} : i64
// GPU: llvm.getelementptr inbounds %[[T]][%[[E0]]] : (!llvm.ptr, i64) -> !llvm.ptr, f64
func.func @gathered_norms(%t: tensor<?x2xf64>, %j: tensor<?xi32>, %idx: tensor<?xi32>, %n: index)
    -> tensor<?xf64> {
  %g = seg.gather_rows %t, %j : tensor<?x2xf64>, tensor<?xi32> -> tensor<?x2xf64>
  %r = seg.component_sum %g : tensor<?x2xf64> -> tensor<?xf64>
  %s = seg.sum %r, %idx, %n : tensor<?xf64>, tensor<?xi32> -> tensor<?xf64>
  return %s : tensor<?xf64>
}
