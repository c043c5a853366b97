"""Models nobody here wrote (bench/models.py: PyG's GCNConv, GATConv,
SAGEConv, SoftmaxAggregation, global pooling and SchNet, and a MACE
model), unmodified, compiled with segops.fusion (strict: a failing pass is
an error) against eager PyTorch in float64: results, input gradients and
every parameter's gradient; SchNet's and MACE's forces and a
force-matching step's second derivatives.
Each must fuse its segment reductions. The layers run again on graphs of
other sizes, with no new segops program after the first dynamic one."""

from __future__ import annotations

import pytest
import torch

pytest.importorskip("torch_geometric")

import segops.fusion  # noqa: E402
from bench import models  # noqa: E402
from segops import _jit  # noqa: E402

pytestmark = [pytest.mark.compiler, pytest.mark.slow]

# Small sizes: nodes for the layers, atoms for SchNet.
SIZES = {"gcn": 300, "gat": 300, "sage": 300, "softmax-aggregation": 300,
         "global-pooling": 700, "global-pooling-sized": 700, "schnet-forces": 60,
         "schnet-training": 60}

# What each model's clusters must hold: its sums, and its maxima
# (scatter_reduce amax: GAT's and SoftmaxAggregation's softmax, max pooling).
FUSED = {"gcn": "aten.scatter_add", "gat": "aten.scatter_reduce", "sage": "aten.scatter_add",
         "softmax-aggregation": "aten.scatter_reduce", "global-pooling": "aten.scatter_reduce",
         "global-pooling-sized": "aten.scatter_reduce",
         "schnet-forces": "aten.scatter_add", "schnet-training": "aten.scatter_add"}


@pytest.fixture(autouse=True)
def _dynamo():
    models.configure_dynamo()
    torch._dynamo.reset()
    segops.fusion.clear_reports()
    with torch._inductor.config.patch(force_disable_caches=True):  # the pass runs
        yield
    torch._dynamo.reset()


def _fused_ops() -> str:
    return " ".join(op for report in segops.fusion.reports() for op in report.ops)


@pytest.mark.parametrize("name", [name for name in models.MODELS if name in SIZES])
def test_model_matches_eager(name: str) -> None:
    build, _ = models.MODELS[name]
    workload = build(SIZES[name], 16, torch.float64)
    step = torch.compile(workload.step, options=segops.fusion.options(strict=True))
    got = step(*workload.inputs)
    want = workload.step(*workload.inputs)
    assert len(got) == len(want) >= 2
    torch.testing.assert_close(got, want, rtol=1e-9, atol=1e-11)
    assert FUSED[name] in _fused_ops(), _fused_ops()


@pytest.mark.long
def test_mace_training_step_matches_eager() -> None:
    """MACE (mace-torch, unmodified) fitted to energies and forces: the
    loss, energies, forces and every parameter's gradient (second
    derivatives through the pass's clusters), as eager's; the forces' sums
    into atoms fuse. One interaction block: each block costs Inductor over
    a minute of C++ compilation here; bench/models.py runs two, and its
    forces step is in this one's outputs."""
    pytest.importorskip("mace")
    workload = models.mace_training(60, 16, torch.float64, interactions=1)
    step = torch.compile(workload.step, options=segops.fusion.options(strict=True))
    got = step(*workload.inputs)
    want = workload.step(*workload.inputs)
    assert len(got) == len(want) > 3
    torch.testing.assert_close(got, want, rtol=1e-9, atol=1e-11)
    assert "aten.index_put" in _fused_ops(), _fused_ops()


@pytest.mark.parametrize("name", ["gat", "sage", "global-pooling"])
def test_layers_on_graphs_of_changing_size(name: str) -> None:
    """One compiled step over four graphs of other sizes (as a training
    loop's batches): eager's results each time; segops compiles programs
    for the first graph and the first dynamic one only."""
    build, _ = models.MODELS[name]
    workload = build(200, 16, torch.float64)
    step = torch.compile(workload.step, options=segops.fusion.options(strict=True))
    programs = []
    for nodes in (200, 260, 330, 410):
        inputs = build(nodes, 16, torch.float64).inputs
        before = len(_jit._PROGRAMS)
        torch.testing.assert_close(step(*inputs), workload.step(*inputs), rtol=1e-9,
                                   atol=1e-11)
        programs.append(len(_jit._PROGRAMS) - before)
    assert programs[2:] == [0, 0], programs


def test_edge_conv_with_sliced_gradients() -> None:
    """PyG's EdgeConv: its messages concatenate features, so the backward
    slices the gradient (aten.slice). Slices were decomposed into
    as_strided and back, endlessly; now only pointwise ops are decomposed
    and the pass finishes, matching eager."""
    from torch_geometric.nn import EdgeConv

    torch.manual_seed(0)
    features = 8
    layer = EdgeConv(torch.nn.Sequential(torch.nn.Linear(2 * features, features),
                                         torch.nn.Tanh()), aggr="max").double()
    parameters = tuple(layer.parameters())

    def step(x, edge_index):
        out = layer(x, edge_index)
        return (out, *torch.autograd.grad(out.square().sum(), (x, *parameters)))

    compiled = torch.compile(step, options=segops.fusion.options(strict=True))
    for nodes in (50, 64):
        x, edge_index = models.random_graph(nodes, 4, features, torch.float64, seed=nodes)
        torch.testing.assert_close(compiled(x, edge_index), step(x, edge_index), rtol=1e-9,
                                   atol=1e-11)


def test_softmax_aggregation_is_one_cluster() -> None:
    """The temperature's gradient, a sum over every edge, is summed per
    receiver inside the cluster (and those sums added outside), so the
    gather by the senders and the scatter of x's gradient join it too: one
    kernel for the forward and backward."""
    build, _ = models.MODELS["softmax-aggregation"]
    workload = build(300, 16, torch.float64)
    step = torch.compile(workload.step, options=segops.fusion.options(strict=True))
    torch.testing.assert_close(step(*workload.inputs), workload.step(*workload.inputs),
                               rtol=1e-9, atol=1e-11)
    assert len(segops.fusion.reports()) == 1, [r.ops for r in segops.fusion.reports()]


def test_a_sum_of_rows_no_cluster_takes_stays_a_sum() -> None:
    """A sum over rows as long as the index, of float64 rows beside a
    float32 cluster: its per-segment form joins no cluster and is undone."""
    def model(x, y, index):
        summed = x.new_zeros(5, 3).index_add(0, index, (2.0 * x).exp())
        return summed, y.sum(0)

    generator = torch.Generator().manual_seed(0)
    x = torch.randn(40, 3, generator=generator, requires_grad=True)
    y = torch.randn(40, 3, dtype=torch.float64, generator=generator, requires_grad=True)
    index = torch.randint(0, 5, (40,), generator=generator)
    step = torch.compile(model, options=segops.fusion.options(strict=True))
    got, want = step(x, y, index), model(x, y, index)
    torch.testing.assert_close(got, want)
    assert not any("index_put" in " ".join(r.ops) and r.num_inputs > 3
                   for r in segops.fusion.reports())
