"""The operator library (libsegops_ops.so) on its own: loaded with
torch.ops.load_library in an interpreter that never imports segops, every
library op runs, matches a pure-PyTorch reference, differentiates to third
order, passes opcheck at every level, and traces with symbolic sizes."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest
import torch

import segops
from bench.gpu_traffic import level_inputs

LIBRARY = segops.library_info()["operator_library"]

# Runs in a fresh interpreter: nothing of segops but the shared library.
SCRIPT = textwrap.dedent("""
    import sys
    import torch

    torch.ops.load_library(sys.argv[1])
    assert not any(name.startswith("segops") for name in sys.modules), "segops was imported"
    ops = torch.ops.segops
    torch.manual_seed(0)
    idx = torch.tensor([0, 0, 2, 2, 2, 3, 4, 4, 4, 4])
    N, S = idx.numel(), 5
    counts = torch.bincount(idx, minlength=S).double()

    def sums(rows):
        return torch.zeros((S, *rows.shape[1:]), dtype=rows.dtype).index_add(0, idx, rows)

    def extreme(rows, reduce):
        out = torch.zeros((S, *rows.shape[1:]), dtype=rows.dtype)
        index = idx.view(-1, *([1] * (rows.dim() - 1))).expand_as(rows)
        return out.scatter_reduce(0, index, rows, reduce, include_self=False)

    def rows(*shape):
        return torch.randn(*shape, dtype=torch.float64)

    # name: (arguments, pure-PyTorch reference)
    CASES = {
        "segmented_sum": ((rows(N, 3),), sums),
        "segmented_mean": ((rows(N, 3),), lambda x: sums(x) / counts.clamp(min=1)[:, None]),
        "segmented_rms_norm": ((rows(N, 3),),
                               lambda x: (sums((x * x).sum(-1)) / counts.clamp(min=1)).sqrt()),
        "segmented_dot": ((rows(N, 3), rows(N, 3)), lambda x, y: sums((x * y).sum(-1))),
        "segmented_mul": ((rows(N, 3), rows(S)), lambda x, y: x * y[idx][:, None]),
        "segmented_gather": ((rows(S, 3),), lambda y: y[idx]),
        "segmented_max": ((rows(N),), lambda x: extreme(x, "amax")),
        "segmented_min": ((rows(N, 3),), lambda x: extreme(x, "amin")),
        "segmented_matvec": ((rows(N, 3), rows(S, 3, 3)),
                             lambda v, m: torch.einsum("nji,nj->ni", m[idx], v)),
    }
    for name, (args, reference) in CASES.items():
        op = getattr(ops, name)
        torch.testing.assert_close(op(*args, idx, S), reference(*args))
        # float32 too: the kernels of both dtypes are in the library.
        torch.testing.assert_close(op(*(a.float() for a in args), idx, S),
                                   reference(*args).float())
        inputs = tuple(a.clone().requires_grad_() for a in args)
        assert torch.autograd.gradcheck(lambda *a: op(*a, idx, S), inputs)
        assert torch.autograd.gradgradcheck(lambda *a: op(*a, idx, S), inputs)
        # Third order runs on the library's last level.
        out = op(*inputs, idx, S)
        first = torch.autograd.grad(out.pow(2).sum(), inputs, create_graph=True)
        second = torch.autograd.grad(sum(g.pow(2).sum() for g in first), inputs,
                                     create_graph=True, allow_unused=True)
        second = [g for g in second if g is not None and g.requires_grad]
        if second:
            torch.autograd.grad(sum(g.sum() for g in second), inputs, allow_unused=True)
        # Each level's default overload takes the level below's float
        # arguments and a cotangent per output of it.
        level_args = [a.clone().requires_grad_() for a in args]
        for level in range(3):
            level_op = getattr(ops, name + "_grad" * level).default
            torch.library.opcheck(level_op, (*level_args, idx, S))
            outputs = level_op(*level_args, idx, S)
            outputs = outputs if isinstance(outputs, tuple) else (outputs,)
            level_args = level_args + [torch.randn_like(o).requires_grad_() for o in outputs]
        print("ok", name)

    # Symbolic sizes: one compiled graph serves every N and S.
    def energy(x, idx, n):
        return ops.segmented_sum(x * x, idx, n).sum()

    compiled = torch.compile(energy, dynamic=True, fullgraph=True)
    for n in (3, 7, 11):
        index = torch.arange(4 * n) // 4
        x = torch.randn(4 * n, 3)
        torch.testing.assert_close(compiled(x, index, n), (x * x).sum())
    print("ok compile")

    class Energy(torch.nn.Module):
        def forward(self, x, idx):
            return ops.segmented_sum(x.sin(), idx, 4)

    rows_dim = torch.export.Dim("rows", min=2)
    exported = torch.export.export(Energy(), (torch.randn(8, 3), torch.arange(8) // 2),
                                   dynamic_shapes=({0: rows_dim}, {0: rows_dim}))
    x, index = torch.randn(12, 3), torch.arange(12) // 3
    torch.testing.assert_close(exported.module()(x, index),
                               torch.zeros(4, 3).index_add(0, index, x.sin()))
    print("ok export")

    # Without the package the library's generic checks word the errors.
    meta = torch.empty(6, 3, device="meta")
    for bad_idx, bad_x, message in [
            (torch.empty(6, device="meta"), meta, "idx must be a 1-D int32 or int64 tensor"),
            (torch.empty(6, dtype=torch.long, device="meta"), meta.int(),
             "float arguments must be float32 or float64")]:
        try:
            ops.segmented_sum(bad_x, bad_idx, 2)
        except ValueError as error:
            assert message in str(error), error
        else:
            raise AssertionError("no error for " + message)
    try:
        ops.segmented_sum(torch.ones(3), torch.tensor([0, 5, 1]), 2)
    except ValueError as error:
        assert "idx is out of range" in str(error), error
    print("ok errors")
""")


@pytest.mark.skipif(segops.ops.native_kernels() is None, reason="no operator library")
def test_the_operator_library_runs_without_the_python_package() -> None:
    result = subprocess.run([sys.executable, "-c", SCRIPT, LIBRARY], capture_output=True,
                            text=True, timeout=900)
    assert result.returncode == 0, result.stdout + result.stderr
    for name in ("segmented_sum", "segmented_matvec", "segmented_max"):
        assert f"ok {name}" in result.stdout
    assert "ok compile" in result.stdout and "ok export" in result.stdout
    assert "ok errors" in result.stdout


@pytest.mark.skipif(segops.ops.native_kernels() is None, reason="no operator library")
def test_every_library_level_is_defined_in_cpp() -> None:
    """The package defines no schema of its own: every level of every op in
    its table is one the operator library registered."""
    from segops._op_table import MAX_LEVEL, OPS, level_name

    registered = set(segops.ops.native_kernels().library_levels())
    wanted = {level_name(op, level) for op in OPS for level in range(MAX_LEVEL + 1)}
    assert wanted == registered
    for name in wanted:
        schema = getattr(torch.ops.segops, name).default._schema
        assert schema.arguments[-2].name == "idx" and schema.arguments[-1].name == "num_segments"


def test_operator_signatures_place_the_schema_arguments() -> None:
    """operator_call reads a graph node's arguments by the signature the
    operator library reports: the op's arguments (arg<i>), what the levels
    add (the saved results they read, saved<i>, and the cotangents,
    grad<i>), idx and num_segments, as the registered schema names them."""
    from segops._op_table import MAX_LEVEL, OPS, level_name

    for op, spec in OPS.items():
        for level in range(MAX_LEVEL + 1):
            name = level_name(op, level)
            packet = getattr(torch.ops.segops, name)
            # The overload with the kernels: `saved` where they take saved
            # results (the default one then recomputes them).
            overload = packet.saved if "saved" in packet.overloads() else packet.default
            names = [a.name for a in overload._schema.arguments]
            call = segops.ops.operator_call(name, names)
            assert call.arguments == [f"arg{i}" for i in range(spec.num_tensors)]
            added = range(spec.num_tensors, len(names) - 2)
            assert call.level_inputs == [n for n in names if n[:4] in ("save", "grad")]
            assert [int(n.lstrip("savedgr")) for n in call.level_inputs] == list(added)
            assert (call.idx, call.num_segments) == ("idx", "num_segments")
            signature = segops.ops.native_kernels().operator_signature(name)
            assert signature.derivative_order == level
            assert signature.backward == (level_name(op, level + 1) if level < MAX_LEVEL else "")
            assert segops.ops.operator_call(name, names[:-1]) is None


@pytest.mark.skipif(segops.ops.native_kernels() is None, reason="no operator library")
def test_the_meta_kernel_checks_what_a_trace_can_see() -> None:
    """With the package loaded its validator words the errors (the library's
    own words are checked without it, above)."""
    x = torch.empty(6, 3, device="meta")
    with pytest.raises(ValueError, match="segmented_sum: idx must be int32 or int64"):
        torch.ops.segops.segmented_sum(x, torch.empty(6, device="meta"), 2)
    with pytest.raises(ValueError, match="segmented_sum: x must be float32 or float64"):
        torch.ops.segops.segmented_sum(x.int(), torch.empty(6, dtype=torch.long, device="meta"),
                                       2)
    out = torch.ops.segops.segmented_dot(x, x, torch.empty(6, dtype=torch.long, device="meta"), 4)
    assert out.shape == (4,) and out.device.type == "meta"
    wide = torch.ops.segops.segmented_sum_grad(
        torch.empty(6, 64, device="meta"), torch.empty(2, 64, device="meta"),
        torch.empty(6, dtype=torch.long, device="meta"), 2)
    assert wide.shape == (6, 64)


@pytest.mark.skipif(segops.ops.native_kernels() is None, reason="no operator library")
@pytest.mark.parametrize("op", ["segmented_rms_norm", "segmented_max", "segmented_min"])
def test_levels_on_saved_results_match_their_recomputing_overloads(op: str) -> None:
    """rms_norm's, max's and min's derivative levels read the forward's
    results: their kernels take them (overload `saved`, which autograd
    calls with the outputs it saved), and the default overload recomputes
    them. Both give the same values at every level, and both pass opcheck."""
    from segops._op_table import MAX_LEVEL, level_name

    idx = torch.tensor([0, 0, 2, 2, 2, 3, 4, 4, 4, 4])
    x = torch.randn(10, 3, dtype=torch.float64)
    x[3] = x[2]  # a tied maximum
    native = segops.ops.native_kernels()
    assert native.operator_signature(op).saved_results == [0]
    for level in range(1, MAX_LEVEL + 1):
        plain, full = level_inputs(op, level, [x], idx, 5)
        packet = getattr(torch.ops.segops, level_name(op, level))
        assert "saved" in packet.overloads()
        recomputed = packet.default(*plain, idx, 5)
        on_saved = packet.saved(*full, idx, 5)
        torch.testing.assert_close(on_saved, recomputed, rtol=1e-12, atol=1e-12)
        if level < MAX_LEVEL:  # the last level has no autograd
            for overload, floats in ((packet.saved, full), (packet.default, plain)):
                leaves = [t.clone().requires_grad_() for t in floats]
                torch.library.opcheck(overload, (*leaves, idx, 5))


@pytest.mark.skipif(segops.ops.native_kernels() is None, reason="no operator library")
def test_autograd_saves_the_results_the_backward_reads() -> None:
    """The backward of rms_norm reads the saved norm, so changing it in
    place before the backward is an error (as for PyTorch's own ops that
    save their output); sum's backward reads no result, so it is not."""
    idx = torch.tensor([0, 0, 1, 1, 1])
    x = torch.randn(5, 3, dtype=torch.float64, requires_grad=True)
    norm = segops.segmented_rms_norm(x, idx, 2)
    norm.mul_(2)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        norm.sum().backward()
    total = segops.segmented_sum(x, idx, 2)
    total.mul_(2)
    total.sum().backward()
    torch.testing.assert_close(x.grad, torch.full_like(x, 2.0))


@pytest.mark.skipif(segops.ops.native_kernels() is None, reason="no operator library")
@pytest.mark.parametrize("op", [segops.segmented_sum, segops.segmented_rms_norm])
def test_a_second_backward_through_a_freed_graph_raises(op) -> None:
    """Once a backward has freed a node's saved tensors, another backward
    through it raises PyTorch's error, as its own nodes do (the node used
    to call the next level on the tensors it no longer held)."""
    x = torch.randn(5, 3, requires_grad=True)
    total = op(x, torch.tensor([0, 0, 1, 1, 1]), 2).sum()
    total.backward()
    with pytest.raises(RuntimeError, match="backward through the graph a second time"):
        total.backward()
