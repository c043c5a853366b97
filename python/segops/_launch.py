"""Running one op-library kernel on tensors: pointers, sizes, device, stream."""

from __future__ import annotations

from collections.abc import Sequence
from functools import cache

import torch

from segops import _gpusim, _library


@cache
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
        _library.run_gpu(_library.cuda_module(index, _capability(index)),
                         _library.kernel_entry(name),
                         torch.cuda.current_stream(index).cuda_stream, pointers, num_rows,
                         num_segments, device)
    else:
        raise ValueError(f"segops runs on CPU and CUDA tensors, not on {device.type}")
