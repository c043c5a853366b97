//===- SimulatedCudaDriver.h - the driver entry points segrt uses, simulated ===//
//
// Stand-ins with the CUDA driver's signatures for the entry points Cuda.cpp
// resolves from libcuda.so.1. One device (0) with one context; a module is a
// simulatorImage() (the simulated kernels' library, and kernels loaded at
// given addresses); a launch runs the kernel at once on the SIMT simulator of
// that library (segsim_launch), on host memory, and takes its arguments as
// one packed buffer of 64-bit values (cuLaunchKernel's `extra`), which is how
// Cuda.cpp passes them to the real driver too.
//
//===----------------------------------------------------------------------===//

#ifndef SEGRT_LIB_SIMULATEDCUDADRIVER_H
#define SEGRT_LIB_SIMULATEDCUDADRIVER_H

#include <cuda.h>

namespace segrt::simulated {

CUresult init(unsigned flags);
CUresult getErrorString(CUresult status, const char **text);
CUresult deviceGet(CUdevice *device, int ordinal);
CUresult primaryCtxRetain(CUcontext *context, CUdevice device);
CUresult primaryCtxRelease(CUdevice device);
CUresult ctxGetCurrent(CUcontext *context);
CUresult ctxSetCurrent(CUcontext context);
CUresult moduleLoadDataEx(CUmodule *module, const void *image,
                          unsigned numOptions, CUjit_option *options,
                          void **values);
CUresult moduleUnload(CUmodule module);
CUresult moduleGetFunction(CUfunction *function, CUmodule module,
                           const char *name);
CUresult launchKernel(CUfunction function, unsigned gridX, unsigned gridY,
                      unsigned gridZ, unsigned blockX, unsigned blockY,
                      unsigned blockZ, unsigned sharedBytes, CUstream stream,
                      void **params, void **extra);

} // namespace segrt::simulated

#endif // SEGRT_LIB_SIMULATEDCUDADRIVER_H
