//===- Cuda.cpp - loading and launching PTX through the driver API --------===//

#include "segrt/Cuda.h"
#include "segrt/Error.h"

#include <mutex>
#include <unordered_map>

#ifdef SEGRT_ENABLE_CUDA
#include <cuda.h>
#include <dlfcn.h>

using namespace segrt;

namespace {
/// The driver entry points segrt uses, resolved from libcuda.so.1.
struct Driver {
  decltype(&::cuInit) init = nullptr;
  decltype(&::cuGetErrorString) getErrorString = nullptr;
  decltype(&::cuDeviceGet) deviceGet = nullptr;
  decltype(&::cuDevicePrimaryCtxRetain) primaryCtxRetain = nullptr;
  decltype(&::cuDevicePrimaryCtxRelease) primaryCtxRelease = nullptr;
  decltype(&::cuCtxGetCurrent) ctxGetCurrent = nullptr;
  decltype(&::cuCtxSetCurrent) ctxSetCurrent = nullptr;
  decltype(&::cuModuleLoadDataEx) moduleLoadDataEx = nullptr;
  decltype(&::cuModuleUnload) moduleUnload = nullptr;
  decltype(&::cuModuleGetFunction) moduleGetFunction = nullptr;
  decltype(&::cuLaunchKernel) launchKernel = nullptr;
  std::string unavailable; // empty when loaded

  Driver() {
    void *handle = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!handle) {
      unavailable = std::string("the CUDA driver (libcuda.so.1) cannot be "
                                "loaded: ") +
                    dlerror();
      return;
    }
    bool complete =
        resolve(handle, "cuInit", init) &&
        resolve(handle, "cuGetErrorString", getErrorString) &&
        resolve(handle, "cuDeviceGet", deviceGet) &&
        resolve(handle, "cuDevicePrimaryCtxRetain", primaryCtxRetain) &&
        resolve(handle, "cuDevicePrimaryCtxRelease_v2", primaryCtxRelease) &&
        resolve(handle, "cuCtxGetCurrent", ctxGetCurrent) &&
        resolve(handle, "cuCtxSetCurrent", ctxSetCurrent) &&
        resolve(handle, "cuModuleLoadDataEx", moduleLoadDataEx) &&
        resolve(handle, "cuModuleUnload", moduleUnload) &&
        resolve(handle, "cuModuleGetFunction", moduleGetFunction) &&
        resolve(handle, "cuLaunchKernel", launchKernel);
    if (!complete)
      return;
    CUresult status = init(0);
    if (status != CUDA_SUCCESS)
      unavailable = "cuInit failed: " + describe(status);
  }

  template <typename Fn>
  bool resolve(void *handle, const char *name, Fn &slot) {
    slot = reinterpret_cast<Fn>(dlsym(handle, name));
    if (!slot)
      unavailable = std::string("the CUDA driver lacks ") + name;
    return slot != nullptr;
  }

  std::string describe(CUresult status) const {
    const char *text = nullptr;
    if (getErrorString && getErrorString(status, &text) == CUDA_SUCCESS && text)
      return text;
    return "CUDA error " + std::to_string(static_cast<int>(status));
  }

  void check(CUresult status, const char *what) const {
    if (status != CUDA_SUCCESS)
      throw Error(std::string("segrt: ") + what + ": " + describe(status));
  }
};

const Driver &driver() {
  static const Driver instance;
  return instance;
}

const Driver &requireDriver() {
  const Driver &d = driver();
  if (!d.unavailable.empty())
    throw Error("segrt: CUDA is unavailable: " + d.unavailable);
  return d;
}
} // namespace

bool segrt::cudaAvailable() { return driver().unavailable.empty(); }

std::string segrt::cudaUnavailableReason() { return driver().unavailable; }

struct CudaModule::Impl {
  CUdevice device = 0;
  CUcontext context = nullptr;
  CUmodule module = nullptr;
  std::mutex mutex;
  std::unordered_map<std::string, CUfunction> functions;

  CUfunction function(const std::string &name) {
    std::lock_guard<std::mutex> lock(mutex);
    auto it = functions.find(name);
    if (it != functions.end())
      return it->second;
    CUfunction fn = nullptr;
    requireDriver().check(
        requireDriver().moduleGetFunction(&fn, module, name.c_str()),
        ("looking up kernel '" + name + "'").c_str());
    functions.emplace(name, fn);
    return fn;
  }
};

/// Makes `context` current on this thread if it is not already (PyTorch uses
/// the same primary context, so this is normally a no-op).
static void makeCurrent(const Driver &d, CUcontext context) {
  CUcontext current = nullptr;
  d.check(d.ctxGetCurrent(&current), "querying the current context");
  if (current != context)
    d.check(d.ctxSetCurrent(context), "setting the current context");
}

CudaModule::CudaModule(int device, const std::string &ptx)
    : impl(std::make_unique<Impl>()), deviceOrdinal(device) {
  const Driver &d = requireDriver();
  d.check(d.deviceGet(&impl->device, device), "selecting the device");
  d.check(d.primaryCtxRetain(&impl->context, impl->device),
          "retaining the primary context");
  makeCurrent(d, impl->context);
  // Ask for the JIT's own log so that a PTX rejected by the driver says why.
  char log[4096] = {0};
  CUjit_option options[] = {CU_JIT_ERROR_LOG_BUFFER,
                            CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES};
  void *values[] = {log, reinterpret_cast<void *>(sizeof(log))};
  CUresult status =
      d.moduleLoadDataEx(&impl->module, ptx.c_str(), 2, options, values);
  if (status != CUDA_SUCCESS) {
    d.primaryCtxRelease(impl->device);
    throw Error("segrt: loading PTX failed: " + d.describe(status) +
                (log[0] ? std::string(": ") + log : std::string()));
  }
}

CudaModule::~CudaModule() {
  const Driver &d = driver();
  if (impl->module)
    d.moduleUnload(impl->module);
  if (impl->context)
    d.primaryCtxRelease(impl->device);
}

void CudaModule::launch(const std::string &name, uint32_t gridX,
                        uint32_t blockX, uintptr_t stream,
                        const std::vector<uintptr_t> &pointers,
                        const std::vector<int64_t> &sizes) {
  const Driver &d = requireDriver();
  CUfunction fn = impl->function(name);
  std::vector<void *> params;
  params.reserve(pointers.size() + sizes.size());
  // cuLaunchKernel takes the address of each parameter's value.
  for (const uintptr_t &pointer : pointers)
    params.push_back(const_cast<uintptr_t *>(&pointer));
  for (const int64_t &size : sizes)
    params.push_back(const_cast<int64_t *>(&size));
  makeCurrent(d, impl->context);
  d.check(d.launchKernel(fn, gridX, 1, 1, blockX, 1, 1, /*sharedMemBytes=*/0,
                         reinterpret_cast<CUstream>(stream), params.data(),
                         nullptr),
          ("launching kernel '" + name + "'").c_str());
}

#else // !SEGRT_ENABLE_CUDA

using namespace segrt;

static const char *kNoCuda = "segrt was built without CUDA support "
                             "(SEGOPS_ENABLE_CUDA=OFF or no cuda.h)";

bool segrt::cudaAvailable() { return false; }
std::string segrt::cudaUnavailableReason() { return kNoCuda; }

struct CudaModule::Impl {};
CudaModule::CudaModule(int device, const std::string &)
    : deviceOrdinal(device) {
  throw Error(std::string("segrt: ") + kNoCuda);
}
CudaModule::~CudaModule() = default;
void CudaModule::launch(const std::string &, uint32_t, uint32_t, uintptr_t,
                        const std::vector<uintptr_t> &,
                        const std::vector<int64_t> &) {
  throw Error(std::string("segrt: ") + kNoCuda);
}

#endif // SEGRT_ENABLE_CUDA
