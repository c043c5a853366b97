//===- Parallel.h - running a few host workers ------------------*- C++ -*-===//
#ifndef SEGRT_PARALLEL_H
#define SEGRT_PARALLEL_H

#include <thread>
#include <vector>

namespace segrt {

/// Calls `work(k)` for k in [0, numWorkers): k = 0 on the calling thread, the
/// others on threads of their own, and returns when all are done.
template <typename Work> void runWorkers(int numWorkers, const Work &work) {
  std::vector<std::thread> threads;
  for (int k = 1; k < numWorkers; ++k)
    threads.emplace_back([&work, k] { work(k); });
  work(0);
  for (std::thread &thread : threads)
    thread.join();
}

} // namespace segrt

#endif // SEGRT_PARALLEL_H
