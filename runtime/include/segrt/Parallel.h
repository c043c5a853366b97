//===- Parallel.h - running a few host workers ------------------*- C++ -*-===//
//
// The host runtime's workers (a call per thread for segment kernels, the
// index check's blocks) run through a launcher the embedding application may
// install: the PyTorch extension installs PyTorch's intra-op thread pool,
// whose threads are already running (far cheaper to launch on than a thread
// started and joined per call). Without one, and in a forked
// child (whose copy of a pool has no threads), each worker but the first
// gets a thread of its own.
//
//===----------------------------------------------------------------------===//

#ifndef SEGRT_PARALLEL_H
#define SEGRT_PARALLEL_H

namespace segrt {

/// Calls `call(context, k)` once for each k in [0, numWorkers), concurrently
/// as far as it can, and returns when all calls are done.
using WorkerLauncher = void (*)(int numWorkers, void *context,
                                void (*call)(void *context, int worker));

/// Installs the launcher runWorkers uses (nullptr: a thread per worker). A
/// forked child goes back to threads of its own.
void setWorkerLauncher(WorkerLauncher launcher);

/// Whether a launcher is installed (in this process: a forked child has
/// none), whose workers' threads run already: parallel work pays from less
/// work per call than on threads started for it.
bool hasWorkerLauncher();

/// Runs `call(context, k)` for k in [0, numWorkers) with the installed
/// launcher, or on threads of their own.
void launchWorkers(int numWorkers, void *context,
                   void (*call)(void *context, int worker));

/// Calls `work(k)` for k in [0, numWorkers) (concurrently: see
/// launchWorkers) and returns when all are done.
template <typename Work> void runWorkers(int numWorkers, const Work &work) {
  if (numWorkers <= 1) {
    work(0);
    return;
  }
  launchWorkers(numWorkers, const_cast<Work *>(&work),
                [](void *context, int worker) {
                  (*static_cast<const Work *>(context))(worker);
                });
}

} // namespace segrt

#endif // SEGRT_PARALLEL_H
