"""An MD code's Lennard-Jones potential, written as MD codes write it: the
minimum-image convention `d - box * round(d / box)` and a cosine cutoff
inside the model, energy and forces in one compiled step. Eager PyTorch,
torch.compile, and torch.compile with segops.fusion, in one process.

    python -m bench.minimum_image [--atoms 2048,4000] [--threads 2]
"""

from __future__ import annotations

import argparse
import time

import torch
from torch import Tensor

import segops
import segops.fusion
from bench.message_passing import fcc_system, neighbour_list
from bench.timing import interleaved_median_seconds

CUTOFF = 2.5


def lj_minimum_image(pos: Tensor, eps: Tensor, sigma: Tensor, i: Tensor, j: Tensor,
                     box: float) -> Tensor:
    d = pos[j] - pos[i]
    d = d - box * torch.round(d / box)
    r2 = (d * d).sum(-1)
    s6 = (sigma * sigma / r2) ** 3
    cutoff = 0.5 * (torch.cos(torch.pi * torch.sqrt(r2) / CUTOFF) + 1.0)
    e = 2.0 * eps * (s6 * s6 - s6) * torch.where(r2 < CUTOFF**2, cutoff, 0.0)
    return pos.new_zeros(pos.shape[0]).index_add_(0, i, e).sum()


def step_of(box: float):
    def step(pos: Tensor, eps: Tensor, sigma: Tensor, i: Tensor, j: Tensor):
        e = lj_minimum_image(pos, eps, sigma, i, j, box)
        return e.detach(), -torch.autograd.grad(e, pos)[0]
    return step


def run(atoms: int) -> dict[str, float]:
    pos0, box = fcc_system(atoms)
    i, j, _ = neighbour_list(pos0, box)
    pos = pos0.float().requires_grad_()
    eps = torch.tensor(1.0, requires_grad=True)
    sigma = torch.tensor(1.0, requires_grad=True)
    args = (pos, eps, sigma, i, j)
    torch._dynamo.config.trace_autograd_ops = True
    variants = {
        "eager": step_of(box),
        "compile": torch.compile(step_of(box)),
        "fusion": torch.compile(step_of(box), options=segops.fusion.options()),
    }
    compile_seconds = {}
    for name, fn in variants.items():
        started = time.perf_counter()
        fn(*args)
        compile_seconds[name] = time.perf_counter() - started
    reference = variants["eager"](*args)
    for fn in variants.values():
        got = fn(*args)
        for a, b in zip(got, reference):
            torch.testing.assert_close(a, b, rtol=2e-4, atol=2e-4 * b.abs().max().item())
    names = list(variants)
    seconds = interleaved_median_seconds([lambda fn=variants[n]: fn(*args) for n in names], "cpu")
    row = {"atoms": atoms, "edges": int(i.numel())}
    row.update({f"{n} ms": s * 1e3 for n, s in zip(names, seconds)})
    row["fusion / compile"] = seconds[2] / seconds[1]
    row["first call fusion s"] = compile_seconds["fusion"]
    row["first call compile s"] = compile_seconds["compile"]
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--atoms", default="2048,4000")
    parser.add_argument("--threads", type=int, default=2)
    options = parser.parse_args()
    torch.set_num_threads(options.threads)
    for atoms in (int(a) for a in options.atoms.split(",")):
        row = run(atoms)
        print("  ".join(f"{k}={v:.3g}" if isinstance(v, float) else f"{k}={v}"
                        for k, v in row.items()), flush=True)


if __name__ == "__main__":
    main()
