"""All six ops, forward and forward+backward, against PyTorch eager written
the way users write it (index_add_, gather, einsum), measured in one run.

    python -m bench.ops [--device cpu|cuda] [--sizes 100000,1000000] [--length 10]

Vec3 rows, float32. "fwd+bwd" runs the op and the backward of out.sum() with
respect to every float input. Ratios are segops / eager from the same run.
"""

from __future__ import annotations

import argparse
import sys
from typing import Callable

import torch

import segops
from bench.timing import median_seconds


def eager_ops(idx: torch.Tensor, num_segments: int) -> dict[str, Callable[..., torch.Tensor]]:
    seg = idx.long()

    def sums(t: torch.Tensor) -> torch.Tensor:
        return t.new_zeros((num_segments,) + t.shape[1:]).index_add_(0, seg, t)

    counts = torch.bincount(seg, minlength=num_segments).clamp(min=1)
    return {
        "sum": lambda x: sums(x),
        "mean": lambda x: sums(x) / counts[:, None].to(x.dtype),
        "rms_norm": lambda x: torch.sqrt(sums((x * x).sum(-1)) / counts.to(x.dtype)),
        "dot": lambda x, y: sums((x * y).sum(-1)),
        "mul": lambda x, w: x * w[seg][:, None],
        "matvec": lambda v, m: torch.einsum("nij,ni->nj", m[seg], v),
    }


def segops_ops(idx: torch.Tensor, num_segments: int) -> dict[str, Callable[..., torch.Tensor]]:
    return {
        "sum": lambda x: segops.segmented_sum(x, idx, num_segments),
        "mean": lambda x: segops.segmented_mean(x, idx, num_segments),
        "rms_norm": lambda x: segops.segmented_rms_norm(x, idx, num_segments),
        "dot": lambda x, y: segops.segmented_dot(x, y, idx, num_segments),
        "mul": lambda x, w: segops.segmented_mul(x, w, idx, num_segments),
        "matvec": lambda v, m: segops.segmented_matvec(v, m, idx, num_segments),
    }


def inputs_for(op: str, num_rows: int, num_segments: int, device: str) -> list[torch.Tensor]:
    x = torch.randn(num_rows, 3, device=device)
    extra = {
        "dot": [torch.randn(num_rows, 3, device=device)],
        "mul": [torch.randn(num_segments, device=device)],
        "matvec": [torch.randn(num_segments, 3, 3, device=device)],
    }
    return [x] + extra.get(op, [])


def timed(fn: Callable[..., torch.Tensor], args: list[torch.Tensor], device: str,
          backward: bool) -> float:
    if not backward:
        return median_seconds(lambda: fn(*args), device, repeats=9)
    leaves = [a.clone().requires_grad_() for a in args]

    def step() -> None:
        torch.autograd.grad(fn(*leaves).sum(), leaves)

    return median_seconds(step, device, repeats=9)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    parser.add_argument("--sizes", default="100000,1000000")
    parser.add_argument("--length", type=int, default=10, help="mean segment length")
    args = parser.parse_args()
    if args.device == "cuda" and not torch.cuda.is_available():
        print("no CUDA device", file=sys.stderr)
        return 1
    print(f"segops {segops.__version__}, torch {torch.__version__}, {args.device}, "
          f"{torch.get_num_threads()} CPU threads, vec3 float32, mean segment length {args.length}")
    header = f"{'op':9} {'N':>9} {'fwd segops us':>14} {'fwd eager us':>13} {'ratio':>6} " \
             f"{'fwd+bwd segops us':>18} {'fwd+bwd eager us':>17} {'ratio':>6}"
    print(header)
    print("-" * len(header))
    for num_rows in [int(s) for s in args.sizes.split(",")]:
        num_segments = max(1, num_rows // args.length)
        generator = torch.Generator().manual_seed(0)
        idx = torch.sort(torch.randint(0, num_segments, (num_rows,), generator=generator)).values
        idx = idx.to(device=args.device, dtype=torch.int32)
        ours, theirs = segops_ops(idx, num_segments), eager_ops(idx, num_segments)
        for op in ours:
            data = inputs_for(op, num_rows, num_segments, args.device)
            fwd = [timed(f[op], data, args.device, False) for f in (ours, theirs)]
            both = [timed(f[op], data, args.device, True) for f in (ours, theirs)]
            print(f"{op:9} {num_rows:>9} {fwd[0] * 1e6:>14.1f} {fwd[1] * 1e6:>13.1f} "
                  f"{fwd[0] / fwd[1]:>6.2f} {both[0] * 1e6:>18.1f} {both[1] * 1e6:>17.1f} "
                  f"{both[0] / both[1]:>6.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
