// RUN: seg-opt %s --convert-gpu-to-simulator --split-input-file --verify-diagnostics | FileCheck %s

// Launch values (x from the simulator, y/z constant), shuffles of floats and
// integers (bits through i64; `valid` only where used), ballots (i1 widened
// to i32), barriers, return; each collective numbered by a distinct site.
// CHECK-NOT: gpu.container_module
// CHECK-DAG: func.func private @segsim_thread_id() -> i64
// CHECK-DAG: func.func private @segsim_shuffle(i32, i64, i32, i32, i32) -> i64
// CHECK-DAG: func.func private @segsim_shuffle_valid(i32, i32, i32) -> i32
// CHECK-DAG: func.func private @segsim_ballot(i32, i32, i32) -> i32
// CHECK-DAG: func.func private @segsim_barrier(i32)
// CHECK-LABEL: func.func @kernel(
// CHECK-SAME: !llvm.ptr, %{{.*}}: i64, %{{.*}}: i64)
// CHECK: %[[TID:.*]] = call @segsim_thread_id() : () -> i64
// CHECK: arith.index_cast %[[TID]] : i64 to index
// CHECK: call @segsim_block_id()
// CHECK: call @segsim_grid_dim()
// CHECK: call @segsim_block_dim()
// CHECK: %[[BITS:.*]] = arith.bitcast %{{.*}} : f32 to i32
// CHECK: %[[WIDE:.*]] = arith.extui %[[BITS]] : i32 to i64
// CHECK: %[[SHUF:.*]] = call @segsim_shuffle(%c0_i32, %[[WIDE]], %{{.*}}, %{{.*}}, %[[SITE0:.*]]) : (i32, i64, i32, i32, i32) -> i64
// CHECK: %[[NARROW:.*]] = arith.trunci %[[SHUF]] : i64 to i32
// CHECK: arith.bitcast %[[NARROW]] : i32 to f32
// CHECK-NOT: segsim_shuffle_valid
// CHECK: call @segsim_shuffle(%c2_i32, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}) : (i32, i64, i32, i32, i32) -> i64
// CHECK: %[[VALID:.*]] = call @segsim_shuffle_valid(%c2_i32, %{{.*}}, %{{.*}}) : (i32, i32, i32) -> i32
// CHECK: arith.cmpi ne, %[[VALID]], %c0_i32
// CHECK: %[[PRED:.*]] = arith.extui %{{.*}} : i1 to i32
// CHECK: call @segsim_ballot(%{{.*}}, %[[PRED]], %{{.*}}) : (i32, i32, i32) -> i32
// CHECK: call @segsim_barrier(%{{.*}}) : (i32) -> ()
// CHECK: return
// CHECK-NOT: gpu.
module attributes {gpu.container_module} {
  gpu.module @kernels {
    gpu.func @kernel(%out: !llvm.ptr, %n: i64, %s: i64) kernel {
      %tid = gpu.thread_id x
      %tidy = gpu.thread_id y
      %bid = gpu.block_id x
      %grid = gpu.grid_dim x
      %bdim = gpu.block_dim x
      %sum0 = arith.addi %tid, %tidy : index
      %sum1 = arith.addi %sum0, %bid : index
      %sum2 = arith.addi %sum1, %grid : index
      %sum3 = arith.addi %sum2, %bdim : index
      %i = arith.index_cast %sum3 : index to i32
      %f = arith.sitofp %i : i32 to f32
      %c1 = arith.constant 1 : i32
      %c32 = arith.constant 32 : i32
      %x, %xvalid = gpu.shuffle xor %f, %c1, %c32 : f32
      %i64 = arith.extsi %i : i32 to i64
      %d, %dvalid = gpu.shuffle down %i64, %c1, %c32 : i64
      %mask = arith.constant -1 : i32
      %vote = nvvm.vote.ballot.sync %mask, %dvalid : i32
      gpu.barrier
      %vote64 = arith.extsi %vote : i32 to i64
      %total = arith.addi %d, %vote64 : i64
      llvm.store %total, %out : i64, !llvm.ptr
      llvm.store %x, %out : f32, !llvm.ptr
      gpu.return
    }
  }
}

// -----

module attributes {gpu.container_module} {
  gpu.module @kernels {
    gpu.func @lanes(%out: !llvm.ptr) kernel {
      // expected-error @below {{'nvvm.read.ptx.sreg.laneid' op is not supported by the GPU simulator}}
      %lane = nvvm.read.ptx.sreg.laneid : i32
      llvm.store %lane, %out : i32, !llvm.ptr
      gpu.return
    }
  }
}

// -----

module attributes {gpu.container_module} {
  gpu.module @kernels {
    // expected-error @below {{'gpu.func' op has workgroup or private attributions, which the GPU simulator does not support}}
    gpu.func @shared(%out: !llvm.ptr) workgroup(%tile: memref<32xf32, #gpu.address_space<workgroup>>) kernel {
      gpu.return
    }
  }
}

// -----

module attributes {gpu.container_module} {
  gpu.module @kernels {
    // expected-error @below {{'gpu.func' op the GPU simulator runs kernels only}}
    gpu.func @helper(%out: !llvm.ptr) {
      gpu.return
    }
  }
}

// -----

module attributes {gpu.container_module} {
  func.func @clash() {
    return
  }
  gpu.module @kernels {
    // expected-error @below {{'gpu.func' op has the name of a symbol of the enclosing module}}
    gpu.func @clash(%out: !llvm.ptr) kernel {
      gpu.return
    }
  }
}
