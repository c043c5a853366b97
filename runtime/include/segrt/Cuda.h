//===- Cuda.h - loading and launching PTX through the driver API -*- C++
//-*-===//
//
// The CUDA driver is opened with dlopen("libcuda.so.1") on first use, so code
// linking segrt builds, loads and runs on machines without a GPU or driver;
// there, every CUDA entry point throws segrt::Error saying why.
//
//===----------------------------------------------------------------------===//

#ifndef SEGRT_CUDA_H
#define SEGRT_CUDA_H

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace segrt {

/// True if the driver library loaded and initialized; otherwise
/// cudaUnavailableReason() says why.
bool cudaAvailable();
std::string cudaUnavailableReason();

/// A PTX image loaded into one device's primary context, with a cache of its
/// kernels. The driver compiles the PTX for the device when it is loaded.
class CudaModule {
public:
  CudaModule(int device, const std::string &ptx);
  ~CudaModule();
  CudaModule(const CudaModule &) = delete;
  CudaModule &operator=(const CudaModule &) = delete;

  /// Launches kernel `name` with the segops kernel ABI: `pointers` (device
  /// addresses), then the 64-bit `sizes` (N, S, and for the kernels of a
  /// split program the partials' device address), on `stream` (a CUstream,
  /// 0 for the legacy default stream). Does not synchronize.
  void launch(const std::string &name, uint32_t gridX, uint32_t blockX,
              uintptr_t stream, const std::vector<uintptr_t> &pointers,
              const std::vector<int64_t> &sizes);

  int device() const { return deviceOrdinal; }

private:
  struct Impl;
  std::unique_ptr<Impl> impl;
  int deviceOrdinal;
};

} // namespace segrt

#endif // SEGRT_CUDA_H
