"""segops.fusion: segment fusion inside torch.compile graphs, against the same
code run eagerly; what the pass fused, read from segops.fusion.reports()."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from torch._inductor.custom_graph_pass import CustomGraphPass

import segops
import segops.fusion as fusion

pytest.importorskip("segops._native._segc", reason="segops.fusion needs the compiler module")

pytestmark = pytest.mark.compiler

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
from bench import fusion as workloads  # noqa: E402 - the benchmark's models

COUNTS = [3, 0, 2, 5, 2, 4, 1]  # an empty segment included


def make_index(counts: list[int]) -> torch.Tensor:
    return torch.repeat_interleave(torch.arange(len(counts), dtype=torch.int32),
                                   torch.tensor(counts))


@pytest.fixture(autouse=True)
def fresh_compilation(fresh_fusion_compilation, monkeypatch):
    """Every test compiles here, with no reports, and traces autograd ops
    (forces inside compiled steps)."""
    monkeypatch.setattr(torch._dynamo.config, "trace_autograd_ops", True)


def fused_compile(fn, **kwargs):
    return torch.compile(fn, options=fusion.options(strict=True), **kwargs)


def centered_energy(x, q, idx, num_segments: int):
    d = x - segops.segmented_gather(segops.segmented_mean(x, idx, num_segments), idx)
    return segops.segmented_sum(q * (d * d).sum(-1), idx, num_segments)


def energy_inputs(counts=COUNTS, dtype=torch.float64, seed=0):
    generator = torch.Generator().manual_seed(seed)
    n = sum(counts)
    x = torch.randn(n, 3, dtype=dtype, generator=generator, requires_grad=True)
    q = torch.rand(n, dtype=dtype, generator=generator, requires_grad=True)
    return x, q, make_index(counts), len(counts)


def assert_close(actual, expected, tol=1e-10):
    for a, e in zip(actual, expected):
        torch.testing.assert_close(a, e, rtol=tol, atol=tol)


def test_forward_and_backward_fused_into_one_kernel_each():
    x, q, idx, s = energy_inputs()
    compiled = fused_compile(centered_energy)
    energy = compiled(x, q, idx, s)
    grads = torch.autograd.grad(energy.square().sum(), [x, q])
    expected = centered_energy(x, q, idx, s)
    assert_close([energy, *grads], [expected, *torch.autograd.grad(expected.square().sum(),
                                                                   [x, q])])
    reports = fusion.reports()
    assert [r.backward for r in reports] == [False, True]
    forward, backward = reports
    assert forward.ops.count("segops.segmented_mean.default") == 1
    assert "aten.sum.dim_IntList" in forward.ops and forward.num_outputs == 2  # energy, mean
    assert any(op.startswith("segops.segmented_mean_grad") for op in backward.ops)
    # The backward recomputes the centered offsets instead of saving them.
    assert "aten.sub.Tensor" in backward.recomputed


def test_second_order_forces_training_step():
    """The potential's step: energy, forces by autograd.grad(create_graph=True)
    inside the compiled function, a loss on both, backward to the MLP."""
    torch.manual_seed(0)
    counts = [12, 30, 17, 25]
    idx, s = make_index(counts), len(counts)
    n = sum(counts)
    model = workloads.Potential(dense=True).double()
    x = torch.randn(n, 3, dtype=torch.float64, requires_grad=True)
    q, u = torch.rand(n, dtype=torch.float64), torch.randn(n, dtype=torch.float64)
    e_ref, f_ref = torch.randn(s, dtype=torch.float64), torch.randn(n, 3, dtype=torch.float64)

    def loss(x):
        energy, forces = model(x, q, u, idx, s, True)
        return ((energy - e_ref) ** 2).mean() + ((forces - f_ref) ** 2).mean()

    params = list(model.parameters())
    fused = fused_compile(loss)(x)
    expected = loss(x)
    assert_close([fused, *torch.autograd.grad(fused, params + [x])],
                 [expected, *torch.autograd.grad(expected, params + [x])])
    sides = [r.backward for r in fusion.reports()]
    assert sides.count(False) >= 1 and sides.count(True) >= 1
    derivative_levels = {op for r in fusion.reports() for op in r.ops if "_grad_grad" in op}
    assert derivative_levels, "the double backward's segops ops were not fused"


@pytest.mark.parametrize("name", ["readout", "attention"])
def test_model_like_graphs_match_eager(name):
    torch.manual_seed(1)
    counts = [10, 23, 1, 40, 16]
    idx, s = make_index(counts), len(counts)
    n = sum(counts)
    h = torch.randn(n, 16, dtype=torch.float64)
    v = torch.randn(n, 3, dtype=torch.float64, requires_grad=True)
    if name == "readout":
        model = workloads.Readout(dense=True).double()
        run = lambda m: m(h, v, idx, s)  # noqa: E731
    else:
        model = workloads.Attention(dense=True).double()
        scores = torch.randn(n, dtype=torch.float64, requires_grad=True)
        run = lambda m: m(h, scores, v, idx, s)  # noqa: E731
    compiled = fused_compile(lambda: run(model))
    out, expected = compiled(), run(model)
    params = list(model.parameters())
    assert_close([out, *torch.autograd.grad(out.square().sum(), params)],
                 [expected, *torch.autograd.grad(expected.square().sum(), params)])
    assert [r.backward for r in fusion.reports()].count(False) == 1
    with torch.no_grad():
        assert_close([compiled()], [run(model)])


def test_gradcheck_to_second_order():
    """gradcheck of the compiled energy, and of compiled forces (its
    gradient taken inside the compiled function: aot_autograd has no double
    backward across a compiled region, docs/fusion.md)."""
    x, q, idx, s = energy_inputs(counts=[3, 4, 2])
    energy = fused_compile(lambda x, q: centered_energy(x, q, idx, s))

    def forces(x, q):
        e = centered_energy(x, q, idx, s)
        return torch.autograd.grad(e.sum(), x, create_graph=True)[0]

    assert torch.autograd.gradcheck(energy, (x, q))
    assert torch.autograd.gradcheck(fused_compile(forces), (x, q))
    assert any("_grad_grad" in op for r in fusion.reports() for op in r.ops)


def test_no_recompiles_when_rows_and_segments_change():
    compiled = fused_compile(centered_energy, dynamic=True)
    frames = torch._dynamo.utils.counters["stats"]["unique_graphs"]
    for counts in ([3, 4, 2], [5, 1, 7, 2, 9], [2] * 11):
        x, q, idx, s = energy_inputs(counts)
        energy = compiled(x, q, idx, s)
        expected = centered_energy(x, q, idx, s)
        assert_close([energy, *torch.autograd.grad(energy.sum(), [x, q])],
                     [expected, *torch.autograd.grad(expected.sum(), [x, q])])
    assert torch._dynamo.utils.counters["stats"]["unique_graphs"] - frames == 1
    # One forward and one backward program: compiled once, for symbolic N and S.
    assert len({r.program for r in fusion.reports()}) == 2


def test_two_indices_give_separate_clusters():
    def two(x, y, atoms, bonds, num_atoms_groups: int, num_bond_groups: int):
        a = segops.segmented_sum(torch.exp(-x) * x, atoms, num_atoms_groups)
        b = segops.segmented_mean(y * y, bonds, num_bond_groups)
        return a.sum() + b.sum()

    generator = torch.Generator().manual_seed(3)
    x = torch.randn(16, dtype=torch.float64, generator=generator, requires_grad=True)
    y = torch.randn(9, 3, dtype=torch.float64, generator=generator, requires_grad=True)
    atoms, bonds = make_index([4, 4, 8]), make_index([2, 0, 7])
    out = fused_compile(two)(x, y, atoms, bonds, 3, 3)
    expected = two(x, y, atoms, bonds, 3, 3)
    assert_close([out, *torch.autograd.grad(out, [x, y])],
                 [expected, *torch.autograd.grad(expected, [x, y])])
    forward = [r for r in fusion.reports() if not r.backward]
    assert len(forward) == 2
    assert {("segops.segmented_sum.default" in r.ops, "segops.segmented_mean.default" in r.ops)
            for r in forward} == {(True, False), (False, True)}


@pytest.mark.parametrize("mode", ["no_grad", "inference_mode"])
def test_inference_graphs(mode):
    x, q, idx, s = energy_inputs()
    compiled = fused_compile(centered_energy)
    with getattr(torch, mode)():
        energy = compiled(x, q, idx, s)
        expected = centered_energy(x, q, idx, s)
    assert_close([energy], [expected])
    assert [r.backward for r in fusion.reports()] == [False]


def test_a_graph_without_segment_ops_is_left_unchanged():
    from torch.fx.experimental.proxy_tensor import make_fx

    def dense(a, b):
        return torch.tanh(a @ b) * 2 + b.sum()

    graph_module = make_fx(dense, tracing_mode="fake")(torch.randn(4, 4), torch.randn(4, 4))
    before = str(graph_module.graph)
    fusion.SegmentFusionPass(strict=True)(graph_module.graph)
    assert str(graph_module.graph) == before
    a, b = torch.randn(4, 4), torch.randn(4, 4)
    assert_close([fused_compile(dense)(a, b)], [dense(a, b)], tol=1e-6)
    assert fusion.reports() == []


def test_unsupported_ops_stay_outside_the_cluster():
    """A Bessel function is not a kernel op (nor decomposed into them): the
    pass fuses around it and leaves it to Inductor, unchanged."""
    def energy_with_sin(x, q, idx, num_segments: int):
        d = x - segops.segmented_gather(segops.segmented_mean(x, idx, num_segments), idx)
        w = torch.special.bessel_j0(q) * 2.0
        return segops.segmented_sum(w * (d * d).sum(-1) + q, idx, num_segments)

    x, q, idx, s = energy_inputs()
    out = fused_compile(energy_with_sin)(x, q, idx, s)
    expected = energy_with_sin(x, q, idx, s)
    assert_close([out, *torch.autograd.grad(out.sum(), [x, q])],
                 [expected, *torch.autograd.grad(expected.sum(), [x, q])])
    forward = [r for r in fusion.reports() if not r.backward]
    assert forward and all("aten.special_bessel_j0.default" not in r.ops
                           for r in fusion.reports())
    assert any("segops.segmented_sum.default" in r.ops for r in forward)


def test_views_returned_and_mutated_inputs_are_left_out():
    def fn(x, q, idx, num_segments: int, buffer):
        e = centered_energy(x, q, idx, num_segments)
        buffer.add_(e)  # an input mutated in place
        return e.unsqueeze(1), e * 2  # a view of a cluster value as an output

    x, q, idx, s = energy_inputs()
    buffer, expected_buffer = torch.zeros(s, dtype=torch.float64), torch.zeros(s,
                                                                            dtype=torch.float64)
    out = fused_compile(fn)(x, q, idx, s, buffer)
    expected = fn(x, q, idx, s, expected_buffer)
    assert_close([*out, buffer], [*expected, expected_buffer])
    assert fusion.reports()
    assert all("aten.unsqueeze.default" not in r.ops for r in fusion.reports()
               if not r.backward)


def test_direct_pass_on_a_traced_graph():
    """The pass on a make_fx graph (no Inductor): one jit_call, same values."""
    from torch.fx.experimental.proxy_tensor import make_fx

    x, q, idx, s = energy_inputs()
    x, q = x.detach(), q.detach()
    graph_module = make_fx(lambda x, q, idx: centered_energy(x, q, idx, s),
                           tracing_mode="fake")(x, q, idx)
    fusion.SegmentFusionPass(strict=True)(graph_module.graph)
    graph_module.recompile()
    targets = [n.target for n in graph_module.graph.nodes if n.op == "call_function"]
    assert targets.count(torch.ops.segops.jit_call.default) == 1
    assert not any(
        getattr(t, "namespace", "") == "segops" and t != torch.ops.segops.jit_call.default
        for t in targets
    )
    assert_close([graph_module(x, q, idx)], [centered_energy(x, q, idx, s)])


class _UserPass(CustomGraphPass):
    def __init__(self) -> None:
        self.calls = 0

    def __call__(self, graph: torch.fx.Graph) -> None:
        self.calls += 1

    def uuid(self) -> str:
        return "user-pass"


def test_enable_composes_with_installed_passes(monkeypatch):
    import torch._inductor.config as inductor_config

    user = _UserPass()
    monkeypatch.setattr(inductor_config, "joint_custom_pre_pass", user)
    fusion.enable()
    installed = inductor_config.joint_custom_pre_pass
    assert installed[0] is user and isinstance(installed[1], fusion.SegmentFusionPass)
    fusion.enable()  # idempotent
    assert len(inductor_config.joint_custom_pre_pass) == 2
    x, q, idx, s = energy_inputs()
    out = torch.compile(centered_energy)(x, q, idx, s)
    assert_close([out], [centered_energy(x, q, idx, s)])
    assert user.calls >= 1 and fusion.reports()
    fusion.disable()
    assert inductor_config.joint_custom_pre_pass is user


def test_uuid_is_stable_and_names_the_options():
    a, b = fusion.SegmentFusionPass(), fusion.SegmentFusionPass()
    assert a.uuid() == b.uuid()
    assert a.uuid() != fusion.SegmentFusionPass(strict=True).uuid()


def _run_with_caches_in(tmp_path: Path, script: Path) -> str:
    """Runs `script` in a fresh process whose Inductor and segops caches are
    under tmp_path; returns its output."""
    env = dict(os.environ, TORCHINDUCTOR_CACHE_DIR=str(tmp_path / "inductor"),
               SEGOPS_CACHE_DIR=str(tmp_path / "segops"))
    # The segops this process imported (a sanitizer build's, under make sanitize).
    package_root = str(Path(segops.__file__).resolve().parents[1])
    env["PYTHONPATH"] = os.pathsep.join([package_root, env.get("PYTHONPATH", "")])
    result = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                            timeout=600, env=env)
    assert result.returncode == 0, result.stderr[-3000:]
    return result.stdout


# A compiled energy and its gradients against eager, in a fresh process;
# prints the Inductor cache hits and the clusters the pass fused.
_CACHED_MODEL = """
import sys, torch
sys.path.insert(0, {tests!r})
import segops, segops.fusion
from test_fusion import centered_energy, energy_inputs
from torch._dynamo.utils import counters
x, q, idx, s = energy_inputs()
energy = torch.compile(centered_energy, options=segops.fusion.options(strict=True))(x, q, idx, s)
# With the backward run, AOTAutograd caches the graphs (and replays them in
# the next process).
grads = torch.autograd.grad(energy.sum(), [x, q])
expected = centered_energy(x, q, idx, s)
for a, b in zip([energy, *grads], [expected, *torch.autograd.grad(expected.sum(), [x, q])]):
    torch.testing.assert_close(a, b)
hits = counters["aot_autograd"]["autograd_cache_hit"] + counters["inductor"]["fxgraph_cache_hit"]
print("hits", hits, "fused", len(segops.fusion.reports()))
"""


def _cached_model(tmp_path: Path) -> Path:
    script = tmp_path / "model.py"
    script.write_text(_CACHED_MODEL.format(tests=str(ROOT / "test" / "python")))
    return script


def test_second_process_hits_the_cache_and_runs(tmp_path):
    """Inductor's caches hold jit_call nodes naming fused programs: a second
    process, whose pass does not run, finds them in the segops cache."""
    script = _cached_model(tmp_path)
    outputs = [_run_with_caches_in(tmp_path, script).split()[-4:] for _ in range(2)]
    assert outputs[0] == ["hits", "0", "fused", "2"]
    assert outputs[1][0] == "hits" and int(outputs[1][1]) >= 1 and outputs[1][3] == "0"


def test_deleted_segops_cache_is_not_replayed(tmp_path):
    """The segops cache deleted between two processes (as documented) while
    Inductor's stays: the second process must not replay graphs naming
    programs whose records went with it. The pass's cache key holds the
    directory's generation, so Inductor compiles anew and the pass runs."""
    script = _cached_model(tmp_path)
    for _ in range(2):
        assert _run_with_caches_in(tmp_path, script).split()[-2:] == ["fused", "2"]
        shutil.rmtree(tmp_path / "segops")


def test_failed_rewrite_leaves_the_graph_unchanged(monkeypatch):
    """Whatever fails in the rewrite (here: the trial on a copy) leaves the
    graph as Inductor gave it, and the compiled function is right."""
    calls = []

    def broken(*args, **kwargs):
        calls.append(args)
        raise AssertionError("a cycle")

    monkeypatch.setattr(fusion, "_rewrite", broken)
    # No cached graph: the pass must run.
    monkeypatch.setattr(torch._functorch.config, "enable_autograd_cache", False)
    x, q, idx, s = energy_inputs()
    fusion.clear_reports()
    torch._dynamo.reset()
    compiled = torch.compile(centered_energy,
                             options={**fusion.options(), "fx_graph_cache": False})
    torch.testing.assert_close(compiled(x, q, idx, s), centered_energy(x, q, idx, s))
    assert calls and not fusion.reports()


@pytest.mark.parametrize("seed", range(16))
def test_random_programs_under_fusion(seed):
    """test_jit's random compositions (reductions of every kind gathered back,
    scalars against vec3 rows), compiled with the pass; odd seeds put an op
    the pass does not fuse (a Bessel function) between the segment ops."""
    import test_jit

    program = test_jit._random_program(seed)

    def model(x, q, idx, num_segments: int):
        if seed % 2:
            q = torch.special.bessel_j0(q) + q
        total, rows = program(x, q, idx, num_segments)
        return segops.segmented_mean(rows * total[idx.long()] if seed % 4 == 1 else rows,
                                     idx, num_segments), total

    x, q, idx, s = energy_inputs(seed=seed)
    got = fused_compile(model)(x, q, idx, s)
    want = model(x, q, idx, s)
    grad_got = torch.autograd.grad(sum(g.square().sum() for g in got), [x, q],
                                   materialize_grads=True)
    grad_want = torch.autograd.grad(sum(w.square().sum() for w in want), [x, q],
                                    materialize_grads=True)
    assert_close([*got, *grad_got], [*want, *grad_want], tol=1e-9)
    assert fusion.reports()


@segops.jit
def _jit_energy(x, q, idx, num_segments: int):
    return centered_energy(x, q, idx, num_segments)


def test_jit_functions_fuse_with_the_code_around_them():
    """A segops.jit function inside a compiled model is a jit_call node; the
    pass pastes its program (and its derivative) into the cluster around it."""
    def model(x, q, idx, num_segments: int):
        energy = _jit_energy(x, torch.tanh(q) * 2.0, idx, num_segments)
        return segops.segmented_gather(energy, idx) * q

    x, q, idx, s = energy_inputs()
    out = fused_compile(model)(x, q, idx, s)
    expected = model(x, q, idx, s)
    assert_close([out, *torch.autograd.grad(out.sum(), [x, q])],
                 [expected, *torch.autograd.grad(expected.sum(), [x, q])])
    reports = fusion.reports()
    forward = [r for r in reports if not r.backward]
    assert len(forward) == 1 and "segops.jit_call.default" in forward[0].ops
    assert "aten.tanh.default" in forward[0].ops
    assert any("segops.jit_call.default" in r.ops for r in reports if r.backward)


def test_bad_and_unsorted_indices_in_fused_kernels():
    x, q, idx, s = energy_inputs()
    compiled = fused_compile(centered_energy)
    compiled(x, q, idx, s)
    bad = idx.clone()
    bad[3] = s + 4
    with pytest.raises(ValueError, match=r"idx value .* out of range"):
        compiled(x, q, bad, s)
    wide = fused_compile(centered_energy)(x, q, idx.long(), s)
    assert_close([wide], [centered_energy(x, q, idx.long(), s)])
    order = torch.randperm(len(idx), generator=torch.Generator().manual_seed(5))
    shuffled = (x.detach()[order].requires_grad_(), q.detach()[order].requires_grad_(),
                idx[order])
    got = compiled(*shuffled, s)
    want = centered_energy(*shuffled, s)
    assert_close([got, *torch.autograd.grad(got.sum(), shuffled[:2])],
                 [want, *torch.autograd.grad(want.sum(), shuffled[:2])])


# --------------------------------------------------------------------------
# Type promotion: a float times a comparison (masked messages).
# --------------------------------------------------------------------------


def masked_messages(m, t, idx):
    """PyG's masked messages: m * (m > t), as eager promotes the bool."""
    return torch.zeros(3, m.shape[1], dtype=m.dtype).index_add(0, idx, (m * (m > t)).exp())


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_a_float_times_a_comparison_fuses(dtype, fresh_fusion_compilation):
    generator = torch.Generator().manual_seed(7)
    m = torch.randn(8, 4, dtype=dtype, generator=generator)
    t = torch.tensor(0.1, dtype=dtype)
    idx = torch.tensor([0, 0, 0, 1, 1, 2, 2, 2])
    tol = 1e-10 if dtype == torch.float64 else 1e-5
    compiled = torch.compile(masked_messages, options=fusion.options(), fullgraph=True)
    assert_close([compiled(m, t, idx)], [masked_messages(m, t, idx)], tol)
    ops = [op for r in fusion.reports() for op in r.ops]
    assert "aten.gt.Tensor" in ops and "aten.mul.Tensor" in ops, ops
    # And differentiated, the mask a constant of the backward.
    leaf = m.clone().requires_grad_()
    got = torch.autograd.grad(compiled(leaf, t, idx).square().sum(), leaf)
    want = torch.autograd.grad(masked_messages(leaf, t, idx).square().sum(), leaf)
    assert_close(got, want, tol)


def test_explain_names_clusters_left_out_nodes_and_unknown_ops(capsys):
    """segops.fusion.explain: the clusters, each node left out of one with
    its reason, and the ops no cluster can take, without the DEBUG log."""
    def model(x, q, idx, num_segments: int):
        w = torch.special.bessel_j0(q)
        e = centered_energy(x, w, idx, num_segments)
        return e, (x * 2.0).unsqueeze(0)  # a view of cluster rows returned

    x, q, idx, s = energy_inputs()
    explanation = fusion.explain(model, x, q, idx, s)
    printed = capsys.readouterr().out
    assert explanation.clusters and "cluster 0 (forward" in printed
    assert "segops.segmented_sum.default" in str(explanation)
    assert explanation.unsupported.get("aten.special_bessel_j0.default") == 1, explanation
    assert "aten.special_bessel_j0.default x1" in printed
    assert all(reason for _, _, reason in explanation.left_out)
    # Nothing stays collecting after it returns.
    assert fusion._EXPLAINING is None


def test_a_cluster_that_only_adds_into_a_sum_is_left_to_inductor(capsys):
    """`index_add(a + b - c)`: Inductor's scatter-add loop does that in one
    pass, where a kernel on an unsorted index first copies every input into
    sorted order, so the pass leaves it and says why; one multiplication
    more makes it a cluster. Both as eager."""
    generator = torch.Generator().manual_seed(4)
    index = torch.randint(0, 20, (300,), generator=generator)
    a, b, c = (torch.randn(300, 4, dtype=torch.float64, generator=generator)
               for _ in range(3))

    def adds(a, b, c, index):
        return a.new_zeros(20, 4).index_add(0, index, a + b - c)

    def scaled(a, b, c, index):
        return a.new_zeros(20, 4).index_add(0, index, a * b - c)

    explanation = fusion.explain(adds, a, b, c, index)
    assert not explanation.clusters, explanation
    assert ("only additions into a sum", ["aten.add.Tensor", "aten.index_put.default",
                                          "aten.sub.Tensor"]) in explanation.left_to_inductor
    assert "(only additions into a sum)" in capsys.readouterr().out
    assert_close(fused_compile(adds)(a, b, c, index), adds(a, b, c, index))
    fusion.clear_reports()
    assert_close(fused_compile(scaled)(a, b, c, index), scaled(a, b, c, index))
    assert [r.ops for r in fusion.reports()] == [
        ("aten.mul.Tensor", "aten.sub.Tensor", "aten.index_put.default")]


def test_integer_operands_promote_as_eager_and_fuse():
    """Atomic numbers z (int64) in float arithmetic, and a mask of them
    (`z > 3`): converted to floats outside, as eager's promotion does, so
    the arithmetic and the sum fuse; values and gradients as eager's."""
    generator = torch.Generator().manual_seed(3)
    index = torch.randint(0, 20, (300,), generator=generator)
    z = torch.randint(1, 9, (300,), generator=generator)
    x = torch.randn(300, 4, dtype=torch.float64, generator=generator, requires_grad=True)

    def model(x, z, index):
        h = x * z[:, None] + (z > 3)[:, None] * x.square()
        return x.new_zeros(20, 4).index_add(0, index, h.tanh() * 2.0 + z[:, None])

    got = fused_compile(model)(x, z, index)
    want = model(x, z, index)
    assert_close([got, *torch.autograd.grad(got.square().sum(), x)],
                 [want, *torch.autograd.grad(want.square().sum(), x)])
    forward = [r for r in fusion.reports() if not r.backward]
    assert len(forward) == 1 and "aten.tanh.default" in forward[0].ops, forward
    assert "aten.index_put.default" in forward[0].ops
