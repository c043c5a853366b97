//===- BufferCache.cpp - reusing large host output buffers ----------------===//

#include "segrt/BufferCache.h"
#include "segrt/Memory.h"

#include <algorithm>
#include <cstdlib>
#if defined(__linux__)
#include <pthread.h>
#include <sys/mman.h>
#include <unistd.h>
#endif

using namespace segrt;

static size_t roundUp(size_t bytes, size_t granule) {
  return (bytes + granule - 1) / granule * granule;
}

/// `bytes` (a multiple of kGranule) of fresh memory at a kGranule boundary,
/// so that every page of it can be a huge page; nullptr if none is left.
static void *mapBuffer(size_t bytes) {
  constexpr size_t granule = HostBufferCache::kGranule;
#if defined(__linux__)
  size_t padded = bytes + granule;
  void *mapped = mmap(nullptr, padded, PROT_READ | PROT_WRITE,
                      MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (mapped == MAP_FAILED)
    return nullptr;
  uintptr_t begin = reinterpret_cast<uintptr_t>(mapped);
  uintptr_t aligned = roundUp(begin, granule);
  // Unmap the slack on both sides of the aligned range.
  if (aligned > begin)
    munmap(mapped, aligned - begin);
  size_t tail = begin + padded - (aligned + bytes);
  if (tail > 0)
    munmap(reinterpret_cast<void *>(aligned + bytes), tail);
  void *data = reinterpret_cast<void *>(aligned);
  adviseHugePages(data, bytes);
  return data;
#else
  return std::aligned_alloc(granule, bytes);
#endif
}

static void unmapBuffer(void *data, size_t bytes) {
#if defined(__linux__)
  munmap(data, bytes);
#else
  (void)bytes;
  std::free(data);
#endif
}

HostBufferCache::~HostBufferCache() {
  empty();
  // Live buffers belong to their tensors, which release them into a cache
  // that must then still exist: hostOutputCache() is never destroyed.
}

void *HostBufferCache::allocate(size_t bytes) {
  size_t wanted = roundUp(std::max<size_t>(bytes, 1), kGranule);
  {
    std::lock_guard<std::mutex> lock(mutex);
    // The smallest cached buffer that fits without wasting over a quarter.
    auto best = cached.end();
    for (auto it = cached.begin(); it != cached.end(); ++it)
      if (it->bytes >= wanted && it->bytes <= wanted + wanted / 4 &&
          (best == cached.end() || it->bytes < best->bytes))
        best = it;
    if (best != cached.end()) {
      void *data = best->data;
      size_t mapped = best->bytes;
      cached.erase(best);
      cachedBytes -= mapped;
      live.emplace(data, mapped);
      liveBytes += mapped;
      ++hits;
      return data;
    }
    ++misses;
  }
  // Mapped outside the lock: the system call may take a while.
  void *data = mapBuffer(wanted);
  if (!data)
    return nullptr;
  std::lock_guard<std::mutex> lock(mutex);
  live.emplace(data, wanted);
  liveBytes += wanted;
  return data;
}

void HostBufferCache::release(void *data) {
  size_t bytes;
  {
    std::lock_guard<std::mutex> lock(mutex);
    auto it = live.find(data);
    if (it == live.end())
      return; // not ours: nothing we may free
    bytes = it->second;
    live.erase(it);
    liveBytes -= bytes;
    if (bytes <= limit) {
      evictFor(bytes);
      cached.push_back({data, bytes, ++tick});
      cachedBytes += bytes;
      return;
    }
  }
  unmapBuffer(data, bytes);
}

void HostBufferCache::evictFor(size_t incoming) {
  while (!cached.empty() && cachedBytes + incoming > limit) {
    auto oldest =
        std::min_element(cached.begin(), cached.end(),
                         [](const CachedBuffer &a, const CachedBuffer &b) {
                           return a.freedAt < b.freedAt;
                         });
    unmapBuffer(oldest->data, oldest->bytes);
    cachedBytes -= oldest->bytes;
    cached.erase(oldest);
  }
}

void HostBufferCache::empty() {
  std::lock_guard<std::mutex> lock(mutex);
  for (const CachedBuffer &buffer : cached)
    unmapBuffer(buffer.data, buffer.bytes);
  cached.clear();
  cachedBytes = 0;
}

void HostBufferCache::setLimit(size_t bytes) {
  std::lock_guard<std::mutex> lock(mutex);
  limit = bytes;
  evictFor(0);
}

HostBufferCache::Stats HostBufferCache::stats() const {
  std::lock_guard<std::mutex> lock(mutex);
  Stats stats;
  stats.cachedBytes = cachedBytes;
  stats.cachedBuffers = cached.size();
  stats.liveBytes = liveBytes;
  stats.limitBytes = limit;
  stats.hits = hits;
  stats.misses = misses;
  return stats;
}

static size_t defaultLimit() {
  size_t limit = kDefaultOutputCacheLimit;
#if defined(__linux__)
  long pages = sysconf(_SC_PHYS_PAGES), pageBytes = sysconf(_SC_PAGESIZE);
  if (pages > 0 && pageBytes > 0)
    limit = std::min(limit, size_t(pages) * size_t(pageBytes) / 8);
#endif
  return limit;
}

HostBufferCache &segrt::hostOutputCache() {
  static HostBufferCache *cache = [] {
    auto *created = new HostBufferCache(defaultLimit());
#if defined(__linux__)
    pthread_atfork([] { hostOutputCache().lockForFork(); },
                   [] { hostOutputCache().unlockAfterFork(); },
                   [] { hostOutputCache().unlockAfterFork(); });
#endif
    return created;
  }();
  return *cache;
}
