//===- torch_ops_cuda.cpp - segops operators' CUDA kernels in C++ ---------===//
//
// The CUDA kernels of the segops operators, registered from C++ so that a
// call on CUDA tensors runs no Python: check the arguments against the
// kernel's buffers, allocate the outputs through PyTorch's caching allocator
// on the tensors' device, and launch the op library's PTX kernels (a split
// program's tile kernel first) on PyTorch's current stream, never
// synchronizing. The launches themselves are segrt's GPU launcher
// (runGpuCall), the code the tests run over the simulated driver. Built
// only against a PyTorch with CUDA (SEGOPS_TORCH_CUDA: the current stream
// comes from c10_cuda); elsewhere a CUDA call raises MissingKernelsError.
//
//===----------------------------------------------------------------------===//

#include "torch_ops.h"

#ifdef SEGOPS_TORCH_CUDA

#include "segrt/Cuda.h"

#include <ATen/core/stack.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include <memory>

namespace segops_torch {
namespace {

/// The CUDA kernel of one operator level (boxed: one implementation serves
/// every operator).
class CudaKernel final : public c10::OperatorKernel {
public:
  explicit CudaKernel(std::shared_ptr<const OperatorLevel> level)
      : level(std::move(level)) {}

  void operator()(const c10::OperatorHandle &, c10::DispatchKeySet,
                  torch::jit::Stack *stack) {
    OperatorCall call = takeArguments(*level, stack, c10::DeviceType::CUDA);
    // idx's content costs a host sync to check: only in debug mode (the
    // validator does it, at every level: a row map's gradient may be a
    // segment kernel); the kernels stay in bounds whatever it holds.
    if (debugChecks())
      callValidator(*level, call.floats, call.idx, call.numSegments);
    for (at::Tensor &output : runCudaCall(*level, call))
      stack->emplace_back(std::move(output));
  }

private:
  std::shared_ptr<const OperatorLevel> level;
};

} // namespace

c10::SmallVector<at::Tensor, 4> runCudaCall(const OperatorLevel &,
                                            const OperatorCall &call) {
  c10::cuda::CUDAGuard guard(call.idx.device());
  int device = call.idx.device().index();
  segrt::CudaModule &module = call.variant->gpuModules->onDevice(device);
  uintptr_t stream = reinterpret_cast<uintptr_t>(
      c10::cuda::getCurrentCUDAStream(device).stream());
  // Segment kernels walk sorted rows. Whether idx is sorted costs a sync to
  // find out, so only an index whose sorted rows were computed before (a
  // segops.Graph's senders, segops.sorted_order) runs on them.
  if (call.variant->range == segrt::HostRange::Segments)
    if (std::optional<SortedRows> known = cachedSortedRows(call.idx)) {
      BoundBuffers bound;
      runOnSortedRows(call, *known, bound, [&](BoundBuffers &buffers) {
        runGpuCall(call, buffers, module, stream);
        return segrt::IndexCheck();
      });
      return std::move(bound.outputs);
    }
  BoundBuffers bound = bindBuffers(call, kernelIndex(call.idx));
  runGpuCall(call, bound, module, stream);
  return std::move(bound.outputs);
}

bool cudaKernelsBuilt() { return true; }

void registerCudaKernel(std::shared_ptr<const OperatorLevel> level,
                        std::vector<std::unique_ptr<torch::Library>> &keep) {
  auto cuda = std::make_unique<torch::Library>(torch::Library::IMPL, "segops",
                                               c10::DispatchKey::CUDA, __FILE__,
                                               __LINE__);
  std::string name = level->qualifiedName();
  cuda->impl(name.c_str(), torch::CppFunction::makeFromBoxedFunctor(
                               std::make_unique<CudaKernel>(std::move(level))));
  keep.push_back(std::move(cuda));
}

} // namespace segops_torch

#else // !SEGOPS_TORCH_CUDA

namespace segops_torch {

bool cudaKernelsBuilt() { return false; }

void registerCudaKernel(std::shared_ptr<const OperatorLevel>,
                        std::vector<std::unique_ptr<torch::Library>> &) {}

c10::SmallVector<at::Tensor, 4> runCudaCall(const OperatorLevel &level,
                                            const OperatorCall &) {
  TORCH_CHECK(false, "segops::", level.name,
              ": this build's PyTorch has no CUDA kernels");
}

} // namespace segops_torch

#endif // SEGOPS_TORCH_CUDA
