//===- OpLibrary.h - ahead-of-time compilation of kernels -------*- C++ -*-===//
//
// Turns a module of seg kernel functions into the artifacts that the runtime
// loads without MLIR: PTX text per GPU architecture, a host object file, and
// a JSON manifest describing every kernel's ABI and launch rule.
//
//===----------------------------------------------------------------------===//

#ifndef SEGOPS_TARGET_OPLIBRARY_H
#define SEGOPS_TARGET_OPLIBRARY_H

#include "mlir/IR/BuiltinOps.h"
#include "segops/Pipelines/Pipelines.h"
#include "llvm/Support/JSON.h"
#include <string>

namespace mlir {
namespace seg {

/// How compileToPTX runs LLVM on the kernels.
struct PTXCodegenOptions {
  /// Groups of kernels compiled in parallel on the context's threads (0: as
  /// many as it has). The PTX is the same for any number.
  unsigned numGroups = 0;
  /// Instead of LLVM's O<opt-level> pipeline, a short one (reassociate,
  /// early CSE, instcombine, simplifycfg, loop rotation, LICM) before code
  /// generation at O2: for
  /// run-time compilation. ptxas optimizes the PTX again; the kernels' SASS
  /// comes out about as large as after O2 (docs/benchmarks.md) in a third
  /// of the LLVM time.
  bool quickOptimization = false;
  /// ptxas, to check the PTX with (none: no check). ptxas aims for an
  /// occupancy of its own choosing, spilling registers to reach it or
  /// keeping more registers than half occupancy allows; a kernel it spills
  /// in gets a `.maxnreg` at the next occupancy step down, until it spills
  /// no more or has 255, and a kernel below half occupancy the cap of half
  /// occupancy where ptxas then spills nothing (the PTX text edited, only
  /// the kernels whose cap changed assembled again).
  std::string ptxas;
};

/// Compiles the kernel functions of `source` to PTX for `options.chip`.
FailureOr<std::string> compileToPTX(ModuleOp source,
                                    const SegToPTXOptions &options,
                                    const PTXCodegenOptions &codegen = {});

/// A CPU level the host kernels are compiled for.
struct HostTarget {
  /// The LLVM CPU name: the instructions the object may use.
  std::string cpu = "x86-64-v2";
  /// Its vector registers' bits (convert-seg-to-host's vector-bits).
  int64_t vectorBits = 128;
  /// LLVM's optimization level (1-3): the op library takes 3.
  unsigned optLevel = 3;
  /// convert-seg-to-host's interleave: 4 for the op library, 1 for
  /// run-time compilation (a third less code to compile).
  int64_t interleave = 4;
};

/// Compiles the kernel functions of `source` to a relocatable, position
/// independent object file for the host, for `target`.
FailureOr<std::string> compileToHostObject(ModuleOp source,
                                           const HostTarget &target);

/// Compiles the kernel functions of `source` for `target` into up to
/// `numParts` object files that together hold every kernel: the lowered
/// functions are split into parts of about equal size (each function whole,
/// the others declared), and LLVM optimizes and emits the parts in
/// parallel on the context's threads. For run-time compilation, where
/// LLVM's time on one large module is what a first call waits for.
FailureOr<SmallVector<std::string>>
compileToHostObjectParts(ModuleOp source, const HostTarget &target,
                         unsigned numParts);

/// compileToHostObject for each of `targets`, in parallel on the context's
/// threads (each build runs LLVM on one thread); the objects in their order.
FailureOr<SmallVector<std::string>>
compileToHostObjects(ModuleOp source, ArrayRef<HostTarget> targets);

/// Compiles the kernel functions of `source` to the GPU kernels of
/// compileToPTX, lowered instead to host code calling the SIMT simulator
/// (runtime/lib/GpuSimulator.cpp): an object file for testing the GPU
/// kernels on a machine without a GPU.
FailureOr<std::string> compileToGPUSimulatorObject(ModuleOp source,
                                                   int64_t blockSize);

/// Describes every kernel function of `source` (see SegmentProgram.h). Keys
/// `ptx` and `host` are left to the caller.
FailureOr<llvm::json::Object> buildKernelManifest(ModuleOp source,
                                                  int64_t blockSize);

} // namespace seg
} // namespace mlir

#endif // SEGOPS_TARGET_OPLIBRARY_H
