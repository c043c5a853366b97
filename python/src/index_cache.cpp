//===- index_cache.cpp - facts derived once per index tensor --------------===//

#include "index_cache.h"

#include <c10/core/StorageImpl.h>
#include <c10/util/intrusive_ptr.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <mutex>
#include <vector>

namespace segops_torch {
namespace {

/// An index tensor's identity and the state of its content. The version
/// counter changes with every in-place write (views share their base's);
/// the storage is held weakly by the entry, so its address cannot be reused
/// by another storage while the entry lives.
struct ContentKey {
  const c10::StorageImpl *storage = nullptr;
  int64_t offset = 0, length = 0, stride = 0;
  at::ScalarType dtype = at::kInt;
  c10::Device device = c10::kCPU;
  uint32_t version = 0;

  bool operator==(const ContentKey &other) const {
    return storage == other.storage && offset == other.offset &&
           length == other.length && stride == other.stride &&
           dtype == other.dtype && device == other.device &&
           version == other.version;
  }
};

enum class Fact { SortedRows, Narrowing, Unsorted };

struct Entry {
  ContentKey key;
  c10::weak_intrusive_ptr<c10::StorageImpl> storage;
  Fact fact;
  int64_t numSegments = 0; // the narrowing's check
  at::Tensor first, second;
  uint64_t lastUse = 0;
};

// A few neighbour lists at a time (each entry holds 4-12 bytes per row).
constexpr size_t kMaxEntries = 16;

std::mutex cacheMutex;
std::vector<Entry> entries;
uint64_t clock = 0;
std::atomic<int64_t> sorts{0};

/// The key of an index whose content can be read and versioned here: a
/// dense 1-D CPU or CUDA tensor with a version counter (not an inference
/// tensor, not a fake, functional or batched one).
/// Whether `t` holds plain data on `device` (not a fake, functional or
/// batched tensor, whose data cannot be read or versioned here).
bool isPlainOn(const at::Tensor &t, c10::DispatchKey device) {
  return (t.key_set() - c10::autograd_dispatch_keyset_with_ADInplaceOrView -
          c10::autocast_dispatch_keyset) == c10::DispatchKeySet(device);
}

std::optional<ContentKey> keyOf(const at::Tensor &idx) {
  if (!idx.defined() || idx.dim() != 1 || !idx.has_storage() ||
      idx.is_inference())
    return std::nullopt;
  if (!isPlainOn(idx, c10::DispatchKey::CPU) &&
      !isPlainOn(idx, c10::DispatchKey::CUDA))
    return std::nullopt;
  ContentKey key;
  key.storage = idx.storage().unsafeGetStorageImpl();
  key.offset = idx.storage_offset();
  key.length = idx.size(0);
  key.stride = idx.stride(0);
  key.dtype = idx.scalar_type();
  key.device = idx.device();
  key.version = idx.unsafeGetTensorImpl()->version_counter().current_version();
  return key;
}

/// Drops entries whose storage was freed (caller holds the lock).
void dropFreed() {
  entries.erase(std::remove_if(entries.begin(), entries.end(),
                               [](const Entry &e) { return e.storage.expired(); }),
                entries.end());
}

Entry *find(const ContentKey &key, Fact fact, int64_t numSegments) {
  for (Entry &entry : entries)
    if (entry.fact == fact && entry.key == key &&
        entry.numSegments == numSegments && !entry.storage.expired()) {
      entry.lastUse = ++clock;
      return &entry;
    }
  return nullptr;
}

void remember(const at::Tensor &idx, Fact fact, int64_t numSegments,
              at::Tensor first, at::Tensor second) {
  std::optional<ContentKey> key = keyOf(idx);
  if (!key)
    return;
  std::lock_guard<std::mutex> lock(cacheMutex);
  dropFreed();
  // An entry of the same tensor with older content is stale.
  entries.erase(std::remove_if(entries.begin(), entries.end(),
                               [&](const Entry &e) {
                                 return e.fact == fact &&
                                        e.key.storage == key->storage &&
                                        e.key.offset == key->offset &&
                                        e.numSegments == numSegments;
                               }),
                entries.end());
  if (entries.size() >= kMaxEntries) {
    auto oldest = std::min_element(
        entries.begin(), entries.end(),
        [](const Entry &a, const Entry &b) { return a.lastUse < b.lastUse; });
    entries.erase(oldest);
  }
  entries.push_back({*key,
                     c10::weak_intrusive_ptr<c10::StorageImpl>(
                         idx.storage().getWeakStorageImpl()),
                     fact, numSegments, std::move(first), std::move(second),
                     ++clock});
}

/// Sorted rows by content: an index made anew with the content of one seen
/// before (PyG's GCNConv and GATConv append self-loops to edge_index on
/// every call) finds its sort by a hash and a comparison of its values, two
/// passes where a stable sort costs O(E log E). Host indices only.
struct ContentEntry {
  uint64_t hash = 0;
  at::Tensor values; // a copy of the int32 index the sort was of
  SortedRows rows;
  uint64_t lastUse = 0;
};

// Each entry holds 16 bytes per row (the copy, the sorted index, the order).
constexpr size_t kMaxContentEntries = 4;
std::vector<ContentEntry> contentEntries;

bool isHostInt32(const at::Tensor &t) {
  return t.scalar_type() == at::kInt && t.is_contiguous() &&
         !t.is_inference() && isPlainOn(t, c10::DispatchKey::CPU);
}

uint64_t contentHash(const at::Tensor &values) {
  const int32_t *data = values.data_ptr<int32_t>();
  uint64_t hash = 0xcbf29ce484222325ull ^ uint64_t(values.numel());
  for (int64_t i = 0, n = values.numel(); i < n; ++i)
    hash = (hash ^ uint32_t(data[i])) * 0x100000001b3ull;
  return hash;
}

/// The sorted rows remembered for an index with `values`' content (caller
/// holds the lock).
std::optional<SortedRows> findByContent(const at::Tensor &values, uint64_t hash) {
  for (ContentEntry &entry : contentEntries)
    if (entry.hash == hash && entry.values.numel() == values.numel() &&
        std::equal(values.data_ptr<int32_t>(),
                   values.data_ptr<int32_t>() + values.numel(),
                   entry.values.data_ptr<int32_t>())) {
      entry.lastUse = ++clock;
      return entry.rows;
    }
  return std::nullopt;
}

void rememberContent(const at::Tensor &values, uint64_t hash,
                     const SortedRows &rows) {
  if (contentEntries.size() >= kMaxContentEntries) {
    auto oldest = std::min_element(contentEntries.begin(), contentEntries.end(),
                                   [](const ContentEntry &a, const ContentEntry &b) {
                                     return a.lastUse < b.lastUse;
                                   });
    contentEntries.erase(oldest);
  }
  contentEntries.push_back({hash, values.clone(), rows, ++clock});
}

/// The tensor a one-tensor fact remembers for idx's content, or undefined.
at::Tensor cachedTensor(const at::Tensor &idx, Fact fact, int64_t numSegments) {
  std::optional<ContentKey> key = keyOf(idx);
  if (!key)
    return {};
  std::lock_guard<std::mutex> lock(cacheMutex);
  Entry *entry = find(*key, fact, numSegments);
  return entry ? entry->first : at::Tensor();
}

} // namespace

SortedRows sortRows(const at::Tensor &idx, const at::Tensor &kernelIdx) {
  bool byContent = isHostInt32(kernelIdx);
  uint64_t hash = byContent ? contentHash(kernelIdx) : 0;
  if (byContent) {
    std::optional<SortedRows> known;
    {
      std::lock_guard<std::mutex> lock(cacheMutex);
      known = findByContent(kernelIdx, hash);
    }
    if (known) {
      remember(idx, Fact::SortedRows, 0, known->sortedIdx, known->order);
      return *known;
    }
  }
  auto [sortedIdx, order] =
      at::sort(kernelIdx, /*stable=*/true, /*dim=*/0, /*descending=*/false);
  ++sorts;
  SortedRows rows{sortedIdx.contiguous(), order};
  remember(idx, Fact::SortedRows, 0, rows.sortedIdx, rows.order);
  if (byContent) {
    std::lock_guard<std::mutex> lock(cacheMutex);
    rememberContent(kernelIdx, hash, rows);
  }
  return rows;
}

std::optional<SortedRows> cachedSortedRows(const at::Tensor &idx) {
  std::optional<ContentKey> key = keyOf(idx);
  if (!key)
    return std::nullopt;
  std::lock_guard<std::mutex> lock(cacheMutex);
  dropFreed();
  if (Entry *entry = find(*key, Fact::SortedRows, 0))
    return SortedRows{entry->first, entry->second};
  return std::nullopt;
}

at::Tensor cachedNarrowing(const at::Tensor &idx, int64_t numSegments) {
  return cachedTensor(idx, Fact::Narrowing, numSegments);
}

void rememberNarrowing(const at::Tensor &idx, int64_t numSegments,
                       const at::Tensor &narrowed) {
  remember(idx, Fact::Narrowing, numSegments, narrowed, at::Tensor());
}

at::Tensor cachedUnsortedIndex(const at::Tensor &idx, int64_t numSegments) {
  return cachedTensor(idx, Fact::Unsorted, numSegments);
}

void rememberUnsortedIndex(const at::Tensor &idx, int64_t numSegments,
                           const at::Tensor &kernelIdx) {
  remember(idx, Fact::Unsorted, numSegments, kernelIdx, at::Tensor());
}

int64_t indexSorts() { return sorts.load(); }

void clearIndexCache() {
  std::lock_guard<std::mutex> lock(cacheMutex);
  entries.clear();
  contentEntries.clear();
}

} // namespace segops_torch
