//===- gpu_call.cpp - an operator call on the GPU kernels ------------------===//
//
// A call's GPU kernels through segrt's launcher: on CUDA (torch_ops_cuda.cpp
// adds the stream) or, for CPU tensors with SEGOPS_SIMULATE_GPU, over the
// simulated driver; and the modules (PTX per device, or the simulator's
// image) they are loaded from.
//
//===----------------------------------------------------------------------===//

#include "torch_ops.h"

#include "segrt/IndexCheck.h"

#include <ATen/Parallel.h>

#include <atomic>
#include <mutex>
#include <optional>

namespace segops_torch {

void runGpuCall(const OperatorCall &call, const BoundBuffers &bound,
                segrt::CudaModule &module, uintptr_t stream) {
  const segrt::GpuProgram &program = call.variant->gpu;
  int64_t numRows = call.idx.size(0), numSegments = call.numSegments;
  if (numRows == 0 && numSegments == 0)
    return;
  // The long-segment kernels' scratch: on CUDA from the caching allocator,
  // freed on return and reused only by work queued after these launches on
  // this stream (it is stream-ordered); simulated, 0xff bytes (NaN floats,
  // -1 integers), so that a kernel reading what was never written shows.
  at::Tensor scratch;
  if (int64_t bytes = program.scratchBytes(numRows, numSegments)) {
    auto options = at::TensorOptions().dtype(at::kByte).device(call.idx.device());
    scratch = call.idx.is_cpu() ? at::full({bytes}, 255, options)
                                : at::empty({bytes}, options);
  }
  segrt::launchGpuProgram(
      module, program, stream, bound.pointers, numRows, numSegments,
      scratch.defined() ? reinterpret_cast<uintptr_t>(scratch.data_ptr()) : 0);
}

void GpuModules::setPtxSource(PtxSource source) {
  std::lock_guard<std::mutex> lock(mutex);
  ptxSource = std::move(source);
}

void GpuModules::setSimulatorImage(const std::string &image) {
  std::lock_guard<std::mutex> lock(mutex);
  if (image.empty())
    simulator.release(); // kernels of it may still be queued: never unloaded
  else
    simulator = std::make_unique<segrt::CudaModule>(
        0, image, segrt::CudaBackend::Simulator);
}

segrt::CudaModule &GpuModules::onDevice(int device) {
  std::lock_guard<std::mutex> lock(mutex);
  auto it = modules.find(device);
  if (it != modules.end())
    return *it->second;
  TORCH_CHECK(ptxSource, "segops: no PTX source was set for these kernels");
  auto module = std::make_unique<segrt::CudaModule>(device, ptxSource(device));
  return *modules.emplace(device, std::move(module)).first->second;
}

segrt::CudaModule *GpuModules::simulated() {
  std::lock_guard<std::mutex> lock(mutex);
  return simulator.get();
}

std::shared_ptr<GpuModules> libraryGpuModules() {
  // Never destroyed: kernels may run until exit.
  static auto *modules =
      new std::shared_ptr<GpuModules>(std::make_shared<GpuModules>());
  return *modules;
}

/// The GPU kernels of `call` on the simulated driver's `module`.
static c10::SmallVector<at::Tensor, 4>
runSimulatedCall(const OperatorLevel &level, const OperatorCall &call,
                 segrt::CudaModule &module) {
  const at::Tensor &idx = call.idx;
  int64_t numRows = idx.size(0), numSegments = call.numSegments;
  at::Tensor kernelIdx = kernelIndex(idx);
  // Range first, over every row (a descent must not hide a value out of
  // range), then order where the kernel needs it.
  auto check = [&](bool requireSorted) {
    return segrt::checkIndex(kernelIdx.data_ptr<int32_t>(), /*is64Bit=*/false,
                             numRows, numSegments, at::get_num_threads(),
                             requireSorted);
  };
  if (check(false).problem != segrt::IndexProblem::None)
    reportInvalid(level, call.floats, idx, numSegments, "idx is out of range");
  bool unsorted = call.variant->range == segrt::HostRange::Segments &&
                  check(true).problem != segrt::IndexProblem::None;
  BoundBuffers bound = bindBuffers(call, kernelIdx);
  auto run = [&](BoundBuffers &buffers) {
    runGpuCall(call, buffers, module, /*stream=*/0);
    return segrt::IndexCheck();
  };
  // GPU segment kernels walk sorted rows, as the host's do.
  if (unsorted) {
    std::optional<SortedRows> known = cachedSortedRows(idx);
    runOnSortedRows(call, known ? *known : sortRows(idx, bound.kernelIdx),
                    bound, run);
  }
  else
    run(bound);
  return std::move(bound.outputs);
}

c10::SmallVector<at::Tensor, 4> runCpuCall(const OperatorLevel &level,
                                           const OperatorCall &call) {
  if (segrt::CudaModule *simulated = call.variant->gpuModules->simulated())
    return runSimulatedCall(level, call, *simulated);
  return runHostCall(level, call);
}

namespace {
std::atomic<bool> debugChecksEnabled{false};
} // namespace

void setDebugChecks(bool enabled) { debugChecksEnabled = enabled; }
bool debugChecks() { return debugChecksEnabled; }

} // namespace segops_torch
