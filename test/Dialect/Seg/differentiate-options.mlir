// RUN: seg-opt %s --seg-differentiate="function=mul wrt=1" --canonicalize | FileCheck %s
// RUN: not seg-opt %s --seg-differentiate="function=mul wrt=2" 2>&1 | FileCheck %s --check-prefix=INDEX
// RUN: not seg-opt %s --seg-differentiate="function=mul wrt=5" 2>&1 | FileCheck %s --check-prefix=RANGE
// RUN: not seg-opt %s --seg-differentiate="function=nope" 2>&1 | FileCheck %s --check-prefix=NAME
// RUN: seg-opt %s --seg-differentiate="function=mul suffix=_vjp" | FileCheck %s --check-prefix=SUFFIX

// Only y's gradient is built.
// CHECK-LABEL: func.func @mul_grad
// CHECK-SAME: (%{{.*}}: tensor<?x3xf32>{{( \{[^}]*\})?}}, %{{.*}}: tensor<?xf32>{{( \{[^}]*\})?}}, %{{.*}}: tensor<?xi32>{{( \{[^}]*\})?}}, %{{.*}}: tensor<?x3xf32>{{( \{[^}]*\})?}}) -> tensor<?xf32>
// CHECK: seg.dot
// CHECK-NOT: seg.mul
// CHECK: return

// INDEX: error: seg-differentiate: argument #2 of type 'tensor<?xi32>' is not floating-point and gets no gradient
// RANGE: error: seg-differentiate: argument #5 does not exist
// NAME: error: seg-differentiate: no function named 'nope'
// SUFFIX: func.func @mul_vjp

func.func @mul(%x: tensor<?x3xf32>, %y: tensor<?xf32>, %idx: tensor<?xi32>) -> tensor<?x3xf32> {
  %0 = seg.mul %x, %y, %idx : tensor<?x3xf32>, tensor<?xf32>, tensor<?xi32> -> tensor<?x3xf32>
  return %0 : tensor<?x3xf32>
}
