// RUN: seg-opt %s --seg-derive=order=2 -split-input-file | FileCheck %s
// RUN: seg-opt %s --seg-derive=order=2 --seg-to-host -split-input-file | FileCheck %s --check-prefix=HOST
// RUN: not seg-opt %s --seg-differentiate="function=count_only" -split-input-file 2>&1 | FileCheck %s --check-prefix=NAMED

// Valid programs that derived or compiled badly before.

// No argument gets a gradient: no derivative function, and the primal still
// compiles (it failed with "returns nothing" at derive).
// CHECK-LABEL: func.func @count_only
// CHECK-NOT: func.func @count_only_grad
// HOST-LABEL: llvm.func @count_only(
// HOST-NOT: llvm.func @count_only_grad(
// NAMED: error: seg-differentiate: no argument of 'count_only' gets a gradient
func.func @count_only(%idx: tensor<?xi32>, %n: index) -> tensor<?xf32> {
  %c = seg.count %idx, %n : tensor<?xi32> -> tensor<?xf32>
  return %c : tensor<?xf32>
}

// -----

// A seg result nobody uses: canonicalization erases it, and the spaces it
// told stay on the arguments; the primal and its derivatives compile as row
// maps over the one integer tensor argument (they had "no seg operation").
// CHECK-LABEL: func.func @unused_sum
// CHECK-SAME: {seg.space = "row"}
// CHECK-LABEL: func.func @unused_sum_grad
// CHECK-LABEL: func.func @unused_sum_grad_grad
// HOST-LABEL: llvm.func @unused_sum(
// HOST-LABEL: llvm.func @unused_sum_grad(
// HOST-LABEL: llvm.func @unused_sum_grad_grad(
func.func @unused_sum(%x: tensor<?xf32>, %idx: tensor<?xi32>, %n: index) -> tensor<?xf32> {
  %s = seg.sum %x, %idx, %n : tensor<?xf32>, tensor<?xi32> -> tensor<?xf32>
  %y = arith.mulf %x, %x : tensor<?xf32>
  return %y : tensor<?xf32>
}

// -----

// x reaches the result through a comparison alone: its gradient is zeros.
// CHECK-LABEL: func.func @no_differentiable_path_grad
// CHECK: %[[ZERO:.*]] = tensor.splat %{{.*}}[%{{.*}}] : tensor<?xf32>
// CHECK: return %[[ZERO]]
// HOST-LABEL: llvm.func @no_differentiable_path_grad(
func.func @no_differentiable_path(%x: tensor<?xf32>, %idx: tensor<?xi32>, %n: index) -> tensor<?xf32> {
  %c = seg.count %idx, %n : tensor<?xi32> -> tensor<?xf32>
  %s = seg.sum %x, %idx, %n : tensor<?xf32>, tensor<?xi32> -> tensor<?xf32>
  %gt = arith.cmpf ogt, %s, %c : tensor<?xf32>
  %r = arith.select %gt, %c, %c : tensor<?xi1>, tensor<?xf32>
  return %r : tensor<?xf32>
}

// -----

// D4: a dead square root of an unplaced splat (it has no space) is no part
// of the kernel; --seg-to-host read a DenseMap end() for it.
// HOST-LABEL: llvm.func @dead_sqrt(
func.func @dead_sqrt(%x: tensor<?xf32>, %idx: tensor<?xi32>, %n: index) -> tensor<?xf32> {
  %c = arith.constant 2.0 : f32
  %z = tensor.splat %c[%n] : tensor<?xf32>
  %q = math.sqrt %z : tensor<?xf32>
  %s = seg.sum %x, %idx, %n : tensor<?xf32>, tensor<?xi32> -> tensor<?xf32>
  return %s : tensor<?xf32>
}
