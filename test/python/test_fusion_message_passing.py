"""segops.fusion of message-passing code written for PyTorch: `pos[j]`,
`index_select`, and `index_add` / `index_put` / `scatter_add` into zeros by
the receivers, in compiled energy, force and force-matching steps, against
the same code run eagerly."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch
from torch import Tensor

import segops
import segops.fusion as fusion
from segops._fusion_index import index_op

pytest.importorskip("segops._native._segc", reason="segops.fusion needs the compiler module")

pytestmark = pytest.mark.compiler

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
from bench.message_passing import (  # noqa: E402 - the benchmark's system and potential
    fcc_system,
    lj_per_atom,
    neighbour_list,
)

ATOMS = 108  # 3 x 3 x 3 fcc cells: about 55 neighbours each


@pytest.fixture(autouse=True)
def fresh_compilation(fresh_fusion_compilation, monkeypatch):
    monkeypatch.setattr(torch._dynamo.config, "trace_autograd_ops", True)


def fused_compile(fn, **kwargs):
    return torch.compile(fn, options=fusion.options(strict=True), **kwargs)


def lj_index_select(pos, eps, sigma, i, j, shift):
    """index_select and an in-place index_add_ into zeros."""
    rij = pos.index_select(0, j) - pos.index_select(0, i) + shift
    s6 = (sigma * sigma / (rij * rij).sum(-1)) ** 3
    e = 2.0 * eps * (s6 * s6 - s6)
    e_atom = pos.new_zeros(pos.shape[0])
    e_atom.index_add_(0, i, e)
    return e_atom.sum().reshape(1)


def lj_scatter_add(pos, eps, sigma, i, j, shift):
    """PyG's scatter idiom: scatter_add_ with the index expanded over the
    features, into zeros_like; per-atom (N, 1) energies."""
    rij = pos[j] - pos[i] + shift
    s6 = (sigma * sigma / (rij * rij).sum(-1, keepdim=True)) ** 3
    e = 2.0 * eps * (s6 * s6 - s6)
    e_atom = torch.zeros_like(pos).scatter_add_(0, i[:, None].expand_as(rij), e.expand_as(rij))
    return e_atom.sum().reshape(1) / 3.0


def lj_segmented_sum(pos, eps, sigma, i, j, shift):
    """The gather as PyTorch writes it, the sum a segops op."""
    rij = pos[j] - pos[i] + shift
    s6 = (sigma * sigma / (rij * rij).sum(-1)) ** 3
    e = 2.0 * eps * (s6 * s6 - s6)
    return segops.segmented_sum(e, i, pos.shape[0]).sum().reshape(1)


def lj_gather(pos, eps, sigma, i, j, shift):
    """torch.gather with the senders expanded over the coordinates."""
    rij = pos.gather(0, j[:, None].expand(-1, 3)) - pos[i] + shift
    s6 = (sigma * sigma / (rij * rij).sum(-1)) ** 3
    e = 2.0 * eps * (s6 * s6 - s6)
    return torch.zeros(pos.shape[0], dtype=pos.dtype).index_add(0, i, e).sum().reshape(1)


POTENTIALS = {"index": lj_per_atom, "index_select": lj_index_select, "gather": lj_gather,
              "scatter_add": lj_scatter_add, "segmented_sum": lj_segmented_sum}


def system(dtype=torch.float64, index_dtype=torch.int64, atoms=ATOMS):
    pos0, box = fcc_system(atoms)
    i, j, shift = neighbour_list(pos0, box)
    pos = pos0.to(dtype).requires_grad_()
    eps = torch.tensor(1.1, dtype=dtype, requires_grad=True)
    sigma = torch.tensor(0.95, dtype=dtype, requires_grad=True)
    return pos, eps, sigma, i.to(index_dtype), j.to(index_dtype), shift.to(dtype)


def energy_forces(energy):
    def run(pos, *args):
        e = energy(pos, *args)
        return e.detach(), -torch.autograd.grad(e.sum(), pos)[0]
    return run


def force_matching(energy, e_ref: Tensor, f_ref: Tensor):
    def loss(pos, *args):
        e = energy(pos, *args)
        forces = -torch.autograd.grad(e.sum(), pos, create_graph=True)[0]
        return ((e - e_ref) ** 2).sum() + ((forces - f_ref) ** 2).mean()
    return loss


def assert_close(actual, expected, dtype):
    tol = 1e-9 if dtype == torch.float64 else 2e-4
    for a, e in zip(actual, expected):
        torch.testing.assert_close(a, e, rtol=tol, atol=tol * max(1.0, e.abs().max().item()))


def fused_ops() -> list[str]:
    return [op for r in fusion.reports() for op in r.ops]


@pytest.mark.parametrize("style", sorted(POTENTIALS))
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_energy_and_forces_fuse_the_gathers_and_sums(style, dtype):
    args = system(dtype)
    step = energy_forces(POTENTIALS[style])
    got = fused_compile(step, fullgraph=True)(*args)
    assert_close(got, step(*args), dtype)
    ops = fused_ops()
    # The gathers by both indices and the sums of the forces' two halves,
    # by the receivers and by the senders, are inside kernels.
    gathers = [op for op in ops if op in ("aten.index.Tensor", "aten.index_select.default",
                                          "aten.gather.default")]
    assert len(gathers) >= 2, ops
    assert sum(op == "aten.index_put.default" for op in ops) >= 2, ops
    if style == "gather":  # its adjoint: scatter_add by the expanded senders
        assert "aten.scatter_add.default" in ops, ops
    # No gradient flows out of the step: energy and forces are one kernel.
    assert len(fusion.reports()) == 1, fusion.reports()


def test_force_matching_gradient_with_respect_to_learnable_scalars():
    args = system(torch.float64)
    pos, eps, sigma = args[:3]
    with torch.no_grad():
        e_ref = lj_per_atom(*args) * 1.01
    f_ref = -torch.autograd.grad(lj_per_atom(*args).sum(), pos)[0].detach() * 0.99
    loss = force_matching(lj_per_atom, e_ref, f_ref)
    compiled = fused_compile(loss, fullgraph=True)
    got = torch.autograd.grad(compiled(*args), (eps, sigma))
    want = torch.autograd.grad(loss(*args), (eps, sigma))
    assert_close(got, want, torch.float64)
    reports = fusion.reports()
    assert any(not r.backward for r in reports) and any(r.backward for r in reports)
    # The double backward gathers the force cotangent by both indices.
    backward_ops = [op for r in reports if r.backward for op in r.ops]
    assert backward_ops.count("aten.index.Tensor") >= 2


def test_bitwise_identical_across_thread_counts_and_runs():
    args = system(torch.float32)
    compiled = fused_compile(energy_forces(lj_per_atom))
    threads = torch.get_num_threads()
    results = []
    try:
        for count in (1, 2, 2):
            torch.set_num_threads(count)
            results.append([t.detach().clone() for t in compiled(*args)])
    finally:
        torch.set_num_threads(threads)
    for other in results[1:]:
        for a, b in zip(results[0], other):
            assert torch.equal(a, b)


def test_unsorted_receivers_and_int32_indices():
    pos, eps, sigma, i, j, shift = system(torch.float64, torch.int32)
    order = torch.randperm(len(i), generator=torch.Generator().manual_seed(3))
    args = (pos, eps, sigma, i[order], j[order], shift[order])
    step = energy_forces(lj_per_atom)
    assert_close(fused_compile(step)(*args), step(*args), torch.float64)
    assert fusion.reports()


def test_an_in_place_change_of_the_senders_is_seen():
    pos, eps, sigma, i, j, shift = system(torch.float64)
    step = energy_forces(lj_per_atom)
    compiled = fused_compile(step)
    compiled(pos, eps, sigma, i, j, shift)
    # Other senders for a few edges (the index cache must not keep the old
    # content's facts), never the receiver itself.
    j[:5] = (i[:5] + 1 + torch.arange(5)) % ATOMS
    assert_close(compiled(pos, eps, sigma, i, j, shift),
                 step(pos, eps, sigma, i, j, shift), torch.float64)


def test_a_sender_out_of_range_raises():
    pos, eps, sigma, i, j, shift = system(torch.float64)
    compiled = fused_compile(energy_forces(lj_per_atom))
    compiled(pos, eps, sigma, i, j, shift)
    bad = j.clone()
    bad[7] = ATOMS + 3
    with pytest.raises((ValueError, IndexError, RuntimeError), match="out of range|index"):
        compiled(pos, eps, sigma, i, bad, shift)


def schnet_layer(pos, x, mu, i, j, shift):
    """A continuous-filter convolution over (N, F) features: x[j] times a
    radial filter, summed into the receivers with index_add."""
    rij = pos[j] - pos[i] + shift
    r = torch.sqrt((rij * rij).sum(-1))
    d = r[:, None] - mu
    message = x[j] * torch.exp(-4.0 * d * d)
    h = torch.zeros_like(x).index_add(0, i, message)
    return (h * h).sum().reshape(1)


@pytest.mark.parametrize("features", [2, 8])
def test_wide_rows_of_a_filter_convolution(features):
    pos, _, _, i, j, shift = system(torch.float64)
    generator = torch.Generator().manual_seed(2)
    x = torch.randn(ATOMS, features, dtype=torch.float64, generator=generator,
                    requires_grad=True)
    mu = torch.linspace(0.5, 2.5, features, dtype=torch.float64)

    def step(pos, x):
        e = schnet_layer(pos, x, mu, i, j, shift)
        return (e, *torch.autograd.grad(e.sum(), (pos, x)))

    assert_close(fused_compile(step)(pos, x), step(pos, x), torch.float64)
    assert "aten.index_put.default" in fused_ops()


def test_a_filter_convolution_saves_no_edge_rows_of_features():
    """Backward of the layer compiled alone: the per-feature centres mu are
    a uniform input, and the backward recomputes the E x F exp() rows
    rather than having the forward save them."""
    pos, _, _, i, j, shift = system(torch.float64)
    generator = torch.Generator().manual_seed(4)
    x = torch.randn(ATOMS, 8, dtype=torch.float64, generator=generator, requires_grad=True)
    mu = torch.linspace(0.5, 2.5, 8, dtype=torch.float64)
    compiled = fused_compile(schnet_layer)
    got = compiled(pos, x, mu, i, j, shift)
    want = schnet_layer(pos, x, mu, i, j, shift)
    assert_close([got, *torch.autograd.grad(got.sum(), (pos, x))],
                 [want, *torch.autograd.grad(want.sum(), (pos, x))], torch.float64)
    (forward,) = [r for r in fusion.reports() if not r.backward]
    (backward,) = [r for r in fusion.reports() if r.backward]
    assert "aten.exp.default" in forward.ops
    assert "aten.exp.default" in backward.recomputed


def test_sums_that_are_not_segment_sums_stay_outside():
    """Into a tensor that is not zeros, or by a 2-D index of the user's: no
    segment sum; the results are still right."""
    pos, eps, sigma, i, j, shift = system(torch.float64)

    def into_ones(pos, i, j, shift):
        rij = pos[j] - pos[i] + shift
        r2 = (rij * rij).sum(-1)
        return torch.ones(pos.shape[0], dtype=pos.dtype).index_add(0, i, r2).sum().reshape(1)

    def by_a_2d_index(pos, i, j, shift):
        rij = pos[j] - pos[i] + shift
        columns = torch.stack([i, j, i], 1)  # each column its own index
        return torch.zeros_like(pos).scatter_add(0, columns, rij * rij).sum().reshape(1)

    for fn in (into_ones, by_a_2d_index):
        fusion.clear_reports()
        step = energy_forces(fn)
        assert_close(fused_compile(step)(pos, i, j, shift), step(pos, i, j, shift),
                     torch.float64)
        ops = fused_ops()
        # The forces' two sums (of the gathers' adjoints) fuse; the sum into
        # ones and the scatter by a 2-D index do not.
        assert ops.count("aten.index_put.default") == 2, ops
        assert "aten.scatter_add.default" not in ops


def test_index_ops_recognised_in_an_aten_graph():
    from torch.fx.experimental.proxy_tensor import make_fx

    def fn(x, src, i, j):
        a = x[j]
        b = x.index_select(0, i)
        c = torch.zeros(4, 3, dtype=x.dtype).index_add(0, i, src)
        d = torch.zeros(4, 3, dtype=x.dtype).scatter_add(0, i[:, None].expand(5, 3), src)
        e = torch.full((4, 3), 2.0, dtype=x.dtype).index_add(0, i, src)  # not zeros
        f = x.gather(0, j[:, None].expand(5, 3))
        g = x.gather(0, torch.stack([j, i, j], 1))  # a 2-D index: no row gather
        return a, b, c, d, e, f, g

    x = torch.randn(4, 3)
    src = torch.randn(5, 3)
    i = torch.tensor([0, 0, 1, 3, 3])
    j = torch.tensor([2, 0, 1, 1, 3])
    graph = make_fx(fn, tracing_mode="fake")(x, src, i, j).graph
    x_node, src_node, i_node, j_node = [n for n in graph.nodes if n.op == "placeholder"]
    found = [op for n in graph.nodes if n.op == "call_function"
             if (op := index_op(n)) is not None]
    assert [(op.kind, op.values, op.index) for op in found] == [
        ("gather", x_node, j_node), ("gather", x_node, i_node),
        ("sum", src_node, i_node), ("sum", src_node, i_node), ("gather", x_node, j_node)]
    assert all(op.count == 4 for op in found)


def test_reports_name_the_index_of_each_gather_and_sum():
    """FusionReport.by: the receivers' gathers and sums (the cluster's
    index) apart from the senders' (another index)."""
    args = system(torch.float64)
    fused_compile(energy_forces(POTENTIALS["index"]), fullgraph=True)(*args)
    (report,) = fusion.reports()
    assert report.index and len(report.by) == len(report.ops)
    roles = {(op, by) for op, by in zip(report.ops, report.by) if by}
    assert ("aten.index.Tensor", "receivers") in roles, roles
    assert ("aten.index.Tensor", "senders") in roles, roles
    assert ("aten.index_put.default", "receivers") in roles, roles
    assert all(by == "" for op, by in zip(report.ops, report.by)
               if op not in ("aten.index.Tensor", "aten.index_put.default",
                             "aten.index_select.default", "aten.gather.default",
                             "aten.scatter_add.default"))


def lj_minimum_image(pos, eps, sigma, i, j, box):
    """An MD code's potential: the minimum-image convention inside the
    model (`d - box * round(d / box)`) and a smooth cosine cutoff."""
    d = pos[j] - pos[i]
    d = d - box * torch.round(d / box)
    r2 = (d * d).sum(-1)
    s6 = (sigma * sigma / r2) ** 3
    cutoff = 0.5 * (torch.cos(torch.pi * torch.sqrt(r2) / 2.5) + 1.0)
    e = 2.0 * eps * (s6 * s6 - s6) * torch.where(r2 < 2.5**2, cutoff, 0.0)
    return pos.new_zeros(pos.shape[0]).index_add_(0, i, e).sum().reshape(1)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_the_minimum_image_convention_fuses(dtype):
    """round and cos (not only arithmetic) join the cluster: energy and
    forces are still one kernel, equal to eager's; so in segops.jit."""
    pos, eps, sigma, i, j, _ = system(dtype)
    box = fcc_system(ATOMS)[1]
    step = energy_forces(lambda p, e, s, a, b: lj_minimum_image(p, e, s, a, b, box))
    got = fused_compile(step, fullgraph=True)(pos, eps, sigma, i, j)
    assert_close(got, step(pos, eps, sigma, i, j), dtype)
    ops = fused_ops()
    assert "aten.cos.default" in ops and "aten.floor.default" not in ops, ops
    assert any(op.startswith("aten.round") for op in ops), ops
    assert len(fusion.reports()) == 1, fusion.reports()

    def per_atom(pos, eps, sigma, i, j, num_atoms: int):
        d = pos[j] - pos[i]
        d = d - box * torch.round(d / box)
        s6 = (sigma * sigma / (d * d).sum(-1)) ** 3
        return segops.segmented_sum(2.0 * eps * (s6 * s6 - s6), i, num_atoms)

    jitted = segops.jit(per_atom)(pos, eps, sigma, i, j, ATOMS)
    torch.testing.assert_close(jitted, per_atom(pos, eps, sigma, i, j, ATOMS),
                               rtol=2e-4 if dtype == torch.float32 else 1e-9, atol=1e-6)


def _scatter_max(src, index, count, include_self=False, reduce="amax"):
    """PyG's scatter(..., reduce="max") (torch_geometric.utils.scatter)."""
    return src.new_zeros(count, src.shape[1]).scatter_reduce(
        0, index[:, None].expand_as(src), src, reduce, include_self=include_self)


def _graph_inputs(seed=0, dtype=torch.float64):
    generator = torch.Generator().manual_seed(seed)
    index = torch.randint(0, 18, (300,), generator=generator)  # segments 18, 19 empty
    src = torch.randn(300, 8, dtype=dtype, generator=generator, requires_grad=True)
    w = torch.randn(8, 8, dtype=dtype, generator=generator, requires_grad=True)
    return src, w, index


@pytest.mark.parametrize("reduce", ["amax", "amin"])
@pytest.mark.parametrize("include_self", [False, True])
def test_scatter_reduce_extrema_fuse_as_segment_ops(reduce, include_self):
    """PyG's softmax (a max by the index, subtracted, exp, summed) and max
    pooling: scatter_reduce joins the cluster as seg.max / seg.min (with
    include_self, the zeros' 0 takes part), values and gradients as eager's,
    empty segments included."""
    def model(src, w, index):
        logits = src @ w
        top = _scatter_max(logits, index, 20, include_self, reduce)
        e = (logits - top[index]).exp()
        attention = e / (_scatter_max(e, index, 20, reduce="sum")[index] + 1e-16)
        return _scatter_max(attention * src, index, 20, include_self, reduce)

    src, w, index = _graph_inputs()
    got = fused_compile(model)(src, w, index)
    want = model(src, w, index)
    assert_close([got, *torch.autograd.grad(got.square().sum(), (src, w))],
                 [want, *torch.autograd.grad(want.square().sum(), (src, w))], torch.float64)
    forward = [op for r in fusion.reports() if not r.backward for op in r.ops]
    assert forward.count("aten.scatter_reduce.two") >= 2, forward


def test_scatter_reduce_mean_and_index_reduce():
    def model(src, index):
        mean = _scatter_max(src, index, 20, reduce="mean")
        top = src.new_zeros(20, 8).index_reduce(0, index, src.exp(), "amax", include_self=False)
        return mean * top

    src, _, index = _graph_inputs(seed=1)
    got = fused_compile(model)(src, index)
    want = model(src, index)
    assert_close([got, *torch.autograd.grad(got.sum(), src)],
                 [want, *torch.autograd.grad(want.sum(), src)], torch.float64)
    ops = [op for r in fusion.reports() for op in r.ops]
    assert "aten.scatter_reduce.two" in ops or "aten.index_reduce.default" in ops, ops


def test_a_max_is_only_ever_by_the_clusters_own_index():
    """seg.scatter_sum sums only: a max by the senders beside sums by the
    receivers is never a second-index op of their cluster (it may seed a
    cluster of the senders' own), and the result is still eager's."""
    pos, eps, sigma, i, j, shift = system()

    def model(pos, i, j):
        rows = (pos[j] - pos[i] + shift).square()
        by_senders = _scatter_max(rows, j, ATOMS)
        return pos.new_zeros(ATOMS, 3).index_add(0, i, rows * 2.0) + by_senders

    got = fused_compile(model)(pos, i, j)
    torch.testing.assert_close(got, model(pos, i, j))
    for report in fusion.reports():
        for op, by in zip(report.ops, report.by):
            if op == "aten.scatter_reduce.two":
                assert by == "receivers", (report.ops, report.by)
