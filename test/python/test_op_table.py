"""The Python op table (ops.SPECS) and the op library (oplib/segops.mlir, as
its manifest lists it) agree: every library kernel belongs to a public op at
a derivative level the ops register, and every op has each of its levels for
every dtype and row width it is compiled for."""

from __future__ import annotations

import re

from segops import _library, ops

KERNEL = re.compile(r"^(?P<op>segmented_[a-z_]+?)_(?P<dtype>f32|f64)_w(?P<width>[13])"
                    r"(?P<grads>(?:_grad)*)$")


def _kernels() -> dict[tuple[str, str, str], set[int]]:
    levels: dict[tuple[str, str, str], set[int]] = {}
    for name in _library.kernels():
        match = KERNEL.match(name)
        assert match, f"op library kernel {name} is not named <op>_<dtype>_w<width>(_grad)*"
        key = (match["op"], match["dtype"], match["width"])
        levels.setdefault(key, set()).add(match["grads"].count("_grad"))
    return levels


def test_every_library_kernel_belongs_to_a_public_op() -> None:
    public = {spec.name for spec in ops.SPECS}
    for op, _, _ in _kernels():
        assert op in public, f"oplib/segops.mlir compiles {op}, which ops.SPECS lacks"


def test_every_public_op_has_all_its_levels() -> None:
    kernels = _kernels()
    for spec in ops.SPECS:
        variants = {key: levels for key, levels in kernels.items() if key[0] == spec.name}
        assert variants, f"ops.SPECS has {spec.name}, which the op library does not compile"
        for (op, dtype, width), levels in variants.items():
            assert levels == set(range(ops.MAX_LEVEL + 1)), (
                f"{op} {dtype} w{width}: the op library has levels {sorted(levels)}, the ops "
                f"register levels 0 to {ops.MAX_LEVEL}")
