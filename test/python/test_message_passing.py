"""Message passing: gathers by an unsorted sender index, per-edge work,
sums into sorted receivers, through the library ops, segops.jit functions
of several indices, segops.Graph and torch.compile, against pure PyTorch
(index_select + index_add_); the transposed order's cache; determinism."""

from __future__ import annotations

import textwrap
from collections.abc import Callable

import pytest
import torch
from conftest import run_simulated
from torch import Tensor

import segops
from segops import ops

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")


def lattice_system(systems: int, side: int, dtype: torch.dtype, seed: int = 0,
                   cutoff: float = 1.6) -> dict:
    """`systems` cubes of side^3 atoms (a jittered unit grid), a full
    neighbour list within `cutoff` per system: receivers sorted, each
    receiver's senders in random order."""
    generator = torch.Generator().manual_seed(seed)
    grid = torch.stack(torch.meshgrid(*[torch.arange(side)] * 3, indexing="ij"), -1)
    base = grid.reshape(-1, 3).to(dtype)
    positions, receivers, senders = [], [], []
    per = base.shape[0]
    for s in range(systems):
        pos = base + 0.2 * (torch.rand(base.shape, generator=generator, dtype=dtype) - 0.5)
        positions.append(pos)
        d = ((pos[None] - pos[:, None]) ** 2).sum(-1)
        for a in range(per):
            near = torch.nonzero((d[a] < cutoff**2) & (d[a] > 0)).flatten()
            near = near[torch.randperm(near.numel(), generator=generator)]
            receivers.append(torch.full_like(near, s * per + a))
            senders.append(near + s * per)
    return {
        "pos": torch.cat(positions),
        "i": torch.cat(receivers),
        "j": torch.cat(senders),
        "batch": torch.arange(systems).repeat_interleave(per),
        "atoms": systems * per,
        "systems": systems,
    }


def lj_reference(pos: Tensor, eps: Tensor, sigma: Tensor, i: Tensor, j: Tensor,
                 batch: Tensor, atoms: int, systems: int) -> Tensor:
    rij = pos.index_select(0, j) - pos.index_select(0, i)
    s6 = (sigma * sigma / (rij * rij).sum(-1)) ** 3
    e = 2.0 * eps * (s6 * s6 - s6)
    e_atom = torch.zeros(atoms, dtype=pos.dtype).index_add(0, i.long(), e)
    return torch.zeros(systems, dtype=pos.dtype).index_add(0, batch.long(), e_atom)


def lj_library(pos: Tensor, eps: Tensor, sigma: Tensor, i: Tensor, j: Tensor,
               batch: Tensor, atoms: int, systems: int) -> Tensor:
    rij = segops.segmented_gather(pos, j) - segops.segmented_gather(pos, i)
    s6 = (sigma * sigma / (rij * rij).sum(-1)) ** 3
    e = 2.0 * eps * (s6 * s6 - s6)
    return segops.segmented_sum(segops.segmented_sum(e, i, atoms), batch, systems)


lj_jit = segops.jit(lj_library)


def forces_and_training(energy, system: dict, dtype: torch.dtype, index_dtype: torch.dtype
                        ) -> tuple[Tensor, Tensor, tuple[Tensor, Tensor]]:
    """Energies, forces, and the force-matching loss's gradient with
    respect to 0-d learnable eps and sigma."""
    pos = system["pos"].to(dtype).requires_grad_()
    eps = torch.tensor(0.8, dtype=dtype, requires_grad=True)
    sigma = torch.tensor(0.9, dtype=dtype, requires_grad=True)
    i, j, batch = (system[k].to(index_dtype) for k in ("i", "j", "batch"))
    e = energy(pos, eps, sigma, i, j, batch, system["atoms"], system["systems"])
    forces = -torch.autograd.grad(e.sum(), pos, create_graph=True)[0]
    loss = (e**2).sum() + (forces**2).mean()
    return e.detach(), forces.detach(), torch.autograd.grad(loss, (eps, sigma))


@pytest.mark.parametrize("energy", [lj_library, lj_jit], ids=["library", "jit"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("index_dtype", [torch.int32, torch.int64])
def test_pair_potential_forces_and_training(energy, dtype: torch.dtype,
                                            index_dtype: torch.dtype) -> None:
    system = lattice_system(2, 3, torch.float64)
    got = forces_and_training(energy, system, dtype, index_dtype)
    want = forces_and_training(lj_reference, system, torch.float64, torch.int64)
    tolerance = {"rtol": 1e-4, "atol": 1e-4} if dtype == torch.float32 else {}
    torch.testing.assert_close(got[0], want[0].to(dtype), **tolerance)
    torch.testing.assert_close(got[1], want[1].to(dtype), **tolerance)
    for a, b in zip(got[2], want[2]):
        torch.testing.assert_close(a, b.to(dtype), **tolerance)


def test_jit_with_three_indices_runs_kernel_steps() -> None:
    """The receivers' stage is one kernel (the gather by i, the gather by
    the unsorted senders read in registers, the pair energy and the sum),
    the batch's another."""
    system = lattice_system(1, 3, torch.float64)
    args = (system["pos"], torch.tensor(1.0, dtype=torch.float64),
            torch.tensor(1.0, dtype=torch.float64), system["i"], system["j"],
            system["batch"], system["atoms"], system["systems"])
    ir = lj_jit.mlir(*args)
    assert ir.count("func.func") == 2
    first, second = ir.split("func.func")[1:]
    assert "seg.gather " in first and "seg.gather_rows" in first and "seg.sum" in first
    assert "math" not in first
    assert second.count("seg.sum") == 1


def test_compile_fullgraph_energy_and_forces() -> None:
    system = lattice_system(2, 3, torch.float64)
    pos = system["pos"].clone().requires_grad_()
    eps, sigma = torch.tensor(1.0, dtype=torch.float64), torch.tensor(0.95, dtype=torch.float64)
    args = (eps, sigma, system["i"], system["j"], system["batch"], system["atoms"],
            system["systems"])
    _assert_energies_and_forces_match(torch.compile(lj_jit, fullgraph=True), pos, args)


def _assert_energies_and_forces_match(energy: Callable[..., Tensor], pos: Tensor,
                                      args: tuple) -> None:
    """energy(pos, *args) and its forces equal the pure-PyTorch reference's."""
    e = energy(pos, *args)
    forces = -torch.autograd.grad(e.sum(), pos)[0]
    e_ref = lj_reference(pos, *args)
    forces_ref = -torch.autograd.grad(e_ref.sum(), pos)[0]
    torch.testing.assert_close(e, e_ref)
    torch.testing.assert_close(forces, forces_ref)


def test_compile_fullgraph_forces_inside_the_step(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(torch._dynamo.config, "trace_autograd_ops", True)
    system = lattice_system(2, 3, torch.float64, seed=3)
    args = (system["i"], system["j"], system["batch"], system["atoms"], system["systems"])

    def step(pos: Tensor, eps: Tensor, sigma: Tensor, energy=lj_jit) -> Tensor:
        e = energy(pos, eps, sigma, *args)
        forces = -torch.autograd.grad(e.sum(), pos, create_graph=True)[0]
        return (e**2).sum() + (forces**2).mean()

    def grads(fn) -> tuple[Tensor, ...]:
        pos = system["pos"].clone().requires_grad_()
        eps = torch.tensor(1.0, dtype=torch.float64, requires_grad=True)
        sigma = torch.tensor(0.95, dtype=torch.float64, requires_grad=True)
        return torch.autograd.grad(fn(pos, eps, sigma), (eps, sigma))

    got = grads(torch.compile(step, fullgraph=True))
    want = grads(lambda p, e, s: step(p, e, s, energy=lj_reference))
    for a, b in zip(got, want):
        torch.testing.assert_close(a, b)


def test_gradgradcheck_through_the_unsorted_gather() -> None:
    generator = torch.Generator().manual_seed(5)
    y = torch.randn(7, 3, dtype=torch.float64, generator=generator, requires_grad=True)
    j = torch.randint(0, 7, (40,), generator=generator)
    weight = torch.randn(40, 3, dtype=torch.float64, generator=generator)

    def fn(y: Tensor) -> Tensor:
        g = segops.segmented_gather(y, j)
        return g * g * weight

    assert torch.autograd.gradcheck(fn, (y,))
    assert torch.autograd.gradgradcheck(fn, (y,))
    # Third order, against index_select.
    def third(gather) -> Tensor:
        x = y.detach().clone().requires_grad_()
        out = (gather(x) ** 4 * weight).sum()
        (g1,) = torch.autograd.grad(out, x, create_graph=True)
        (g2,) = torch.autograd.grad((g1 * g1).sum(), x, create_graph=True)
        (g3,) = torch.autograd.grad(g2.sum(), x)
        return g3

    torch.testing.assert_close(third(lambda x: segops.segmented_gather(x, j)),
                               third(lambda x: x.index_select(0, j)))


def test_gradgradcheck_of_a_jit_function_of_three_indices() -> None:
    system = lattice_system(1, 2, torch.float64, cutoff=1.8)
    pos = system["pos"].clone().requires_grad_()
    eps = torch.tensor(0.7, dtype=torch.float64, requires_grad=True)
    sigma = torch.tensor(0.8, dtype=torch.float64, requires_grad=True)
    rest = (system["i"], system["j"], system["batch"], system["atoms"], system["systems"])
    assert torch.autograd.gradcheck(lambda p, e, s: lj_jit(p, e, s, *rest), (pos, eps, sigma))
    assert torch.autograd.gradgradcheck(lambda p, e, s: lj_jit(p, e, s, *rest),
                                        (pos, eps, sigma))


def test_opcheck_with_an_unsorted_index() -> None:
    generator = torch.Generator().manual_seed(2)
    y = torch.randn(9, 3, dtype=torch.float64, generator=generator, requires_grad=True)
    j = torch.randint(0, 9, (50,), generator=generator, dtype=torch.int32)
    x = torch.randn(50, 3, dtype=torch.float64, generator=generator, requires_grad=True)
    torch.library.opcheck(torch.ops.segops.segmented_gather.default, (y, j, 9))
    torch.library.opcheck(torch.ops.segops.segmented_sum.default, (x, j, 9))


def _forces(system: dict, threads: int) -> tuple[Tensor, Tensor]:
    previous = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        _, forces, grads = forces_and_training(lj_jit, system, torch.float32, torch.int32)
        return forces, torch.stack(grads)
    finally:
        torch.set_num_threads(previous)


def test_bitwise_identical_across_thread_counts_and_runs() -> None:
    """Every pass is a sorted segment reduction (the senders' over their
    transposed order): no atomics, an order fixed by the index alone."""
    system = lattice_system(3, 12, torch.float64, cutoff=1.5)
    assert system["i"].numel() > 65536  # threaded kernels
    one = _forces(system, 1)
    two = _forces(system, 2)
    again = _forces(system, 2)
    for a, b, c in zip(one, two, again):
        assert torch.equal(a, b)
        assert torch.equal(b, c)


def test_scatter_by_senders_is_deterministic_and_sorts_once() -> None:
    generator = torch.Generator().manual_seed(4)
    j = torch.randint(0, 1000, (200000,), generator=generator, dtype=torch.int32)
    x = torch.randn(200000, 3, generator=generator)
    native = ops.native_kernels()
    first = segops.segmented_sum(x, j, 1000)
    sorts = native.index_sorts()
    for threads in (1, 2):
        previous = torch.get_num_threads()
        torch.set_num_threads(threads)
        try:
            assert torch.equal(segops.segmented_sum(x, j, 1000), first)
        finally:
            torch.set_num_threads(previous)
    assert native.index_sorts() == sorts  # the transposed order was remembered
    want = torch.zeros(1000, 3, dtype=torch.float64).index_add_(0, j.long(), x.double())
    torch.testing.assert_close(first.double(), want, rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("index_dtype", [torch.int32, torch.int64])
def test_in_place_change_of_the_index_invalidates_its_order(index_dtype: torch.dtype) -> None:
    """A mean walks the transposed order (a plain sum runs by chunks,
    test_sums_by_chunks.py)."""
    generator = torch.Generator().manual_seed(6)
    j = torch.randint(0, 50, (3000,), generator=generator).to(index_dtype)
    x = torch.randn(3000, dtype=torch.float64, generator=generator)
    native = ops.native_kernels()

    def want() -> Tensor:
        total = torch.zeros(50, dtype=torch.float64).index_add_(0, j.long(), x)
        count = torch.zeros(50, dtype=torch.float64).index_add_(
            0, j.long(), torch.ones_like(x))
        return total / count.clamp(min=1)

    segops.clear_index_cache()  # no order of this content from an earlier test
    segops.segmented_mean(x, j, 50)
    sorts = native.index_sorts()
    j[:10] = 49 - j[:10]  # in place: the version counter moves
    got = segops.segmented_mean(x, j, 50)
    assert native.index_sorts() == sorts + 1
    torch.testing.assert_close(got, want())
    j.copy_(torch.flip(j, [0]))
    torch.testing.assert_close(segops.segmented_mean(x, j, 50), want())


@pytest.mark.parametrize("index_dtype", [torch.int32, torch.int64])
def test_an_index_made_anew_with_the_same_content_sorts_once(index_dtype: torch.dtype) -> None:
    """PyG's GCNConv and GATConv append self-loops to edge_index on every
    call: a new tensor, the same content. Its order is found by content."""
    generator = torch.Generator().manual_seed(8)
    j = torch.randint(0, 50, (3000,), generator=generator).to(index_dtype)
    x = torch.randn(3000, dtype=torch.float64, generator=generator)
    loops = torch.arange(50).to(index_dtype)
    native = ops.native_kernels()
    segops.clear_index_cache()
    want = segops.segmented_mean(x, torch.cat([j, loops])[:3000], 50)
    sorts = native.index_sorts()
    for _ in range(3):
        again = torch.cat([j, loops])[:3000]  # a new tensor, j's content
        assert torch.equal(segops.segmented_mean(x, again, 50), want)
    assert native.index_sorts() == sorts
    other = j.clone()
    other[0] = (other[0] + 1) % 50
    expected = torch.zeros(50, dtype=torch.float64).index_add_(0, other.long(), x) / \
        torch.bincount(other.long(), minlength=50).clamp(min=1)
    torch.testing.assert_close(segops.segmented_mean(x, other, 50), expected)
    assert native.index_sorts() == sorts + 1


def test_a_freed_index_never_hits_another_tensors_order() -> None:
    """The cache holds an index's storage weakly: a new index in reused
    memory is a new key."""
    x = torch.randn(4000, dtype=torch.float64)
    for seed in range(5):
        generator = torch.Generator().manual_seed(seed)
        j = torch.randint(0, 30, (4000,), generator=generator, dtype=torch.int32)
        want = torch.zeros(30, dtype=torch.float64).index_add_(0, j.long(), x)
        torch.testing.assert_close(segops.segmented_sum(x, j, 30), want)
        del j


# -- segops.Graph -----------------------------------------------------------


def test_graph_from_coo_roles_and_csr_agree() -> None:
    system = lattice_system(1, 3, torch.float64)
    i, j, atoms = system["i"], system["j"], system["atoms"]
    pyg = segops.Graph(torch.stack([j, i]), senders=0, receivers=1)
    nequip = segops.Graph(torch.stack([i, j]), receivers=0, senders=1)
    named = segops.Graph(receivers=i, senders=j, num_nodes=atoms)
    ptr = torch.zeros(atoms + 1, dtype=torch.int64)
    ptr[1:] = torch.cumsum(torch.bincount(i, minlength=atoms), 0)
    csr = segops.Graph(ptr=ptr, senders=j)
    for g in (pyg, nequip, named, csr):
        assert g.num_nodes == atoms and g.num_edges == i.numel()
        assert torch.equal(g.receivers.long(), i) and torch.equal(g.senders.long(), j)
        assert g.edge_order is None
        assert torch.equal(g.senders[g.sender_order].long(), torch.sort(j, stable=True)[0])


def test_graph_sorts_edges_by_receiver_and_permutes_features() -> None:
    generator = torch.Generator().manual_seed(7)
    receivers = torch.randint(0, 20, (100,), generator=generator)
    senders = torch.randint(0, 20, (100,), generator=generator)
    features = torch.arange(100.0)
    g = segops.Graph(receivers=receivers, senders=senders, num_nodes=20)
    assert g.edge_order is not None
    assert bool((g.receivers[1:] >= g.receivers[:-1]).all())
    permuted = g.permute(features)
    assert torch.equal(g.receivers.long(), receivers[permuted.long()])
    assert torch.equal(g.senders.long(), senders[permuted.long()])
    # The same sum either way.
    torch.testing.assert_close(
        segops.segmented_sum(permuted, g.receivers, 20),
        torch.zeros(20).index_add_(0, receivers, features))


@pytest.mark.parametrize("make, message", [
    (lambda e: segops.Graph(), "needs edge_index"),
    (lambda e: segops.Graph(e), "name the rows' roles"),
    (lambda e: segops.Graph(e, senders=0, receivers=0), "name the rows' roles"),
    (lambda e: segops.Graph(e[:1], senders=0, receivers=1), "must be a \\(2, E\\) tensor"),
    (lambda e: segops.Graph(receivers=e[0], senders=e[1][:-1]), "must have one length"),
    (lambda e: segops.Graph(receivers=e[0], senders=e[1], num_nodes=3), "out of range"),
    (lambda e: segops.Graph(receivers=e[0].float(), senders=e[1]), "int32 or int64"),
    (lambda e: segops.Graph(ptr=torch.tensor([0, 2, 1]), senders=e[1]), "must rise from 0"),
])
def test_graph_rejects_bad_input(make, message: str) -> None:
    edge_index = torch.tensor([[0, 1, 2, 4], [1, 2, 3, 0]])
    with pytest.raises((ValueError, TypeError), match=message):
        make(edge_index)


def test_graph_passes_into_jit_functions() -> None:
    system = lattice_system(2, 3, torch.float64)

    @segops.jit
    def energy(pos: Tensor, eps: Tensor, sigma: Tensor, graph: segops.Graph, batch: Tensor,
               systems: int) -> Tensor:
        rij = (segops.segmented_gather(pos, graph.senders)
               - segops.segmented_gather(pos, graph.receivers))
        s6 = (sigma * sigma / (rij * rij).sum(-1)) ** 3
        e = segops.segmented_sum(2.0 * eps * (s6 * s6 - s6), graph.receivers, graph.num_nodes)
        return segops.segmented_sum(e, batch, systems)

    graph = segops.Graph(torch.stack([system["j"], system["i"]]), senders=0, receivers=1)
    pos = system["pos"].clone().requires_grad_()
    eps, sigma = torch.tensor(1.0, dtype=torch.float64), torch.tensor(0.9, dtype=torch.float64)
    got = energy(pos, eps, sigma, graph, system["batch"], system["systems"])
    want = lj_reference(pos, eps, sigma, system["i"], system["j"], system["batch"],
                        system["atoms"], system["systems"])
    torch.testing.assert_close(got, want)
    torch.testing.assert_close(torch.autograd.grad(got.sum(), pos)[0],
                               torch.autograd.grad(want.sum(), pos)[0])


def test_a_gnn_layer_over_wide_rows() -> None:
    """A SchNet-style filter convolution: (N, F) node features gathered by
    the senders, an elementwise radial filter, summed by receiver."""
    system = lattice_system(1, 3, torch.float64)
    generator = torch.Generator().manual_seed(9)
    features = 8
    x = torch.randn(system["atoms"], features, dtype=torch.float64, generator=generator,
                    requires_grad=True)
    mu = torch.linspace(0.5, 1.5, features, dtype=torch.float64)

    def layer(pos: Tensor, x: Tensor, mu: Tensor, i: Tensor, j: Tensor, atoms: int,
              gather, reduce) -> Tensor:
        rij = gather(pos, j) - gather(pos, i)
        r = torch.sqrt((rij * rij).sum(-1))
        d = r[:, None] - mu
        return reduce(gather(x, j) * torch.exp(-4.0 * d * d), i, atoms)

    @segops.jit
    def fused(pos: Tensor, x: Tensor, mu: Tensor, i: Tensor, j: Tensor, atoms: int) -> Tensor:
        return layer(pos, x, mu, i, j, atoms, segops.segmented_gather, segops.segmented_sum)

    def reference(pos: Tensor, x: Tensor, mu: Tensor, i: Tensor, j: Tensor, atoms: int
                  ) -> Tensor:
        return layer(pos, x, mu, i, j, atoms, lambda v, k: v.index_select(0, k),
                     lambda v, k, n: torch.zeros(n, v.shape[1], dtype=v.dtype)
                     .index_add(0, k, v))

    pos = system["pos"].clone().requires_grad_()
    args = (mu, system["i"], system["j"], system["atoms"])
    got = fused(pos, x, *args)
    want = reference(pos, x, *args)
    torch.testing.assert_close(got, want)
    weight = torch.randn_like(got)
    for a, b in zip(torch.autograd.grad((got * weight).sum(), (pos, x)),
                    torch.autograd.grad((want * weight).sum(), (pos, x))):
        torch.testing.assert_close(a, b)


def test_pyg_style_indexing_and_counts_from_shapes() -> None:
    """`pos[j]` and `index_select` by an index argument are gathers (in the
    receivers' kernel for i; by the transposed order's adjoint for j), and
    a count may be a tensor's length."""
    system = lattice_system(2, 3, torch.float64, seed=11)

    @segops.jit
    def energy(pos: Tensor, eps: Tensor, sigma: Tensor, i: Tensor, j: Tensor, batch: Tensor,
               systems: int) -> Tensor:
        rij = pos[j] - pos.index_select(0, i)
        s6 = (sigma * sigma / (rij * rij).sum(-1)) ** 3
        e = segops.segmented_sum(2.0 * eps * (s6 * s6 - s6), i, pos.shape[0])
        return segops.segmented_sum(e, batch, systems)

    pos = system["pos"].clone().requires_grad_()
    eps = torch.tensor(1.0, dtype=torch.float64, requires_grad=True)
    sigma = torch.tensor(0.9, dtype=torch.float64, requires_grad=True)
    args = (system["i"], system["j"], system["batch"])
    got = energy(pos, eps, sigma, *args, system["systems"])
    want = lj_reference(pos, eps, sigma, *args, system["atoms"], system["systems"])
    torch.testing.assert_close(got, want)
    assert energy.mlir(pos, eps, sigma, *args, system["systems"]).count("func.func") == 2
    for a, b in zip(torch.autograd.grad(got.sum(), (pos, eps, sigma)),
                    torch.autograd.grad(want.sum(), (pos, eps, sigma))):
        torch.testing.assert_close(a, b)


def test_an_index_computed_in_the_function_is_a_jit_error() -> None:
    @segops.jit
    def bad(x: Tensor, i: Tensor, j: Tensor, n: int) -> Tensor:
        return segops.segmented_sum(segops.segmented_gather(x, j + 0), i, n)

    i = torch.tensor([0, 0, 1, 1])
    j = torch.tensor([1, 0, 0, 1])
    with pytest.raises(segops.JitError, match="index computed in the function"):
        bad(torch.randn(2, dtype=torch.float64), i, j, 2)


@pytest.mark.slow
@pytest.mark.simulator
def test_pair_potential_on_the_gpu_simulator() -> None:
    """The GPU kernels of every step (and the sorted run over the senders'
    transposed order) through segrt's launcher on the simulated driver."""
    script = textwrap.dedent("""
        import torch, segops
        from test_message_passing import (forces_and_training, lattice_system, lj_jit,
                                          lj_reference)
        system = lattice_system(1, 3, torch.float64)
        got = forces_and_training(lj_jit, system, torch.float64, torch.int32)
        want = forces_and_training(lj_reference, system, torch.float64, torch.int64)
        torch.testing.assert_close(got[1], want[1])
        for a, b in zip(got[2], want[2]):
            torch.testing.assert_close(a, b)
        print("ok")
    """)
    run_simulated(script)


def test_compile_dynamic_forces_of_any_system_size_compile_once() -> None:
    """jit_call's Meta kernel (C++) shapes every level's outputs in the
    trace's symbols: the forces, summed by the senders into as many rows
    as pos has (atoms, not edges), keep working as atoms, edges and
    systems change, with one graph."""
    from torch._dynamo.utils import counters

    torch._dynamo.reset()
    counters.clear()
    compiled = torch.compile(lj_jit, fullgraph=True, dynamic=True)
    for systems, side in ((2, 3), (3, 3), (2, 4)):
        system = lattice_system(systems, side, torch.float64, seed=systems)
        args = (torch.tensor(1.0, dtype=torch.float64), torch.tensor(0.95, dtype=torch.float64),
                system["i"], system["j"], system["batch"], system["atoms"], system["systems"])
        _assert_energies_and_forces_match(compiled, system["pos"].clone().requires_grad_(),
                                          args)
    assert counters["stats"]["unique_graphs"] == 1


def test_jit_call_shapes_meta_tensors_without_python() -> None:
    """No fake kernel of jit_call is registered from Python: the operator
    library's Meta kernel answers, from the program's kernel record."""
    from torch._library.simple_registry import singleton

    assert singleton.find("segops::jit_call").fake_impl.kernel is None
    system = lattice_system(1, 3, torch.float64)
    args = (system["pos"], torch.tensor(1.0, dtype=torch.float64),
            torch.tensor(1.0, dtype=torch.float64), system["i"], system["j"],
            system["batch"], system["atoms"], system["systems"])
    pos = args[0].clone().requires_grad_()
    torch.autograd.grad(lj_jit(pos, *args[1:]).sum(), pos)  # compiled before recording
    calls = []

    class Recorder(torch.utils._python_dispatch.TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            if func is torch.ops.segops.jit_call.default:
                calls.append(args)
            return func(*args, **(kwargs or {}))

    with Recorder():
        torch.autograd.grad(lj_jit(pos, *args[1:]).sum(), pos)
    assert any(program.endswith("_grad") for program, _, _ in calls)
    for program, tensors, num_segments in calls:
        tensors = [t.detach() for t in tensors]
        real = torch.ops.segops.jit_call(program, tensors, num_segments)
        meta = torch.ops.segops.jit_call(program, [t.to("meta") for t in tensors],
                                         num_segments)
        assert [(m.shape, m.dtype, m.device.type) for m in meta] == \
            [(r.shape, r.dtype, "meta") for r in real]
