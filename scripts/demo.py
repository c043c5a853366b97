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
    reference = torch.zeros(1000, dtype=torch.float64, device=device)
    reference.index_add_(0, many.long(), scalars)
    error = (segops.segmented_sum(scalars, many, 1000) - reference).abs().max().item()
    print(f"  10000 rows in 1000 segments (float64): max |segops - index_add_| = {error:.3g}")


def show_all_ops(device: str) -> None:
    """Every public op against plain PyTorch, and a derived gradient."""
    generator = torch.Generator().manual_seed(0)
    counts = torch.tensor([3, 0, 4, 1])
    idx = torch.repeat_interleave(torch.arange(4), counts).to(device=device, dtype=torch.int32)
    seg = idx.long()
    x = torch.randn(8, 3, dtype=torch.float64, generator=generator).to(device)
    y = torch.randn(8, 3, dtype=torch.float64, generator=generator).to(device)
    w = torch.randn(4, dtype=torch.float64, generator=generator).to(device)
    m = torch.randn(4, 3, 3, dtype=torch.float64, generator=generator).to(device)
    def sums(t):
        return torch.zeros((4,) + t.shape[1:], dtype=t.dtype, device=device).index_add(0, seg, t)
    count = counts.to(device=device, dtype=torch.float64).clamp(min=1)
    checks = {
        "segmented_sum": (segops.segmented_sum(x, idx, 4), sums(x)),
        "segmented_mean": (segops.segmented_mean(x, idx, 4), sums(x) / count[:, None]),
        "segmented_rms_norm": (segops.segmented_rms_norm(x, idx, 4),
                               torch.sqrt(sums((x * x).sum(-1)) / count)),
        "segmented_dot": (segops.segmented_dot(x, y, idx, 4), sums((x * y).sum(-1))),
        "segmented_mul": (segops.segmented_mul(x, w, idx, 4), x * w[seg][:, None]),
        "segmented_matvec": (segops.segmented_matvec(x, m, idx, 4),
                             torch.einsum("nij,ni->nj", m[seg], x)),
    }
    print(f"all six ops on {device} (float64, segment 1 empty): max |segops - PyTorch|")
    for name, (got, want) in checks.items():
        print(f"  {name:20s} {(got - want).abs().max().item():.2e}")
    leaf = x.clone().requires_grad_()
    (grad,) = torch.autograd.grad(segops.segmented_rms_norm(leaf, idx, 4).sum(), leaf)
    ref_leaf = x.clone().requires_grad_()
    reference_norm = torch.sqrt(sums((ref_leaf * ref_leaf).sum(-1)) / count)
    (ref,) = torch.autograd.grad(reference_norm.sum(), ref_leaf)
    error = (grad - ref).abs().max().item()
    print(f"  d rms_norm / dx (compiler-derived kernel) vs autograd: {error:.2e}")


def show_library() -> None:
    info = segops.library_info()
    print(f"op library: {len(info['kernels'])} kernels in {info['native_dir']}")
    print(f"  host code: {info['host_library']} (compiled for {info['host_cpu']}; "
          f"builds: {', '.join(info['host_builds'])})")
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


def show_jit() -> None:
    """segops.jit: a user's energy, fused into one kernel, and its forces
    from the compiler-derived gradient kernel, against eager PyTorch."""
    try:
        from segops._native import _segc  # noqa: F401 - the compiler module
    except ImportError:
        print("segops.jit: this build has no compiler module (runtime only)")
        return

    @segops.jit
    def energy(x, q, idx, num_segments):
        d = x - segops.segmented_gather(segops.segmented_mean(x, idx, num_segments), idx)
        return segops.segmented_sum(q * (d * d).sum(-1), idx, num_segments)

    generator = torch.Generator().manual_seed(0)
    idx = torch.sort(torch.randint(0, 100, (1000,), generator=generator)).values.to(torch.int32)
    x = torch.randn(1000, 3, dtype=torch.float64, generator=generator, requires_grad=True)
    q = torch.rand(1000, dtype=torch.float64, generator=generator)
    forces = -torch.autograd.grad(energy(x, q, idx, 100).sum(), x)[0]
    reference = -torch.autograd.grad(energy.fn(x, q, idx, 100).sum(), x)[0]
    print("segops.jit energy E_s = sum q |x - mean_s x|^2 over 1000 rows, 100 segments:")
    print(f"  forces -dE/dx (derived kernel) vs eager autograd: "
          f"max |difference| = {(forces - reference).abs().max().item():.2e}")
    ir = energy.mlir(x.detach(), q, idx, 100)
    ops = re.findall(r"= (seg\.\w+)", ir)
    print(f"  its seg IR: {len(ops)} seg ops ({', '.join(ops)}), compiled to one kernel")


def main() -> None:
    print(f"segops {segops.__version__}, torch {torch.__version__}")
    show_library()
    show_sum("cpu")
    show_all_ops("cpu")
    show_jit()
    if torch.cuda.is_available():
        show_sum("cuda")
        show_all_ops("cuda")
    else:
        print("CUDA: no GPU here; CUDA tensors run the PTX above where one is present")


if __name__ == "__main__":
    main()
