"""segops.fusion: segment fusion inside torch.compile graphs.

>>> import segops.fusion
>>> segops.fusion.enable()             # every torch.compile from here on
>>> compiled = torch.compile(model)    # or, for one model:
>>> compiled = torch.compile(model, options=segops.fusion.options())

An Inductor joint-graph pass (``torch._inductor.config.joint_custom_pre_pass``)
finds clusters of segops ops and the elementwise aten ops around them that
share one index, and replaces each by one ``segops::jit_call`` of a kernel
the segops compiler makes from the cluster (see segops.jit). The joint graph
holds forward and backward: clusters stay on one side, and backward clusters
recompute the cheap forward row values they read instead of having them
saved. Inference graphs go through the same pass. What each compilation
fused is in :func:`reports`; docs/fusion.md has the details and the limits.
"""

from __future__ import annotations

import dataclasses
import logging
import operator
import os
from typing import Any

import torch
from torch._inductor.custom_graph_pass import CustomGraphPass, get_hash_for_files

from segops import (
    _compiler,
    _extensions,
    _fusion_cluster,
    _fusion_index,
    _fusion_translate,
    _jit,
    _jit_pointwise,
    _jit_trace,
    ops,
)
from segops._dtypes import FLOAT_DTYPES
from segops._fusion_cluster import (
    Cluster,
    ClusterFinder,
    forward_node,
    is_kernel_value,
    is_uniform,
    is_view,
    second_index_op,
)
from segops._fusion_index import index_op
from segops._fusion_translate import ClusterError, ClusterTranslator, SymbolicSize, size_expr
from segops._jit_trace import TABLE, Signature

__all__ = ["enable", "disable", "options", "reports", "clear_reports", "FusionReport",
           "explain", "Explanation",
           "SegmentFusionPass"]

log = logging.getLogger("segops.fusion")

_JIT_CALL = ops.jit_call_op()
# Clusters with fewer ops than this stay as they are (one library op is
# already one kernel).
_MIN_OPS = 2
# Pointwise ops that only add rows: a cluster of these and aten sums by its
# index is what Inductor's own scatter-add loop does in one pass.
_ADDITIVE = frozenset({torch.ops.aten.add.Tensor, torch.ops.aten.sub.Tensor,
                       torch.ops.aten.neg.default})


@dataclasses.dataclass(frozen=True)
class FusionReport:
    """One fused cluster: its program, whether it is on the backward side,
    the ops it replaced (aten/segops overload names, in graph order, with
    recomputed forward ops), and its inputs and outputs.

    `index` names the cluster's index in the graph (the receivers: the
    index its reductions sum by); `by`, per op of `ops`, which index an
    indexing op used: "receivers" (the cluster's index: seg.gather,
    seg.sum), "senders" (another index: seg.gather_rows, seg.scatter_sum),
    or "" for other ops."""

    program: str
    backward: bool
    ops: tuple[str, ...]
    recomputed: tuple[str, ...]
    num_inputs: int
    num_outputs: int
    index: str = ""
    by: tuple[str, ...] = ()


def _index_role(node: torch.fx.Node, cluster: Cluster) -> str:
    """Which index an indexing node of `cluster` uses (FusionReport.by)."""
    found = index_op(node)
    if found is None:
        return ""
    return "receivers" if found.index is cluster.key.idx else "senders"


_REPORTS: list[FusionReport] = []


def reports() -> list[FusionReport]:
    """The clusters fused by every compilation in this process so far."""
    return list(_REPORTS)


def clear_reports() -> None:
    _REPORTS.clear()


@dataclasses.dataclass
class _Plan:
    cluster: Cluster
    inputs: list[torch.fx.Node]
    outputs: list[torch.fx.Node]
    program: str
    uniform: set[int] = dataclasses.field(default_factory=set)  # 0-d and (F,) inputs


class _Rejected(Exception):
    """Cluster nodes to leave out, and why."""

    def __init__(self, nodes: torch.fx.Node | set[torch.fx.Node], why: str) -> None:
        super().__init__(why)
        self.nodes = nodes if isinstance(nodes, set) else {nodes}


@dataclasses.dataclass
class Explanation:
    """What segops.fusion did with a model (`explain`): the clusters it
    fused, the nodes it left out of a cluster and why, the clusters too
    small or too simple to be worth a kernel, and the ops of the graphs that no cluster
    can take (ops segops has no kernel code for)."""

    clusters: list[FusionReport] = dataclasses.field(default_factory=list)
    left_out: list[tuple[str, str, str]] = dataclasses.field(default_factory=list)
    left_to_inductor: list[tuple[str, list[str]]] = dataclasses.field(default_factory=list)
    unsupported: dict[str, int] = dataclasses.field(default_factory=dict)

    def note_graph(self, graph: torch.fx.Graph, clusters: list[Cluster]) -> None:
        for cluster in clusters:
            why = _left_to_inductor(cluster)
            if why is not None:
                self.left_to_inductor.append(
                    (why, sorted(str(n.target) for n in cluster.nodes)))
        clustered = set().union(*(c.nodes for c in clusters)) if clusters else set()
        for node in graph.nodes:
            if node.op != "call_function" or node in clustered or index_op(node) is not None \
                    or not node.all_input_nodes:  # a tensor made from sizes (zeros)
                continue
            namespace = getattr(node.target, "namespace", "")
            if namespace == "aten" and not _jit_trace.is_supported(node):
                name = str(node.target)
                self.unsupported[name] = self.unsupported.get(name, 0) + 1

    def __str__(self) -> str:
        lines = [f"segops.fusion: {len(self.clusters)} cluster(s) fused"]
        for k, report in enumerate(self.clusters):
            side = "backward" if report.backward else "forward"
            lines.append(f"  cluster {k} ({side}, index {report.index}): "
                         + " ".join(report.ops))
        if self.left_out:
            lines.append("left out of a cluster:")
            lines += [f"  {name} ({target}): {why}" for name, target, why in self.left_out]
        if self.left_to_inductor:
            lines.append("clusters left to Inductor, not worth a kernel:")
            lines += [f"  ({why}) " + " ".join(ops) for why, ops in self.left_to_inductor]
        if self.unsupported:
            lines.append("ops segops.fusion has no kernel code for (left to Inductor):")
            lines += [f"  {name} x{count}" for name, count in sorted(self.unsupported.items())]
        return "\n".join(lines)


_EXPLAINING: Explanation | None = None


def explain(model: Any, *args: Any, **kwargs: Any) -> Explanation:
    """Compiles `model` with the pass, runs it once on `args`, and returns
    (and prints) what the pass fused and what it left out, with the
    reasons: why a model did or did not speed up, without the DEBUG log.
    Where inputs require grad the pass sees the joint forward and backward
    graph at this call (no backward is run). Inductor's caches are off for
    this compilation, so the pass runs."""
    global _EXPLAINING
    explanation = Explanation()
    first_report = len(_REPORTS)
    _EXPLAINING = explanation
    try:
        with torch._inductor.config.patch(force_disable_caches=True):
            torch.compile(model, options=options())(*args, **kwargs)
    finally:
        _EXPLAINING = None
    explanation.clusters = _REPORTS[first_report:]
    print(explanation)
    return explanation


def _example(node: torch.fx.Node) -> Any:
    return node.meta["val"]


def _compute_ops(cluster: Cluster) -> int:
    return sum(1 for n in cluster.nodes if not is_view(n))


def _only_adds_into_sums(cluster: Cluster) -> bool:
    """Whether a cluster only adds its inputs' rows and sums them with
    aten's scatter_add/index_put/index_add: Inductor makes that one loop
    over the inputs too, while a kernel on an unsorted index would first
    copy every input into the index's sorted order (measured on MACE's
    training step: such clusters made it slower; docs/benchmarks.md)."""
    for node in cluster.members():
        if is_view(node) or node.target in _ADDITIVE:
            continue
        found = index_op(node)
        if found is None or found.kind != "sum" or found.reduce != "sum":
            return False
    return True


def _left_to_inductor(cluster: Cluster) -> str | None:
    """Why a cluster is not worth a kernel, or None if it is."""
    if _compute_ops(cluster) < _MIN_OPS:
        return f"fewer than {_MIN_OPS} ops"
    if _only_adds_into_sums(cluster):
        return "only additions into a sum"
    return None


class SegmentFusionPass(CustomGraphPass):
    """The joint-graph pass. `strict` raises on an internal error instead of
    leaving the graph unchanged (for tests)."""

    def __init__(self, strict: bool = False) -> None:
        self.strict = strict

    def uuid(self) -> Any:
        # Everything its output depends on: this code, the translator, the
        # compiler (its IR decides the programs) and the program records'
        # directory and its generation (a cached graph names programs
        # recorded there: a deleted directory must not be replayed).
        sources = tuple(sorted(str(p) for p in _source_files()))
        extra = "|".join([_compiler.compiler_identity(), str(_compiler.cache_dir()),
                          _compiler.cache_generation(),
                          str(self.strict), str(_MIN_OPS)])
        return get_hash_for_files(sources, extra).hex()

    def __call__(self, graph: torch.fx.Graph) -> None:
        rewritten: list[torch.fx.Node] = []
        try:
            _unshare_views(graph)
            _promote_integer_operands(graph)
            rewritten = _sum_rows_by_segments(graph)
            plans = self.plan(graph)
            _undo_unfused_sums(graph, rewritten, plans)
            rewritten = []
            fake_mode = _fake_mode(graph) if plans else None
            if plans:
                # A rewrite of a copy first: one that fails (an internal
                # error, a cycle the planning missed) leaves the graph as it
                # was.
                trial = torch.fx.Graph()
                copies: dict[torch.fx.Node, torch.fx.Node] = {}
                trial.output(trial.graph_copy(graph, copies))
                _rewrite(trial, _plans_in(plans, copies), fake_mode, report=False)
        except Exception:  # noqa: BLE001 - the graph stays as Inductor gave it
            _undo_unfused_sums(graph, rewritten, [])
            if self.strict:
                raise
            log.warning("segops.fusion: the pass failed; the graph is left unchanged",
                        exc_info=True)
            return
        if plans:
            _rewrite(graph, plans, fake_mode)
            log.debug("segops.fusion: the graph after the pass:\n%s", graph)

    def plan(self, graph: torch.fx.Graph) -> list[_Plan]:
        """The clusters to fuse, each translated and registered. Nodes the
        translation rejects are left out and the clusters found again."""
        finder = ClusterFinder(graph)
        excluded: set[torch.fx.Node] = set()
        while True:
            clusters = finder.find(excluded)
            for cluster in clusters:
                log.debug("segops.fusion: cluster (%s): %s", "backward" if cluster.backward
                          else "forward", " ".join(n.name for n in finder.sorted(cluster.nodes)))
            inputs = {id(c): finder.inputs(c) for c in clusters}
            try:
                plans = [_translate(finder, c, clusters, inputs) for c in clusters
                         if _left_to_inductor(c) is None]
            except _Rejected as rejected:
                log.debug("segops.fusion: leaving out %s: %s",
                          ", ".join(sorted(n.name for n in rejected.nodes)), rejected)
                if _EXPLAINING is not None:
                    _EXPLAINING.left_out.extend((n.name, str(n.target), str(rejected))
                                                for n in sorted(rejected.nodes,
                                                                key=finder.position.get))
                excluded |= rejected.nodes
                continue
            if _EXPLAINING is not None:
                _EXPLAINING.note_graph(graph, clusters)
            return plans


def _source_files() -> list[str]:
    return [m.__file__ for m in (_fusion_cluster, _fusion_index, _fusion_translate,
                                 _jit_pointwise, _jit_trace)] + [__file__]


def _second_index_roles(cluster: Cluster) -> tuple[set[torch.fx.Node], set[torch.fx.Node],
                                                   set[torch.fx.Node], set[torch.fx.Node]]:
    """Of a cluster's gathers and sums by indices other than its own: the
    tables they read, the indices, the zeros they sum into, and the sums."""
    tables, indices, bases, sums = set(), set(), set(), set()
    for node in cluster.members():
        found = second_index_op(node, cluster.key)
        if found is None:
            continue
        indices.add(found.index)
        if found.kind == "gather":
            tables.add(found.values)
        else:
            bases.add(found.base)
            sums.add(node)
    return tables, indices, bases, sums


def _unshare_views(graph: torch.fx.Graph) -> None:
    """One copy of each view per user (`c[:, None]` read by a cluster and
    saved for the backward): a cluster then takes its own copy in and the
    view's base out, where a shared view would cut it. Views cost nothing;
    Inductor folds the copies."""
    for node in reversed(list(graph.nodes)):
        if node.op != "call_function" or not is_view(node) or len(node.users) < 2:
            continue
        for user in list(node.users)[1:]:
            with graph.inserting_after(node):
                copy = graph.node_copy(node)
            user.replace_input_with(node, copy)


def _promote_integer_operands(graph: torch.fx.Graph) -> None:
    """An integer tensor in float arithmetic (`h * z[:, None]` with atomic
    numbers z) converted to the float type first, as eager's type promotion
    does: the conversion (of the integer tensor itself, before its views)
    stays outside, and the float row it makes can enter a cluster (kernels
    take float rows)."""
    fake_mode = None
    converted: dict[tuple[torch.fx.Node, torch.dtype], torch.fx.Node] = {}

    def as_float(node: torch.fx.Node, dtype: torch.dtype, before: torch.fx.Node) -> torch.fx.Node:
        nonlocal fake_mode
        if (node, dtype) in converted:
            return converted[(node, dtype)]
        fake_mode = fake_mode or _fake_mode(graph)
        if is_view(node) and isinstance(node.args[0], torch.fx.Node):
            # The view of the converted tensor: rows stay rows.
            base = as_float(node.args[0], dtype, before)
            with graph.inserting_before(before):
                result = graph.node_copy(node, lambda n: base if n is node.args[0] else n)
            with fake_mode:
                result.meta["val"] = node.meta["val"].to(dtype)
        else:
            with graph.inserting_after(node):
                result = graph.call_function(torch.ops.prims.convert_element_type.default,
                                             (node, dtype))
            with fake_mode:
                result.meta["val"] = node.meta["val"].to(dtype)
        converted[(node, dtype)] = result
        return result

    for node in list(graph.nodes):
        value = node.meta.get("val") if node.op == "call_function" else None
        if not isinstance(value, torch.Tensor) or not value.dtype.is_floating_point or \
                torch.Tag.pointwise not in getattr(node.target, "tags", ()):
            continue
        # where's condition is a predicate, not an operand to promote.
        predicate = node.args[0] if node.target is torch.ops.aten.where.self else None
        for operand in list(node.all_input_nodes):
            if operand is predicate:
                continue
            operand_value = operand.meta.get("val")
            if isinstance(operand_value, torch.Tensor) and operand_value.dim() >= 1 and \
                    not operand_value.dtype.is_floating_point and \
                    not operand_value.is_complex() and \
                    (operand_value.dtype != torch.bool or _of_integers(operand)):
                node.replace_input_with(operand, as_float(operand, value.dtype, node))


def _sum_rows_by_segments(graph: torch.fx.Graph) -> list[torch.fx.Node]:
    """A sum of all rows of (L, F) floats (the gradient of a learnable
    per-feature parameter, summed over every edge) rewritten as the sum of
    per-segment sums by an index of L rows the graph already reduces by:
    the per-segment sum (an index_put into zeros) can join that index's
    cluster, so the rows it reads need not leave it; only S x F partial
    sums do. The same total whatever the index (every row is in one
    segment). Returns the new per-segment sums, so that a rewrite whose
    sum joined no cluster can be undone."""
    aten = torch.ops.aten
    reductions = [found for n in graph.nodes
                  if (found := index_op(n)) is not None and found.kind == "sum"]
    rewritten: list[torch.fx.Node] = []
    fake_mode = None
    for node in list(graph.nodes):
        if node.target is not aten.sum.dim_IntList or node.kwargs.get("dtype") is not None:
            continue
        rows, dims = node.args[0], node.args[1]
        keepdim = node.args[2] if len(node.args) > 2 else node.kwargs.get("keepdim", False)
        value = _example(rows) if isinstance(rows, torch.fx.Node) else None
        if not isinstance(value, torch.Tensor) or value.dim() != 2 or \
                not value.dtype.is_floating_point or list(dims) not in ([0], [-2]):
            continue
        if len(rows.users) > 1:
            continue  # the rows leave any cluster for their other users anyway
        length = size_expr(value.shape[0])
        by = next((r for r in reductions if size_expr(_example(r.index).shape[0]) == length
                   and isinstance(r.count_node, (int, torch.fx.Node))), None)
        if by is None:
            continue
        fake_mode = fake_mode or _fake_mode(graph)
        with graph.inserting_before(node):
            zeros = graph.call_function(aten.full.default, ([by.count_node, value.shape[1]], 0.0),
                                        {"dtype": value.dtype, "device": value.device,
                                         "pin_memory": False})
            partial = graph.call_function(aten.index_put.default,
                                          (zeros, [by.index], rows, True))
            total = graph.call_function(aten.sum.dim_IntList, (partial, [0], keepdim))
        with fake_mode:
            zeros.meta["val"] = value.new_zeros((by.count, value.shape[1]))
            partial.meta["val"] = zeros.meta["val"].clone()
            total.meta["val"] = node.meta["val"].clone()
        node.replace_all_uses_with(total)
        graph.erase_node(node)  # a dead user would make the rows a cluster output
        rewritten.append(partial)
    return rewritten


def _undo_unfused_sums(graph: torch.fx.Graph, rewritten: list[torch.fx.Node],
                       plans: list[_Plan]) -> None:
    """Each rewritten sum whose per-segment sum joined no cluster, back to
    the plain sum of rows (Inductor's is faster than a scatter): the total
    sums the rows again instead of the per-segment sums."""
    members = set().union(*(p.cluster.members() for p in plans)) if plans else set()
    for partial in rewritten:
        if partial in members:
            continue
        (total,) = partial.users
        zeros, _, rows = partial.args[:3]
        total.replace_input_with(partial, rows)
        graph.erase_node(partial)
        graph.erase_node(zeros)


def _of_integers(node: torch.fx.Node) -> bool:
    """Whether a bool tensor comes from integers only (`z > 3` of atomic
    numbers): no cluster can make it, so it enters one as floats. A bool of
    floats (`m > t`) is made inside the cluster, as it is."""
    while is_view(node) and isinstance(node.args[0], torch.fx.Node):
        node = node.args[0]
    if node.op != "call_function":
        return True
    for operand in node.all_input_nodes:
        value = operand.meta.get("val")
        if not isinstance(value, torch.Tensor):
            continue
        if value.dtype.is_floating_point or \
                (value.dtype == torch.bool and not _of_integers(operand)):
            return False
    return True


def _check_boundary(finder: ClusterFinder, cluster: Cluster, inputs: list[torch.fx.Node],
                    outputs: list[torch.fx.Node], roles: tuple[set[torch.fx.Node], ...]) -> None:
    """Inputs and outputs a jit_call can take and return (`roles`: the
    cluster's _second_index_roles)."""
    key = cluster.key
    tables, indices, bases, sums = roles
    for node in inputs:
        if node is key.idx or node is key.size or node in indices or node in tables \
                or node in bases or is_uniform(node, key):
            continue
        if not is_kernel_value(_example(node), key):
            consumer = min((u for u in node.users if u in cluster.members()),
                           key=finder.position.get)
            raise _Rejected(consumer, f"its input {node.name} is not a (L,), (L, 3) or "
                                      f"(S, 3, 3) {key.dtype} tensor")
    for node in outputs:
        if is_view(node):
            raise _Rejected(node, "a view used outside the cluster")
        if node not in sums and not is_kernel_value(_example(node), key):
            raise _Rejected(node, "its value, used outside the cluster, is not a float "
                                  "row or segment tensor")


def _translate(finder: ClusterFinder, cluster: Cluster, clusters: list[Cluster],
               inputs_of: dict[int, list[torch.fx.Node]]) -> _Plan:
    """Translates and registers one cluster (`inputs_of`: every cluster's
    inputs, by id). If the compiler rejects the program, the whole cluster
    is left to Inductor."""
    inputs = inputs_of[id(cluster)]
    outputs = finder.outputs(cluster, clusters, inputs_of)
    key = cluster.key
    if not outputs:
        raise _Rejected(set(cluster.nodes), "nothing in it is used outside it")
    roles = _second_index_roles(cluster)
    _check_boundary(finder, cluster, inputs, outputs, roles)
    tensors = [n for n in inputs if n is not key.size]
    if key.idx not in tensors:
        tensors.append(key.idx)
    sub = torch.fx.Graph()
    env: dict[torch.fx.Node, torch.fx.Node] = {}
    for node in tensors:
        env[node] = sub.placeholder(node.name)
        env[node].meta = dict(node.meta)
    size_placeholder = sub.placeholder("num_segments")
    if isinstance(key.size, torch.fx.Node):
        env[key.size] = size_placeholder
    origin: dict[torch.fx.Node, torch.fx.Node] = {}
    for node in finder.placeholders(cluster) + sorted(cluster.members(), key=finder.position.get):
        copy = sub.node_copy(node, lambda n: env[n] if n in env else SymbolicSize(n.name))
        env[node] = copy
        origin[copy] = node
    sub.output([env[n] for n in outputs])
    size_example = _example(key.size) if isinstance(key.size, torch.fx.Node) else key.size
    args = [_example(n) for n in tensors] + [size_example]
    idx_position = tensors.index(key.idx)
    tables, indices, _, _ = roles
    spaces = ["uniform" if is_uniform(n, key) else TABLE if n in tables else None
              for n in tensors] + [None]
    signature = Signature(list(range(len(tensors))), idx_position, len(tensors),
                          gather_indices=tuple(k for k, n in enumerate(tensors) if n in indices))
    index_ops = {}
    for copy, node in origin.items():
        found = index_op(node)
        if found is not None:
            index_ops[copy] = dataclasses.replace(
                found, values=env[found.values], index=env[found.index],
                base=env.get(found.base) if found.base is not None else None)
    translator = ClusterTranslator("jit_kernel", args, _example(key.idx).shape[0], size_example,
                                   spaces, index_ops)
    for node in cluster.members():
        forward = forward_node(node)
        if forward is not None and forward in env:
            translator.forward_results[env[node]] = env[forward]
    try:
        draft = translator.translate(sub, signature, FLOAT_DTYPES[key.dtype])
    except ClusterError as error:
        raise _Rejected(origin.get(error.node, error.node), str(error)) from None
    except ValueError as error:  # the compiler rejected the inlined calls
        log.info("segops.fusion: the compiler could not inline a cluster's calls; left to "
                 "Inductor:\n%s", error)
        raise _Rejected(set(cluster.nodes), "the compiler rejected the cluster") from None
    parameters = {f"%a{i}" for i in range(len(tensors))} | {"%idx"}
    for node in outputs:
        result = translator.values[env[node]]
        if getattr(result, "name", None) in parameters:
            raise _Rejected(node, "it returns an input unchanged")
    program = _jit.register_program(draft, "fused", idx_position, "segops.fusion cluster")
    try:
        entry = _jit.program_entry(program)
    except ValueError as error:
        log.info("segops.fusion: the compiler rejected a cluster of %d nodes; left to "
                 "Inductor:\n%s", len(cluster.nodes), error)
        raise _Rejected(set(cluster.nodes), "the compiler rejected the cluster") from None
    if len(entry.buffers) > _jit.MAX_KERNEL_TENSORS:
        raise _Rejected(set(cluster.nodes), f"its kernel would take {len(entry.buffers)} "
                        f"tensors (at most {_jit.MAX_KERNEL_TENSORS})")
    return _Plan(cluster, tensors, outputs, program,
                 {k for k, space in enumerate(spaces) if space == "uniform"})


def _fake_mode(graph: torch.fx.Graph) -> Any:
    """The fake mode of the graph's values (the new nodes' values are made
    in it)."""
    from torch._guards import detect_fake_mode

    mode = detect_fake_mode([n.meta.get("val") for n in graph.nodes if n.op == "placeholder"])
    if mode is None:
        raise ValueError("the graph's placeholders carry no fake values")
    return mode


def _plans_in(plans: list[_Plan], copies: dict[torch.fx.Node, torch.fx.Node]) -> list[_Plan]:
    """`plans` with their nodes replaced by their copies."""
    def copied(node: Any) -> Any:
        return copies.get(node, node) if isinstance(node, torch.fx.Node) else node

    result = []
    for plan in plans:
        cluster = plan.cluster
        key = dataclasses.replace(cluster.key, idx=copied(cluster.key.idx),
                                  size=copied(cluster.key.size))
        cluster = dataclasses.replace(cluster, key=key, nodes={copied(n) for n in cluster.nodes},
                                      recomputed={copied(n) for n in cluster.recomputed})
        result.append(dataclasses.replace(plan, cluster=cluster,
                                          inputs=[copied(n) for n in plan.inputs],
                                          outputs=[copied(n) for n in plan.outputs]))
    return result


def _per_segment(graph: torch.fx.Graph, scalar: torch.fx.Node, size: Any,
                 fake_mode: Any) -> torch.fx.Node:
    """A 0-d or (F,) tensor as a kernel's uniform argument takes it: its
    value per segment, (S,) or (S, F), contiguous."""
    aten = torch.ops.aten
    tail = list(scalar.meta["val"].shape)
    row = graph.call_function(aten.view.default, (scalar, [1, *tail] if tail else [1]))
    expanded = graph.call_function(aten.expand.default, (row, [size, *tail]))
    result = graph.call_function(aten.clone.default, (expanded,),
                                 {"memory_format": torch.contiguous_format})
    size_example = size.meta["val"] if isinstance(size, torch.fx.Node) else size
    with fake_mode:
        value = scalar.meta["val"]
        row.meta["val"] = value.view(1, *tail) if tail else value.view(1)
        expanded.meta["val"] = row.meta["val"].expand(size_example, *tail)
        result.meta["val"] = expanded.meta["val"].clone(memory_format=torch.contiguous_format)
    return result


def _rewrite(graph: torch.fx.Graph, plans: list[_Plan], fake_mode: Any,
             report: bool = True) -> None:
    """Replaces each planned cluster by one jit_call and its getitems
    (reported, with `report`), and checks the graph is still acyclic and
    well ordered."""
    from torch._inductor.pattern_matcher import stable_topological_sort

    order = {n: i for i, n in enumerate(graph.nodes)}
    recomputing: dict[torch.fx.Node, list[Cluster]] = {}
    for plan in plans:
        for node in plan.cluster.recomputed:
            recomputing.setdefault(node, []).append(plan.cluster)
    replaced: dict[torch.fx.Node, torch.fx.Node] = {}  # cluster outputs -> getitems
    for plan in plans:
        cluster = plan.cluster
        last = max(cluster.nodes, key=order.get)
        size = cluster.key.size
        inputs = [replaced.get(n, n) for n in plan.inputs]
        with graph.inserting_before(last):
            for position in plan.uniform:
                inputs[position] = _per_segment(graph, inputs[position], size, fake_mode)
            call = graph.call_function(_JIT_CALL, (plan.program, inputs, size))
        size_example = size.meta["val"] if isinstance(size, torch.fx.Node) else size
        with fake_mode:
            values = _JIT_CALL(plan.program, [n.meta["val"] for n in plan.inputs],
                               size_example)
        call.meta["val"] = values
        for position, node in enumerate(plan.outputs):
            with graph.inserting_after(call):
                item = graph.call_function(operator.getitem, (call, position))
            item.meta = dict(node.meta)
            item.meta["val"] = values[position]
            replaced[node] = item
            keep = recomputing.get(node, [])
            node.replace_all_uses_with(
                item, delete_user_cb=lambda user: not any(user in c.members() for c in keep)
                and user is not call)
        if not report:
            continue
        nodes = sorted(cluster.nodes, key=order.get)
        _REPORTS.append(FusionReport(
            plan.program, cluster.backward, tuple(str(n.target) for n in nodes),
            tuple(str(n.target) for n in sorted(cluster.recomputed, key=order.get)),
            len(plan.inputs), len(plan.outputs), cluster.key.idx.name,
            tuple(_index_role(n, cluster) for n in nodes)))
        log.info("segops.fusion: fused %d ops (%s side, %d recomputed) into %s",
                 len(cluster.nodes), "backward" if cluster.backward else "forward",
                 len(cluster.recomputed), plan.program)
    members = set().union(*(p.cluster.members() for p in plans))
    for node in reversed(list(graph.nodes)):
        if node in members and not node.users:
            graph.erase_node(node)
    stable_topological_sort(graph)
    graph.eliminate_dead_code()
    graph.lint()


# --------------------------------------------------------------------------
# Turning it on.
# --------------------------------------------------------------------------

_PASS = SegmentFusionPass(strict=os.environ.get("SEGOPS_FUSION_STRICT", "") == "1")


def _with_pass(existing: Any, fusion: SegmentFusionPass) -> Any:
    """`existing` joint passes with `fusion` after them."""
    if existing is None:
        return fusion
    passes = list(existing) if isinstance(existing, (list, tuple)) else [existing]
    if not any(isinstance(p, SegmentFusionPass) for p in passes):
        passes.append(fusion)
    return passes


def _without_pass(existing: Any) -> Any:
    if isinstance(existing, SegmentFusionPass):
        return None
    if isinstance(existing, (list, tuple)):
        passes = [p for p in existing if not isinstance(p, SegmentFusionPass)]
        return passes[0] if len(passes) == 1 else (passes or None)
    return existing


def options(strict: bool = False) -> dict[str, Any]:
    """Inductor options for one ``torch.compile(..., options=...)`` call,
    keeping joint passes already installed."""
    import torch._inductor.config as inductor_config

    _extensions.segc()  # the pass compiles kernels: a clear error on the runtime wheel
    fusion = SegmentFusionPass(strict) if strict != _PASS.strict else _PASS
    return {"joint_custom_pre_pass": _with_pass(inductor_config.joint_custom_pre_pass, fusion)}


def enable(strict: bool = False) -> None:
    """Turns segment fusion on for every later torch.compile in this
    process (after any joint pass the user installed)."""
    import torch._inductor.config as inductor_config

    inductor_config.joint_custom_pre_pass = options(strict)["joint_custom_pre_pass"]


def disable() -> None:
    import torch._inductor.config as inductor_config

    inductor_config.joint_custom_pre_pass = _without_pass(inductor_config.joint_custom_pre_pass)
