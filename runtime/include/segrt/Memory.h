//===- Memory.h - hints for host output buffers -----------------*- C++ -*-===//
#ifndef SEGRT_MEMORY_H
#define SEGRT_MEMORY_H

#include <cstddef>

namespace segrt {

/// Asks the kernel to back the whole 2 MiB pages inside [data, data + bytes)
/// with transparent huge pages (Linux `madvise(MADV_HUGEPAGE)`). Large
/// outputs are fresh mappings that every call faults in page by page; with
/// huge pages the first touch costs 512x fewer faults. Only a hint: does
/// nothing where unsupported or for buffers smaller than a huge page.
void adviseHugePages(void *data, size_t bytes);

} // namespace segrt

#endif // SEGRT_MEMORY_H
