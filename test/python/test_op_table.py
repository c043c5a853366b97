"""The Python op table (segops._op_table.OPS) is the op library's one
source: oplib/segops.mlir is generated from it, and the library (as its
manifest lists it) agrees: every library kernel belongs to a public op at a
derivative level the ops register, every op has each of its levels for
every dtype and row width it is compiled for, and each op's kernels apply
the seg op the table names, with its operands."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from segops import _library, _op_table

KERNEL = re.compile(r"^(?P<op>segmented_[a-z_]+?)_(?P<dtype>f32|f64)_w(?P<width>[13])$")
OPLIB = Path(__file__).resolve().parents[2] / "oplib" / "segops.mlir"


def _kernels() -> dict[tuple[str, str, str], set[int]]:
    levels: dict[tuple[str, str, str], set[int]] = {}
    for name in _library.kernels():
        base, level = _op_table.split_level_name(name)
        match = KERNEL.match(base)
        assert match, f"op library kernel {name} is not named <op>_<dtype>_w<width>(_grad)*"
        key = (match["op"], match["dtype"], match["width"])
        levels.setdefault(key, set()).add(level)
    return levels


def test_every_library_kernel_belongs_to_a_public_op() -> None:
    for op, _, _ in _kernels():
        assert op in _op_table.OPS, f"oplib/segops.mlir compiles {op}, which the op table lacks"


def test_every_public_op_has_all_its_levels() -> None:
    kernels = _kernels()
    for spec in _op_table.OPS.values():
        variants = {key: levels for key, levels in kernels.items() if key[0] == spec.name}
        assert variants, f"the op table has {spec.name}, which the op library does not compile"
        for (op, dtype, width), levels in variants.items():
            assert levels == set(range(_op_table.MAX_LEVEL + 1)), (
                f"{op} {dtype} w{width}: the op library has levels {sorted(levels)}, the ops "
                f"register levels 0 to {_op_table.MAX_LEVEL}")
            assert spec.kernel_name(dtype, int(width), 2) == f"{op}_{dtype}_w{width}_grad_grad"


def test_each_op_kernel_applies_the_tables_seg_op() -> None:
    """Each forward kernel of oplib/segops.mlir is one op, the table's, on
    the op's tensors, idx and (if it takes one) the count."""
    functions = re.findall(r"func\.func @(\w+)\((.*?)\) -> .*?\{\n\s*%0 = (seg\.\w+) (.*?) :",
                           OPLIB.read_text())
    assert len(functions) >= len(_op_table.OPS)
    for name, params, seg_op, operands in functions:
        spec = _op_table.OPS[KERNEL.match(name)["op"]]
        assert seg_op == spec.seg_op, f"@{name} applies {seg_op}; the op table says {spec.seg_op}"
        expected = spec.num_tensors + 1 + (1 if spec.takes_count else 0)
        assert len(operands.split(",")) == expected, f"@{name}: {operands}"
        assert len(params.split(",")) == expected, f"@{name}: {params}"


@pytest.mark.parametrize("name, expected", [
    ("segmented_sum", ("segmented_sum", 0)),
    ("segmented_mean_grad_grad", ("segmented_mean", 2)),
    ("jit_f_0123_grad", ("jit_f_0123", 1)),
    ("grad", ("grad", 0)),
])
def test_level_names_round_trip(name: str, expected: tuple[str, int]) -> None:
    assert _op_table.split_level_name(name) == expected
    assert _op_table.level_name(*expected) == name


def test_op_level_names_only_segment_ops() -> None:
    assert _op_table.op_level("segmented_max_grad")[0].seg_op == "seg.max"
    assert _op_table.op_level("segmented_max_grad")[1] == 1
    assert _op_table.op_level("index_add") is None
    assert _op_table.op_level("segmented_sum" + "_grad" * (_op_table.MAX_LEVEL + 1)) is None


def test_oplib_source_is_generated_from_the_table() -> None:
    """oplib/segops.mlir is library_source()'s text: `python
    scripts/generate_oplib.py` writes it after a change to the table."""
    assert OPLIB.read_text() == _op_table.library_source(), (
        "oplib/segops.mlir differs from the op table's library_source(); run "
        "`python scripts/generate_oplib.py`")


def test_kernel_source_at_a_width_the_library_lacks() -> None:
    """Widths compiled at run time use the same kernel functions."""
    source = _op_table.OPS["segmented_mul"].kernel_source("f64", 64)
    assert "%x: tensor<?x64xf64>, %y: tensor<?xf64>, %idx: tensor<?xi32>" in source
    assert source.startswith("func.func @segmented_mul_f64_w64(")
    with pytest.raises(ValueError, match="takes no rows of 5 features"):
        _op_table.OPS["segmented_matvec"].kernel_source("f32", 5)
