//===- Memory.h - hints for host output buffers -----------------*- C++ -*-===//
#ifndef SEGRT_MEMORY_H
#define SEGRT_MEMORY_H

#include <cstddef>

namespace segrt {

/// Buffers from this size on get the hint below: fresh mappings, which every
/// call faults in page by page.
constexpr size_t kHugePageMinBytes = size_t(8) << 20;

/// Asks the kernel to back the whole 2 MiB pages inside [data, data + bytes)
/// with transparent huge pages (Linux `madvise(MADV_HUGEPAGE)`), if the
/// buffer has at least kHugePageMinBytes: the first touch then costs 512x
/// fewer page faults. Only a hint: does nothing where unsupported.
void adviseHugePages(void *data, size_t bytes);

} // namespace segrt

#endif // SEGRT_MEMORY_H
