//===- Memory.cpp - hints for host output buffers -------------------------===//

#include "segrt/Memory.h"

#include <cstdint>
#if defined(__linux__)
#include <sys/mman.h>
#endif

void segrt::adviseHugePages(void *data, size_t bytes) {
#if defined(__linux__) && defined(MADV_HUGEPAGE)
  if (bytes < kHugePageMinBytes)
    return;
  constexpr uintptr_t kHugePage = uintptr_t(2) << 20;
  uintptr_t begin =
      (reinterpret_cast<uintptr_t>(data) + kHugePage - 1) & ~(kHugePage - 1);
  uintptr_t end =
      (reinterpret_cast<uintptr_t>(data) + bytes) & ~(kHugePage - 1);
  if (end > begin)
    // Failure (e.g. THP disabled) leaves ordinary pages: nothing to report.
    (void)madvise(reinterpret_cast<void *>(begin), end - begin, MADV_HUGEPAGE);
#else
  (void)data;
  (void)bytes;
#endif
}
