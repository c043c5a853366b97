// seg-compile --ptxas: the kernels ptxas reports spilling in are compiled
// again with a higher `.maxnreg`, an occupancy step at a time (48 registers
// used: 64, 80, then 128 for blocks of 256), until they spill no more; the
// others are left as they were. A stand-in ptxas (spilling below 128
// registers) reports the spills, so the test does not depend on ptxas.
// RUN: rm -rf %t && seg-compile %s -o %t --chips=sm_90 --ptxas=%S/Inputs/spilling-ptxas.sh
// RUN: FileCheck %s < %t/segops_sm_90.ptx
// RUN: rm -rf %t.plain && seg-compile %s -o %t.plain --chips=sm_90
// RUN: FileCheck %s --check-prefix=PLAIN < %t.plain/segops_sm_90.ptx
// RUN: not seg-compile %s -o %t.bad --chips=sm_90 --ptxas=%S/Inputs/no-such-ptxas 2>&1 | FileCheck %s --check-prefix=MISSING
// RUN: not seg-compile %s -o %t.bad --chips=sm_90 --ptxas=false 2>&1 | FileCheck %s --check-prefix=FAILS

// CHECK-LABEL: .visible .entry spills_sum(
// CHECK: .maxntid 256, 1, 1
// CHECK-NEXT: .maxnreg 128
// CHECK-LABEL: .visible .entry fits_sum(
// CHECK-NOT: .maxnreg
// CHECK: ret;

// PLAIN-NOT: .maxnreg

// MISSING: error: ptxas ({{.*}}no-such-ptxas) failed on the generated PTX for sm_90
// FAILS: error: ptxas (false) failed on the generated PTX for sm_90

func.func @spills_sum(%x: tensor<?xf32>, %idx: tensor<?xi32>, %n: index) -> tensor<?xf32> {
  %0 = seg.sum %x, %idx, %n : tensor<?xf32>, tensor<?xi32> -> tensor<?xf32>
  return %0 : tensor<?xf32>
}

func.func @fits_sum(%x: tensor<?xf32>, %idx: tensor<?xi32>, %n: index) -> tensor<?xf32> {
  %0 = seg.sum %x, %idx, %n : tensor<?xf32>, tensor<?xi32> -> tensor<?xf32>
  return %0 : tensor<?xf32>
}
