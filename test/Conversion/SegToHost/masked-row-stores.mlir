// RUN: seg-opt %s --convert-seg-to-host=vector-bits=256 --canonicalize --cse | FileCheck %s

// A pass that stores rows and reduces (the backward of a gather's
// consumer: rows out, segment totals too) runs short segments as a masked
// 16-row block and long ones with a masked tail. The lanes past the
// segment's end are not stored (llvm.intr.masked.store: the rows belong to
// other segments, which another thread may be writing), so neither choice
// depends on the rows of a thread's call, and results do not depend on the
// thread split. The vec3 rows' mask repeats each lane's bit 3 times.
// CHECK-LABEL: func.func @scaled_rows_and_sums
// CHECK-NOT: llvm.load {{.*}} -> vector<24xf32>{{.*}}result
// CHECK: llvm.shufflevector %{{.*}} [0, 0, 0, 1, 1, 1, 2, 2, 2, 3, 3, 3, 4, 4, 4, 5, 5, 5, 6, 6, 6, 7, 7, 7] : vector<8xi1>
// CHECK: llvm.intr.masked.store %{{.*}}, %{{.*}}, %{{.*}} {alignment = 4 : i32} : vector<24xf32>, vector<24xi1> into !llvm.ptr
func.func @scaled_rows_and_sums(%x: tensor<?x3xf32>, %y: tensor<?xf32>, %idx: tensor<?xi32>, %n: index) -> (tensor<?x3xf32>, tensor<?x3xf32>) {
  %0 = seg.mul %x, %y, %idx : tensor<?x3xf32>, tensor<?xf32>, tensor<?xi32> -> tensor<?x3xf32>
  %1 = seg.sum %0, %idx, %n : tensor<?x3xf32>, tensor<?xi32> -> tensor<?x3xf32>
  return %0, %1 : tensor<?x3xf32>, tensor<?x3xf32>
}
