// RUN: rm -rf %t && seg-compile %s -o %t --chips=sm_80,sm_90
// RUN: FileCheck %s --check-prefix=MANIFEST < %t/manifest.json
// RUN: FileCheck %s --check-prefix=PTX90 < %t/segops_sm_90.ptx
// RUN: FileCheck %s --check-prefix=PTX80 < %t/segops_sm_80.ptx
// RUN: FileCheck %s --check-prefix=TOTALS < %t/segops_sm_90.ptx
// RUN: llvm-nm %t/segops_host_x86-64-v2.o | FileCheck %s --check-prefix=HOST
// RUN: rm -rf %t.two && seg-compile %s -o %t.two --host-targets=x86-64-v3:256,x86-64-v2:128
// RUN: FileCheck %s --check-prefix=TWO < %t.two/manifest.json
// RUN: llvm-objdump -d %t.two/segops_host_x86-64-v3.o | FileCheck %s --check-prefix=AVX2
// RUN: llvm-objdump -d %t.two/segops_host_x86-64-v2.o | FileCheck %s --check-prefix=SSE --implicit-check-not=ymm
// RUN: not seg-compile %s -o %t.bad --host-targets=x86-64-v3 2>&1 | FileCheck %s --check-prefix=BAD-TARGET
// RUN: not seg-compile %s -o %t.bad --host-targets=x86-64-v2:128,x86-64-v2:256 2>&1 | FileCheck %s --check-prefix=TWICE
// RUN: not seg-compile %s -o %t.bad --host-targets=pentium-9:128 2>&1 | FileCheck %s --check-prefix=UNKNOWN-CPU
// RUN: not seg-compile %s -o %t.bad --chips=sm_90, 2>&1 | FileCheck %s --check-prefix=EMPTY-CHIP
// RUN: test ! -e %t/segops_gpusim.o
// RUN: rm -rf %t.sim && seg-compile %s -o %t.sim --chips=sm_90 --gpu-simulator
// RUN: llvm-nm %t.sim/segops_gpusim.o | FileCheck %s --check-prefix=SIM
// RUN: FileCheck %s --check-prefix=SIM-MANIFEST < %t.sim/manifest.json
// RUN: not seg-compile %S/Inputs/not-a-kernel.mlir -o %t/bad 2>&1 | FileCheck %s --check-prefix=BAD

// The manifest describes each kernel's ABI and launch rule, and records the
// call contract (segrt/KernelABI.h): each entry point's trailing parameters
// (their order is the header's, not checked here).
// MANIFEST-LABEL: "abi": {
// MANIFEST-DAG: "host_kernel": [
// MANIFEST-DAG: "host_tile": [
// MANIFEST-DAG: "host_finish": [
// MANIFEST-DAG: "gpu_kernel": [
// MANIFEST-DAG: "gpu_segment_kernel": [
// MANIFEST-DAG: "gpu_long_segment": [
// MANIFEST-DAG: "name": "num_rows"
// MANIFEST-DAG: "name": "scratch"
// MANIFEST: "format": "segops-op-library"
// One host build by default: x86-64-v2 (SSE4.2), 128-bit vectors.
// MANIFEST-LABEL: "host": [
// MANIFEST-NEXT: {
// MANIFEST-NEXT: "cpu": "x86-64-v2",
// MANIFEST-NEXT: "library": "libsegops_host_x86-64-v2.so",
// MANIFEST-NEXT: "object": "segops_host_x86-64-v2.o",
// MANIFEST-NEXT: "vector_bits": 128
// MANIFEST-NEXT: }
// MANIFEST-NEXT: ],
// MANIFEST-LABEL: "kernels": [
// MANIFEST: "buffers": [
// MANIFEST: "dtype": "f32",
// MANIFEST-NEXT: "name": "arg0",
// MANIFEST-NEXT: "read": true,
// MANIFEST-NEXT: "role": "input",
// MANIFEST-NEXT: "shape": [
// MANIFEST-NEXT: "N",
// MANIFEST-NEXT: "3"
// MANIFEST: "name": "idx",
// MANIFEST: "name": "result0",
// MANIFEST-NEXT: "role": "output",
// MANIFEST-NEXT: "shape": [
// MANIFEST-NEXT: "S",
// MANIFEST-NEXT: "3"
// MANIFEST: "block": [
// MANIFEST-NEXT: 256,
// One pass: no packed lane loads its own row once for several.
// MANIFEST: "caches_own_rows": false,
// Rows of 3 components run whole: one block of columns.
// MANIFEST-NEXT: "column_blocks": 1,
// MANIFEST: "entry": "gpu_segment_kernel",
// A warp per window of 4 chunks of 32 rows: 1,024 rows a block of 256, up
// to 2,048 blocks (16,384 warps) where segments hold 1,024 rows or more on
// average; then windows grow, to 32 chunks.
// MANIFEST: "grid": {
// MANIFEST-NEXT: "elements": "rows",
// MANIFEST-NEXT: "max": 2048,
// MANIFEST-NEXT: "max_from_mean_segment_rows": 1024,
// MANIFEST-NEXT: "min": 1,
// MANIFEST-NEXT: "per_block": 1024
// MANIFEST-NEXT: },
// MANIFEST-NEXT: "long_segments": {
// MANIFEST-NEXT: "launches": [
// MANIFEST-NEXT: {
// MANIFEST-NEXT: "column_blocks": 1,
// MANIFEST-NEXT: "kernel": "sum_vec3__tiles",
// MANIFEST-NEXT: "min_rows": 1024,
// MANIFEST-NEXT: "pass": 0,
// MANIFEST-NEXT: "rows_per_unit": 1024,
// MANIFEST-NEXT: "warps_per_unit": 1
// MANIFEST-NEXT: },
// A warp per 32-tile super-tile (3 components: one warp), from more rows
// than one super-tile.
// MANIFEST-NEXT: {
// MANIFEST-NEXT: "column_blocks": 1,
// MANIFEST-NEXT: "kernel": "sum_vec3__super_tiles",
// MANIFEST-NEXT: "min_rows": 32769,
// MANIFEST-NEXT: "pass": 0,
// MANIFEST-NEXT: "rows_per_unit": 32768,
// MANIFEST-NEXT: "warps_per_unit": 1
// MANIFEST-NEXT: }
// MANIFEST-NEXT: ],
// A long segment covers a whole tile starting at a multiple of 1,024 rows
// (rows held a row per lane; split rows: half a tile).
// MANIFEST-NEXT: "long_span_alignment": 1024,
// MANIFEST-NEXT: "scratch_bytes_per_segment": 0,
// MANIFEST-NEXT: "scratch_bytes_per_super_tile": 24,
// MANIFEST-NEXT: "scratch_bytes_per_tile": 24,
// MANIFEST-NEXT: "super_tile_rows": 32768,
// MANIFEST-NEXT: "tile_rows": 1024
// Segments within a 32-row chunk run packed, and one ending in the next
// chunk where that is at most 4 rows a lane of its lanes (rows of 3
// components: not their rows there a lane each).
// MANIFEST: "packed_chunk_rows": 32,
// MANIFEST-NEXT: "packed_tail_from_next_chunk": false,
// MANIFEST-NEXT: "packed_tail_rows_per_lane": 4,
// The tile kernel reduces the 3-vectors a warp at a time, as loaded.
// MANIFEST-NEXT: "striped_reductions": true,
// MANIFEST-NEXT: "window_chunks": {
// MANIFEST-NEXT: "max": 32,
// MANIFEST-NEXT: "min": 4
// MANIFEST-NEXT: }
// MANIFEST: "host": {
// MANIFEST-NEXT: "range": "segments",
// MANIFEST-NEXT: "split": {
// MANIFEST-NEXT: "combine": [
// MANIFEST-NEXT: "add",
// MANIFEST-NEXT: "add",
// MANIFEST-NEXT: "add"
// MANIFEST-NEXT: ],
// MANIFEST-NEXT: "finish_symbol": "sum_vec3__finish",
// MANIFEST-NEXT: "pass_totals": [
// MANIFEST-NEXT: 3
// MANIFEST-NEXT: ],
// MANIFEST-NEXT: "rows_symbol": "sum_vec3__rows",
// MANIFEST-NEXT: "totals": 3,
// MANIFEST-NEXT: "totals_dtype": "f32"
// MANIFEST: "symbol": "sum_vec3"
// MANIFEST: "name": "sum_vec3",
// MANIFEST-NEXT: "ops": [
// MANIFEST-NEXT: "seg.sum"
// MANIFEST: "passes": 1,
// Gather: the per-segment input and a per-row output; it only maps rows, so
// a host call computes a range of rows.
// MANIFEST: "name": "arg0",
// MANIFEST-NEXT: "read": true,
// MANIFEST-NEXT: "role": "input",
// MANIFEST-NEXT: "shape": [
// MANIFEST-NEXT: "S"
// MANIFEST: "host": {
// MANIFEST-NEXT: "range": "rows",
// MANIFEST-NEXT: "symbol": "gather_scalar"
// MANIFEST: "name": "gather_scalar",
// Two passes and row outputs: long segments run in stages, and the scratch
// holds each segment's bounds and totals (16 + 4 bytes) and two slots of
// totals per tile.
// MANIFEST: "long_segments": {
// MANIFEST-NEXT: "launches": [
// MANIFEST: "kernel": "normalize__bounds",
// MANIFEST-NEXT: "min_rows": 1024,
// MANIFEST-NEXT: "pass": 0,
// MANIFEST: "kernel": "normalize__tiles",
// MANIFEST-NEXT: "min_rows": 1024,
// MANIFEST-NEXT: "pass": 0,
// MANIFEST: "kernel": "normalize__super_tiles",
// MANIFEST-NEXT: "min_rows": 32769,
// MANIFEST-NEXT: "pass": 0,
// MANIFEST: "kernel": "normalize__pass_totals",
// MANIFEST-NEXT: "min_rows": 1024,
// MANIFEST-NEXT: "pass": 0,
// MANIFEST: "kernel": "normalize__tiles",
// MANIFEST-NEXT: "min_rows": 1024,
// MANIFEST-NEXT: "pass": 1,
// MANIFEST-NEXT: "rows_per_unit": 1024,
// MANIFEST-NEXT: "warps_per_unit": 1
// MANIFEST-NEXT: }
// MANIFEST-NEXT: ],
// MANIFEST-NEXT: "long_span_alignment": 1024,
// MANIFEST-NEXT: "scratch_bytes_per_segment": 20,
// MANIFEST-NEXT: "scratch_bytes_per_super_tile": 8,
// MANIFEST-NEXT: "scratch_bytes_per_tile": 8,
// MANIFEST-NEXT: "super_tile_rows": 32768,
// MANIFEST-NEXT: "tile_rows": 1024
// On the host, long segments run in tiles pass by pass: the tile kernel
// gets the pass; the totals of each pass are added over the tiles.
// MANIFEST: "host": {
// MANIFEST-NEXT: "range": "segments",
// MANIFEST-NEXT: "split": {
// MANIFEST-NEXT: "combine": [
// MANIFEST-NEXT: "add"
// MANIFEST-NEXT: ],
// MANIFEST-NEXT: "finish_symbol": "normalize__finish",
// MANIFEST-NEXT: "pass_totals": [
// MANIFEST-NEXT: 1,
// MANIFEST-NEXT: 0
// MANIFEST-NEXT: ],
// MANIFEST-NEXT: "rows_symbol": "normalize__rows",
// MANIFEST-NEXT: "totals": 1,
// MANIFEST-NEXT: "totals_dtype": "f32"
// MANIFEST: "name": "normalize",
// MANIFEST: "ptx": {
// MANIFEST-NEXT: "sm_80": "segops_sm_80.ptx",
// MANIFEST-NEXT: "sm_90": "segops_sm_90.ptx"
// MANIFEST: "version": 11

// PTX90: .target sm_90
// PTX90: .visible .entry sum_vec3(
// PTX90: .visible .entry gather_scalar(
// PTX80: .target sm_80

// The GPU kernels for the SIMT simulator (--gpu-simulator): the gpu.func
// kernels as host functions of the GPU ABI, calling the simulator runtime.
// SIM-DAG: T sum_vec3
// SIM-DAG: T gather_scalar
// SIM-DAG: U segsim_shuffle
// SIM-DAG: U segsim_ballot
// SIM-DAG: U segsim_thread_id
// SIM-NOT: sum_vec3__rows
// SIM-MANIFEST: "gpu_simulator_object": "segops_gpusim.o"

// HOST-DAG: T gather_scalar
// HOST-DAG: T sum_vec3
// HOST-DAG: T sum_vec3__rows
// HOST-DAG: T sum_vec3__finish
// HOST-DAG: T normalize__rows
// HOST-DAG: T normalize__finish

// Host builds in the order given (the runtime takes the first this CPU
// runs): AVX2 code in 256-bit registers, and none in the x86-64-v2 build.
// TWO-LABEL: "host": [
// TWO-NEXT: {
// TWO-NEXT: "cpu": "x86-64-v3",
// TWO-NEXT: "library": "libsegops_host_x86-64-v3.so",
// TWO-NEXT: "object": "segops_host_x86-64-v3.o",
// TWO-NEXT: "vector_bits": 256
// TWO-NEXT: },
// TWO-NEXT: {
// TWO-NEXT: "cpu": "x86-64-v2",
// TWO: "vector_bits": 128
// AVX2: <sum_vec3>:
// AVX2: ymm
// SSE: <sum_vec3>:
// SSE: xmm
// BAD-TARGET: --host-targets: expected CPU:BITS, got 'x86-64-v3'
// TWICE: --host-targets: CPU 'x86-64-v2' given twice
// UNKNOWN-CPU: error: LLVM does not know the CPU 'pentium-9' for x86_64
// EMPTY-CHIP: seg-compile: --chips takes GPU architectures such as sm_90, got ''

// BAD: is not a seg kernel function: a value is used both per row and per segment

func.func @sum_vec3(%x: tensor<?x3xf32>, %idx: tensor<?xi32>, %n: index) -> tensor<?x3xf32> {
  %0 = seg.sum %x, %idx, %n : tensor<?x3xf32>, tensor<?xi32> -> tensor<?x3xf32>
  return %0 : tensor<?x3xf32>
}

func.func @gather_scalar(%y: tensor<?xf64>, %idx: tensor<?xi32>) -> tensor<?xf64> {
  %0 = seg.gather %y, %idx : tensor<?xf64>, tensor<?xi32> -> tensor<?xf64>
  return %0 : tensor<?xf64>
}

// PTX90-DAG: .visible .entry normalize__bounds(
// PTX90-DAG: .visible .entry normalize__pass_totals(
// PTX90-DAG: .visible .entry normalize__super_tiles(
// The pass-totals kernel asks for 4 blocks of 256 per SM: half the SM's
// threads, at most 64 registers, no spills under ptxas.
// TOTALS: .visible .entry normalize__pass_totals(
// TOTALS: .maxntid 256, 1, 1
// TOTALS-NEXT: .minnctapersm 4
func.func @normalize(%x: tensor<?x3xf32>, %idx: tensor<?xi32>, %n: index) -> tensor<?x3xf32> {
  %r = seg.rms_norm %x, %idx, %n : tensor<?x3xf32>, tensor<?xi32> -> tensor<?xf32>
  %w = seg.mul %x, %r, %idx : tensor<?x3xf32>, tensor<?xf32>, tensor<?xi32> -> tensor<?x3xf32>
  return %w : tensor<?x3xf32>
}
