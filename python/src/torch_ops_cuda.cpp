//===- torch_ops_cuda.cpp - segops operators' CUDA kernels in C++ ---------===//
//
// The CUDA kernels of the segops operators, registered from C++ so that a
// call on CUDA tensors runs no Python: check the arguments against the
// kernel's buffers, allocate the outputs through PyTorch's caching allocator
// on the tensors' device, and launch the op library's PTX kernels (a split
// program's tile kernel first) on PyTorch's current stream, never
// synchronizing. Built only against a PyTorch with CUDA (SEGOPS_TORCH_CUDA:
// the current stream comes from c10_cuda); elsewhere ops.py registers its
// Python CUDA kernels instead.
//
//===----------------------------------------------------------------------===//

#include "torch_ops.h"

#ifdef SEGOPS_TORCH_CUDA

#include "segrt/Cuda.h"

#include <ATen/core/stack.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include <pybind11/pybind11.h>

#include <memory>
#include <mutex>

namespace py = pybind11;

namespace segops_torch {
namespace {

// Large enough to fill any GPU; kernels grid-stride over the rest (as
// python/segops/_library.py's MAX_GRID).
constexpr int64_t kMaxGrid = 1 << 18;

PyObject *ptxSource = nullptr;
std::mutex modulesMutex;
// Never destroyed: kernels may run until exit.
auto *modules = new std::map<int, std::unique_ptr<segrt::CudaModule>>();

segrt::CudaModule &moduleFor(int device) {
  std::lock_guard<std::mutex> lock(modulesMutex);
  auto it = modules->find(device);
  if (it != modules->end())
    return *it->second;
  TORCH_CHECK(ptxSource, "segops: no PTX source was set for the CUDA kernels");
  std::string ptx;
  {
    py::gil_scoped_acquire gil;
    ptx = py::handle(ptxSource)(device).cast<std::string>();
  }
  auto module = std::make_unique<segrt::CudaModule>(device, ptx);
  return *modules->emplace(device, std::move(module)).first->second;
}

int64_t gridFor(int64_t items, int64_t perBlock, int64_t minimum) {
  int64_t blocks = (items + perBlock - 1) / perBlock;
  return std::min(std::max(blocks, minimum), kMaxGrid);
}

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
    c10::cuda::CUDAGuard guard(call.idx.device());
    BoundBuffers bound = bindBuffers(call, kernelIndex(call.idx));
    int64_t numRows = call.idx.size(0);
    if (numRows > 0 || call.numSegments > 0)
      launch(*call.variant, bound.pointers, numRows, call.numSegments,
             call.idx.device());
    for (at::Tensor &output : bound.outputs)
      stack->emplace_back(std::move(output));
  }

private:
  /// The kernel, after its long-segment kernels when there is a whole
  /// tile of rows (as _library.gpu_launches).
  void launch(const Variant &variant, const std::vector<uintptr_t> &pointers,
              int64_t numRows, int64_t numSegments, c10::Device device) const {
    const GpuLaunch &gpu = variant.gpu;
    int index = device.index();
    segrt::CudaModule &module = moduleFor(index);
    auto stream = reinterpret_cast<uintptr_t>(
        c10::cuda::getCurrentCUDAStream(index).stream());
    std::vector<int64_t> trailing{numRows, numSegments};
    // The long-segment kernels' scratch: freed on return, reused only by
    // work queued after these launches on this stream (the caching
    // allocator is stream-ordered).
    at::Tensor scratch;
    if (!gpu.longSegmentLaunches.empty()) {
      int64_t tiles = (numRows + gpu.tileRows - 1) / gpu.tileRows;
      int64_t bytes =
          gpu.scratchPerSegment * numSegments + gpu.scratchPerTile * tiles;
      scratch = at::empty({std::max<int64_t>(1, bytes)},
                          at::TensorOptions().dtype(at::kByte).device(device));
      trailing.push_back(reinterpret_cast<int64_t>(scratch.data_ptr()));
      if (numRows >= gpu.tileRows)
        for (const auto &[kernel, pass] : gpu.longSegmentLaunches) {
          std::vector<int64_t> withPass(trailing);
          withPass.push_back(pass);
          module.launch(
              kernel, static_cast<uint32_t>(gridFor(tiles, gpu.block / 32, 1)),
              gpu.block, stream, pointers, withPass);
        }
    }
    module.launch(
        variant.kernel,
        static_cast<uint32_t>(gridFor(numRows, gpu.gridPerBlock, gpu.gridMin)),
        gpu.block, stream, pointers, trailing);
  }

  std::shared_ptr<const OperatorLevel> level;
};

} // namespace

bool cudaKernelsBuilt() { return true; }

void registerCudaKernel(std::shared_ptr<const OperatorLevel> level,
                        std::vector<std::unique_ptr<torch::Library>> &keep) {
  auto cuda = std::make_unique<torch::Library>(torch::Library::IMPL, "segops",
                                               c10::DispatchKey::CUDA, __FILE__,
                                               __LINE__);
  std::string name = level->name;
  cuda->impl(name.c_str(), torch::CppFunction::makeFromBoxedFunctor(
                               std::make_unique<CudaKernel>(std::move(level))));
  keep.push_back(std::move(cuda));
}

void setPtxSource(PyObject *source) { ptxSource = source; }

} // namespace segops_torch

#else // !SEGOPS_TORCH_CUDA

namespace segops_torch {

bool cudaKernelsBuilt() { return false; }

void registerCudaKernel(std::shared_ptr<const OperatorLevel>,
                        std::vector<std::unique_ptr<torch::Library>> &) {}

void setPtxSource(PyObject *) {}

} // namespace segops_torch

#endif // SEGOPS_TORCH_CUDA
