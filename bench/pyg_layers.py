"""PyG's layers, aggregations, norms and models, unmodified, through
torch.compile with segops.fusion against eager PyTorch in float64, on
graphs of four sizes (one compiled step for all: the static graph, then
the dynamic one): the largest difference of the output, the input's
gradient and every parameter's gradient. A correctness sweep, not a
timing: the layers test/python/test_models.py does not run.

    python -m bench.pyg_layers [--only GINConv,EdgeConv,...] [--plain]

`--plain` compiles without the pass (to tell PyTorch's failures from
segops').
"""

from __future__ import annotations

import argparse
from collections.abc import Callable

import torch

import segops.fusion

FEATURES = 8


def _layers() -> dict[str, tuple[Callable[[], torch.nn.Module], str]]:
    """name -> (constructor, how it is called: "conv" (x, edge_index),
    "aggr" (senders' rows, receivers), "norm" (x, batch), "softmax")."""
    import torch_geometric.nn as gnn
    from torch_geometric.nn import aggr, norm

    f = FEATURES

    def mlp(inputs: int) -> torch.nn.Module:
        return torch.nn.Sequential(torch.nn.Linear(inputs, f), torch.nn.Tanh())

    return {
        "GINConv": (lambda: gnn.GINConv(mlp(f)), "conv"),
        "GraphConv-max": (lambda: gnn.GraphConv(f, f, aggr="max"), "conv"),
        "GraphConv-mean": (lambda: gnn.GraphConv(f, f, aggr="mean"), "conv"),
        "GATv2Conv": (lambda: gnn.GATv2Conv(f, f, heads=2), "conv"),
        "TransformerConv": (lambda: gnn.TransformerConv(f, f, heads=2), "conv"),
        "ResGatedGraphConv": (lambda: gnn.ResGatedGraphConv(f, f), "conv"),
        "GENConv-softmax": (lambda: gnn.GENConv(f, f, aggr="softmax", learn_t=True), "conv"),
        "EdgeConv-max": (lambda: gnn.EdgeConv(mlp(2 * f), aggr="max"), "conv"),
        "ChebConv": (lambda: gnn.ChebConv(f, f, K=3), "conv"),
        "LEConv": (lambda: gnn.LEConv(f, f), "conv"),
        "SAGEConv-max": (lambda: gnn.SAGEConv(f, f, aggr="max"), "conv"),
        "ClusterGCNConv": (lambda: gnn.ClusterGCNConv(f, f), "conv"),
        "TAGConv": (lambda: gnn.TAGConv(f, f), "conv"),
        "SGConv": (lambda: gnn.SGConv(f, f, K=2), "conv"),
        "MFConv": (lambda: gnn.MFConv(f, f), "conv"),
        "FeaStConv": (lambda: gnn.FeaStConv(f, f, heads=2), "conv"),
        "GCN": (lambda: gnn.models.GCN(f, 16, num_layers=2, out_channels=f), "conv"),
        "GIN": (lambda: gnn.models.GIN(f, 16, num_layers=2, out_channels=f), "conv"),
        "GAT": (lambda: gnn.models.GAT(f, 16, num_layers=2, out_channels=f, heads=2), "conv"),
        "GraphSAGE": (lambda: gnn.models.GraphSAGE(f, 16, num_layers=2, out_channels=f),
                      "conv"),
        "MaxAggregation": (lambda: aggr.MaxAggregation(), "aggr"),
        "MultiAggregation": (lambda: aggr.MultiAggregation(["mean", "max", "std"]), "aggr"),
        "PowerMeanAggregation": (lambda: aggr.PowerMeanAggregation(learn=True), "aggr"),
        "AttentionalAggregation": (lambda: aggr.AttentionalAggregation(torch.nn.Linear(f, 1)),
                                   "aggr"),
        "VarAggregation": (lambda: aggr.VarAggregation(), "aggr"),
        "GraphNorm": (lambda: norm.GraphNorm(f), "norm"),
        "LayerNorm-graph": (lambda: norm.LayerNorm(f, mode="graph"), "norm"),
        "InstanceNorm": (lambda: norm.InstanceNorm(f, affine=True), "norm"),
        "PairNorm": (lambda: norm.PairNorm(), "norm"),
        "utils.softmax": (lambda: torch.nn.Linear(f, f), "softmax"),
    }


def sweep(make: Callable[[], torch.nn.Module], kind: str, fusion: bool) -> str:
    """The largest difference from eager over four graph sizes, or the
    exception the compiled step raised."""
    from torch_geometric.utils import softmax

    torch.manual_seed(0)
    module = make().double()
    parameters = tuple(p for p in module.parameters() if p.requires_grad)

    def step(x: torch.Tensor, edge_index: torch.Tensor, batch: torch.Tensor):
        senders, receivers = edge_index
        if kind == "aggr":
            out = module(x[senders], receivers, dim_size=x.shape[0])
        elif kind == "norm":
            out = module(x, batch)
        elif kind == "softmax":
            out = softmax(module(x)[senders], receivers, num_nodes=x.shape[0]) * x[senders]
        else:
            out = module(x, edge_index)
        grads = torch.autograd.grad(out.square().sum(), (x, *parameters), allow_unused=True)
        return (out, *[g for g in grads if g is not None])

    torch._dynamo.reset()
    compiled = torch.compile(step, options=segops.fusion.options() if fusion else None)
    worst = 0.0
    try:
        for nodes in (50, 64, 81, 97):
            generator = torch.Generator().manual_seed(nodes)
            x = torch.randn(nodes, FEATURES, dtype=torch.float64, generator=generator,
                            requires_grad=True)
            edge_index = torch.randint(0, nodes, (2, 4 * nodes), generator=generator)
            batch = torch.randint(0, 5, (nodes,), generator=generator).sort().values
            got, want = compiled(x, edge_index, batch), step(x, edge_index, batch)
            worst = max([worst] + [float((a - b).abs().max()) for a, b in zip(got, want)])
    except Exception as error:  # noqa: BLE001 - reported, the sweep goes on
        return f"{type(error).__name__}: {str(error).splitlines()[0][:160]}"
    return f"{worst:.1e}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default="")
    parser.add_argument("--plain", action="store_true")
    options = parser.parse_args()
    torch._dynamo.config.trace_autograd_ops = True
    torch._dynamo.config.capture_scalar_outputs = True
    layers = _layers()
    names = options.only.split(",") if options.only else list(layers)
    for name in names:
        make, kind = layers[name]
        print(f"{name:24} {sweep(make, kind, not options.plain)}", flush=True)


if __name__ == "__main__":
    main()
