//===- Cuda.cpp - loading and launching kernels through the driver API ----===//

#include "segrt/Cuda.h"
#include "segrt/Error.h"

#include <mutex>
#include <sstream>
#include <unordered_map>

using namespace segrt;

std::string
segrt::simulatorImage(const std::string &library,
                      const std::map<std::string, uintptr_t> &addresses) {
  std::ostringstream image;
  image << "segsim\n" << library << "\n";
  for (const auto &[name, address] : addresses)
    image << name << " " << address << "\n";
  return image.str();
}

#ifdef SEGRT_ENABLE_CUDA
#include "SimulatedCudaDriver.h"

#include <cuda.h>
#include <dlfcn.h>

namespace {
/// The driver entry points segrt uses: resolved from libcuda.so.1, or the
/// simulated driver's.
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

  struct Simulated {};
  explicit Driver(Simulated) {
    namespace sim = segrt::simulated;
    init = sim::init;
    getErrorString = sim::getErrorString;
    deviceGet = sim::deviceGet;
    primaryCtxRetain = sim::primaryCtxRetain;
    primaryCtxRelease = sim::primaryCtxRelease;
    ctxGetCurrent = sim::ctxGetCurrent;
    ctxSetCurrent = sim::ctxSetCurrent;
    moduleLoadDataEx = sim::moduleLoadDataEx;
    moduleUnload = sim::moduleUnload;
    moduleGetFunction = sim::moduleGetFunction;
    launchKernel = sim::launchKernel;
  }

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

const Driver &simulatedDriver() {
  static const Driver instance{Driver::Simulated{}};
  return instance;
}

const Driver &requireDriver(CudaBackend backend) {
  if (backend == CudaBackend::Simulator)
    return simulatedDriver();
  const Driver &d = driver();
  if (!d.unavailable.empty())
    throw Error("segrt: CUDA is unavailable: " + d.unavailable);
  return d;
}
} // namespace

bool segrt::cudaAvailable() { return driver().unavailable.empty(); }

std::string segrt::cudaUnavailableReason() { return driver().unavailable; }

struct CudaModule::Impl {
  const Driver *driver = nullptr;
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
    driver->check(driver->moduleGetFunction(&fn, module, name.c_str()),
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

CudaModule::CudaModule(int device, const std::string &image,
                       CudaBackend backend)
    : impl(std::make_unique<Impl>()), deviceOrdinal(device),
      backendKind(backend) {
  const Driver &d = requireDriver(backend);
  impl->driver = &d;
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
      d.moduleLoadDataEx(&impl->module, image.c_str(), 2, options, values);
  if (status != CUDA_SUCCESS) {
    d.primaryCtxRelease(impl->device);
    throw Error("segrt: loading the kernels failed: " + d.describe(status) +
                (log[0] ? std::string(": ") + log : std::string()));
  }
}

CudaModule::~CudaModule() {
  const Driver &d = *impl->driver;
  if (impl->module)
    d.moduleUnload(impl->module);
  if (impl->context)
    d.primaryCtxRelease(impl->device);
}

void CudaModule::launch(const std::string &name, uint32_t gridX,
                        uint32_t blockX, uintptr_t stream,
                        const std::vector<uintptr_t> &pointers,
                        const abi::TrailingArguments &trailing) {
  const Driver &d = *impl->driver;
  CUfunction fn = impl->function(name);
  // Every parameter is 64 bits wide (segrt/KernelABI.h): one packed buffer,
  // the pointers then the trailing arguments in the contract's order.
  std::vector<int64_t> arguments;
  arguments.reserve(pointers.size() + trailing.size());
  for (uintptr_t pointer : pointers)
    arguments.push_back(static_cast<int64_t>(pointer));
  arguments.insert(arguments.end(), trailing.data(),
                   trailing.data() + trailing.size());
  size_t bytes = arguments.size() * sizeof(int64_t);
  void *extra[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, arguments.data(),
                   CU_LAUNCH_PARAM_BUFFER_SIZE, &bytes, CU_LAUNCH_PARAM_END};
  makeCurrent(d, impl->context);
  d.check(d.launchKernel(fn, gridX, 1, 1, blockX, 1, 1, /*sharedMemBytes=*/0,
                         reinterpret_cast<CUstream>(stream), nullptr, extra),
          ("launching kernel '" + name + "'").c_str());
}

#else // !SEGRT_ENABLE_CUDA

static const char *kNoCuda = "segrt was built without CUDA support "
                             "(SEGOPS_ENABLE_CUDA=OFF or no cuda.h)";

bool segrt::cudaAvailable() { return false; }
std::string segrt::cudaUnavailableReason() { return kNoCuda; }

struct CudaModule::Impl {};
CudaModule::CudaModule(int device, const std::string &, CudaBackend backend)
    : deviceOrdinal(device), backendKind(backend) {
  throw Error(std::string("segrt: ") + kNoCuda);
}
CudaModule::~CudaModule() = default;
void CudaModule::launch(const std::string &, uint32_t, uint32_t, uintptr_t,
                        const std::vector<uintptr_t> &,
                        const abi::TrailingArguments &) {
  throw Error(std::string("segrt: ") + kNoCuda);
}

#endif // SEGRT_ENABLE_CUDA
