"""Finding fusion clusters in a functional aten graph.

A cluster is a set of nodes that share one segment index, one segment
count and one float dtype: segops ops at any derivative level and the
elementwise and per-row aten ops around them that segops.jit's translator
understands. Clusters grow greedily from each segops op over producers and
consumers, never across the forward/backward boundary of a joint graph
(a node is backward when it depends on a tangent) and never into a set
that a node outside it would sit in the middle of (replacing the set by one
node would make a cycle). Backward clusters then take copies of the cheap
forward row producers they read, so that the forward saves their inputs
rather than their row-sized results.
"""

from __future__ import annotations

import operator
from dataclasses import dataclass, field
from typing import Any

import sympy
import torch

from segops._fusion_index import IndexOp, index_op
from segops._fusion_translate import (
    is_unused_placeholder,
    jit_program_level,
    library_call,
    segment_op_level,
    size_expr,
)
from segops._jit_trace import VIEWS, is_feature_tail, is_supported
from segops._op_table import OPS

_FLOATS = (torch.float32, torch.float64)

def _is_kernel_tail(tail: tuple) -> bool:
    """An element shape kernels hold: a scalar, a (1,) column, a row of F
    static features (3-vectors, wide feature rows) or a 3x3 matrix."""
    return tail in ((), (1,), (3, 3)) or is_feature_tail(tail)

# Row producers a backward cluster reads saved rather than recomputing:
# polynomial transcendentals, recomputed once per pass of the backward
# kernel, cost more than a saved row's write and read (measured with
# bench/fusion.py, docs/benchmarks.md).
SAVED_PRODUCERS = frozenset({"exp", "log", "tanh", "sigmoid"})


@dataclass(frozen=True)
class Key:
    """What every node of one cluster shares."""

    idx: torch.fx.Node
    size: Any  # the num_segments argument: an fx.Node (SymInt) or an int
    size_expr: sympy.Expr
    rows_expr: sympy.Expr
    dtype: torch.dtype

    def same(self, other: Key) -> bool:
        return (self.idx is other.idx and self.size_expr == other.size_expr
                and self.dtype == other.dtype)


@dataclass
class Cluster:
    key: Key
    nodes: set[torch.fx.Node]  # its own nodes, in the graph's order when listed
    backward: bool
    recomputed: set[torch.fx.Node] = field(default_factory=set)  # copies of forward nodes

    def members(self) -> set[torch.fx.Node]:
        return self.nodes | self.recomputed


def packet(node: torch.fx.Node) -> str:
    target = node.target
    return target.__name__.split(".")[0] if hasattr(target, "__name__") else str(target)


def is_view(node: torch.fx.Node) -> bool:
    return getattr(node.target, "namespace", "") == "aten" and packet(node) in VIEWS


def _value(node: Any) -> Any:
    return node.meta.get("val") if isinstance(node, torch.fx.Node) else None


def is_segment_node(node: torch.fx.Node) -> bool:
    """A segops library op (any level) or a jit_call."""
    return node.op == "call_function" and (segment_op_level(node.target) is not None
                                           or jit_program_level(node) is not None)


def segment_key(node: torch.fx.Node) -> Key | None:
    """The key of a segops op node whose operands segops can fuse."""
    program = jit_program_level(node)
    if program is not None:
        tensors = list(node.args[1])
        idx, size = tensors[program[0].idx_position], node.args[2]
        floats = [t for i, t in enumerate(tensors) if i != program[0].idx_position]
        first = _value(floats[0]) if floats else None
    elif (call := library_call(node)) is not None:
        idx, size = call.idx, call.num_segments
        first = _value(call.arguments[0]) if call.arguments else None
    elif (found := index_op(node)) is not None and found.kind == "sum":
        idx, size, first = found.index, found.count_node, _value(found.values)
    else:
        return None
    idx_value = _value(idx)
    if not isinstance(idx_value, torch.Tensor) or idx_value.dtype not in (torch.int32,
                                                                         torch.int64):
        return None
    if not isinstance(first, torch.Tensor) or first.dtype not in _FLOATS:
        return None
    size_value = _value(size) if isinstance(size, torch.fx.Node) else size
    if not isinstance(size_value, (int, torch.SymInt)) or isinstance(size_value, bool):
        return None
    return Key(idx, size, size_expr(size_value), size_expr(idx_value.shape[0]), first.dtype)


def _fits(value: Any, key: Key, dtypes: tuple[torch.dtype, ...]) -> bool:
    """A tensor the cluster's kernel can hold: rows or segments long, with
    a scalar, row of features or 3x3 element."""
    if not isinstance(value, torch.Tensor) or value.dtype not in dtypes or value.dim() == 0:
        return False
    if not _is_kernel_tail(tuple(value.shape[1:])):
        return False
    return size_expr(value.shape[0]) in (key.rows_expr, key.size_expr)


def is_kernel_value(value: Any, key: Key) -> bool:
    """A tensor a cluster's jit_call can take or return: a float row or
    segment tensor (a scalar column (L, 1) lives only inside kernels)."""
    return _fits(value, key, (key.dtype,)) and tuple(value.shape[1:]) != (1,)


def forward_node(node: torch.fx.Node) -> torch.fx.Node | None:
    """For a derivative-level segops node, the graph's level-0 node of the
    same op on the same operands, index and count (if there is one)."""
    found = segment_op_level(node.target)
    if found is None or found[1] == 0:
        return None
    public = found[0]
    call = library_call(node)
    first = call.arguments[0] if call is not None and call.arguments else None
    if not isinstance(first, torch.fx.Node):
        return None
    for user in first.users:
        if user.op != "call_function" or segment_op_level(user.target) != (public, 0):
            continue
        forward = library_call(user)
        if forward is not None and (forward.arguments, forward.idx, forward.num_segments) == (
                call.arguments, call.idx, call.num_segments):
            return user
    return None


def _is_second_sum(node: torch.fx.Node, key: Key) -> bool:
    found = second_index_op(node, key)
    return found is not None and found.kind == "sum"


def operands(node: torch.fx.Node, key: Key) -> list[torch.fx.Node]:
    """The values a cluster node reads: an index op's values and index (and
    a sum by another index the zeros it sums into, whose length the kernel
    takes; a sum by the cluster's index makes its own); any other node's
    inputs."""
    found = index_op(node)
    if found is None:
        return list(node.all_input_nodes)
    if found.kind == "sum" and found.index is not key.idx:
        return [found.values, found.index, found.base]
    return [found.values, found.index]


def is_tensor(node: Any) -> bool:
    return isinstance(_value(node), torch.Tensor)


def is_candidate(node: torch.fx.Node, key: Key) -> bool:
    """Whether `node` may join a cluster with `key`."""
    if node.op != "call_function":
        return False
    if is_segment_node(node):
        other = segment_key(node)
        return other is not None and other.same(key)
    if node.target is operator.getitem:  # one result of a multi-result segops op
        source = node.args[0]
        return (isinstance(source, torch.fx.Node) and is_segment_node(source)
                and is_candidate(source, key) and _fits(_value(node), key, (key.dtype,)))
    found = index_op(node)
    if found is not None:
        return _index_op_fits(found, key)
    if not is_supported(node):
        return False
    if _is_uniform_row(node, key):
        return True  # t.view(1, F): the kernel takes t
    schema = getattr(node.target, "_schema", None)
    if schema is None or schema.is_mutable:
        return False
    if not _fits(_value(node), key, (key.dtype, torch.bool)):
        return False
    # Non-tensor inputs are sizes (expand's shape); the translator takes
    # them from the graph's values.
    return all(_fits(_value(arg), key, (key.dtype, torch.bool)) or is_uniform(arg, key)
               or _is_uniform_row(arg, key) for arg in node.all_input_nodes if is_tensor(arg))


def _is_uniform_row(node: Any, key: Key) -> bool:
    """Whether `node` is a (1, F) view of a uniform (F,) value (PyG's
    `t.view(-1, channels)`): the kernel takes the uniform value."""
    if not isinstance(node, torch.fx.Node) or not is_view(node) or \
            not is_uniform(node.args[0], key):
        return False
    shape, of = tuple(_value(node).shape), tuple(_value(node.args[0]).shape)
    return len(of) == 1 and shape == (1, *of)


def is_uniform(node: Any, key: Key) -> bool:
    """A 0-d or (F,) tensor of the cluster's dtype (a learnable scalar, a
    per-feature weight) whose length cannot be taken for rows or segments:
    the kernel takes it as a value per segment."""
    value = _value(node)
    if not isinstance(value, torch.Tensor) or value.dtype != key.dtype or value.dim() > 1:
        return False
    if value.dim() == 0:
        return True
    length = value.shape[0]
    return isinstance(length, int) and is_feature_tail((length,)) and \
        size_expr(length) not in (key.rows_expr, key.size_expr)


def _index_op_fits(op: IndexOp, key: Key) -> bool:
    """Whether a gather or sum by an index tensor can join a cluster with
    `key`: by the cluster's index, a segment gather or sum; by another
    index over the cluster's rows, a gather of a table's rows or a sum into
    a table's rows (seg.gather_rows, seg.scatter_sum)."""
    values = _value(op.values)
    if values.dtype != key.dtype or not _is_kernel_tail(tuple(values.shape[1:])):
        return False
    if size_expr(_value(op.index).shape[0]) != key.rows_expr:
        return False
    if op.index is not key.idx:
        return op.reduce == "sum"  # seg.scatter_sum sums only
    # By the cluster's index: a table of S rows, a sum into S rows.
    return size_expr(op.count) == key.size_expr


def second_index_op(node: torch.fx.Node, key: Key) -> IndexOp | None:
    """The gather or sum `node` is, where it is by an index other than
    `key`'s (its table an input of the cluster, its sum an output)."""
    found = index_op(node)
    return found if found is not None and found.index is not key.idx else None


class ClusterFinder:
    """Clusters of one graph; nodes in `excluded` join none."""

    def __init__(self, graph: torch.fx.Graph) -> None:
        self.graph = graph
        self.order = list(graph.nodes)
        self.position = {n: i for i, n in enumerate(self.order)}
        # Bitsets over positions: each node's ancestors.
        self.ancestors: dict[torch.fx.Node, int] = {}
        self.backward: dict[torch.fx.Node, bool] = {}
        for node in self.order:
            mask = 0
            backward = node.op == "placeholder" and node.name.startswith("tangents")
            for arg in node.all_input_nodes:
                mask |= self.ancestors[arg] | (1 << self.position[arg])
                backward = backward or self.backward[arg]
            self.ancestors[node] = mask
            self.backward[node] = backward

    def sorted(self, nodes: set[torch.fx.Node]) -> list[torch.fx.Node]:
        return sorted(nodes, key=self.position.get)

    def mask(self, nodes: set[torch.fx.Node]) -> int:
        result = 0
        for node in nodes:
            result |= 1 << self.position[node]
        return result

    def is_convex(self, nodes: set[torch.fx.Node]) -> bool:
        """No node outside `nodes` lies on a path between two of its nodes."""
        inside = self.mask(nodes)
        above = 0
        for node in nodes:
            above |= self.ancestors[node]
        between = above & ~inside
        while between:
            low = between & -between
            node = self.order[low.bit_length() - 1]
            if self.ancestors[node] & inside:
                return False
            between ^= low
        return True

    def seeds(self) -> list[tuple[torch.fx.Node, Key]]:
        """The nodes clusters grow from, with their keys: the reductions by
        the index reduced by first (the receivers, in message passing) come
        first, so that sums and gathers by other indices (the senders) join
        its clusters rather than seed their own."""
        found = [(n, key) for n in self.order
                 if n.op == "call_function" and (key := segment_key(n)) is not None]
        rank: dict[torch.fx.Node, int] = {}
        for _, key in found:
            rank.setdefault(key.idx, len(rank))
        return sorted(found, key=lambda seed: (rank[seed[1].idx], self.position[seed[0]]))

    def find(self, excluded: set[torch.fx.Node]) -> list[Cluster]:
        assigned: set[torch.fx.Node] = set()
        clusters = []
        for seed, key in self.seeds():
            if seed in assigned or seed in excluded:
                continue
            backward = self.backward[seed]
            nodes = {seed}
            # Producers first: a consumer of the seed's sum that joins early
            # would make the rows feeding another sum unreachable (outside
            # the cluster, between two of its nodes).
            for producers_only in (True, False):
                frontier = self.sorted(nodes)
                while frontier:
                    node = frontier.pop()
                    neighbours = list(node.all_input_nodes)
                    if not producers_only:
                        neighbours += list(node.users)
                    for other in sorted(neighbours, key=self.position.get):
                        if self._may_join(nodes, other, key, backward, assigned | excluded):
                            nodes.add(other)
                            frontier.append(other)
            assigned |= nodes
            clusters.append(Cluster(key, nodes, backward))
        clusters.sort(key=lambda c: min(self.position[n] for n in c.nodes))
        for cluster in clusters:
            if cluster.backward:
                self.add_recomputation(cluster, excluded)
        return clusters

    def _may_join(self, nodes: set[torch.fx.Node], other: torch.fx.Node, key: Key,
                  backward: bool, taken: set[torch.fx.Node]) -> bool:
        if (other in nodes or other in taken or self.backward[other] != backward
                or not is_candidate(other, key)):
            return False
        if other.target is operator.getitem and other.args[0] not in nodes:
            return False  # joins with the node it takes a result of
        return self._keeps_second_indices_apart(nodes, other, key) and \
            self.is_convex(nodes | {other})

    @staticmethod
    def _keeps_second_indices_apart(nodes: set[torch.fx.Node], other: torch.fx.Node,
                                    key: Key) -> bool:
        """A kernel reads a table of a gather by another index as an
        argument, and returns a sum by another index as it is (the runtime
        sums its rows): neither a table nor a sum's user joins the cluster."""
        for user in other.users:
            found = second_index_op(user, key)
            if found is not None and found.kind == "gather" and found.values is other:
                return False
        if any(arg in nodes and _is_second_sum(arg, key) for arg in other.all_input_nodes):
            return False
        found = second_index_op(other, key)
        if found is not None and found.kind == "sum" and any(u in nodes for u in other.users):
            return False
        return True

    def add_recomputation(self, cluster: Cluster, excluded: set[torch.fx.Node]) -> None:
        """Copies into a backward cluster the forward nodes it reads that
        compute row values from their inputs without reducing (elementwise
        ops but SAVED_PRODUCERS, gathers): recomputing one is cheaper than
        saving its rows."""
        pending = [a for n in cluster.nodes for a in n.all_input_nodes]
        while pending:
            node = pending.pop()
            if (node in cluster.nodes or node in cluster.recomputed or node in excluded
                    or self.backward[node]
                    or not is_candidate(node, cluster.key) or not self._is_row_map(node)):
                continue
            cluster.recomputed.add(node)
            found = second_index_op(node, cluster.key)
            pending.extend([] if found is not None else node.all_input_nodes)

    @staticmethod
    def _is_row_map(node: torch.fx.Node) -> bool:
        if jit_program_level(node) is not None or node.target is operator.getitem:
            return False
        found = index_op(node)
        if found is not None:
            return found.kind == "gather"
        found = segment_op_level(node.target)
        if found is not None:
            public, level = found
            # Level-0 ops without a segment count map rows (gather, mul, matvec).
            return level == 0 and not OPS[public].takes_count
        # A transcendental of rows of features is recomputed too: saving
        # F values per row is what message passing cannot afford (E x F).
        return packet(node) not in SAVED_PRODUCERS or tuple(_value(node).shape[1:]) != ()


    def inputs(self, cluster: Cluster) -> list[torch.fx.Node]:
        members = cluster.members()
        seen: dict[torch.fx.Node, None] = {}
        for node in sorted(members, key=self.position.get):
            for arg in operands(node, cluster.key):
                if arg not in members and not is_unused_placeholder(arg) and (
                        is_tensor(arg) or arg is cluster.key.size):
                    seen.setdefault(arg)
            # A derivative reads its forward's result (saved: segment-sized)
            # rather than reducing the rows again.
            forward = forward_node(node)
            if (forward is not None and forward not in members
                    and self.position[forward] < self.position[node]
                    and not (self.ancestors[forward] & self.mask(members))):
                seen.setdefault(forward)
        return list(seen)

    def placeholders(self, cluster: Cluster) -> list[torch.fx.Node]:
        """The empty tensors its segops ops take for unread inputs (copied
        into the cluster's graph: the kernel makes zeros for them)."""
        seen: dict[torch.fx.Node, None] = {}
        for node in sorted(cluster.members(), key=self.position.get):
            for arg in node.all_input_nodes:
                if is_unused_placeholder(arg):
                    seen.setdefault(arg)
        return list(seen)

    def outputs(self, cluster: Cluster, clusters: list[Cluster],
                inputs: dict[int, list[torch.fx.Node]]) -> list[torch.fx.Node]:
        """Its own nodes used outside it: by other clusters (as inputs, from
        `inputs`: each cluster's by id) or by other nodes. A use by a cluster
        that recomputes the node is not one."""
        read_elsewhere = {n for c in clusters if c is not cluster for n in inputs[id(c)]}
        recomputing = [c for c in clusters if c.recomputed]
        result = []
        for node in sorted(cluster.nodes, key=self.position.get):
            if node in read_elsewhere:
                result.append(node)
                continue
            for user in node.users:
                if user in cluster.nodes:
                    continue
                if any(node in c.recomputed and (user in c.nodes or user in c.recomputed)
                       for c in recomputing):
                    continue
                result.append(node)
                break
        return result
