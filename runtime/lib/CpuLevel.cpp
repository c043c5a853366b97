//===- CpuLevel.cpp - which host kernel build this CPU runs ---------------===//

#include "segrt/CpuLevel.h"

// GCC 12 knows the x86-64 level names in __builtin_cpu_supports; other
// compilers get the features that set the levels apart in practice.
#if defined(__x86_64__) && !defined(__clang__) && __GNUC__ >= 12
#define SEGRT_CPU_LEVEL(level, features) __builtin_cpu_supports(level)
#else
#define SEGRT_CPU_LEVEL(level, features) (features)
#endif

bool segrt::cpuSupports(const std::string &level) {
#if defined(__x86_64__)
  // The compiler's runtime reads CPUID (and XGETBV: whether the operating
  // system saves the AVX registers) once.
  __builtin_cpu_init();
  if (level == "x86-64")
    return true;
  if (level == "x86-64-v2")
    return SEGRT_CPU_LEVEL("x86-64-v2", __builtin_cpu_supports("sse4.2") &&
                                            __builtin_cpu_supports("popcnt"));
  if (level == "x86-64-v3")
    return SEGRT_CPU_LEVEL("x86-64-v3", __builtin_cpu_supports("avx2") &&
                                            __builtin_cpu_supports("fma") &&
                                            __builtin_cpu_supports("bmi") &&
                                            __builtin_cpu_supports("bmi2"));
  if (level == "x86-64-v4")
    return SEGRT_CPU_LEVEL("x86-64-v4",
                           __builtin_cpu_supports("avx512f") &&
                               __builtin_cpu_supports("avx512bw") &&
                               __builtin_cpu_supports("avx512dq") &&
                               __builtin_cpu_supports("avx512vl"));
#else
  (void)level;
#endif
  return false;
}
