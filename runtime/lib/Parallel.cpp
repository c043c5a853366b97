//===- Parallel.cpp - running a few host workers --------------------------===//

#include "segrt/Parallel.h"

#include <atomic>
#include <mutex>
#include <pthread.h>
#include <thread>
#include <vector>

namespace {
std::atomic<segrt::WorkerLauncher> installedLauncher{nullptr};

/// A forked child has the parent's launcher but not the threads behind it
/// (an OpenMP pool used before the fork deadlocks there): it starts threads
/// of its own.
void forgetLauncherInChild() {
  installedLauncher.store(nullptr, std::memory_order_relaxed);
}
} // namespace

void segrt::setWorkerLauncher(WorkerLauncher launcher) {
  static std::once_flag registered;
  std::call_once(registered, [] {
    pthread_atfork(nullptr, nullptr, forgetLauncherInChild);
  });
  installedLauncher.store(launcher, std::memory_order_relaxed);
}

bool segrt::hasWorkerLauncher() {
  return installedLauncher.load(std::memory_order_relaxed) != nullptr;
}

void segrt::launchWorkers(int numWorkers, void *context,
                          void (*call)(void *context, int worker)) {
  if (WorkerLauncher launcher =
          installedLauncher.load(std::memory_order_relaxed)) {
    launcher(numWorkers, context, call);
    return;
  }
  std::vector<std::thread> threads;
  for (int k = 1; k < numWorkers; ++k)
    threads.emplace_back([=] { call(context, k); });
  call(context, 0);
  for (std::thread &thread : threads)
    thread.join();
}
