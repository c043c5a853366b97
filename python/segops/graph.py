"""segops.Graph: a neighbour list as segops' kernels walk it.

Edges are ordered by receiver (the index reductions sum into, sorted), and
the graph holds the transposed order: a stable permutation of the edges by
sender. A gather by the senders has a sum by the senders as its adjoint;
over the transposed order that sum is a sorted segment reduction, so every
pass, forward and every backward level, is deterministic and needs no
atomics. The order is computed once per graph (and remembered by the
kernels for the sender tensor's content: an in-place change invalidates
it).

>>> g = segops.Graph(edge_index, senders=0, receivers=1)    # PyG, MACE
>>> g = segops.Graph(edge_index, receivers=0, senders=1)    # NequIP
>>> g = segops.Graph(ptr=ptr, senders=neighbours)           # CSR
>>> edge_attr = g.permute(edge_attr)    # edge features in the graph's order
"""

from __future__ import annotations

import torch
from torch import Tensor

from segops import ops as _ops

__all__ = ["Graph", "clear_index_cache"]

_INT32_MAX = 2**31 - 1


def clear_index_cache() -> None:
    """Forgets the int32 narrowings and transposed orders the kernels
    remember per index tensor (they are dropped anyway when the tensor is
    freed or written in place)."""
    native = _ops.native_kernels()
    if native is not None:
        native.clear_index_cache()


def _check_index_tensor(name: str, value: object) -> Tensor:
    if not isinstance(value, Tensor):
        raise TypeError(f"segops.Graph: {name} must be a tensor, got {type(value).__name__}")
    if value.dtype not in (torch.int32, torch.int64):
        raise TypeError(f"segops.Graph: {name} must be int32 or int64, got {value.dtype}")
    if value.dim() != 1:
        raise ValueError(f"segops.Graph: {name} must be 1-D, got shape {tuple(value.shape)}")
    return value


def _check_range(name: str, value: Tensor, num_nodes: int) -> None:
    if value.numel() and (int(value.min()) < 0 or int(value.max()) >= num_nodes):
        bad = int(((value < 0) | (value >= num_nodes)).nonzero()[0, 0])
        raise ValueError(f"segops.Graph: {name}[{bad}] = {int(value[bad])} is out of range: "
                         f"node indices must lie in [0, num_nodes) = [0, {num_nodes})")


class Graph:
    """Edges `senders[e] -> receivers[e]`, sorted by receiver, over
    `num_nodes` nodes, with the transposed order.

    Built from a COO `edge_index` (2, E) with the rows' roles named
    (`senders=0, receivers=1` for PyG and MACE, the reverse for NequIP),
    from `receivers=` and `senders=` tensors, or from CSR `ptr=` (num_nodes
    + 1 offsets of each receiver's edges) and `senders=`. Validated once.
    Edges not sorted by receiver are sorted (stably); `edge_order` is then
    the permutation applied (`permute` applies it to edge features), else
    None.

    Attributes: `receivers` and `senders` (int32), `num_nodes`,
    `num_edges`, `edge_order`, `sender_order` (the transposed order: edges
    sorted stably by sender)."""

    receivers: Tensor
    senders: Tensor
    num_nodes: int
    edge_order: Tensor | None

    def __init__(self, edge_index: Tensor | None = None, *,
                 receivers: Tensor | int | None = None, senders: Tensor | int | None = None,
                 ptr: Tensor | None = None, num_nodes: int | None = None) -> None:
        if ptr is not None:
            if edge_index is not None or receivers is not None:
                raise ValueError("segops.Graph: give CSR as ptr= and senders= alone")
            receivers, num_nodes = self._receivers_of_csr(ptr, senders, num_nodes)
        elif edge_index is not None:
            receivers, senders = self._roles_of_coo(edge_index, receivers, senders)
        if receivers is None or senders is None:
            raise ValueError("segops.Graph needs edge_index with receivers= and senders= "
                             "naming its rows, receivers= and senders= tensors, or CSR ptr= "
                             "and senders=")
        receivers = _check_index_tensor("receivers", receivers)
        senders = _check_index_tensor("senders", senders)
        if receivers.shape[0] != senders.shape[0]:
            raise ValueError(f"segops.Graph: receivers ({receivers.shape[0]} edges) and "
                             f"senders ({senders.shape[0]} edges) must have one length")
        if receivers.device != senders.device:
            raise ValueError(f"segops.Graph: receivers and senders must be on one device, got "
                             f"{receivers.device} and {senders.device}")
        if num_nodes is None:
            num_nodes = int(torch.maximum(receivers.max(), senders.max())) + 1 \
                if receivers.numel() else 0
        num_nodes = int(num_nodes)
        if not 0 <= num_nodes <= _INT32_MAX:
            raise ValueError(f"segops.Graph: num_nodes must lie in [0, 2^31), got {num_nodes}")
        _check_range("receivers", receivers, num_nodes)
        _check_range("senders", senders, num_nodes)
        receivers, senders = receivers.to(torch.int32), senders.to(torch.int32)
        order = None
        if receivers.numel() > 1 and bool((receivers[1:] < receivers[:-1]).any()):
            receivers, order = torch.sort(receivers, stable=True)
            senders = senders[order]
        self.receivers = receivers.contiguous()
        self.senders = senders.contiguous()
        self.num_nodes = num_nodes
        self.edge_order = order
        # The transposed order, remembered by the kernels for this sender
        # tensor: reductions by the senders (a gather's adjoint) walk it.
        native = _ops.native_kernels()
        self.sender_order = native.sorted_rows(self.senders)[1] if native is not None \
            else torch.sort(self.senders, stable=True)[1]

    @staticmethod
    def _receivers_of_csr(ptr: Tensor, senders: object,
                          num_nodes: int | None) -> tuple[Tensor, int]:
        ptr = _check_index_tensor("ptr", ptr)
        senders = _check_index_tensor("senders", senders)
        if ptr.shape[0] < 1:
            raise ValueError("segops.Graph: ptr must hold num_nodes + 1 offsets")
        if num_nodes is not None and int(num_nodes) != ptr.shape[0] - 1:
            raise ValueError(f"segops.Graph: ptr holds {ptr.shape[0]} offsets, so num_nodes "
                             f"is {ptr.shape[0] - 1}, not {num_nodes}")
        counts = ptr[1:] - ptr[:-1]
        if int(ptr[0]) != 0 or int(ptr[-1]) != senders.shape[0] or bool((counts < 0).any()):
            raise ValueError("segops.Graph: ptr must rise from 0 to the number of senders "
                             f"({senders.shape[0]}), got {ptr[0]} ... {ptr[-1]}")
        nodes = torch.arange(ptr.shape[0] - 1, device=ptr.device, dtype=torch.int32)
        return torch.repeat_interleave(nodes, counts), ptr.shape[0] - 1

    @staticmethod
    def _roles_of_coo(edge_index: Tensor, receivers: object,
                      senders: object) -> tuple[Tensor, Tensor]:
        if not isinstance(edge_index, Tensor) or edge_index.dim() != 2 \
                or edge_index.shape[0] != 2:
            shape = tuple(edge_index.shape) if isinstance(edge_index, Tensor) else None
            raise ValueError(f"segops.Graph: edge_index must be a (2, E) tensor, got {shape}")
        if {receivers, senders} != {0, 1} or not all(type(r) is int
                                                      for r in (receivers, senders)):
            raise ValueError("segops.Graph(edge_index, ...): name the rows' roles, "
                             "senders=0, receivers=1 (PyG, MACE) or receivers=0, senders=1 "
                             "(NequIP)")
        return edge_index[receivers], edge_index[senders]

    @property
    def num_edges(self) -> int:
        return self.receivers.shape[0]

    def permute(self, edge_values: Tensor) -> Tensor:
        """Per-edge values given in the input's edge order, in the graph's."""
        if edge_values.shape[0] != self.num_edges:
            raise ValueError(f"segops.Graph.permute: expected {self.num_edges} edge rows, got "
                             f"{edge_values.shape[0]}")
        return edge_values if self.edge_order is None else edge_values[self.edge_order]

    def __repr__(self) -> str:
        return (f"segops.Graph(num_nodes={self.num_nodes}, num_edges={self.num_edges}, "
                f"device={self.receivers.device})")

    # segops.jit passes a graph into a function as its parts.
    def _parts(self) -> tuple[Tensor, Tensor, int]:
        return self.receivers, self.senders, self.num_nodes

    @classmethod
    def _of_parts(cls, receivers: Tensor, senders: Tensor, num_nodes: int) -> Graph:
        """A graph of already sorted and checked parts (tracing stand-ins)."""
        graph = cls.__new__(cls)
        graph.receivers, graph.senders, graph.num_nodes = receivers, senders, num_nodes
        graph.edge_order = None
        graph.sender_order = None  # type: ignore[assignment]
        return graph
