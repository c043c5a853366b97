//===- intra_op_workers.cpp - segrt's workers on PyTorch's threads --------===//
//
// The host runtime's workers run on PyTorch's intra-op thread pool: its
// threads are running already (a launch is far cheaper than starting and
// joining a thread; docs/architecture.md, "The PyTorch layer", has the
// figures), they are the threads torch.set_num_threads sizes, and segops'
// work never competes with PyTorch's own for the cores.
//
//===----------------------------------------------------------------------===//

#include "segrt/Parallel.h"
#include "torch_ops.h"

#include <ATen/Config.h>
#include <ATen/Parallel.h>

static void launchOnIntraOpPool(int numWorkers, void *context,
                                void (*call)(void *context, int worker)) {
  // Grain 1: a task per worker. Inside another parallel region PyTorch runs
  // them one after another on this thread, which is still every worker.
  at::parallel_for(0, numWorkers, 1, [&](int64_t begin, int64_t end) {
    for (int64_t worker = begin; worker < end; ++worker)
      call(context, static_cast<int>(worker));
  });
}

void segops_torch::runWorkersOnIntraOpPool() {
#if AT_PARALLEL_OPENMP && !defined(_OPENMP)
  // Built without OpenMP, at::parallel_for would run every worker on this
  // thread: keep segrt's own threads.
  return;
#endif
  segrt::setWorkerLauncher(launchOnIntraOpPool);
}
