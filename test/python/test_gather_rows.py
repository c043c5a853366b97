"""Gathers by a second index inside a kernel (seg.gather_rows): a segops.jit
function's `pos[j]` by the unsorted senders is read in the receivers'
kernel, and its adjoint is the kernel's rows summed by j after it
(seg.scatter_sum). Against index_select + index_add_; every derivative
level; the runtime's checks of j; determinism."""

from __future__ import annotations

import textwrap

import pytest
import torch
from conftest import run_simulated
from segment_lengths import (
    GPU_THRESHOLDS,
    HOST_THRESHOLDS,
    assert_levels_close,
    derivative_levels,
    lengths_around,
    long_segment_index,
)
from test_message_passing import (
    _forces,
    forces_and_training,
    lattice_system,
    lj_jit,
    lj_reference,
)
from torch import Tensor

import segops

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")


def _lj_args(system: dict, dtype: torch.dtype = torch.float64) -> tuple:
    return (system["pos"].to(dtype), torch.tensor(1.0, dtype=dtype),
            torch.tensor(0.9, dtype=dtype), system["i"], system["j"], system["batch"],
            system["atoms"], system["systems"])


def test_the_senders_gather_is_in_the_receivers_kernel() -> None:
    """No step gathers pos[j] into E rows: the receivers' kernel reads the
    table at j's rows; its derivatives sum the rows by j."""
    system = lattice_system(1, 3, torch.float64)
    ir = lj_jit.mlir(*_lj_args(system))
    assert ir.count("func.func") == 2
    first = ir.split("func.func")[1]
    assert "seg.gather_rows" in first and "seg.sum" in first
    # The table (pos) is its own argument, apart from pos as read per atom
    # by the receivers' gather (their gradients add up in autograd).
    lj_jit(*_lj_args(system))
    plan = next(iter(lj_jit._staged._plans.values()))
    (step,) = [s for s in plan.steps if s.tables]
    assert len(step.tables) == 1 and step.tables[0].args[0] in step.inputs


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("index_dtype", [torch.int32, torch.int64])
def test_forces_and_training_against_pytorch(dtype: torch.dtype,
                                             index_dtype: torch.dtype) -> None:
    system = lattice_system(2, 3, torch.float64, seed=2)
    got = forces_and_training(lj_jit, system, dtype, index_dtype)
    want = forces_and_training(lj_reference, system, torch.float64, torch.int64)
    tolerance = {"rtol": 1e-4, "atol": 1e-4} if dtype == torch.float32 else {}
    for a, b in zip(got[:2], want[:2]):
        torch.testing.assert_close(a, b.to(dtype), **tolerance)
    for a, b in zip(got[2], want[2]):
        torch.testing.assert_close(a, b.to(dtype), **tolerance)


def _messages(pos: Tensor, x: Tensor, w: Tensor, i: Tensor, j: Tensor, k: Tensor, atoms: int,
              gather, reduce) -> Tensor:
    """A table gathered by two second indices (x by j and by k), one by the
    same index twice (pos[j] in r and in the message), and wide rows."""
    rij = gather(pos, j) - gather(pos, i)
    r2 = (rij * rij).sum(-1)
    message = gather(x, j) * torch.exp(-r2)[:, None] + gather(x, k) * w \
        + (gather(pos, j) * rij).sum(-1)[:, None]
    return reduce(message * message, i, atoms)


@segops.jit
def messages_jit(pos: Tensor, x: Tensor, w: Tensor, i: Tensor, j: Tensor, k: Tensor,
                 atoms: int) -> Tensor:
    return _messages(pos, x, w, i, j, k, atoms, segops.segmented_gather, segops.segmented_sum)


def messages_reference(pos: Tensor, x: Tensor, w: Tensor, i: Tensor, j: Tensor, k: Tensor,
                       atoms: int) -> Tensor:
    return _messages(pos, x, w, i, j, k, atoms, lambda v, n: v.index_select(0, n),
                     lambda v, n, s: torch.zeros(s, *v.shape[1:], dtype=v.dtype)
                     .index_add(0, n, v))


def _message_inputs(features: int, seed: int = 3) -> tuple:
    system = lattice_system(1, 3, torch.float64, seed=seed)
    generator = torch.Generator().manual_seed(seed)
    atoms = system["atoms"]
    x = torch.randn(atoms, features, dtype=torch.float64, generator=generator)
    w = torch.randn(features, dtype=torch.float64, generator=generator)
    k = torch.randint(0, atoms, system["j"].shape, generator=generator)
    return system["pos"], x, w, system["i"], system["j"], k, atoms


@pytest.mark.parametrize("features", [2, 3, 16])
def test_tables_by_two_second_indices_and_wide_rows(features: int) -> None:
    pos, x, w, i, j, k, atoms = _message_inputs(features)
    assert "seg.gather_rows" in messages_jit.mlir(pos, x, w, i, j, k, atoms)
    fresh = segops.jit(messages_jit.fn)
    fresh(pos, x, w, i, j, k, atoms)
    (plan,) = fresh._staged._plans.values()
    (step,) = [s for s in plan.steps if s.tables]
    # pos[j] twice is one table; x by j and by k two; x is read as tables
    # only (no argument of its own).
    assert len(step.tables) == 4
    x_node = next(n for n in plan.placeholders if n.name.startswith("arg1"))
    assert x_node not in step.inputs
    pos, x = pos.clone().requires_grad_(), x.clone().requires_grad_()
    got = messages_jit(pos, x, w, i, j, k, atoms)
    want = messages_reference(pos, x, w, i, j, k, atoms)
    torch.testing.assert_close(got, want)
    weight = torch.randn_like(got)
    for a, b in zip(torch.autograd.grad((got * weight).sum(), (pos, x)),
                    torch.autograd.grad((want * weight).sum(), (pos, x))):
        torch.testing.assert_close(a, b)


def test_gradcheck_gradgradcheck_and_third_order() -> None:
    pos, x, w, i, j, k, atoms = _message_inputs(2, seed=5)
    pos = pos[:atoms].clone().requires_grad_()
    x = x.clone().requires_grad_()

    def fn(pos: Tensor, x: Tensor) -> Tensor:
        return messages_jit(pos, x, w, i, j, k, atoms)

    assert torch.autograd.gradcheck(fn, (pos, x))
    assert torch.autograd.gradgradcheck(fn, (pos, x))

    def third(energy) -> Tensor:
        p = pos.detach().clone().requires_grad_()
        e = energy(p, x, w, i, j, k, atoms).sum()
        (g1,) = torch.autograd.grad(e, p, create_graph=True)
        (g2,) = torch.autograd.grad((g1 * g1).sum(), p, create_graph=True)
        (g3,) = torch.autograd.grad(g2.sum(), p)
        return g3

    torch.testing.assert_close(third(messages_jit), third(messages_reference))


@segops.jit
def _column_messages(pos: Tensor, x: Tensor, i: Tensor, j: Tensor, atoms: int) -> Tensor:
    rij = segops.segmented_gather(pos, j) - segops.segmented_gather(pos, i)
    weight = torch.exp(-(rij * rij).sum(-1))[:, None]
    return segops.segmented_sum(segops.segmented_gather(x, j) * weight, i, atoms)


def test_one_feature_per_node_as_a_column() -> None:
    """(N, 1) node features: the library ops' views of the column run
    outside the kernel, x[j] inside it."""
    pos, _, _, i, j, _, atoms = _message_inputs(1, seed=6)
    pos = pos[:atoms].clone().requires_grad_()
    x = torch.randn(atoms, 1, dtype=torch.float64, requires_grad=True)

    def reference(pos: Tensor, x: Tensor) -> Tensor:
        rij = pos[j] - pos[i]
        weight = torch.exp(-(rij * rij).sum(-1))[:, None]
        return torch.zeros(atoms, 1, dtype=x.dtype).index_add(0, i, x[j] * weight)

    def fn(pos: Tensor, x: Tensor) -> Tensor:
        return _column_messages(pos, x, i, j, atoms)

    torch.testing.assert_close(fn(pos, x), reference(pos, x))
    assert torch.autograd.gradcheck(fn, (pos, x))
    assert torch.autograd.gradgradcheck(fn, (pos, x))
    plan = next(iter(_column_messages._staged._plans.values()))
    assert [s.index is not None for s in plan.steps].count(True) == 1
    assert any(s.tables for s in plan.steps)


def test_unsorted_receivers_rerun_on_sorted_rows() -> None:
    """An unsorted reduction index runs on its rows in sorted order: the
    second index's rows move with them."""
    pos, x, w, i, j, k, atoms = _message_inputs(3, seed=6)
    order = torch.randperm(i.numel(), generator=torch.Generator().manual_seed(1))
    i, j, k = i[order], j[order], k[order]
    torch.testing.assert_close(messages_jit(pos, x, w, i, j, k, atoms),
                               messages_reference(pos, x, w, i, j, k, atoms))


def test_no_edges() -> None:
    pos, x, w, i, j, k, atoms = _message_inputs(3)
    empty = i[:0]
    pos = pos.clone().requires_grad_()
    got = messages_jit(pos, x, w, empty, empty, empty, atoms)
    assert torch.equal(got, torch.zeros(atoms, 3, dtype=torch.float64))
    (grad,) = torch.autograd.grad(got.sum(), pos)
    assert torch.equal(grad, torch.zeros_like(pos))


@pytest.mark.parametrize("index_dtype", [torch.int32, torch.int64])
def test_a_second_index_out_of_range_raises(index_dtype: torch.dtype) -> None:
    pos, x, w, i, j, k, atoms = _message_inputs(3)
    j = j.to(index_dtype)
    messages_jit(pos, x, w, i, j, k, atoms)
    for bad in (atoms, -1):
        wrong = j.clone()
        wrong[7] = bad
        with pytest.raises(ValueError, match=rf"j value {bad} at row 7 is out of range for "
                                             r"pos \(27 rows\)"):
            messages_jit(pos, x, w, i, wrong, k, atoms)
    # Checked once per content: an in-place change is seen.
    j[3] = atoms
    with pytest.raises(ValueError, match="out of range"):
        messages_jit(pos, x, w, i, j, k, atoms)


def test_bitwise_identical_across_thread_counts() -> None:
    """The kernels' rows are fixed by idx alone, and the sums by j run in
    a grouping fixed by E and the atoms alone."""
    system = lattice_system(3, 12, torch.float64, cutoff=1.5)
    assert system["i"].numel() > 65536
    one, two, again = (_forces(system, t) for t in (1, 2, 2))
    for a, b, c in zip(one, two, again):
        assert torch.equal(a, b) and torch.equal(b, c)


def test_compile_fullgraph_with_forces() -> None:
    system = lattice_system(2, 3, torch.float64, seed=4)
    pos = system["pos"].clone().requires_grad_()
    args = _lj_args(system)[1:]
    compiled = torch.compile(lj_jit, fullgraph=True)
    e = compiled(pos, *args)
    (forces,) = torch.autograd.grad(e.sum(), pos)
    want = lj_reference(pos, *args)
    (want_forces,) = torch.autograd.grad(want.sum(), pos)
    torch.testing.assert_close(e, want)
    torch.testing.assert_close(forces, want_forces)


def test_opcheck_of_a_level_with_a_second_index() -> None:
    """jit_call of the receivers' kernel, whose arguments include j and a
    table: fake outputs (the scatter's table rows), autograd, schema."""
    pos, x, w, i, j, k, atoms = _message_inputs(3)
    fresh = segops.jit(messages_jit.fn)
    fresh(pos, x, w, i, j, k, atoms)
    (plan,) = fresh._staged._plans.values()
    kernel = next(s for s in plan.steps if s.tables).kernel
    captured: dict[str, tuple] = {}
    run = kernel._run

    def spy(*args: object) -> object:
        captured["args"] = args
        return run(*args)

    kernel._run = spy
    try:
        fresh(pos, x, w, i, j, k, atoms)
    finally:
        del kernel._run
    args = captured["args"]
    spec = next(iter(kernel._specializations.values()))
    tensors = kernel._with_uniform_values(spec, [args[p] for p in spec.tensor_positions],
                                          args[spec.size_position])
    tensors = [t.detach().requires_grad_() if t.is_floating_point() else t for t in tensors]
    torch.library.opcheck(torch.ops.segops.jit_call.default,
                          (spec.program, tensors, args[spec.size_position]))


@pytest.mark.slow
@pytest.mark.simulator
def test_tables_on_the_gpu_simulator() -> None:
    """The GPU kernels' gathers (a load of j, then of the table, per row)
    and the sums by j after them, through segrt's launcher on the
    simulated driver, to second order."""
    script = textwrap.dedent("""
        import torch
        from test_gather_rows import _message_inputs, messages_jit, messages_reference
        pos, x, w, i, j, k, atoms = _message_inputs(4)
        results = []
        for energy in (messages_jit, messages_reference):
            p, y = pos.clone().requires_grad_(), x.clone().requires_grad_()
            e = energy(p, y, w, i, j, k, atoms)
            g = torch.autograd.grad((e * e).sum(), (p, y), create_graph=True)
            results.append([e, *g, *torch.autograd.grad((g[0] * g[1][:, :3]).sum(), (p, y))])
        for a, b in zip(*results):
            torch.testing.assert_close(a, b)
        print("ok")
    """)
    run_simulated(script)


def _edge_messages(table: Tensor, rows: Tensor, i: Tensor, j: Tensor, s: int,
                   gather, reduce) -> Tensor:
    message = gather(table, j) * rows + torch.exp(-gather(table, j) * gather(table, i))
    return reduce(message * message, i, s)


@segops.jit
def _fused_edge_messages(table: Tensor, rows: Tensor, i: Tensor, j: Tensor, s: int) -> Tensor:
    return _edge_messages(table, rows, i, j, s, segops.segmented_gather, segops.segmented_sum)


def check_one_long_receiver(dtype: torch.dtype, length: int) -> None:
    """One receiver of `length` edges between short ones, its senders at
    random: the fused kernels against index_select / index_add_, to second
    order."""
    i, s = long_segment_index(length)
    generator = torch.Generator().manual_seed(length)
    j = torch.randint(0, s, i.shape, generator=generator, dtype=torch.int32)

    def reference(table: Tensor, rows: Tensor) -> Tensor:
        return _edge_messages(table, rows, i, j, s, lambda v, n: v.index_select(0, n),
                              lambda v, n, m: torch.zeros(m, *v.shape[1:], dtype=v.dtype)
                              .index_add(0, n, v))

    inputs = [torch.randn(s, 3, dtype=torch.float64, generator=generator),
              torch.randn(i.numel(), 3, dtype=torch.float64, generator=generator)]
    expected = derivative_levels(reference, inputs, 2)
    actual = derivative_levels(lambda t, r: _fused_edge_messages(t, r, i, j, s),
                               [t.to(dtype) for t in inputs], 2)
    assert_levels_close(actual, expected, f"gather_rows {dtype} over {length} rows")


@pytest.mark.slow
@pytest.mark.parametrize("length", lengths_around(HOST_THRESHOLDS))
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_every_host_threshold_to_second_order(dtype: torch.dtype, length: int) -> None:
    """Vectors, masked tails, the short-segment block, threads, long-segment
    tiles; 1e6 rows."""
    check_one_long_receiver(dtype, length)


@pytest.mark.slow
@pytest.mark.simulator
def test_every_gpu_threshold_on_the_simulator() -> None:
    """The GPU kernels (a warp's 32 rows, long segments from an aligned
    1024-row tile) with a gather by j in them, on the simulated driver, to
    second order, in f32 and f64."""
    script = textwrap.dedent(f"""
        import torch
        from test_gather_rows import check_one_long_receiver
        for dtype in (torch.float32, torch.float64):
            for length in {lengths_around(GPU_THRESHOLDS, largest=None)!r}:
                check_one_long_receiver(dtype, length)
        print("ok")
    """)
    run_simulated(script, timeout=1200)
