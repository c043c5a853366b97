"""Models nobody here wrote, unmodified, through eager PyTorch, plain
torch.compile and torch.compile with segops.fusion, in one run: PyG's
GCNConv, GATConv, SAGEConv, SoftmaxAggregation and global pooling on a
graph of 20,000 nodes with 64 features (a training step: forward, and
the gradients of a loss for the input and every parameter), PyG's
SchNet, and a small MACE model (mace-torch with e3nn; energy and forces,
and a force-matching training step).

    python -m bench.models [--models gcn,gat,...] [--threads 2] [--scale 1.0]

Prints per model the step's median milliseconds for each, the ratio
fusion / compile (the target is at most 0.5, never above 1), and the
largest difference of fusion's results from eager's (float32).
test/python/test_models.py runs the same builders, small and in float64,
against eager.

PyG's radius_graph needs the compiled pyg-lib: SchNet's neighbour list is
a fixed one here (all pairs within each molecule), as in bench/varying_sizes.
MACE's is the pairs closer than its cutoff; MACE is prepared for
torch.compile with its own `mace.tools.compile.prepare` and runs with
`training=True`, as MACE's calculator compiles it.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from dataclasses import dataclass

import torch

import segops.fusion
from bench.timing import interleaved_median_seconds


@dataclass
class Workload:
    """A model's step and the tensors it takes: `step(*inputs)` returns
    the tensors to compare (results and gradients)."""

    step: Callable[..., tuple[torch.Tensor, ...]]
    inputs: tuple
    parameters: tuple[torch.Tensor, ...]


def random_graph(nodes: int, degree: int, features: int, dtype: torch.dtype,
                 seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """Node features and an edge_index of nodes * degree random edges
    (PyG's layout: row 0 the senders, row 1 the receivers), unsorted."""
    generator = torch.Generator().manual_seed(seed)
    x = torch.randn(nodes, features, generator=generator, dtype=dtype)
    edge_index = torch.randint(0, nodes, (2, nodes * degree), generator=generator)
    return x.requires_grad_(), edge_index


def _training_step(module: torch.nn.Module, forward: Callable[..., torch.Tensor]
                   ) -> Callable[..., tuple[torch.Tensor, ...]]:
    """forward's output, and the gradients of a loss of it for its first
    input and the module's parameters."""
    parameters = tuple(module.parameters())

    def step(x: torch.Tensor, *rest: object) -> tuple[torch.Tensor, ...]:
        out = forward(x, *rest)
        grads = torch.autograd.grad(out.square().mean(), (x, *parameters))
        return (out.detach(), *grads)

    return step


def _layer(make: Callable[[int], torch.nn.Module]) -> Callable[..., Workload]:
    def build(nodes: int, features: int, dtype: torch.dtype) -> Workload:
        torch.manual_seed(0)
        layer = make(features).to(dtype)
        x, edge_index = random_graph(nodes, 10, features, dtype)
        return Workload(_training_step(layer, lambda x, e: layer(x, e)), (x, edge_index),
                        tuple(layer.parameters()))
    return build


def _gcn(features: int) -> torch.nn.Module:
    from torch_geometric.nn import GCNConv
    return GCNConv(features, features)


def _gat(features: int) -> torch.nn.Module:
    from torch_geometric.nn import GATConv
    return GATConv(features, features // 4, heads=4)


def _sage(features: int) -> torch.nn.Module:
    from torch_geometric.nn import SAGEConv
    return SAGEConv(features, features)


def softmax_aggregation(nodes: int, features: int, dtype: torch.dtype) -> Workload:
    """PyG's SoftmaxAggregation (learnable temperature) of the senders'
    features at their receivers."""
    from torch_geometric.nn.aggr import SoftmaxAggregation

    torch.manual_seed(0)
    aggregation = SoftmaxAggregation(learn=True, channels=features).to(dtype)
    x, edge_index = random_graph(nodes, 10, features, dtype)
    senders, receivers = edge_index

    def forward(x: torch.Tensor, senders: torch.Tensor, receivers: torch.Tensor) -> torch.Tensor:
        return aggregation(x[senders], receivers, dim_size=x.shape[0])

    return Workload(_training_step(aggregation, forward), (x, senders, receivers),
                    tuple(aggregation.parameters()))


def global_pooling(nodes: int, features: int, dtype: torch.dtype,
                   sized: bool = False) -> Workload:
    """A linear layer, then PyG's global add, mean and max pooling over
    graphs of about 100 nodes (the batch vector, sorted, as PyG makes it).
    Without `sized`, each pool reads the graph count from the batch
    (int(batch.max()) + 1), as PyG does when no size is given; with it,
    the count is passed (a Python int)."""
    from torch_geometric.nn import global_add_pool, global_max_pool, global_mean_pool

    torch.manual_seed(0)
    linear = torch.nn.Linear(features, features).to(dtype)
    x, _ = random_graph(nodes, 1, features, dtype)
    graphs = max(1, nodes // 100)
    batch = torch.randint(0, graphs, (nodes,), generator=torch.Generator().manual_seed(1))
    batch = batch.sort().values
    size = graphs if sized else None

    def forward(x: torch.Tensor, batch: torch.Tensor) -> torch.Tensor:
        h = torch.nn.functional.silu(linear(x))
        return (global_add_pool(h, batch, size) + global_mean_pool(h, batch, size)
                + global_max_pool(h, batch, size))

    return Workload(_training_step(linear, forward), (x, batch), tuple(linear.parameters()))


def global_pooling_sized(nodes: int, features: int, dtype: torch.dtype) -> Workload:
    return global_pooling(nodes, features, dtype, sized=True)


class FixedNeighbours:
    """SchNet's interaction graph: the given edges and their lengths."""

    def __init__(self, edge_index: torch.Tensor) -> None:
        self.edge_index = edge_index

    def __call__(self, pos: torch.Tensor, batch: torch.Tensor):
        i, j = self.edge_index
        return self.edge_index, (pos[i] - pos[j]).norm(dim=-1)


def _molecules(atoms: int, dtype: torch.dtype, seed: int = 1):
    """Molecules of 20 to 35 atoms, about `atoms` in all: atomic numbers,
    positions, the batch vector and every pair within a molecule."""
    generator = torch.Generator().manual_seed(seed)
    sizes = torch.randint(20, 36, (max(1, atoms // 27),), generator=generator)
    batch = torch.arange(sizes.numel()).repeat_interleave(sizes)
    n = batch.numel()
    starts = torch.cumsum(sizes, 0) - sizes
    i = torch.cat([torch.arange(s, s + k).repeat_interleave(k)
                   for s, k in zip(starts.tolist(), sizes.tolist())])
    j = torch.cat([torch.arange(s, s + k).repeat(k) for s, k in zip(starts.tolist(),
                                                                     sizes.tolist())])
    keep = i != j
    edge_index = torch.stack([i[keep], j[keep]])
    z = torch.randint(1, 10, (n,), generator=generator)
    pos = (torch.randn(n, 3, generator=generator, dtype=dtype) * 1.5).requires_grad_()
    return z, pos, batch, edge_index


def _schnet(features: int, dtype: torch.dtype, edge_index: torch.Tensor) -> torch.nn.Module:
    from torch_geometric.nn.models import SchNet

    torch.manual_seed(0)
    return SchNet(hidden_channels=features, num_filters=features, num_interactions=3,
                  num_gaussians=32, cutoff=5.0,
                  interaction_graph=FixedNeighbours(edge_index)).to(dtype)


def schnet_forces(atoms: int, features: int, dtype: torch.dtype) -> Workload:
    """PyG's SchNet: energies per molecule and forces (-dE/dpos)."""
    z, pos, batch, edge_index = _molecules(atoms, dtype)
    schnet = _schnet(features, dtype, edge_index)

    def step(z: torch.Tensor, pos: torch.Tensor, batch: torch.Tensor) -> tuple[torch.Tensor, ...]:
        energy = schnet(z, pos, batch)
        forces = -torch.autograd.grad(energy.sum(), pos)[0]
        return energy.detach(), forces

    return Workload(step, (z, pos, batch), tuple(schnet.parameters()))


def schnet_training(atoms: int, features: int, dtype: torch.dtype) -> Workload:
    """PyG's SchNet fitted to energies and forces: the loss, and its
    gradients for every parameter (second derivatives of the model)."""
    z, pos, batch, edge_index = _molecules(atoms, dtype)
    schnet = _schnet(features, dtype, edge_index)
    parameters = tuple(schnet.parameters())
    generator = torch.Generator().manual_seed(2)
    e_ref = torch.randn(int(batch[-1]) + 1, 1, generator=generator, dtype=dtype)
    f_ref = torch.randn(pos.shape, generator=generator, dtype=dtype)

    def step(z: torch.Tensor, pos: torch.Tensor, batch: torch.Tensor) -> tuple[torch.Tensor, ...]:
        energy = schnet(z, pos, batch)
        forces = -torch.autograd.grad(energy.sum(), pos, create_graph=True)[0]
        loss = ((energy - e_ref) ** 2).mean() + ((forces - f_ref) ** 2).mean()
        return (loss.detach(), *torch.autograd.grad(loss, parameters))

    return Workload(step, (z, pos, batch), parameters)


def mace_model(dtype: torch.dtype, features: int = 16, max_ell: int = 2,
               correlation: int = 3, interactions: int = 2) -> torch.nn.Module:
    """A small MACE (spherical harmonics to `max_ell`, three elements; the
    first interaction block, then residual ones), made the way MACE's own
    calculator makes a model for torch.compile
    (`mace.tools.compile.prepare`)."""
    # e3nn 0.4.4 loads its constants with torch.load, which since PyTorch
    # 2.6 refuses the slices they hold unless allowed.
    torch.serialization.add_safe_globals([slice])
    import numpy as np
    from e3nn import o3
    from mace import modules
    from mace.tools.compile import prepare

    def build() -> torch.nn.Module:
        torch.manual_seed(0)
        return modules.MACE(
            r_max=MACE_CUTOFF, num_bessel=8, num_polynomial_cutoff=5, max_ell=max_ell,
            interaction_cls=modules.interaction_classes["RealAgnosticResidualInteractionBlock"],
            interaction_cls_first=modules.interaction_classes["RealAgnosticInteractionBlock"],
            num_interactions=interactions, num_elements=3, hidden_irreps=o3.Irreps(
                f"{features}x0e+{features}x1o"), MLP_irreps=o3.Irreps(f"{features}x0e"),
            atomic_energies=np.zeros(3), avg_num_neighbors=20.0, atomic_numbers=[1, 6, 8],
            correlation=correlation, gate=torch.nn.functional.silu).to(dtype)

    return prepare(build)()


MACE_CUTOFF = 4.0


def mace_graph(atoms: int, dtype: torch.dtype, seed: int = 1) -> dict[str, torch.Tensor]:
    """MACE's input (the dictionary its data loader makes) for molecules of
    20 to 35 atoms of three elements: the pairs within the cutoff, no
    periodic cell."""
    z, pos, batch, edge_index = _molecules(atoms, dtype, seed)
    pos = pos.detach()
    lengths = (pos[edge_index[0]] - pos[edge_index[1]]).norm(dim=-1)
    edge_index = edge_index[:, lengths < MACE_CUTOFF]
    graphs, edges = int(batch[-1]) + 1, edge_index.shape[1]
    counts = torch.bincount(batch, minlength=graphs)
    return {"positions": pos.clone().requires_grad_(),
            "node_attrs": torch.nn.functional.one_hot(z % 3, 3).to(dtype),
            "edge_index": edge_index, "shifts": torch.zeros(edges, 3, dtype=dtype),
            "unit_shifts": torch.zeros(edges, 3, dtype=dtype),
            "cell": torch.zeros(3 * graphs, 3, dtype=dtype), "batch": batch,
            "ptr": torch.cat([counts.new_zeros(1), counts.cumsum(0)]),
            "head": torch.zeros(graphs, dtype=torch.long)}


def mace_forces(atoms: int, features: int, dtype: torch.dtype,
                interactions: int = 2) -> Workload:
    """MACE's energies per molecule and forces."""
    model = mace_model(dtype, min(features, 16), interactions=interactions)

    def step(data: dict[str, torch.Tensor]) -> tuple[torch.Tensor, ...]:
        out = model(data, training=True, compute_force=True)
        return out["energy"].detach(), out["forces"].detach()

    return Workload(step, (mace_graph(atoms, dtype),), tuple(model.parameters()))


def mace_training(atoms: int, features: int, dtype: torch.dtype,
                  interactions: int = 2) -> Workload:
    """MACE fitted to energies and forces: the loss, the energies and
    forces, and the loss's gradients for every parameter (through the
    forces: second derivatives)."""
    model = mace_model(dtype, min(features, 16), interactions=interactions)
    parameters = tuple(model.parameters())
    data = mace_graph(atoms, dtype)
    generator = torch.Generator().manual_seed(2)
    e_ref = torch.randn(data["head"].shape, generator=generator, dtype=dtype)
    f_ref = torch.randn(data["positions"].shape, generator=generator, dtype=dtype)

    def step(data: dict[str, torch.Tensor]) -> tuple[torch.Tensor, ...]:
        out = model(data, training=True, compute_force=True)
        loss = ((out["energy"] - e_ref) ** 2).mean() + ((out["forces"] - f_ref) ** 2).mean()
        return (loss.detach(), out["energy"].detach(), out["forces"].detach(),
                *torch.autograd.grad(loss, parameters))

    return Workload(step, (data,), parameters)


# name -> (builder, benchmark size): nodes for the layers, atoms for SchNet
# and MACE.
MODELS: dict[str, tuple[Callable[..., Workload], int]] = {
    "gcn": (_layer(_gcn), 20_000),
    "gat": (_layer(_gat), 20_000),
    "sage": (_layer(_sage), 20_000),
    "softmax-aggregation": (softmax_aggregation, 20_000),
    "global-pooling": (global_pooling, 20_000),
    "global-pooling-sized": (global_pooling_sized, 20_000),
    "schnet-forces": (schnet_forces, 2_000),
    "schnet-training": (schnet_training, 2_000),
    "mace-forces": (mace_forces, 1_000),
    "mace-training": (mace_training, 1_000),
}


def configure_dynamo() -> None:
    """What these models need compiled: forces' autograd.grad inside the
    graph, and SchNet's readout's int(batch.max()) as a captured scalar."""
    torch._dynamo.config.trace_autograd_ops = True
    torch._dynamo.config.capture_scalar_outputs = True


def compiled(workload: Workload, fusion: bool) -> Callable[..., tuple[torch.Tensor, ...]]:
    return torch.compile(workload.step, options=segops.fusion.options() if fusion else None)


def largest_difference(got: tuple[torch.Tensor, ...], want: tuple[torch.Tensor, ...]) -> float:
    """The largest difference relative to the size of each result."""
    return max(float((a - b).abs().max() / b.abs().max().clamp_min(1e-30))
               for a, b in zip(got, want))


def measure(name: str, scale: float, repeats: int) -> dict[str, float]:
    build, size = MODELS[name]
    workload = build(max(100, int(size * scale)), 64, torch.float32)
    torch._dynamo.reset()
    plain = compiled(workload, fusion=False)
    plain(*workload.inputs)
    fused = compiled(workload, fusion=True)
    got = fused(*workload.inputs)
    want = workload.step(*workload.inputs)
    eager, compile_s, fusion_s = interleaved_median_seconds(
        [lambda: workload.step(*workload.inputs), lambda: plain(*workload.inputs),
         lambda: fused(*workload.inputs)], "cpu", repeats=repeats, budget_s=20.0)
    return {"eager ms": 1e3 * eager, "compile ms": 1e3 * compile_s, "fusion ms": 1e3 * fusion_s,
            "fusion/compile": fusion_s / compile_s,
            "difference": largest_difference(got, want)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default=",".join(MODELS))
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--scale", type=float, default=1.0)
    parser.add_argument("--repeats", type=int, default=15)
    options = parser.parse_args()
    torch.set_num_threads(options.threads)
    configure_dynamo()
    print(f"{'model':20} {'eager ms':>9} {'compile ms':>10} {'fusion ms':>9} "
          f"{'fusion/compile':>14} {'difference':>10}")
    for name in options.models.split(","):
        row = measure(name, options.scale, options.repeats)
        print(f"{name:20} {row['eager ms']:9.2f} {row['compile ms']:10.2f} "
              f"{row['fusion ms']:9.2f} {row['fusion/compile']:14.2f} "
              f"{row['difference']:10.1e}", flush=True)


if __name__ == "__main__":
    main()
