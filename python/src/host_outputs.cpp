//===- host_outputs.cpp - host output tensors from segrt's cache ----------===//
//
// Large host outputs, and the contiguous copies of non-contiguous inputs,
// come from segrt::hostOutputCache() (see segrt/BufferCache.h: reused
// buffers skip the first touch's page faults and zeroing); small ones from
// PyTorch's CPU allocator, as before. The tensors are ordinary CPU tensors:
// their storage stays resizable, through the same allocator.
//
//===----------------------------------------------------------------------===//

#include "torch_ops.h"

#include "segrt/BufferCache.h"
#include "segrt/KernelABI.h"
#include "segrt/Memory.h"

#include <ATen/EmptyTensor.h>
#include <c10/core/CPUAllocator.h>
#include <c10/util/Exception.h>

namespace {

void releaseToCache(void *data) { segrt::hostOutputCache().release(data); }

class CachedOutputAllocator final : public c10::Allocator {
public:
  c10::DataPtr allocate(size_t bytes) override {
    if (bytes < segrt::kHugePageMinBytes)
      return c10::GetCPUAllocator()->allocate(bytes);
    void *data = segrt::hostOutputCache().allocate(bytes);
    if (!data)
      TORCH_CHECK_WITH(OutOfMemoryError, false, "segops: out of memory for a ",
                       bytes, "-byte output");
    return {data, data, &releaseToCache, c10::Device(c10::DeviceType::CPU)};
  }

  void copy_data(void *dest, const void *src, size_t count) const override {
    default_copy_data(dest, src, count);
  }
};

} // namespace

at::Tensor segops_torch::emptyHostOutput(at::IntArrayRef shape,
                                         at::ScalarType dtype) {
  static CachedOutputAllocator allocator;
  return at::detail::empty_generic(shape, &allocator,
                                   c10::DispatchKeySet(c10::DispatchKey::CPU),
                                   dtype, std::nullopt);
}

at::Tensor segops_torch::contiguousInput(const at::Tensor &tensor) {
  bool aligned = reinterpret_cast<uintptr_t>(tensor.data_ptr()) %
                     segrt::abi::kBufferAlignment ==
                 0;
  if (tensor.is_contiguous() && aligned)
    return tensor;
  // A fresh buffer: contiguous() keeps a contiguous view where it starts.
  at::Tensor copy =
      tensor.is_cpu()
          ? emptyHostOutput(tensor.sizes(), tensor.scalar_type())
          : at::empty(tensor.sizes(), tensor.options().memory_format(
                                          at::MemoryFormat::Contiguous));
  copy.copy_(tensor);
  return copy;
}
