// RUN: seg-opt %s --convert-seg-to-host=vector-bits=256 --canonicalize --cse | FileCheck %s --check-prefix=FOUR
// RUN: seg-opt %s --convert-seg-to-host="vector-bits=256 interleave=1" --canonicalize --cse | FileCheck %s --check-prefix=ONE
// RUN: not seg-opt %s --convert-seg-to-host=interleave=3 2>&1 | FileCheck %s --check-prefix=BAD

// The general row loop keeps `interleave` independent vector partial sums:
// 4 by default (the loop steps 4 vectors of 8 rows), 1 for run-time
// compilation (one vector per step).
// FOUR-LABEL: func.func @sum_f32
// FOUR: scf.for %{{.*}} step %c32_i64 iter_args({{.*}}) -> (vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>)
// ONE-LABEL: func.func @sum_f32
// ONE-NOT: step %c32_i64
// ONE: scf.for %{{.*}} step %c8_i64 iter_args({{.*}}) -> (vector<8xf32>)
// BAD: error: interleave must be 1, 2, 4 or 8, got 3
func.func @sum_f32(%x: tensor<?xf32>, %idx: tensor<?xi32>, %n: index) -> tensor<?xf32> {
  %0 = seg.sum %x, %idx, %n : tensor<?xf32>, tensor<?xi32> -> tensor<?xf32>
  return %0 : tensor<?xf32>
}
