"""Every elementwise op of PyTorch's OpInfo database through segops.jit
(bench/opinfo_coverage.py): values in float32 and float64, first and second
derivatives in float64, against eager. An op segops does not lower is
refused with a JitError naming it; none may compute a wrong value."""

from __future__ import annotations

import pytest
import torch

pytest.importorskip("expecttest")  # torch.testing._internal needs it

from bench import opinfo_coverage  # noqa: E402

# One xdist worker runs the module, so that the sweep (`results`, a module
# fixture of over a minute) runs once.
pytestmark = [pytest.mark.xdist_group("opinfo"), pytest.mark.long]


@pytest.fixture(scope="module")
def results() -> list[opinfo_coverage.Result]:
    return opinfo_coverage.run()


def test_no_op_computes_a_wrong_value(results):
    wrong = [f"{r.name}: {r.why}" for r in results if r.status == "wrong"]
    assert not wrong, wrong


def test_core_aten_coverage(results):
    """At least 95% of the core ATen ops (and those PyTorch decomposes into
    them) pass; the rest are refused by name."""
    core = [r for r in results if r.core and r.status != "skipped"]
    passed = [r for r in core if r.status == "pass"]
    assert len(core) >= 100
    assert len(passed) >= 0.95 * len(core), opinfo_coverage.figures(results)
    for r in core:
        if r.status == "refused":
            assert "not supported" in r.why or "cannot hold" in r.why, r


def test_the_models_ops_pass(results):
    """The pointwise ops of SchNet, DimeNet/MACE's Bessel bases, GNN
    activations and the minimum-image convention."""
    by_name = {r.name: r.status for r in results}
    for name in ("sin", "cos", "nn.functional.softplus", "nn.functional.silu",
                 "nn.functional.mish", "nn.functional.elu", "round", "remainder", "fmod",
                 "atan2", "erf", "expm1", "log1p", "sigmoid", "tanh", "where", "clamp"):
        if name in by_name:
            assert by_name[name] == "pass", (name, by_name[name])


def test_a_refused_op_names_itself():
    import segops

    def fn(x, idx, n: int):
        return segops.segmented_sum(torch.special.bessel_j0(x), idx, n)

    x = torch.randn(6, dtype=torch.float64)
    with pytest.raises(segops.JitError, match="bessel_j0"):
        segops.jit(fn)(x, torch.tensor([0, 0, 1, 1, 2, 2]), 3)


# Through segops.fusion (a compile each, so a subset): the ops whose
# decompositions put predicates, bool arithmetic and selects in clusters,
# and the models' ops.
FUSION_SUBSET = {"__rpow__", "clamp", "fmax", "isfinite", "logaddexp", "logit", "xlogy",
                 "nn.functional.hardtanh", "nn.functional.softplus", "nn.functional.silu",
                 "round", "remainder", "cos", "tan", "atan2", "erf", "sign"}


def test_through_fusion_no_op_computes_a_wrong_value():
    results = opinfo_coverage.run(fusion=True, names=FUSION_SUBSET)
    assert len(results) >= len(FUSION_SUBSET)
    wrong = [f"{r.name}: {r.why}" for r in results if r.status == "wrong"]
    assert not wrong, wrong
    assert sum(r.status == "pass" for r in results) >= len(results) - 1, \
        opinfo_coverage.figures(results)
