//===- SimulatedCudaDriver.cpp - the driver entry points segrt uses, simulated ===//

// Built with the CUDA headers only (their types are the driver's).
#ifdef SEGRT_ENABLE_CUDA
#include "SimulatedCudaDriver.h"

#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <sstream>
#include <string>

#include <dlfcn.h>

namespace {
/// segsim_launch (segrt/GpuSimulator.h), resolved in the module's library.
using LaunchFn = int (*)(void *, const uint64_t *, int, const int64_t *, int,
                         int64_t, int64_t, int, char *, size_t);

struct SimulatedFunction {
  void *entry = nullptr;
  LaunchFn launch = nullptr;
};

struct SimulatedModule {
  void *library = nullptr;
  LaunchFn launch = nullptr;
  std::map<std::string, uintptr_t> addresses;
  std::mutex mutex;
  std::map<std::string, std::unique_ptr<SimulatedFunction>> functions;
};

/// Any non-null value: the one context of the one device.
int contextTag;
thread_local CUcontext currentContext = nullptr;
/// What the last failed call on this thread said, and its status, for
/// getErrorString.
thread_local std::string lastError;
thread_local CUresult lastStatus = CUDA_SUCCESS;

CUresult fail(CUresult status, std::string message) {
  lastError = std::move(message);
  lastStatus = status;
  return status;
}
} // namespace

namespace segrt::simulated {

CUresult init(unsigned) { return CUDA_SUCCESS; }

CUresult getErrorString(CUresult status, const char **text) {
  if (status != CUDA_SUCCESS && status == lastStatus) {
    *text = lastError.c_str();
    return CUDA_SUCCESS;
  }
  *text = status == CUDA_SUCCESS ? "no error" : "simulated driver error";
  return CUDA_SUCCESS;
}

CUresult deviceGet(CUdevice *device, int ordinal) {
  if (ordinal != 0)
    return fail(CUDA_ERROR_INVALID_DEVICE,
                "the simulated driver has one device, 0, not " +
                    std::to_string(ordinal));
  *device = 0;
  return CUDA_SUCCESS;
}

CUresult primaryCtxRetain(CUcontext *context, CUdevice) {
  *context = reinterpret_cast<CUcontext>(&contextTag);
  return CUDA_SUCCESS;
}

CUresult primaryCtxRelease(CUdevice) { return CUDA_SUCCESS; }

CUresult ctxGetCurrent(CUcontext *context) {
  *context = currentContext;
  return CUDA_SUCCESS;
}

CUresult ctxSetCurrent(CUcontext context) {
  currentContext = context;
  return CUDA_SUCCESS;
}

CUresult moduleLoadDataEx(CUmodule *module, const void *image, unsigned,
                          CUjit_option *, void **) {
  // "segsim\n<library>\n" then "<name> <address>" lines (simulatorImage).
  std::istringstream lines(static_cast<const char *>(image));
  std::string magic, library;
  std::getline(lines, magic);
  std::getline(lines, library);
  if (magic != "segsim")
    return fail(CUDA_ERROR_INVALID_IMAGE,
                "the simulated driver loads simulator images, not PTX");
  auto loaded = std::make_unique<SimulatedModule>();
  loaded->library = dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!loaded->library)
    return fail(CUDA_ERROR_FILE_NOT_FOUND,
                "cannot load the simulated kernels' library " + library +
                    ": " + dlerror());
  loaded->launch =
      reinterpret_cast<LaunchFn>(dlsym(loaded->library, "segsim_launch"));
  if (!loaded->launch) {
    dlclose(loaded->library);
    return fail(CUDA_ERROR_INVALID_IMAGE,
                library + " is not linked with the GPU simulator");
  }
  std::string name;
  uintptr_t address = 0;
  while (lines >> name >> address)
    loaded->addresses[name] = address;
  *module = reinterpret_cast<CUmodule>(loaded.release());
  return CUDA_SUCCESS;
}

CUresult moduleUnload(CUmodule module) {
  auto *loaded = reinterpret_cast<SimulatedModule *>(module);
  dlclose(loaded->library);
  delete loaded;
  return CUDA_SUCCESS;
}

CUresult moduleGetFunction(CUfunction *function, CUmodule module,
                           const char *name) {
  auto &loaded = *reinterpret_cast<SimulatedModule *>(module);
  std::lock_guard<std::mutex> lock(loaded.mutex);
  auto &slot = loaded.functions[name];
  if (!slot) {
    auto it = loaded.addresses.find(name);
    void *entry = it != loaded.addresses.end()
                      ? reinterpret_cast<void *>(it->second)
                      : dlsym(loaded.library, name);
    if (!entry) {
      loaded.functions.erase(name);
      return fail(CUDA_ERROR_NOT_FOUND,
                  std::string("no simulated kernel named ") + name);
    }
    slot = std::make_unique<SimulatedFunction>(
        SimulatedFunction{entry, loaded.launch});
  }
  *function = reinterpret_cast<CUfunction>(slot.get());
  return CUDA_SUCCESS;
}

CUresult launchKernel(CUfunction function, unsigned gridX, unsigned gridY,
                      unsigned gridZ, unsigned blockX, unsigned blockY,
                      unsigned blockZ, unsigned sharedBytes, CUstream,
                      void **params, void **extra) {
  if (gridY != 1 || gridZ != 1 || blockY != 1 || blockZ != 1 ||
      sharedBytes != 0)
    return fail(CUDA_ERROR_INVALID_VALUE,
                "the simulator runs 1-D launches without dynamic shared "
                "memory");
  // The arguments: CU_LAUNCH_PARAM_BUFFER_POINTER, its size.
  const void *buffer = nullptr;
  size_t bytes = 0;
  for (void **option = extra; !params && option && *option != CU_LAUNCH_PARAM_END;
       option += 2) {
    if (option[0] == CU_LAUNCH_PARAM_BUFFER_POINTER)
      buffer = option[1];
    else if (option[0] == CU_LAUNCH_PARAM_BUFFER_SIZE)
      bytes = *static_cast<size_t *>(option[1]);
  }
  if (!buffer || bytes % sizeof(int64_t))
    return fail(CUDA_ERROR_INVALID_VALUE,
                "the simulated driver takes a launch's arguments as one "
                "buffer of 64-bit values");
  const auto &simulated = *reinterpret_cast<SimulatedFunction *>(function);
  char error[4096] = {0};
  int status = simulated.launch(
      simulated.entry, nullptr, 0, static_cast<const int64_t *>(buffer),
      static_cast<int>(bytes / sizeof(int64_t)), gridX, blockX,
      /*reverseBlocks=*/0, error, sizeof(error));
  if (status != 0)
    return fail(CUDA_ERROR_LAUNCH_FAILED, error);
  return CUDA_SUCCESS;
}

} // namespace segrt::simulated

#endif // SEGRT_ENABLE_CUDA
