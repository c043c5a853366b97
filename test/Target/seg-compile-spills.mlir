// seg-compile --ptxas: ptxas's register ladder. The kernels ptxas reports
// spilling in get `.maxnreg` caps from the occupancy step their registers
// allow down, the step's cap and then 8 fewer (48 registers used, blocks
// of 256: 48, 64, 56, 80, 72, 128), until one spills nothing; kernels left
// below half occupancy (80 registers) are capped at half occupancy (64),
// and those at most 8 registers past an occupancy step (48: the step of
// 40) at the step, where they then spill nothing; the others are left as
// they were. After the first run, ptxas is given only the kernels whose
// cap changed. A stand-in ptxas (spills_*: spilling below 128 registers;
// oddspills_*: spilling but at 56; fits_*: 48 registers, fitting in 40;
// tight_*: 48, spilling below 48; wide_*: 80 registers, fitting in 64;
// widespills_*: 80, spilling below 80) reports the registers, so the test
// does not depend on ptxas.
// (Each function is a segment kernel, its __tiles and __super_tiles.)
// RUN: rm -rf %t %t.log && env PTXAS_LOG=%t.log seg-compile %s -o %t --chips=sm_90 --ptxas=%S/Inputs/spilling-ptxas.sh
// RUN: FileCheck %s < %t/segops_sm_90.ptx
// RUN: FileCheck %s --check-prefix=RUNS < %t.log
// RUN: rm -rf %t.plain && seg-compile %s -o %t.plain --chips=sm_90
// RUN: FileCheck %s --check-prefix=PLAIN < %t.plain/segops_sm_90.ptx
// RUN: not seg-compile %s -o %t.bad --chips=sm_90 --ptxas=%S/Inputs/no-such-ptxas 2>&1 | FileCheck %s --check-prefix=MISSING
// RUN: not seg-compile %s -o %t.bad --chips=sm_90 --ptxas=false 2>&1 | FileCheck %s --check-prefix=FAILS
// RUN: rm -f %t.forget && env PTXAS_FORGET=%t.forget not seg-compile %s -o %t.bad --chips=sm_90 --ptxas=%S/Inputs/spilling-ptxas.sh 2>&1 | FileCheck %s --check-prefix=FORGETS

// CHECK-LABEL: .visible .entry spills_sum(
// CHECK: .maxntid 256, 1, 1
// CHECK-NEXT: .maxnreg 128
// CHECK-NEXT: {
// CHECK-LABEL: .visible .entry fits_sum(
// CHECK: .maxntid 256, 1, 1
// CHECK-NEXT: .maxnreg 40
// CHECK-NEXT: {
// CHECK-LABEL: .visible .entry wide_sum(
// CHECK: .maxntid 256, 1, 1
// CHECK-NEXT: .maxnreg 64
// CHECK-NEXT: {
// CHECK-LABEL: .visible .entry widespills_sum(
// CHECK-NOT: .maxnreg
// CHECK: ret;
// CHECK-LABEL: .visible .entry oddspills_sum(
// CHECK: .maxntid 256, 1, 1
// CHECK-NEXT: .maxnreg 56
// CHECK-NEXT: {
// CHECK-LABEL: .visible .entry tight_sum(
// CHECK-NOT: .maxnreg
// CHECK: ret;

// RUNS: {{^}}spills_sum spills_sum__tiles spills_sum__super_tiles fits_sum fits_sum__tiles fits_sum__super_tiles
// RUNS-SAME: wide_sum wide_sum__tiles wide_sum__super_tiles widespills_sum widespills_sum__tiles widespills_sum__super_tiles
// RUNS-SAME: oddspills_sum oddspills_sum__tiles oddspills_sum__super_tiles
// RUNS-SAME: tight_sum tight_sum__tiles tight_sum__super_tiles{{$}}
// RUNS-COUNT-3: {{^}}spills_sum spills_sum__tiles spills_sum__super_tiles oddspills_sum oddspills_sum__tiles oddspills_sum__super_tiles{{$}}
// RUNS-NEXT: {{^}}spills_sum spills_sum__tiles spills_sum__super_tiles{{$}}
// RUNS-NEXT: {{^}}spills_sum spills_sum__tiles spills_sum__super_tiles{{$}}
// RUNS-NEXT: {{^}}spills_sum spills_sum__tiles spills_sum__super_tiles{{$}}
// RUNS-NEXT: {{^}}fits_sum fits_sum__tiles fits_sum__super_tiles wide_sum wide_sum__tiles wide_sum__super_tiles
// RUNS-SAME: widespills_sum widespills_sum__tiles widespills_sum__super_tiles
// RUNS-SAME: tight_sum tight_sum__tiles tight_sum__super_tiles{{$}}
// RUNS-NOT: {{.}}

// PLAIN-NOT: .maxnreg

// MISSING: error: ptxas ({{.*}}no-such-ptxas) failed on the generated PTX for sm_90
// FAILS: error: ptxas (false) failed on the generated PTX for sm_90
// FORGETS: error: ptxas reported nothing of kernel 'spills_sum'

func.func @spills_sum(%x: tensor<?xf32>, %idx: tensor<?xi32>, %n: index) -> tensor<?xf32> {
  %0 = seg.sum %x, %idx, %n : tensor<?xf32>, tensor<?xi32> -> tensor<?xf32>
  return %0 : tensor<?xf32>
}

func.func @fits_sum(%x: tensor<?xf32>, %idx: tensor<?xi32>, %n: index) -> tensor<?xf32> {
  %0 = seg.sum %x, %idx, %n : tensor<?xf32>, tensor<?xi32> -> tensor<?xf32>
  return %0 : tensor<?xf32>
}

func.func @wide_sum(%x: tensor<?xf32>, %idx: tensor<?xi32>, %n: index) -> tensor<?xf32> {
  %0 = seg.sum %x, %idx, %n : tensor<?xf32>, tensor<?xi32> -> tensor<?xf32>
  return %0 : tensor<?xf32>
}

func.func @widespills_sum(%x: tensor<?xf32>, %idx: tensor<?xi32>, %n: index) -> tensor<?xf32> {
  %0 = seg.sum %x, %idx, %n : tensor<?xf32>, tensor<?xi32> -> tensor<?xf32>
  return %0 : tensor<?xf32>
}

func.func @oddspills_sum(%x: tensor<?xf32>, %idx: tensor<?xi32>, %n: index) -> tensor<?xf32> {
  %0 = seg.sum %x, %idx, %n : tensor<?xf32>, tensor<?xi32> -> tensor<?xf32>
  return %0 : tensor<?xf32>
}

func.func @tight_sum(%x: tensor<?xf32>, %idx: tensor<?xi32>, %n: index) -> tensor<?xf32> {
  %0 = seg.sum %x, %idx, %n : tensor<?xf32>, tensor<?xi32> -> tensor<?xf32>
  return %0 : tensor<?xf32>
}
