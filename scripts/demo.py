"""The segops demo: run segmented_sum on CPU (and CUDA when present) beside a
PyTorch reference, and show what the op library compiled."""

from __future__ import annotations

import re

import torch

import segops
from segops import _library


def show_sum(device: str) -> None:
    # Three "molecules" of 2, 0 and 3 atoms with 3-vector forces.
    idx = torch.tensor([0, 0, 2, 2, 2], dtype=torch.int32, device=device)
    x = torch.arange(15, dtype=torch.float32, device=device).reshape(5, 3)
    out = segops.segmented_sum(x, idx, 3)
    reference = torch.zeros(3, 3, device=device).index_add_(0, idx.long(), x)
    print(f"segmented_sum on {device}: x (5, 3), idx {idx.tolist()}, num_segments 3")
    for s in range(3):
        print(f"  segment {s}: segops {out[s].tolist()}   torch index_add_ {reference[s].tolist()}")
    print(f"  equal to the reference: {torch.equal(out, reference)}")

    scalars = torch.randn(10_000, dtype=torch.float64, device=device)
    many = torch.sort(torch.randint(0, 1000, (10_000,), device=device)).values.to(torch.int32)
    error = (segops.segmented_sum(scalars, many, 1000)
             - torch.zeros(1000, dtype=torch.float64, device=device).index_add_(0, many.long(), scalars))
    print(f"  10000 rows in 1000 segments (float64): max |segops - index_add_| = {error.abs().max().item():.3g}")


def show_library() -> None:
    info = segops.library_info()
    print(f"op library: {len(info['kernels'])} kernels in {info['native_dir']}")
    print(f"  host code: {info['host_library']} (compiled for {info['host_cpu']})")
    for chip, file_name in sorted(info["ptx"].items()):
        ptx = (_library.NATIVE_DIR / file_name).read_text()
        entries = re.findall(r"\.visible \.entry (\w+)\(", ptx)
        print(f"  PTX {chip}: {file_name}, {len(ptx)} bytes, {len(entries)} entries")
        # Size of one kernel's PTX text, from its .entry to the next one.
        name = "segmented_sum_f32_w3"
        start = ptx.index(f".visible .entry {name}(")
        end = ptx.find(".visible .entry", start + 1)
        body = ptx[start:end if end >= 0 else len(ptx)]
        print(f"    entry {name}: {len(body)} bytes of PTX, {body.count(chr(10))} lines")


def main() -> None:
    print(f"segops {segops.__version__}, torch {torch.__version__}")
    show_library()
    show_sum("cpu")
    if torch.cuda.is_available():
        show_sum("cuda")
    else:
        print("CUDA: no GPU here; CUDA tensors run the PTX above where one is present")


if __name__ == "__main__":
    main()
