"""One compile per training run: models stepped over batches whose atom,
edge and molecule counts change every step, compiled with and without
segops.fusion. For each: the graphs Dynamo made (static, then dynamic),
the segops programs compiled per step, the first calls' seconds, and the
steady-state step time (median over the remaining batches).

    python -m bench.varying_sizes [--batches 20] [--threads 2]

Models: PyG's SchNet (torch_geometric 2.8.1, energy and forces, with
`capture_scalar_outputs` for its `int(batch.max())`; a fixed neighbour
list of all pairs within each molecule stands in for pyg-lib's
radius_graph), and the minimum-image Lennard-Jones of
bench/minimum_image.py on fcc boxes of 256 to 2,048 atoms.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

import torch

import segops.fusion
from segops import _jit


class _FixedNeighbours:
    """SchNet's interaction graph: the step's edges and their lengths."""

    def __init__(self) -> None:
        self.edge_index: torch.Tensor | None = None

    def __call__(self, pos: torch.Tensor, batch: torch.Tensor):
        i, j = self.edge_index
        return self.edge_index, (pos[i] - pos[j]).norm(dim=-1)


def schnet_batches(count: int) -> tuple[Callable, list[tuple]]:
    from torch_geometric.nn.models import SchNet

    graph = _FixedNeighbours()
    torch.manual_seed(0)
    schnet = SchNet(hidden_channels=64, num_filters=64, num_interactions=3, num_gaussians=32,
                    cutoff=5.0, interaction_graph=graph)
    generator = torch.Generator().manual_seed(1)
    batches = []
    for _ in range(count):
        molecules = int(torch.randint(24, 40, (1,), generator=generator))
        sizes = torch.randint(10, 24, (molecules,), generator=generator)
        batch = torch.arange(molecules).repeat_interleave(sizes)
        n = batch.numel()
        pairs = (batch[:, None] == batch[None, :]) & ~torch.eye(n, dtype=torch.bool)
        edges = pairs.nonzero().t()
        z = torch.randint(1, 10, (n,), generator=generator)
        pos = (torch.randn(n, 3, generator=generator) * 1.5).requires_grad_()
        batches.append((edges, z, pos, batch))

    def step(edges, z, pos, batch):
        graph.edge_index = edges
        energy = schnet(z, pos, batch)
        return energy, -torch.autograd.grad(energy.sum(), pos, create_graph=True)[0]

    return step, batches


def lj_batches(count: int) -> tuple[Callable, list[tuple]]:
    from bench.message_passing import fcc_system, neighbour_list
    from bench.minimum_image import lj_minimum_image

    eps = torch.tensor(1.0, requires_grad=True)
    sigma = torch.tensor(1.0, requires_grad=True)
    systems = {}
    for cells in (4, 5, 6, 7, 8):
        pos0, box = fcc_system(4 * cells**3)
        i, j, _ = neighbour_list(pos0, box)
        systems[cells] = (pos0.float(), i, j, torch.tensor(box))
    batches = []
    for k in range(count):
        pos0, i, j, box = systems[4 + (k * 3) % 5]
        batches.append((pos0.clone().requires_grad_(), i, j, box))

    def step(pos, i, j, box):
        energy = lj_minimum_image(pos, eps, sigma, i, j, box)
        return energy.detach(), -torch.autograd.grad(energy, pos)[0]

    return step, batches


def measure(step: Callable, batches: list[tuple], fusion: bool) -> dict[str, object]:
    import torch._dynamo.utils as dynamo_utils

    torch._dynamo.reset()
    dynamo_utils.counters.clear()
    compiled = torch.compile(step, options=segops.fusion.options() if fusion else None)
    seconds, programs = [], []
    for args in batches:
        before = len(_jit._PROGRAMS)
        started = time.perf_counter()
        compiled(*args)
        seconds.append(time.perf_counter() - started)
        programs.append(len(_jit._PROGRAMS) - before)
    return {"graphs": dynamo_utils.counters["stats"]["unique_graphs"],
            "programs per step": programs, "first s": seconds[0], "second s": seconds[1],
            "steady ms": 1e3 * statistics.median(seconds[3:])}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batches", type=int, default=20)
    parser.add_argument("--threads", type=int, default=2)
    options = parser.parse_args()
    torch.set_num_threads(options.threads)
    torch._dynamo.config.trace_autograd_ops = True
    torch._dynamo.config.capture_scalar_outputs = True
    for name, make in (("lj-minimum-image", lj_batches), ("pyg-schnet", schnet_batches)):
        step, batches = make(options.batches)
        for fusion in (False, True):
            row = measure(step, batches, fusion)
            print(f"{name:18} {'fusion ' if fusion else 'compile'} " +
                  "  ".join(f"{k}={v:.3g}" if isinstance(v, float) else f"{k}={v}"
                            for k, v in row.items()), flush=True)


if __name__ == "__main__":
    main()
