//===- BufferCache.h - reusing large host output buffers -------*- C++ -*-===//
//
// A large host buffer freed back to the system (glibc maps every allocation
// above 32 MiB afresh) costs its next owner a page fault and the kernel's
// zeroing of every page on first touch: as much as the kernel writing it, for
// ops that write a row per input row. The cache keeps such buffers after
// their tensors die and hands them to the next output of the same size, as
// PyTorch's CUDA caching allocator does for device memory; unlike it, it
// holds at most a set number of bytes, releasing the least recently freed
// buffers first.
//
// c10's CPUCachingAllocator is not used: it is a mobile-only beta, keeps
// every size it ever saw, and has no bound.
//
//===----------------------------------------------------------------------===//
#ifndef SEGRT_BUFFERCACHE_H
#define SEGRT_BUFFERCACHE_H

#include <cstddef>
#include <cstdint>
#include <mutex>
#include <unordered_map>
#include <vector>

namespace segrt {

class HostBufferCache {
public:
  struct Stats {
    size_t cachedBytes = 0; // held for reuse, owned by nobody
    size_t cachedBuffers = 0;
    size_t liveBytes = 0; // handed out, not yet released
    size_t limitBytes = 0;
    uint64_t hits = 0;   // allocations served from the cache
    uint64_t misses = 0; // allocations mapped afresh
  };

  /// Buffers are whole 2 MiB huge pages, aligned to one and hinted for
  /// transparent huge pages.
  static constexpr size_t kGranule = size_t(2) << 20;

  explicit HostBufferCache(size_t limitBytes) : limit(limitBytes) {}
  HostBufferCache(const HostBufferCache &) = delete;
  HostBufferCache &operator=(const HostBufferCache &) = delete;
  ~HostBufferCache();

  /// A buffer of at least `bytes` bytes, kGranule-aligned, its content
  /// undefined: a cached one no more than a quarter larger, else a fresh
  /// mapping. nullptr if the system has no memory left.
  void *allocate(size_t bytes);
  /// Gives back a buffer from allocate(): kept for reuse within the limit.
  void release(void *data);
  /// Returns every cached buffer to the system.
  void empty();
  /// Sets the limit on cached bytes (0: cache nothing), releasing the least
  /// recently freed buffers above it.
  void setLimit(size_t bytes);
  Stats stats() const;

  /// Locks and unlocks the cache around fork(), so that a child never
  /// inherits it locked by a thread that did not follow.
  void lockForFork() { mutex.lock(); }
  void unlockAfterFork() { mutex.unlock(); }

private:
  struct CachedBuffer {
    void *data;
    size_t bytes;
    uint64_t freedAt; // tick of its release: the oldest is evicted first
  };

  /// Releases cached buffers, oldest first, until `incoming` more bytes fit
  /// under the limit. Requires the mutex.
  void evictFor(size_t incoming);

  mutable std::mutex mutex;
  size_t limit;
  size_t cachedBytes = 0;
  size_t liveBytes = 0;
  uint64_t tick = 0;
  uint64_t hits = 0;
  uint64_t misses = 0;
  std::vector<CachedBuffer> cached;
  std::unordered_map<void *, size_t> live; // data -> mapped bytes
};

/// The process's cache of host output buffers (never destroyed: tensors may
/// outlive static destruction; fork-safe). Its initial limit is
/// kDefaultOutputCacheLimit, or less on machines with under 8 GiB of memory
/// (an eighth of it).
HostBufferCache &hostOutputCache();

constexpr size_t kDefaultOutputCacheLimit = size_t(1) << 30;

} // namespace segrt

#endif // SEGRT_BUFFERCACHE_H
