"""Integer and bool arguments that a segops.jit function uses as numbers.

Kernels take integer tensors only as indices. A function may also compute
with one, as eager PyTorch promotes it: `h * z[:, None]` with atomic
numbers `z` is a float product. Such arguments are found from a trace of
the function (every use of the argument reaches a float result or a
where() condition) and converted to the function's float type before the call: the
same values eager's type promotion computes with, at any derivative order
(integers carry no gradient).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch
from torch import Tensor
from torch.utils._python_dispatch import _disable_current_modes

from segops._dtypes import INDEX_DTYPES
from segops._jit_trace import JitError, meta_like, trace

_aten = torch.ops.aten

_ONE_INDEX = tuple((dtype, 1) for dtype in INDEX_DTYPES)  # a 1-D index: (dtype, rank)


def integer_layout(args: Sequence[Any]) -> tuple:
    """The call's non-float tensors of one or more dimensions (0-d integer
    tensors are counts), by position, dtype and rank: what decides which
    of them are numbers. Built on every call: kept cheap."""
    return tuple((i, a.dtype, a.dim()) for i, a in enumerate(args)
                 if isinstance(a, Tensor) and a.dim() and not a.is_floating_point())


# Ops that read rows of their first operand: the rows are what is used.
_GATHERS = frozenset({_aten.index.Tensor, _aten.index_select.default, _aten.gather.default,
                      _aten.embedding.default})
_CONVERSIONS = frozenset({_aten._to_copy.default, _aten.to.dtype})


def _uses(node: torch.fx.Node) -> set[str]:
    """How the integer (or bool) value `node` is used, followed through
    views, gathers of its rows and pointwise ops with integer or bool
    results: "number" (it reaches a float result), "condition" (a
    where()'s), "index" (any other op)."""
    kinds: set[str] = set()
    for user in node.users:
        target = user.target
        if user.op == "output":
            continue
        if not isinstance(target, torch._ops.OpOverload):
            kinds.add("index")
        elif target.is_view or (target in _GATHERS and user.args[0] is node):
            kinds |= _uses(user)
        elif target.name().startswith("aten::where") and user.args[0] is node:
            kinds.add("condition")
        elif target in _CONVERSIONS or torch.Tag.pointwise in target.tags:
            value = user.meta.get("val")
            if isinstance(value, Tensor) and value.is_floating_point():
                kinds.add("number")
            else:
                kinds |= _uses(user)
        else:
            kinds.add("index")
    return kinds


def number_arguments(fn: Callable, args: Sequence[Any], layout: tuple) -> tuple[int, ...]:
    """The positions, among `layout`'s tensors, of those `fn` computes
    with (or only compares). An argument used both as a number and as an
    index is a JitError: its two uses need two tensors."""
    if not layout or (len(layout) == 1 and layout[0][1:] in _ONE_INDEX):
        return ()  # no integer tensor, or only the segment index
    stand_ins = [meta_like(a) for a in args]
    with torch._guards.tracing(None), _disable_current_modes():
        try:
            graph = trace(fn, stand_ins).graph
        except JitError:
            return ()  # the call reports it, with the arguments as given
    placeholders = [n for n in graph.nodes if n.op == "placeholder"]
    if len(placeholders) != len(args):
        return ()  # arguments that are not flat (a Graph): indices only
    numbers = []
    for position, dtype, _ in layout:
        uses = _uses(placeholders[position])
        if "index" in uses and "number" in uses:
            raise JitError(f"segops.jit: {fn.__name__}: argument {position} ({dtype}) is "
                           "used both as a number and as an index; pass the number as a "
                           "float argument of its own (`.to(<the float dtype>)`)")
        # A bool that is only a condition stays one (the call refuses it).
        as_condition = dtype == torch.bool and "number" not in uses
        if uses and "index" not in uses and not as_condition:
            numbers.append(position)
    return tuple(numbers)


def promoted(args: Sequence[Any], numbers: Sequence[int]) -> tuple:
    """`args` with the integer arguments at `numbers` in the float type of
    the call's float tensors (PyTorch's default dtype where it has none)."""
    dtype = next((a.dtype for a in args if isinstance(a, Tensor) and a.is_floating_point()),
                 torch.get_default_dtype())
    result = list(args)
    for position in numbers:
        result[position] = result[position].to(dtype)
    return tuple(result)
