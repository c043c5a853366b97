//===- CpuLevel.cpp - which host kernel build this CPU runs ---------------===//

#include "segrt/CpuLevel.h"

bool segrt::cpuSupports(const std::string &level) {
#if defined(__x86_64__)
  // The compiler's runtime reads CPUID (and XGETBV: whether the operating
  // system saves the AVX registers) once; the level names need GCC 12 or
  // Clang 16.
  __builtin_cpu_init();
  if (level == "x86-64")
    return true;
  if (level == "x86-64-v2")
    return __builtin_cpu_supports("x86-64-v2");
  if (level == "x86-64-v3")
    return __builtin_cpu_supports("x86-64-v3");
  if (level == "x86-64-v4")
    return __builtin_cpu_supports("x86-64-v4");
#else
  (void)level;
#endif
  return false;
}
