//===- GpuSimulator.h - run GPU kernels on the CPU, for tests ---*- C++ -*-===//
//
// A SIMT simulator for the op library's GPU kernels on machines without a
// GPU. `seg-compile --gpu-simulator` compiles the same gpu.func kernels as
// the PTX, with their GPU operations turned into calls of the functions
// below (convert-gpu-to-simulator), into segops_gpusim.o; linked with
// GpuSimulator.cpp it becomes libsegops_gpusim.so, driven from Python by
// ctypes (test/python/gpusim.py).
//
// Every GPU thread runs as a fiber (ucontext) on the calling thread; blocks
// run one after another, in a chosen order. A thread runs until it reaches a
// collective (shuffle, ballot, block barrier); a collective completes when
// every lane of its member mask (every live thread of the block, for a
// barrier) waits at the same one. Lanes that wait at different collectives,
// a lane that exited while its warp-mates wait, or a lane outside the member
// mask are errors: on a GPU they are undefined behaviour or a hang. What it
// does not model: timing, memory ordering between blocks, shared memory.
// What it can count (segsim_trace): each launch's memory traffic, the
// lanes of a warp's load or store grouped into one instruction as a GPU
// issues it, for the performance model (bench/gpu_model.py).
//
//===----------------------------------------------------------------------===//

#ifndef SEGRT_GPUSIMULATOR_H
#define SEGRT_GPUSIMULATOR_H

#include <cstddef>
#include <cstdint>

extern "C" {

/// Shuffle modes as the simulated kernels pass them.
enum SegsimShuffleMode {
  SEGSIM_XOR = 0,
  SEGSIM_UP = 1,
  SEGSIM_DOWN = 2,
  SEGSIM_IDX = 3
};

/// One traced launch's global memory traffic. A warp instruction is the
/// k-th execution of one load or store site by the lanes of one warp (the
/// lanes a GPU would issue it for, if they reconverge as the simulator's
/// collectives require). Sectors are the 32-byte pieces of memory an
/// instruction touches; `useful` bytes are those its lanes asked for, each
/// address once (a broadcast counts once).
typedef struct SegsimTraffic {
  int64_t gridSize, blockSize;
  /// Warps that ran.
  int64_t warps;
  /// Warp instructions, the lanes they ran for, their useful bytes and the
  /// sectors they touched (summed over instructions).
  int64_t loadInstructions, loadLanes, loadUsefulBytes, loadSectors;
  int64_t storeInstructions, storeLanes, storeUsefulBytes, storeSectors;
  /// Distinct sectors over the whole launch: what moves between L2 and DRAM
  /// if L2 keeps every sector between its uses.
  int64_t distinctLoadSectors, distinctStoreSectors;
  /// Dependent load rounds: per lane, the loads between two collectives
  /// (or the start and the end) in groups of `loadsPerRound` (the loads one
  /// warp keeps in flight), summed; a warp's rounds are its slowest
  /// lane's. Summed over warps, and the most of one warp.
  int64_t warpRounds, maxWarpRounds;
} SegsimTraffic;

/// Starts (`loadsPerRound` > 0, clearing the records) or stops (0) tracing
/// every launch, on any thread.
void segsim_trace(int32_t loadsPerRound);
/// While tracing, launch k (from the start, in order) runs on `grids[k]`
/// blocks instead of its own grid, for k < `count` where grids[k] > 0: the
/// performance model traces a small run on the grid a large one gets
/// (kernels grid-stride, so results do not change). Cleared by
/// segsim_trace.
void segsim_trace_grids(const int64_t *grids, int64_t count);
/// How many launches were traced since tracing started.
int64_t segsim_trace_count(void);
/// Copies launch `index`'s record (in launch order); 0, or 1 if there is none.
int32_t segsim_trace_record(int64_t index, SegsimTraffic *record);

/// Runs `kernel`, a simulated GPU kernel (its buffers' `pointers`, then the
/// `numTrailing` 64-bit trailing arguments of its entry point, in the order
/// of segrt/KernelABI.h), on a 1-D grid of
/// `gridSize` blocks of `blockSize` threads (a multiple of 32). Blocks run in
/// increasing order, or decreasing if `reverseBlocks`. Returns 0, or 1 with a
/// message in `error` (at most `errorSize` bytes, NUL-terminated).
int segsim_launch(void *kernel, const uint64_t *pointers, int numPointers,
                  const int64_t *trailing, int numTrailing, int64_t gridSize,
                  int64_t blockSize,
                  int reverseBlocks, char *error, size_t errorSize);

// Called by simulated kernels.
int64_t segsim_thread_id();
int64_t segsim_block_id();
int64_t segsim_block_dim();
int64_t segsim_grid_dim();
/// PTX `shfl.sync` as MLIR lowers gpu.shuffle: member mask the low `width`
/// lanes, clamp `width - 1` (`32 - width` for up). `bits` holds the value.
int64_t segsim_shuffle(int32_t mode, int64_t bits, int32_t offset,
                       int32_t width, int32_t site);
/// Whether the calling lane's shuffle reads another lane (PTX's predicate).
int32_t segsim_shuffle_valid(int32_t mode, int32_t offset, int32_t width);
/// PTX `vote.ballot.sync`: bit l is set if lane l of `mask` has `predicate`.
int32_t segsim_ballot(int32_t mask, int32_t predicate, int32_t site);
/// `bar.sync 0`: waits for every live thread of the block.
void segsim_barrier(int32_t site);
/// Before every global load or store of `bytes` at `address` (traced if
/// tracing is on).
void segsim_access(int64_t address, int32_t bytes, int32_t isStore,
                   int32_t site);
}

#endif // SEGRT_GPUSIMULATOR_H
