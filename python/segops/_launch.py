"""Running one op-library kernel on tensors: pointers, sizes, device, stream."""

from __future__ import annotations

from functools import lru_cache
from typing import Sequence

import torch

from segops import _gpusim, _library


@lru_cache(maxsize=None)
def _capability(device: int) -> tuple[int, int]:
    return torch.cuda.get_device_capability(device)


def run(name: str, inputs: Sequence[torch.Tensor], outputs: torch.Tensor | Sequence[torch.Tensor],
        num_rows: int, num_segments: int) -> None:
    """Runs kernel `name` with the segops ABI: contiguous `inputs` (in the
    kernel function's argument order), then `outputs`, then the sizes (N rows,
    S segments). Launches asynchronously on CUDA."""
    info = _library.kernel(name)
    if isinstance(outputs, torch.Tensor):
        outputs = [outputs]
    if len(inputs) != info.num_inputs or len(outputs) != info.num_outputs:
        raise ValueError(f"kernel {name} takes {info.num_inputs} inputs and "
                         f"{info.num_outputs} outputs, got {len(inputs)} and {len(outputs)}")
    pointers = [t.data_ptr() for t in inputs]
    pointers.extend(t.data_ptr() for t in outputs)
    device = outputs[0].device
    if device.type == "cpu" and _gpusim.ENABLED:
        _gpusim.simulator().run(name, inputs, outputs, num_rows, num_segments)
    elif device.type == "cpu":
        for output in outputs:  # segrt skips the small ones
            _library.advise_huge_pages(output)
        _library.launch_host(info, pointers, num_rows, num_segments)
    elif device.type == "cuda":
        index = device.index if device.index is not None else torch.cuda.current_device()
        stream = torch.cuda.current_stream(index).cuda_stream
        # The long-segment kernels' scratch, from PyTorch's caching
        # allocator: freed when this returns, reused only by work queued on
        # the stream after these launches.
        scratch = None if info.gpu_long is None else torch.empty(
            info.gpu_scratch_bytes(num_rows, num_segments), device=device, dtype=torch.uint8)
        _library.launch_cuda(info, index, _capability(index), stream, pointers, num_rows,
                             num_segments, 0 if scratch is None else scratch.data_ptr())
    else:
        raise ValueError(f"segops runs on CPU and CUDA tensors, not on {device.type}")
