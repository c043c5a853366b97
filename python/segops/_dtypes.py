"""The dtypes segops takes and their names in the op library's manifest:
the one table every module reads."""

from __future__ import annotations

import torch

# Float rows, by the element type name of their kernels ("f32_w3").
FLOAT_DTYPES: dict[torch.dtype, str] = {torch.float32: "f32", torch.float64: "f64"}
# 16-bit float rows: the ops whose table entry says so (SegmentOp.
# takes_16_bit) run them in float32 (float32 accumulation) and return their
# results in the input dtype, as PyTorch's ops do.
SIXTEEN_BIT_DTYPES: tuple[torch.dtype, ...] = (torch.bfloat16, torch.float16)
# Segment indices (an int64 index is narrowed to the int32 the kernels read).
INDEX_DTYPES: tuple[torch.dtype, ...] = (torch.int32, torch.int64)
# The manifest's element type names.
MANIFEST_DTYPES: dict[str, torch.dtype] = {
    "f32": torch.float32, "f64": torch.float64, "i32": torch.int32}
