"""Second-order use, as in training on forces: each op's output enters an
energy, its gradient with respect to the float inputs is taken with
`create_graph=True`, and a loss on those gradients is differentiated again
(the op's forward, backward and double backward, plus PyTorch's own
elementwise ops around them), for segops and the eager reference.

    python -m bench.second_order [--sizes 1000000,10000000] [--lengths 10,1000]
                                 [--ops sum,mean,...] [--budget 1.0]

Prints one line per op, width and layout: both medians (segops and eager
sampled in turn) and their ratio.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable

import torch
from torch import Tensor

from bench import references
from bench.timing import interleaved_median_seconds


def energy_and_forces(fn: Callable[..., Tensor], floats: list[Tensor], idx: Tensor,
                      num_segments: int) -> Callable[[], object]:
    """A training step's differentiation: energy = sum(out^2), its gradient
    kept differentiable, loss = sum of the squared gradients, then the
    loss's gradient."""
    leaves = [f.detach().clone().requires_grad_() for f in floats]

    def step() -> object:
        energy = fn(*leaves, idx, num_segments).pow(2).sum()
        forces = torch.autograd.grad(energy, leaves, create_graph=True)
        loss = sum(force.pow(2).sum() for force in forces)
        return torch.autograd.grad(loss, leaves)

    return step


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="1000000,10000000")
    parser.add_argument("--lengths", default="10,1000")
    parser.add_argument("--ops", default=",".join(references.OPS))
    parser.add_argument("--budget", type=float, default=1.0,
                        help="seconds of samples per configuration (at least 5 rounds)")
    args = parser.parse_args()
    print(f"{torch.get_num_threads()} threads; ms per step, segops / eager (sampled in turn)")
    for num_rows in (int(float(size)) for size in args.sizes.split(",")):
        for length in (int(value) for value in args.lengths.split(",")):
            for op in args.ops.split(","):
                for width in references.widths(op):
                    floats, idx, num_segments = references.make_case(op, width, num_rows, length)
                    steps = [energy_and_forces(table[op], floats, idx, num_segments)
                             for table in (references.SEGOPS, references.EAGER)]
                    ours, eager = interleaved_median_seconds(steps, "cpu", repeats=50,
                                                             budget_s=args.budget,
                                                             min_repeats=5)
                    print(f"{op:9s} w{width} N={num_rows:<9d} len {length:<5d}: "
                          f"{ours * 1e3:9.2f} / {eager * 1e3:9.2f} = {ours / eager:5.2f}x",
                          flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
