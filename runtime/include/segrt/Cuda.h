//===- Cuda.h - loading and launching kernels through the driver API -*- C++ -*-===//
//
// The CUDA driver is opened with dlopen("libcuda.so.1") on first use, so code
// linking segrt builds, loads and runs on machines without a GPU or driver;
// there, every CUDA entry point throws segrt::Error saying why.
//
// The same module and launch code also runs over a stand-in for the few
// driver entry points segrt calls (CudaBackend::Simulator): module load,
// function lookup and launch, backed by host memory and the SIMT simulator
// (segrt/GpuSimulator.h). Tests on machines without a GPU run the shipped
// launcher that way; only the driver itself differs.
//
//===----------------------------------------------------------------------===//

#ifndef SEGRT_CUDA_H
#define SEGRT_CUDA_H

#include "segrt/KernelABI.h"

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace segrt {

/// Which driver a CudaModule calls.
enum class CudaBackend {
  /// libcuda.so.1: the image is PTX.
  Driver,
  /// The simulated driver: the image is a simulatorImage(); pointers are
  /// host addresses, and streams are ignored (launches run at once).
  Simulator,
};

/// A simulated driver's module image: the simulated kernels of `library`
/// (a shared object linked with the simulator, as libsegops_gpusim.so), and
/// kernels already loaded elsewhere at `addresses` (programs compiled at run
/// time, whose simulator calls resolve in `library`).
std::string simulatorImage(const std::string &library,
                           const std::map<std::string, uintptr_t> &addresses =
                               {});

/// True if the driver library loaded and initialized; otherwise
/// cudaUnavailableReason() says why.
bool cudaAvailable();
std::string cudaUnavailableReason();

/// An image loaded into one device's primary context, with a cache of its
/// kernels. The driver compiles PTX for the device when it is loaded.
class CudaModule {
public:
  CudaModule(int device, const std::string &image,
             CudaBackend backend = CudaBackend::Driver);
  ~CudaModule();
  CudaModule(const CudaModule &) = delete;
  CudaModule &operator=(const CudaModule &) = delete;

  /// Launches kernel `name`: its buffers' `pointers` (device addresses),
  /// then the `trailing` arguments of its entry point, on `stream` (a
  /// CUstream, 0 for the legacy default stream). Does not synchronize.
  void launch(const std::string &name, uint32_t gridX, uint32_t blockX,
              uintptr_t stream, const std::vector<uintptr_t> &pointers,
              const abi::TrailingArguments &trailing);

  int device() const { return deviceOrdinal; }
  CudaBackend backend() const { return backendKind; }

private:
  struct Impl;
  std::unique_ptr<Impl> impl;
  int deviceOrdinal;
  CudaBackend backendKind;
};

} // namespace segrt

#endif // SEGRT_CUDA_H
