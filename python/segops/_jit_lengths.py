"""Which arguments of a several-index segops.jit function share a length,
read from the function's data flow, never from coincidences of sizes.

In `lj_energy(pos, eps, sigma, i, j, batch, num_atoms, num_systems)` the
receivers i and the senders j have one length (the edges: their gathers
are subtracted), num_atoms is the length of batch (the atoms' energies are
summed by it), and pos has a length of its own (a table). A ring, with as
many edges as atoms, must not make i and batch one size: the stages of the
function would then be read wrongly.

So the function runs once on fake tensors whose lengths (and counts) are
symbols of one common example value, none equal to another: every check an
op makes (`x.shape[0] == idx.shape[0]`, broadcasting) that two lengths are
equal makes the shape environment replace one symbol by the other, and the
symbols left are the classes. A 1-D float argument is rows (per-edge
weights, charges) unless its length ends up along a feature dimension
(`r[:, None] - mu`: a per-feature parameter), or rows cannot work at all.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import sympy
import torch
from torch import Tensor
from torch._dynamo.source import ConstantSource
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.fx.experimental.symbolic_shapes import (
    DimDynamic,
    ShapeEnv,
    StatelessSymbolicContext,
)
from torch.utils._python_dispatch import TorchDispatchMode, _disable_current_modes

from segops import _columns
from segops._dtypes import INDEX_DTYPES
from segops._jit_trace import concrete, trace

# Every symbolic length's example value: one value, so that each equality
# an op checks holds and is recorded, and large, so that nothing is
# specialized (0 and 1 are) or mistaken for a feature width.
_EXAMPLE_LENGTH = 8191


@dataclass(frozen=True)
class Lengths:
    """Per flat argument its length class (dimension 0 of an index, a row
    block or a 1-D float row; a count), or None: a fixed shape (a per-
    feature parameter, a 0-d tensor) or no length (a float constant)."""

    classes: tuple[int | None, ...]
    count: int


def is_index(value: Any) -> bool:
    return isinstance(value, Tensor) and value.dim() == 1 and value.dtype in INDEX_DTYPES


def _is_count(value: Any) -> bool:
    return type(value) is int or isinstance(value, torch.SymInt)


def _role(value: Any) -> str | None:
    """"length": its length (or value) is a size of the function's spaces;
    "maybe": a 1-D float tensor, rows or a per-feature parameter; None."""
    if is_index(value) or _is_count(value) or (
            isinstance(value, Tensor) and value.dim() >= 2 and value.is_floating_point()):
        return "length"
    if isinstance(value, Tensor) and value.dim() == 1 and value.is_floating_point():
        return "maybe"
    return None


def structure(flat: Sequence[Any]) -> tuple:
    """What the length classes depend on (not the sizes): per argument its
    kind, dtype, rank, element shape and device (CUDA or not)."""
    key = tuple((a.dtype, a.dim(), a.shape[1:], a.is_cuda) if isinstance(a, Tensor)
                else int if _is_count(a) else type(a) for a in flat)
    try:
        hash(key)
        return key
    except TypeError:  # symbolic sizes (fake tensors inside torch.compile)
        return tuple((a.dtype, a.dim(), tuple(concrete(d) for d in a.shape[1:]), a.is_cuda)
                     if isinstance(a, Tensor) else k for a, k in zip(flat, key))


class _ShapeRecorder(TorchDispatchMode):
    """Every shape an op of the run returns."""

    def __init__(self) -> None:
        super().__init__()
        self.shapes: list[tuple[Any, ...]] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        for value in out if isinstance(out, (tuple, list)) else (out,):
            if isinstance(value, Tensor):
                self.shapes.append(tuple(value.shape))
        return out


def _symbolic_run(fn: Callable, flat: Sequence[Any], symbolic: Sequence[bool]
                  ) -> tuple[list[Any], list[tuple[Any, ...]]]:
    """Runs `fn` on fake stand-ins of `flat` whose dimension 0 (or value,
    for counts) is a symbol where `symbolic` says so. Returns per argument
    its symbolic length expression, simplified by what the run found equal
    (None where not symbolic), and the shapes of every value made."""
    shape_env = ShapeEnv(duck_shape=False, specialize_zero_one=False)
    mode = FakeTensorMode(shape_env=shape_env, allow_non_fake_inputs=True)
    stand_ins: list[Any] = []
    for position, (a, is_symbolic) in enumerate(zip(flat, symbolic)):
        source = ConstantSource(f"segops_argument_{position}")
        if isinstance(a, Tensor):
            shape = [concrete(d) for d in a.shape]
            dynamic = [DimDynamic.STATIC] * len(shape)
            if is_symbolic:
                shape[0], dynamic[0] = _EXAMPLE_LENGTH, DimDynamic.DYNAMIC
            stand_ins.append(mode.from_tensor(
                torch.empty(shape, dtype=a.dtype), source=source,
                symbolic_context=StatelessSymbolicContext(dynamic_sizes=dynamic)))
        elif is_symbolic:
            symbol = shape_env.create_symbol(_EXAMPLE_LENGTH, source=source,
                                             dynamic_dim=DimDynamic.DYNAMIC)
            stand_ins.append(shape_env.create_symintnode(symbol, hint=_EXAMPLE_LENGTH,
                                                         source=source))
        else:
            stand_ins.append(a)
    recorder = _ShapeRecorder()
    with _columns.rows_as_written(), mode, recorder:
        fn(*stand_ins)

    def length(value: Any) -> Any:
        size = value.shape[0] if isinstance(value, Tensor) else value
        return shape_env.replace(size.node.expr) if isinstance(size, torch.SymInt) else None

    return [length(s) if is_symbolic else None for s, is_symbolic in zip(stand_ins, symbolic)], \
        recorder.shapes


def _feature_symbols(shapes: Sequence[tuple[Any, ...]]) -> set[sympy.Symbol]:
    """The symbols found along a dimension other than the first."""
    found: set[sympy.Symbol] = set()
    for shape in shapes:
        for size in shape[1:]:
            if isinstance(size, torch.SymInt):
                found |= size.node.expr.free_symbols
    return found


def infer_lengths(fn: Callable, flat: Sequence[Any]) -> Lengths:
    """The length classes of a call like `flat` to `fn` (flat arguments).
    Raises JitError, with the user's sizes, where no assignment traces."""
    roles = [_role(a) for a in flat]
    with torch._guards.tracing(None), _disable_current_modes():
        try:
            lengths, shapes = _symbolic_run(fn, flat, [r is not None for r in roles])
        except Exception:  # noqa: BLE001 - a 1-D float that cannot be rows
            try:
                lengths, shapes = _symbolic_run(fn, flat, [r == "length" for r in roles])
            except Exception:  # noqa: BLE001 - reported from a trace at the call's sizes
                trace(fn, [torch.empty([concrete(d) for d in a.shape], dtype=a.dtype)
                           if isinstance(a, Tensor) else concrete(a) if _is_count(a) else a
                           for a in flat])
                # It traces at the call's own sizes, though not with symbolic
                # ones: equal sizes are taken as one length.
                return _by_equal_sizes(flat, roles)
    features = _feature_symbols(shapes)
    members: dict[Any, list[int]] = {}
    for position, expr in enumerate(lengths):
        if expr is not None:
            members.setdefault(expr, []).append(position)
    classes: list[int | None] = [None] * len(flat)
    number = 0
    for expr, positions in members.items():
        if not isinstance(expr, sympy.Symbol):  # fixed by the function (broadcast)
            groups = [[p] for p in positions if roles[p] != "maybe"]
        elif expr in features and all(roles[p] == "maybe" for p in positions):
            groups = []  # a per-feature parameter: its shape is fixed
        else:
            groups = [positions]
        for group in groups:
            for position in group:
                classes[position] = number
            number += 1
    return Lengths(tuple(classes), number)


def _by_equal_sizes(flat: Sequence[Any], roles: Sequence[str | None]) -> Lengths:
    """Classes of equal sizes: each distinct length or count, and the 1-D
    floats as long as one of them."""
    numbers: dict[int, int] = {}
    for a, role in zip(flat, roles):
        if role == "length":
            numbers.setdefault(concrete(a.shape[0] if isinstance(a, Tensor) else a), len(numbers))
    classes = [numbers.get(concrete(a.shape[0])) if role == "maybe"
               else numbers[concrete(a.shape[0] if isinstance(a, Tensor) else a)]
               if role == "length" else None for a, role in zip(flat, roles)]
    return Lengths(tuple(classes), len(numbers))


def _described(value: Any, name: str) -> str:
    if _is_count(value):
        return f"{name} ({concrete(value)})"
    noun = "entries" if is_index(value) else "rows"
    return f"{name} ({concrete(value.shape[0])} {noun})"


def class_sizes(fn_name: str, lengths: Lengths, flat: Sequence[Any],
                names: Callable[[], Sequence[str]]) -> list[Any]:
    """Per class, the call's size (symbolic inside torch.compile); raises
    ValueError, naming the arguments (`names()`: per flat value), where one
    class holds two sizes."""
    sizes: list[Any] = [None] * lengths.count
    first: list[int] = [-1] * lengths.count
    for position, (a, cls) in enumerate(zip(flat, lengths.classes)):
        if cls is None:
            continue
        size = a.shape[0] if isinstance(a, Tensor) else a
        if first[cls] < 0:
            sizes[cls], first[cls] = size, position
        elif concrete(size) != concrete(sizes[cls]):
            other, named = first[cls], names()
            raise ValueError(
                f"segops.jit: {fn_name}: {_described(flat[other], named[other])} and "
                f"{_described(a, named[position])} must have one length: the function "
                "uses them together")
    return sizes
