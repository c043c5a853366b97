"""Hostile inputs (issue 41): sizes that coincide in message passing,
index expansions that are no row index, (N, 1) columns in segops.jit, the
runtime wheel's by-columns path, NaN under max/min gradients, very wide
rows, and errors in the user's terms. Each case against pure PyTorch."""

from __future__ import annotations

import itertools
import re

import pytest
import torch
from torch import Tensor

import segops

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")


def _sorted_index(length: int, count: int, generator: torch.Generator) -> Tensor:
    return torch.randint(0, count, (length,), generator=generator).sort().values.int()


def _sum_into(values: Tensor, index: Tensor, count: int) -> Tensor:
    out = torch.zeros((count, *values.shape[1:]), dtype=values.dtype)
    return out.index_add(0, index.long(), values)


# --------------------------------------------------------------------------
# 1. Spaces from the data flow: every combination of A, E, S and F.
# --------------------------------------------------------------------------


def lj_energy(pos, eps, sigma, i, j, batch, num_atoms, num_systems):
    """The README's pair potential (shifted so that no pair is at r = 0)."""
    rij = segops.segmented_gather(pos, j) - segops.segmented_gather(pos, i)
    s6 = (sigma * sigma / ((rij * rij).sum(-1) + 1.0)) ** 3
    e_atom = segops.segmented_sum(2.0 * eps * (s6 * s6 - s6), i, num_atoms)
    return segops.segmented_sum(e_atom, batch, num_systems)


def lj_reference(pos, eps, sigma, i, j, batch, num_atoms, num_systems):
    rij = pos[j.long()] - pos[i.long()]
    s6 = (sigma * sigma / ((rij * rij).sum(-1) + 1.0)) ** 3
    return _sum_into(_sum_into(2.0 * eps * (s6 * s6 - s6), i, num_atoms), batch, num_systems)


def cfconv(pos, x, mu, i, j, batch, num_atoms, num_systems):
    """docs/message-passing.md's filter convolution, read out per system:
    mu is an (F,) parameter, x (A, F) node features."""
    rij = segops.segmented_gather(pos, j) - segops.segmented_gather(pos, i)
    r = torch.sqrt((rij * rij).sum(-1) + 1.0)
    filt = torch.exp(-(r[:, None] - mu) ** 2)
    h = segops.segmented_sum(segops.segmented_gather(x, j) * filt, i, num_atoms)
    return segops.segmented_sum((h * h).sum(-1), batch, num_systems)


def cfconv_reference(pos, x, mu, i, j, batch, num_atoms, num_systems):
    rij = pos[j.long()] - pos[i.long()]
    r = torch.sqrt((rij * rij).sum(-1) + 1.0)
    filt = torch.exp(-(r[:, None] - mu) ** 2)
    h = _sum_into(x[j.long()] * filt, i, num_atoms)
    return _sum_into((h * h).sum(-1), batch, num_systems)


def _graph(atoms: int, edges: int, systems: int, seed: int) -> tuple | None:
    """Receivers sorted, senders in any order, atoms sorted into systems;
    None where no such graph exists (edges without atoms, atoms without
    systems)."""
    if (edges and not atoms) or (atoms and not systems):
        return None
    generator = torch.Generator().manual_seed(seed)
    i = _sorted_index(edges, max(atoms, 1), generator)
    j = torch.randint(0, max(atoms, 1), (edges,), generator=generator).int()
    batch = _sorted_index(atoms, max(systems, 1), generator)
    pos = torch.randn(atoms, 3, dtype=torch.float64, generator=generator)
    return pos, i, j, batch


SIZES = range(5)


def test_every_combination_of_atoms_edges_and_systems() -> None:
    """A, E and S from 0 to 4, equal or not, through one function object
    (so a plan made at one coincidence is reused at another)."""
    jitted = segops.jit(lj_energy)
    eps, sigma = torch.tensor(1.0, dtype=torch.float64), torch.tensor(0.8, dtype=torch.float64)
    for atoms, edges, systems in itertools.product(SIZES, SIZES, SIZES):
        graph = _graph(atoms, edges, systems, atoms * 25 + edges * 5 + systems)
        if graph is None:
            continue
        pos, i, j, batch = graph
        args = (pos, eps, sigma, i, j, batch, atoms, systems)
        torch.testing.assert_close(jitted(*args), lj_reference(*args),
                                   msg=f"A={atoms} E={edges} S={systems}")


@pytest.mark.parametrize("features", [1, 2, 3, 4])
def test_every_combination_with_features(features: int) -> None:
    """A, E, S and F from 0 to 4 (F >= 1), equal or not, with an (F,)
    parameter and (A, F) features, through one function object per F; and
    the first call of a fresh one wherever A, E and F coincide (one system)."""
    shared = segops.jit(cfconv)
    for atoms, edges, systems in itertools.product(SIZES, SIZES, SIZES):
        graph = _graph(atoms, edges, systems, atoms * 25 + edges * 5 + systems + 125 * features)
        if graph is None:
            continue
        pos, i, j, batch = graph
        x = torch.randn(atoms, features, dtype=torch.float64)
        mu = torch.linspace(0.5, 1.5, features, dtype=torch.float64)
        args = (pos, x, mu, i, j, batch, atoms, systems)
        coincide = len({atoms, edges, features}) < 3 and systems == 1
        jitted = segops.jit(cfconv) if coincide else shared
        torch.testing.assert_close(jitted(*args), cfconv_reference(*args),
                                   msg=f"A={atoms} E={edges} S={systems} F={features}")


def test_ring_gradients_match_pytorch() -> None:
    """As many edges as atoms (a ring), forces and the parameters'
    gradients: the README's example."""
    atoms = 7
    pos = torch.randn(atoms, 3, dtype=torch.float64, requires_grad=True)
    eps = torch.tensor(1.0, dtype=torch.float64, requires_grad=True)
    sigma = torch.tensor(0.8, dtype=torch.float64, requires_grad=True)
    i = torch.arange(atoms, dtype=torch.int32)
    j = (i + 1) % atoms
    batch = torch.zeros(atoms, dtype=torch.int32)
    args = (pos, eps, sigma, i, j, batch, atoms, 1)
    got = torch.autograd.grad(segops.jit(lj_energy)(*args).sum(), (pos, eps, sigma))
    expected = torch.autograd.grad(lj_reference(*args).sum(), (pos, eps, sigma))
    torch.testing.assert_close(got, expected)


def test_cfconv_with_as_many_features_as_atoms() -> None:
    """docs' cfconv with 32 atoms and 32 features, to second order."""
    atoms = features = 32
    generator = torch.Generator().manual_seed(3)
    i = _sorted_index(96, atoms, generator)
    j = torch.randint(0, atoms, (96,), generator=generator).int()
    batch = torch.zeros(atoms, dtype=torch.int32)
    pos = torch.randn(atoms, 3, dtype=torch.float64, generator=generator, requires_grad=True)
    x = torch.randn(atoms, features, dtype=torch.float64, generator=generator,
                    requires_grad=True)
    mu = torch.linspace(0.5, 1.6, features, dtype=torch.float64, requires_grad=True)
    jitted = segops.jit(cfconv)
    torch.testing.assert_close(jitted(pos, x, mu, i, j, batch, atoms, 1),
                               cfconv_reference(pos, x, mu, i, j, batch, atoms, 1))
    torch.autograd.gradcheck(lambda p, h, m: jitted(p, h, m, i, j, batch, atoms, 1),
                             (pos, x, mu))


def test_lengths_used_together_must_agree() -> None:
    """A second index one entry short names both indices and their
    lengths, not trace sizes."""
    pos = torch.randn(5, 3, dtype=torch.float64)
    i = torch.tensor([0, 0, 1, 2, 3, 4], dtype=torch.int32)
    j = torch.tensor([1, 2, 0, 4, 3], dtype=torch.int32)
    batch = torch.zeros(5, dtype=torch.int32)
    one = torch.tensor(1.0, dtype=torch.float64)
    with pytest.raises(ValueError, match=r"i \(6 entries\) and j \(5 entries\)") as error:
        segops.jit(lj_energy)(pos, one, one, i, j, batch, 5, 1)
    assert not re.search(r"\b10[0-9]{2}\b", str(error.value)), error.value


# --------------------------------------------------------------------------
# 2. Only an expansion over the features is a row index.
# --------------------------------------------------------------------------


def _fused(fn, *args) -> tuple[Tensor, list[str]]:
    """fn compiled with segops.fusion, its result and the ops fused."""
    from segops import fusion

    torch._dynamo.reset()
    fusion.clear_reports()
    out = torch.compile(fn, options=fusion.options(), fullgraph=True)(*args)
    return out, [op for r in fusion.reports() for op in r.ops]


def test_scatter_add_by_an_index_along_the_other_dimension_is_not_fused(
        fresh_fusion_compilation: None) -> None:
    generator = torch.Generator().manual_seed(0)
    edges, atoms = 6, 4
    j = torch.randint(0, atoms, (edges,), generator=generator)
    src = torch.randn(edges, edges, generator=generator)

    def across(src, j):  # index[r, c] = j[c]
        return torch.zeros(atoms, edges).scatter_add(0, j.expand(edges, edges), src * 2.0)

    def rows(src, j):  # index[r, c] = j[r]: a sum of rows by j
        return torch.zeros(atoms, edges).scatter_add(0, j[:, None].expand(-1, edges), src * 2.0)

    out, ops = _fused(across, src, j)
    torch.testing.assert_close(out, across(src, j))
    assert "aten.scatter_add.default" not in ops, ops
    out, ops = _fused(rows, src, j)
    torch.testing.assert_close(out, rows(src, j))
    assert "aten.scatter_add.default" in ops, ops


def test_gather_by_an_index_along_the_other_dimension_is_not_fused(
        fresh_fusion_compilation: None) -> None:
    generator = torch.Generator().manual_seed(1)
    edges = 6
    j = torch.randint(0, edges, (edges,), generator=generator)
    table = torch.randn(edges, edges, generator=generator)
    i = torch.arange(edges).repeat_interleave(1)

    def across(table, j, i):  # index[r, c] = j[c]
        m = (table * 2.0).gather(0, j.expand(edges, edges)).exp()
        return torch.zeros(edges, edges).index_add(0, i, m)

    def rows(table, j, i):
        m = (table * 2.0).gather(0, j[:, None].expand(-1, edges)).exp()
        return torch.zeros(edges, edges).index_add(0, i, m)

    out, ops = _fused(across, table, j, i)
    torch.testing.assert_close(out, across(table, j, i))
    assert "aten.gather.default" not in ops, ops
    out, ops = _fused(rows, table, j, i)
    torch.testing.assert_close(out, rows(table, j, i))
    assert "aten.gather.default" in ops, ops


def test_expanded_index_recognises_only_row_indices() -> None:
    from torch.fx.experimental.proxy_tensor import make_fx

    from segops._fusion_index import index_op

    def graph_of(fn, *args):
        return make_fx(fn)(*args).graph

    j = torch.tensor([2, 0, 1, 1])
    src = torch.randn(4, 3)
    table = torch.randn(3, 3)
    column = graph_of(lambda s, j: torch.zeros(3, 3).scatter_add(0, j[:, None].expand(-1, 3), s),
                      src, j)
    assert [op.kind for n in column.nodes if (op := index_op(n))] == ["sum"]
    across = graph_of(lambda t, j: t.gather(0, j[:3].expand(3, 3)), table, j)
    assert not [op for n in across.nodes if (op := index_op(n))]
    square = torch.randn(4, 4)
    rows = graph_of(lambda s, j: torch.zeros(3, 4).scatter_add(0, j.expand(4, 4), s), square, j)
    assert not [op for n in rows.nodes if (op := index_op(n))]


# --------------------------------------------------------------------------
# 3. (N, 1) columns in single-index segops.jit.
# --------------------------------------------------------------------------


def _column_inputs() -> tuple[Tensor, ...]:
    generator = torch.Generator().manual_seed(5)
    idx = torch.tensor([0, 0, 1, 1, 1, 3], dtype=torch.int32)
    h = torch.randn(6, 4, dtype=torch.float64, generator=generator, requires_grad=True)
    c = torch.randn(6, 1, dtype=torch.float64, generator=generator, requires_grad=True)
    r = torch.randn(6, dtype=torch.float64, generator=generator, requires_grad=True)
    return h, c, r, idx


COLUMN_FUNCTIONS = {
    "rows_times_column": lambda h, c, r, idx, n: segops.segmented_sum(h * c, idx, n),
    "max_of_a_column": lambda h, c, r, idx, n: segops.segmented_max(c * r[:, None], idx, n),
    "column_sum": lambda h, c, r, idx, n: segops.segmented_sum(c.sum(-1) * r, idx, n),
    "column_in_and_out": lambda h, c, r, idx, n: (
        segops.segmented_sum(c, idx, n), segops.segmented_gather(
            segops.segmented_mean(c * c, idx, n), idx) + c),
}


@pytest.mark.parametrize("name", sorted(COLUMN_FUNCTIONS))
def test_columns_in_single_index_jit(name: str) -> None:
    fn = COLUMN_FUNCTIONS[name]
    h, c, r, idx = _column_inputs()
    jitted = segops.jit(fn)
    torch.testing.assert_close(jitted(h, c, r, idx, 4), fn(h, c, r, idx, 4))
    torch.autograd.gradcheck(lambda *t: jitted(*t, idx, 4), (h, c, r))
    torch.autograd.gradgradcheck(lambda *t: jitted(*t, idx, 4), (h, c, r))
    # The same function again (a warm call) and under torch.compile.
    torch.testing.assert_close(jitted(h, c, r, idx, 4), fn(h, c, r, idx, 4))
    torch._dynamo.reset()
    compiled = torch.compile(lambda *t: jitted(*t, idx, 4), fullgraph=True)
    torch.testing.assert_close(compiled(h, c, r), fn(h, c, r, idx, 4))


# --------------------------------------------------------------------------
# 4. The by-columns path (the runtime wheel: no compiler).
# --------------------------------------------------------------------------


@pytest.fixture
def no_compiler(monkeypatch: pytest.MonkeyPatch):
    from segops import _columns

    monkeypatch.setattr(_columns, "compiler_available", lambda: False)


def test_columns_rms_norm_keeps_nan(no_compiler: None) -> None:
    idx = torch.tensor([0, 0, 1, 1, 2], dtype=torch.int32)
    x = torch.randn(5, 5, dtype=torch.float64)
    x[3, 1] = float("nan")
    x[4] = 0.0
    out = segops.segmented_rms_norm(x, idx, 3)
    expected = torch.stack([x[:2].square().sum(-1).mean().sqrt(),
                            x[2:4].square().sum(-1).mean().sqrt(), torch.tensor(0.0).double()])
    torch.testing.assert_close(out, expected, equal_nan=True)
    assert torch.isnan(out[1]) and out[2] == 0


def test_columns_with_no_rows_and_no_segments(no_compiler: None) -> None:
    empty = torch.zeros(0, dtype=torch.int32)
    for op in (segops.segmented_sum, segops.segmented_mean, segops.segmented_max):
        assert op(torch.zeros(0, 5), empty, 0).shape == (0, 5)
        assert op(torch.zeros(0, 5), empty, 2).shape == (2, 5)
    assert segops.segmented_gather(torch.zeros(0, 5), empty).shape == (0, 5)
    assert segops.segmented_rms_norm(torch.zeros(0, 5), empty, 0).shape == (0,)


def test_columns_report_the_users_index_value(no_compiler: None) -> None:
    bad = torch.tensor([0, 0, 1, -18, 1], dtype=torch.int32)
    x = torch.randn(5, 6)
    message = r"idx value -18 at row 3 is negative"
    with pytest.raises(ValueError, match=message):
        segops.segmented_sum(x, bad, 2)
    torch._dynamo.reset()
    compiled = torch.compile(lambda x, i: segops.segmented_sum(x, i, 2), fullgraph=True)
    with pytest.raises(ValueError, match=message):
        compiled(x, bad)
    too_big = torch.tensor([0, 0, 1, 7, 1], dtype=torch.int32)
    with pytest.raises(ValueError, match=r"idx value 7 at row 3 is out of range"):
        compiled(x, too_big)
    with pytest.raises(ValueError, match=r"segmented_gather: idx value 7 at row 3"):
        segops.segmented_gather(torch.randn(2, 6), too_big)


def test_column_index_op_passes_opcheck() -> None:
    from segops import _columns

    idx = torch.tensor([0, 2, 1, 1], dtype=torch.int32)
    torch.library.opcheck(_columns.checked_column_index, (idx, 3, 4, "segmented_sum"))


# --------------------------------------------------------------------------
# 5. max/min gradients over a segment holding NaN: NaN, as torch.amax's.
# --------------------------------------------------------------------------


@pytest.mark.parametrize("op,reference", [(segops.segmented_max, torch.amax),
                                          (segops.segmented_min, torch.amin)])
@pytest.mark.parametrize("features", [(), (3,), (5,)])
def test_extremum_gradient_over_nan_matches_eager(op, reference, features) -> None:
    idx = torch.tensor([0, 0, 0, 1, 1, 3], dtype=torch.int32)
    x = torch.randn(6, *features, dtype=torch.float64, generator=torch.Generator().manual_seed(2))
    x[1] = float("nan")
    x[4] = x[3]  # a tie in segment 1
    x.requires_grad_()
    (got,) = torch.autograd.grad(op(x, idx, 4).sum(), x)
    expected = sum(reference(x[a:b], 0).sum() for a, b in ((0, 3), (3, 5), (5, 6)))
    (want,) = torch.autograd.grad(expected, x)
    torch.testing.assert_close(got, want, equal_nan=True)
    assert torch.isnan(got[:3]).all() and not torch.isnan(got[3:]).any()


# --------------------------------------------------------------------------
# 7. Errors in the user's terms.
# --------------------------------------------------------------------------


def _pair_sum(pos, i, j, n):
    rij = segops.segmented_gather(pos, j) - segops.segmented_gather(pos, i)
    return segops.segmented_sum((rij * rij).sum(-1), i, n)


def _no_internal_numbers(message: str) -> None:
    assert not re.search(r"\b10[0-9]{2}\b|stage\d|argument \d", message), message


@pytest.mark.parametrize("j_value,message", [
    (9, r"j value 9 at row 4 is out of range for pos \(4 rows\)"),
    (-1, r"j value -1 at row 4 is out of range for pos \(4 rows\)"),
])
def test_an_out_of_range_second_index_names_itself(j_value: int, message: str) -> None:
    pos = torch.randn(4, 3)
    i = torch.tensor([0, 0, 1, 2, 3], dtype=torch.int32)
    j = torch.tensor([1, 2, 0, 3, j_value], dtype=torch.int32)
    with pytest.raises(ValueError, match=message) as error:
        segops.jit(_pair_sum)(pos, i, j, 4)
    _no_internal_numbers(str(error.value))


def test_an_out_of_range_receiver_names_the_count() -> None:
    pos = torch.randn(4, 3)
    i = torch.tensor([0, 0, 1, 2, 3], dtype=torch.int32)
    j = torch.tensor([1, 2, 0, 3, 0], dtype=torch.int32)
    with pytest.raises(ValueError, match=r"i value 3 at row 4 is out of range for n = 3") \
            as error:
        segops.jit(_pair_sum)(pos, i, j, 3)
    _no_internal_numbers(str(error.value))


def test_a_longer_table_than_segments_is_read_as_eager_reads_it() -> None:
    """pos with more rows than the receivers' segments (i < n): eager's
    pos[i] reads the first n rows only."""
    pos = torch.randn(6, 3, dtype=torch.float64, requires_grad=True)
    i = torch.tensor([0, 0, 1, 2, 3], dtype=torch.int32)
    j = torch.tensor([1, 2, 0, 5, 0], dtype=torch.int32)

    def reference(pos):
        rij = pos[j.long()] - pos[i.long()]
        return _sum_into((rij * rij).sum(-1), i, 4)

    got = segops.jit(_pair_sum)(pos, i, j, 4)
    torch.testing.assert_close(got, reference(pos))
    torch.testing.assert_close(torch.autograd.grad(got.sum(), pos)[0],
                               torch.autograd.grad(reference(pos).sum(), pos)[0])


def test_bad_shapes_name_what_was_passed() -> None:
    idx = torch.tensor([0, 0, 1, 1, 1], dtype=torch.int32)
    with pytest.raises(ValueError, match=r"y must have shape \(S,\).*got a 0-d tensor"):
        segops.segmented_gather(torch.tensor(1.0), idx)
    with pytest.raises(ValueError, match=r"got \(5, 3, 0\)"):
        segops.segmented_sum(torch.randn(5, 3, 0), idx, 2)
    with pytest.raises(ValueError, match=r"got \(5, 0\)"):
        segops.segmented_mean(torch.randn(5, 0), idx, 2)
    with pytest.raises(TypeError, match=r"num_segments must be an int.*shape \(1,\)"):
        segops.segmented_sum(torch.randn(5), idx, torch.tensor([2]))
    with pytest.raises(ValueError, match=r"num_segments must be an int.*shape \(1,\)"):
        segops.jit(lambda x, i, n: segops.segmented_sum(x, i, n))(
            torch.randn(5), idx, torch.tensor([2]))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("op,reference", [(segops.segmented_max, torch.amax),
                                          (segops.segmented_min, torch.amin)])
def test_extremum_gradient_over_nan_in_a_tiled_segment(op, reference, dtype) -> None:
    """One segment of 2^17 + 5 rows (cut into tiles on the host) holding a
    NaN, beside a short one: NaN in every row of the long one only, to
    second order."""
    rows = 2**17 + 5
    idx = torch.cat([torch.zeros(rows, dtype=torch.int32), torch.ones(3, dtype=torch.int32)])
    x = torch.randn(rows + 3, dtype=dtype, generator=torch.Generator().manual_seed(3))
    x[rows // 2] = float("nan")
    x.requires_grad_()
    (first,) = torch.autograd.grad(op(x, idx, 2).square().sum(), x, create_graph=True)
    (want,) = torch.autograd.grad(
        reference(x[:rows], 0).square() + reference(x[rows:], 0).square(), x,
        create_graph=True)
    torch.testing.assert_close(first, want, equal_nan=True)
    assert torch.isnan(first[:rows]).all() and not torch.isnan(first[rows:]).any()
    (second,) = torch.autograd.grad(first[rows:].sum(), x)
    (second_want,) = torch.autograd.grad(want[rows:].sum(), x)
    torch.testing.assert_close(second[rows:], second_want[rows:])
