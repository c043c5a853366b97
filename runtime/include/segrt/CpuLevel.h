//===- CpuLevel.h - which host kernel build this CPU runs -------*- C++ -*-===//
//
// The op library's host kernels are compiled once per x86-64 level
// (x86-64-v2: SSE4.2; x86-64-v3: AVX2, FMA, BMI2; x86-64-v4: AVX-512); the
// loader takes the best build the running CPU supports.
//
//===----------------------------------------------------------------------===//

#ifndef SEGRT_CPULEVEL_H
#define SEGRT_CPULEVEL_H

#include <string>

namespace segrt {

/// Whether this CPU (and its operating system, for the wider registers' state)
/// runs code compiled for the LLVM CPU `level`: one of "x86-64",
/// "x86-64-v2", "x86-64-v3", "x86-64-v4"; false for any other name.
bool cpuSupports(const std::string &level);

} // namespace segrt

#endif // SEGRT_CPULEVEL_H
