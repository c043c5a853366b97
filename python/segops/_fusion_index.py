"""PyTorch's indexing idioms in an aten graph, as segment gathers and sums.

Message-passing code written for PyTorch (PyG, MACE, NequIP) gathers node
values by an index tensor and sums edge values into nodes:

    x[j], x.index_select(0, j),
    x.gather(0, j[:, None].expand(-1, F))            -> a gather by j
    zeros.index_add_(0, i, src), zeros.index_put_((i,), src, accumulate=True),
    zeros.scatter_add_(0, i[:, None].expand_as(src), src)  -> a sum by i
    zeros.scatter_reduce_(0, i[:, None].expand_as(src), src, "amax",
                          include_self=False), zeros.index_reduce_(...)
                                                     -> a max by i (also
                                                        sum, mean, amin)

After functionalization and Inductor's decompositions these are
aten.index.Tensor, aten.index_select, aten.index_put (index_add becomes it)
aten.scatter_add, aten.scatter_reduce and aten.index_reduce on a zeros
tensor. segops.fusion reads each as a segment op: by the cluster's index,
seg.gather / seg.sum (seg.mean, seg.max, seg.min); by another index,
seg.gather_rows / seg.scatter_sum (sums only).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from segops._dtypes import INDEX_DTYPES

_FLOATS = (torch.float32, torch.float64)


@dataclass(frozen=True)
class IndexOp:
    """One gather or sum by an index tensor.

    gather: result[r] = values[index[r]], values has `count` rows.
    sum:    result[s] = sum of values[r] over index[r] == s, into `count`
            rows (the zeros tensor `base`, whose length is `count_node`
            where it is a symbolic size the graph holds)."""

    kind: str  # "gather" or "sum" (any reduction into a base: see `reduce`)
    values: torch.fx.Node
    index: torch.fx.Node
    count: Any  # int or SymInt: the table's rows (gather), the result's (sum)
    base: torch.fx.Node | None = None
    count_node: Any = None  # an fx.Node holding a symbolic count, or an int
    # A "sum"'s reduction: "sum", "mean", "amax" or "amin" (scatter_reduce's
    # names); with include_self, an extremum also takes the base's 0.
    reduce: str = "sum"
    include_self: bool = False


def _value(node: Any) -> Any:
    return node.meta.get("val") if isinstance(node, torch.fx.Node) else None


def _is_index(node: Any) -> bool:
    value = _value(node)
    return (isinstance(value, torch.Tensor) and value.dim() == 1
            and value.dtype in INDEX_DTYPES)


def _is_float_rows(node: Any) -> bool:
    value = _value(node)
    return isinstance(value, torch.Tensor) and value.dim() >= 1 and value.dtype in _FLOATS


def _is_dim0(dim: Any, node: Any) -> bool:
    value = _value(node)
    return isinstance(dim, int) and isinstance(value, torch.Tensor) and \
        dim % max(value.dim(), 1) == 0


def _is_zero(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and value == 0


def _zeros_count(node: Any) -> tuple[Any, Any] | None:
    """For a tensor of zeros made in the graph: its rows, and what holds
    them (an int, or the fx.Node of a symbolic size); None otherwise."""
    if not isinstance(node, torch.fx.Node) or node.op != "call_function":
        return None
    aten = torch.ops.aten
    target, args, kwargs = node.target, node.args, node.kwargs
    shape: Any = None
    if target in (aten.full.default, aten.new_full.default):
        at = 0 if target is aten.full.default else 1
        fill = args[at + 1] if len(args) > at + 1 else kwargs.get("fill_value")
        if not _is_zero(fill):
            return None
        shape = args[at]
    elif target is aten.zeros.default:
        shape = args[0]
    elif target is aten.new_zeros.default:
        shape = args[1]
    elif target is aten.full_like.default:
        if not _is_zero(args[1] if len(args) > 1 else kwargs.get("fill_value")):
            return None
    elif target is not aten.zeros_like.default:
        return None
    value = _value(node)
    if not isinstance(value, torch.Tensor) or value.dim() == 0:
        return None
    count = value.shape[0]
    if isinstance(count, int):
        return count, count
    first = shape[0] if isinstance(shape, (list, tuple)) and shape else None
    if isinstance(first, torch.fx.Node):
        return count, first
    return None  # a symbolic length no node of the graph holds


def _expanded_index(node: Any, rows: torch.Size) -> torch.fx.Node | None:
    """The 1-D index i behind scatter_add's or gather's `i[:, None].expand_as(src)`:
    i viewed as a column (L, 1, ..., 1), then expanded over the features,
    so that index[r, ...] = i[r]. Any other layout (`j.expand(E, E)`, where
    index[r, c] = j[c]; a view after the expansion) is no row index: None."""
    aten = torch.ops.aten
    value = _value(node)
    if not isinstance(value, torch.Tensor) or tuple(value.shape) != tuple(rows):
        return None
    length = rows[0]
    # The expansions over the features, outermost first: each keeps the rows
    # in dimension 0 (an expansion that adds leading dimensions moves them).
    while isinstance(node, torch.fx.Node) and node.target is aten.expand.default:
        inner = _value(node.args[0])
        if _value(node).shape[0] != length or not isinstance(inner, torch.Tensor) \
                or inner.dim() != _value(node).dim():
            return None
        node = node.args[0]
    # Then views of i as a column: (L, 1, ..., 1) down to i itself.
    while isinstance(node, torch.fx.Node) and node.target in (
            aten.unsqueeze.default, aten.view.default, aten.reshape.default,
            aten._unsafe_view.default):
        inner = _value(node)
        if not isinstance(inner, torch.Tensor) or inner.dim() < 1 or \
                inner.shape[0] != length or \
                any(not (isinstance(d, int) and d == 1) for d in inner.shape[1:]):
            return None
        node = node.args[0]
    # A 2-D index tensor of the user's (each column its own index) is no
    # 1-D index expanded: not a segment sum.
    if not _is_index(node) or _value(node).shape[0] != length:
        return None
    return node


def index_op(node: torch.fx.Node) -> IndexOp | None:
    """The gather or sum `node` is, or None."""
    if node.op != "call_function":
        return None
    aten = torch.ops.aten
    target, args = node.target, node.args
    if target is aten.index.Tensor and len(args) == 2 and isinstance(args[1], (list, tuple)) \
            and len(args[1]) == 1:
        table, index = args[0], args[1][0]
    elif target is aten.index_select.default and len(args) == 3 and _is_dim0(args[1], args[0]):
        table, index = args[0], args[2]
    elif target is aten.gather.default and len(args) >= 3 and _is_dim0(args[1], args[0]) \
            and not (args[3] if len(args) > 3 else node.kwargs.get("sparse_grad", False)):
        # torch.gather(x, 0, j[:, None].expand(-1, F)): x[j].
        table, value = args[0], _value(node)
        if not isinstance(value, torch.Tensor) or \
                tuple(value.shape[1:]) != tuple(_value(table).shape[1:]):
            return None
        index = _expanded_index(args[2], value.shape)
    else:
        return _sum_op(node)
    if not (_is_index(index) and _is_float_rows(table)):
        return None
    return IndexOp("gather", table, index, _value(table).shape[0])


def _sum_op(node: torch.fx.Node) -> IndexOp | None:
    aten = torch.ops.aten
    target, args, kwargs = node.target, node.args, node.kwargs
    if target is aten.index_put.default and len(args) >= 3:
        accumulate = args[3] if len(args) > 3 else kwargs.get("accumulate", False)
        indices = args[1]
        if accumulate is not True or not isinstance(indices, (list, tuple)) or len(indices) != 1:
            return None
        base, index, src = args[0], indices[0], args[2]
    elif target is aten.index_add.default and len(args) >= 4:
        if kwargs.get("alpha", 1) != 1 or not _is_dim0(args[1], args[0]):
            return None
        base, index, src = args[0], args[2], args[3]
    elif target is aten.scatter_add.default and len(args) == 4:
        if not _is_dim0(args[1], args[0]) or not _is_float_rows(args[3]):
            return None
        base, src = args[0], args[3]
        index = _expanded_index(args[2], _value(src).shape)
    elif target in (aten.scatter_reduce.two, aten.index_reduce.default) and len(args) >= 5:
        reduce = args[4]
        include_self = args[5] if len(args) > 5 else kwargs.get("include_self", True)
        # Into zeros, "mean" with include_self divides by count + 1: no
        # segment mean; "prod" has no segment op.
        if reduce not in ("sum", "mean", "amax", "amin") or \
                (reduce == "mean" and include_self) or \
                not _is_dim0(args[1], args[0]) or not _is_float_rows(args[3]):
            return None
        base, src = args[0], args[3]
        index = args[2] if target is aten.index_reduce.default else \
            _expanded_index(args[2], _value(src).shape)
        found = _reduction(base, index, src)
        if found is None:
            return None
        return IndexOp("sum", src, index, found[0], base, found[1], reduce,
                       bool(include_self) and reduce != "sum")
    else:
        return None
    found = _reduction(base, index, src)
    return None if found is None else IndexOp("sum", src, index, found[0], base, found[1])


def _reduction(base: Any, index: Any, src: Any) -> tuple[Any, Any] | None:
    """The count of a reduction of src's rows by index into zeros `base`
    (and what holds it), or None where it is not one."""
    if not (_is_index(index) and _is_float_rows(src) and _is_float_rows(base)):
        return None
    src_value, base_value = _value(src), _value(base)
    # Rows of src summed whole into rows of base: no broadcasting.
    if tuple(src_value.shape[1:]) != tuple(base_value.shape[1:]) or \
            src_value.dtype != base_value.dtype or \
            src_value.shape[0] != _value(index).shape[0]:
        return None
    return _zeros_count(base)
