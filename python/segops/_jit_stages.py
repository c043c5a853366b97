"""segops.jit functions of several index tensors: message passing and
readouts as a few single-index kernels in sequence.

A function such as

    rij = segmented_gather(pos, senders) - segmented_gather(pos, receivers)
    e_atom = segmented_sum(pair_energy(rij), receivers, num_atoms)
    return segmented_sum(e_atom, batch, num_systems)

uses three indices. Each index that a reduction uses (receivers, batch)
must be sorted and owns kernels: its *stage*. The function is traced once
(make_fx, with sizes of its own), each node is labelled with the stage
that computes it (a segment op by its index; an elementwise op by its
operands' stage, where its length is that stage's rows or segments), and
the nodes are grouped into *steps*: the largest groups of one stage that
the data dependences allow, in order. Each kernel step is itself a
single-index segops.jit function (one fused kernel, derived gradients to
any order); the rest runs as it is written, between them:

* gathers by an index no reduction uses (the senders: any order), as
  segops.segmented_gather, whose adjoint is a sum by the senders over their
  transposed order (computed once per sender tensor and remembered, so
  every level is a sorted, deterministic reduction);
* arithmetic on uniform values only (`sigma ** 6`), passed to the kernels
  as uniform arguments (with their gradients).

PyTorch's autograd chains the steps, so derivatives of any order run on
compiler-derived kernels. What crosses steps is written out: the gathered
sender rows (E rows) and each stage's results.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.fx
from torch import Tensor
from torch.utils._python_dispatch import _disable_current_modes

from segops._dtypes import FLOAT_DTYPES
from segops._fusion_index import index_op
from segops._jit_lengths import Lengths, class_sizes, infer_lengths, is_index, structure
from segops._jit_trace import VIEWS, JitError, concrete, trace
from segops._op_table import OPS, SEGMENT
from segops.graph import Graph
from segops.ops import OperatorCall, operator_call, specialization_key

# The lengths the function is traced with, one per length class (_jit_lengths:
# index lengths and counts the data flow makes one), distinct from any
# feature width.
_TRACE_SIZES = (1009, 1013, 1019, 1021, 1031, 1033, 1039, 1049, 1051, 1061, 1063, 1069,
                1087, 1091, 1093, 1097, 1103, 1109, 1117, 1123, 1129, 1151, 1153, 1163)


def _segment_op(node: torch.fx.Node) -> str | None:
    """The op table name of a segops op node, else None."""
    if node.op != "call_function" or getattr(node.target, "namespace", "") != "segops":
        return None
    name = node.target.__name__.split(".")[0]
    return name if name in OPS else None


def _call(node: torch.fx.Node) -> OperatorCall:
    """A segops op node's arguments, placed by the operator's signature."""
    call = operator_call(node.target.__name__.split(".")[0], node.args)
    assert call is not None, node.format_node()
    return call


def _gathers_as_segment_ops(module: torch.fx.GraphModule) -> None:
    """Gathers by an index argument (`x[j]`, `x.index_select(0, j)`,
    `x.gather(0, j[:, None].expand(-1, F))`: _fusion_index) become
    segmented_gather: in a kernel step where j is its index, a gather in
    registers; otherwise a gather whose adjoint runs over j's transposed
    order (deterministic), where aten's would scatter."""
    for node in module.graph.nodes:
        found = index_op(node)
        if found is None or found.kind != "gather" or found.index.op != "placeholder" \
                or found.values.meta["val"].dim() not in (1, 2):
            continue
        node.target = torch.ops.segops.segmented_gather.default
        node.args = (found.values, found.index, int(found.count))
        node.kwargs = {}
    module.graph.eliminate_dead_code()  # the views of an expanded index
    module.recompile()


def _gathers_an_argument(node: torch.fx.Node) -> bool:
    """Whether `node` is segmented_gather of an argument (a table; or a
    view of one, taken before the kernel) by an index argument."""
    table = node.args[0] if _segment_op(node) == "segmented_gather" else None
    if isinstance(table, torch.fx.Node) and _is_free_view(table):
        table = table.args[0]
    return (isinstance(table, torch.fx.Node) and table.op == "placeholder"
            and isinstance(node.args[1], torch.fx.Node) and node.args[1].op == "placeholder")


def uses_several_indices(args: Sequence[Any]) -> bool:
    """Whether a call passes more than one index tensor (or a Graph)."""
    count = 0
    for a in args:
        if isinstance(a, Graph):
            return True
        count += is_index(a)
    return count > 1


def _flatten(args: Sequence[Any]) -> tuple[list[Any], list[int]]:
    """Graph arguments as their parts (receivers, senders, num_nodes); per
    argument, how many flat values it became."""
    flat: list[Any] = []
    widths: list[int] = []
    for a in args:
        parts = a._parts() if isinstance(a, Graph) else (a,)
        flat.extend(parts)
        widths.append(len(parts))
    return flat, widths


def _unflatten(flat: Sequence[Any], widths: Sequence[int], graphs: Sequence[bool]) -> list[Any]:
    args, at = [], 0
    for width, is_graph in zip(widths, graphs):
        args.append(Graph._of_parts(*flat[at:at + width]) if is_graph else flat[at])
        at += width
    return args


@dataclass
class _Step:
    """Nodes of the traced function run together: one kernel (a stage's
    index), or eager ops."""

    index: torch.fx.Node | None  # None: eager
    nodes: list[torch.fx.Node] = field(default_factory=list)
    inputs: list[torch.fx.Node] = field(default_factory=list)
    outputs: list[torch.fx.Node] = field(default_factory=list)
    # Gathers by a second index in the kernel: each reads its table from an
    # argument of its own (so that the table's gradient is one sum by that
    # index, apart from any other use of the same tensor).
    tables: list[torch.fx.Node] = field(default_factory=list)
    kernel: Any = None  # the step's JitFunction
    count_class: int | None = None  # its segment count's size class
    # Inputs (indices into `inputs`) that are arguments gathered by the
    # step's own index, of a length class other than its count's (pos
    # gathered by the receivers, summed into num_atoms): passed as their
    # first `count` rows, which are all such a gather can read.
    segment_tables: list[int] = field(default_factory=list)


@dataclass
class _Plan:
    module: torch.fx.GraphModule
    placeholders: list[torch.fx.Node]
    steps: list[_Step]
    results: Any  # the output node's argument
    trace_sizes: dict[int, int]  # traced size -> class
    names: list[str]  # per placeholder, the user's name for it
    lengths: Lengths


class StagedFunction:
    """The several-index part of a segops.jit function (JitFunction hands
    calls with more than one index tensor, or a Graph, here)."""

    def __init__(self, fn: Callable, jit: Callable[[Callable], Any]) -> None:
        self.fn = fn
        self._jit = jit  # segops.jit, for the kernel steps
        self._plans: dict[tuple, _Plan] = {}
        self._lengths: dict[tuple, Lengths] = {}

    # -- specialization -----------------------------------------------------

    def _names(self, widths: Sequence[int], graphs: Sequence[bool]) -> list[str]:
        """Per flat value, the user's name for it (a Graph's parts as
        graph.receivers, graph.senders, graph.num_nodes)."""
        params = list(inspect.signature(self.fn).parameters)
        names: list[str] = []
        for position, (width, is_graph) in enumerate(zip(widths, graphs)):
            name = params[position] if position < len(params) else f"argument {position}"
            names.extend([f"{name}.receivers", f"{name}.senders", f"{name}.num_nodes"]
                         if is_graph else [name] * width)
        return names

    def _flat_fn(self, widths: Sequence[int], graphs: Sequence[bool]) -> Callable:
        """The function of the flat values (a Graph's parts)."""
        fn = self.fn

        def flat_fn(*values: Any) -> Any:
            return fn(*_unflatten(values, widths, graphs))

        flat_fn.__name__ = fn.__name__
        flat_fn.segops_source = fn  # type: ignore[attr-defined]  # errors name the user's lines
        return flat_fn

    def _specialize(self, args: Sequence[Any]) -> tuple[list[Any], _Plan, list[Any]]:
        """The call's flat values, its plan and its size per length class."""
        flat, widths = _flatten(args)
        graphs = [isinstance(a, Graph) for a in args]
        shape_key = (tuple(widths), tuple(graphs), structure(flat))
        lengths = self._lengths.get(shape_key)
        if lengths is None:
            lengths = self._lengths[shape_key] = infer_lengths(self._flat_fn(widths, graphs),
                                                               flat)
        sizes = class_sizes(self.fn.__name__, lengths, flat,
                            lambda: self._names(widths, graphs))
        # Beyond the structure: the shapes that are no length class's, and
        # float constants' bits (the one specialization key, given the classes).
        key = (shape_key, specialization_key(flat, lengths.classes))
        plan = self._plans.get(key)
        if plan is None:
            plan = self._plans[key] = self._plan(flat, widths, graphs, lengths)
        return flat, plan, sizes

    def __call__(self, args: Sequence[Any]) -> Any:
        flat, plan, sizes = self._specialize(args)
        try:
            return self._execute(plan, flat, sizes)
        except ValueError as error:
            # The kernels check their indices in their own terms (argument
            # numbers of a step); say which of the user's is out of range.
            problem = self._index_problem(plan, flat, sizes)
            if problem is not None:
                raise problem from None
            raise error

    def mlir(self, args: Sequence[Any]) -> str:
        """The kernel steps' seg IR, in order."""
        flat, plan, sizes = self._specialize(args)
        return "\n".join(self._run_steps(plan, flat, sizes, want_ir=True))

    # -- tracing and planning -----------------------------------------------

    @staticmethod
    def _stand_ins(flat: Sequence[Any], lengths: Lengths) -> list[Any]:
        """Tensors and counts with the trace's sizes (no data is read)."""
        result = []
        for a, cls in zip(flat, lengths.classes):
            if isinstance(a, Tensor):
                shape = [concrete(d) for d in a.shape]
                if cls is not None:
                    shape[0] = _TRACE_SIZES[cls]
                result.append(torch.empty(shape, dtype=a.dtype))
            elif cls is not None:
                result.append(_TRACE_SIZES[cls])
            else:
                result.append(a)
        return result

    def _plan(self, flat: Sequence[Any], widths: Sequence[int], graphs: Sequence[bool],
              lengths: Lengths) -> _Plan:
        name = self.fn.__name__
        if lengths.count > len(_TRACE_SIZES):
            raise JitError(f"segops.jit: {name} has more than {len(_TRACE_SIZES)} distinct "
                           "index lengths and counts")
        dtypes = {a.dtype for a in flat if isinstance(a, Tensor) and a.is_floating_point()}
        if not dtypes <= set(FLOAT_DTYPES) or len(dtypes) > 1:
            found = ", ".join(sorted(str(d) for d in dtypes))
            raise JitError(f"segops.jit: {name}: float tensors must all be float32 or all "
                           f"float64 (found {found})")
        with torch._guards.tracing(None), _disable_current_modes():
            module = trace(self._flat_fn(widths, graphs), self._stand_ins(flat, lengths))
        _gathers_as_segment_ops(module)
        trace_sizes = {size: cls for cls, size in enumerate(_TRACE_SIZES[:lengths.count])}
        placeholders = [n for n in module.graph.nodes if n.op == "placeholder"]
        labels = self._labels(module, trace_sizes)
        steps = self._steps(module, labels)
        output = next(n for n in module.graph.nodes if n.op == "output")
        for number, step in enumerate(steps):
            if step.index is not None and not _reduces(step):
                # Nodes of a stage split off from its reductions (a view of
                # an (N, 1) argument before its gather by the senders): no
                # kernel of their own, they run as they are.
                step.index = None
            if step.index is not None:
                self._make_kernel(step, number, trace_sizes)
        return _Plan(module, placeholders, steps, output.args[0], trace_sizes,
                     self._names(widths, graphs), lengths)

    def _size_class(self, node: Any, trace_sizes: dict[int, int]) -> int | None:
        value = node.meta.get("val") if isinstance(node, torch.fx.Node) else None
        if not isinstance(value, Tensor) or value.dim() == 0:
            return None
        return trace_sizes.get(int(value.shape[0]))

    def _labels(self, module: torch.fx.GraphModule,
                trace_sizes: dict[int, int]) -> dict[torch.fx.Node, torch.fx.Node | None]:
        """Per computed node, the index of the stage that computes it, or
        None (run eagerly)."""
        name = self.fn.__name__
        stages: dict[torch.fx.Node, tuple[int | None, int | None]] = {}
        for node in module.graph.nodes:
            op = _segment_op(node)
            if op is None:
                continue
            idx = _call(node).idx
            if not isinstance(idx, torch.fx.Node) or idx.op != "placeholder":
                raise JitError(f"segops.jit: {name}: {op} takes an index computed in the "
                               "function; indices must be arguments")
            if OPS[op].result_space == SEGMENT:
                stages[idx] = (self._size_class(idx, trace_sizes),
                               self._size_class(node, trace_sizes))
        labels: dict[torch.fx.Node, torch.fx.Node | None] = {}
        for node in module.graph.nodes:
            if node.op != "call_function":
                continue
            op = _segment_op(node)
            if op is not None:
                idx = _call(node).idx
                labels[node] = idx if idx in stages else None
                continue
            if _is_free_view(node):
                labels[node] = None
                continue
            size = self._size_class(node, trace_sizes)
            candidates = [k for k, spaces in stages.items() if size is not None and size in spaces]
            label = None
            for operand in reversed(node.all_input_nodes):
                if labels.get(operand) in candidates:
                    label = labels[operand]
                    break
            labels[node] = label if label is not None else (candidates[0] if candidates else None)
        # A gather of an argument by an index no reduction uses (the
        # senders) joins the kernel of the stage that uses it, where its
        # rows are that stage's rows: the gathered rows stay in registers
        # (seg.gather_rows), and its adjoint is a sum by that index.
        for node in module.graph.nodes:
            if labels.get(node, 0) is not None or not _gathers_an_argument(node):
                continue
            users = {labels.get(user) for user in node.users}
            label = users.pop() if len(users) == 1 else None
            if label is not None and self._size_class(node, trace_sizes) == stages[label][0]:
                labels[node] = label
        return labels

    @staticmethod
    def _steps(module: torch.fx.GraphModule,
               labels: dict[torch.fx.Node, torch.fx.Node | None]) -> list[_Step]:
        """Groups nodes into steps: as early as their operands allow
        (a kernel's operands from other steps come first), kernel nodes then
        as late as their users allow, so that a stage's nodes meet."""
        nodes = [n for n in module.graph.nodes if n.op == "call_function"]

        def after(operand: torch.fx.Node, node: torch.fx.Node) -> int:
            """How many waves `node` comes after `operand`, at least."""
            same = labels[operand] is labels[node]
            return 0 if same else 1

        wave: dict[torch.fx.Node, int] = {}
        for node in nodes:
            wave[node] = max((wave[m] + after(m, node) for m in node.all_input_nodes
                              if m in labels), default=0)
        for node in reversed(nodes):
            if labels[node] is None:
                continue
            limits = [wave[u] - after(node, u) for u in node.users if u in labels]
            if limits:
                wave[node] = max(wave[node], min(limits))
        groups: dict[tuple[int, int, int], _Step] = {}
        for node in nodes:
            label = labels[node]
            order = (wave[node], 0 if label is None else 1,
                     0 if label is None else id(label))
            groups.setdefault(order, _Step(label)).nodes.append(node)
        steps = [groups[k] for k in sorted(groups, key=lambda k: (k[0], k[1]))]
        where = {n: s for s in steps for n in s.nodes}
        for step in steps:
            for node in step.nodes:
                for operand in node.all_input_nodes:
                    if where.get(operand) is not step and operand not in step.inputs \
                            and operand is not step.index:
                        step.inputs.append(operand)
                for user in node.users:
                    if where.get(user) is not step and node not in step.outputs:
                        step.outputs.append(node)
        return steps

    def _make_kernel(self, step: _Step, number: int, trace_sizes: dict[int, int]) -> None:
        """The step's single-index segops.jit function: its inputs, the
        index and the count in, its outputs out."""
        counts = {_call(node).num_segments
                  for node in step.nodes if _segment_op(node) is not None
                  and OPS[_segment_op(node)].result_space == SEGMENT}
        count = counts.pop() if len(counts) == 1 else None
        step.count_class = trace_sizes.get(count) if isinstance(count, int) else None
        if step.count_class is None:
            raise JitError(f"segops.jit: {self.fn.__name__}: the reductions by one index must "
                           "share one count")
        in_step = set(step.nodes)
        step.tables = [n for n in step.nodes
                       if _gathers_an_argument(n) and n.args[1] is not step.index]
        # A table only gathered is passed as the gathers' tables only.
        step.inputs = [n for n in step.inputs
                       if not all(u in step.tables and u.args[0] is n and u.args[1] is not n
                                  for u in n.users if u in in_step)]
        nodes, inputs, outputs, index = step.nodes, step.inputs, step.outputs, step.index
        step.segment_tables = [
            k for k, n in enumerate(inputs)
            if n.op == "placeholder" and self._size_class(n, trace_sizes) != step.count_class
            and any(_segment_op(u) == "segmented_gather" and u.args[0] is n
                    and u.args[1] is index for u in n.users if u in in_step)]
        tables = {node: len(inputs) + k for k, node in enumerate(step.tables)}
        rows_class = self._size_class(index, trace_sizes)

        def size_in_stage(size_class: int, values: tuple) -> Any:
            """A traced size (a view's shape) in the kernel: its rows or its
            segment count."""
            return values[-2].shape[0] if size_class == rows_class else values[-1]

        def stage(*values: Any) -> Any:
            env: dict[torch.fx.Node, Any] = dict(zip(inputs, values[:len(inputs)]))
            env[index] = values[-2]
            for node in nodes:
                if node in tables:
                    table = values[tables[node]]
                    env[node] = torch.ops.segops.segmented_gather.default(
                        table, env[node.args[1]], table.shape[0])
                    continue
                env[node] = _run_node(node, env, lambda size: size_in_stage(size, values),
                                      trace_sizes)
            results = [env[n] for n in outputs]
            return results[0] if len(results) == 1 else tuple(results)

        stage.__name__ = f"{self.fn.__name__}_stage{number}"
        stage.segops_source = self.fn  # type: ignore[attr-defined]
        parameters = [inspect.Parameter(f"a{i}", inspect.Parameter.POSITIONAL_ONLY)
                      for i in range(len(inputs) + len(tables) + 2)]
        stage.__signature__ = inspect.Signature(parameters)  # type: ignore[attr-defined]
        step.kernel = self._jit(stage, segment_index=len(inputs) + len(tables),
                                tables=tables.values())

    # -- running ------------------------------------------------------------

    def _segment_rows(self, plan: _Plan, step: _Step, node: torch.fx.Node, table: Tensor,
                      count: Any) -> Tensor:
        """An argument gathered by a step's own index, as the kernel takes
        it: one row per segment."""
        rows, segments = concrete(table.shape[0]), concrete(count)
        if rows == segments:
            return table
        if rows > segments:
            return table[:count]
        names = plan.names
        index = names[plan.placeholders.index(step.index)]
        raise ValueError(f"segops.jit: {self.fn.__name__}: {names[plan.placeholders.index(node)]} "
                         f"has {rows} rows but is gathered by {index}, whose reduction has "
                         f"{segments} segments: it needs a row per segment")

    def _index_problem(self, plan: _Plan, flat: Sequence[Any], sizes: Sequence[Any]
                       ) -> ValueError | None:
        """The first index argument value outside what an op of the function
        reads with it (a reduction's segments, a gathered argument's rows),
        in the user's names; None if every one is in range."""
        names = plan.names
        position = {node: k for k, node in enumerate(plan.placeholders)}
        for node in plan.module.graph.nodes:
            op = _segment_op(node)
            idx = _call(node).idx if op is not None else None
            if idx not in position or not _is_plain(flat[position[idx]]):
                continue
            if OPS[op].result_space == SEGMENT:
                cls = plan.trace_sizes.get(_call(node).num_segments)
                if cls is None:
                    continue
                bound = concrete(sizes[cls])
                counts = [k for k, c in enumerate(plan.lengths.classes)
                          if c == cls and not isinstance(flat[k], Tensor)]
                what = f"{names[counts[0]]} = {bound}" if counts else f"{bound} segments"
            elif op == "segmented_gather" and node.args[0] in position:
                bound = concrete(flat[position[node.args[0]]].shape[0])
                what = f"{names[position[node.args[0]]]} ({bound} rows)"
            else:
                continue
            values = flat[position[idx]]
            bad = ((values < 0) | (values >= bound)).nonzero()
            if bad.numel():
                row = int(bad[0, 0])
                return ValueError(f"segops.jit: {self.fn.__name__}: {names[position[idx]]} value "
                                  f"{int(values[row])} at row {row} is out of range for {what} "
                                  f"(its values must lie in [0, {bound}))")
        return None

    def _execute(self, plan: _Plan, flat: Sequence[Any], sizes: Sequence[Any]) -> Any:
        env = self._run_steps(plan, flat, sizes)
        return torch.fx.node.map_arg(plan.results, lambda n: env[n])

    def _run_steps(self, plan: _Plan, flat: Sequence[Any], sizes: Sequence[Any],
                   want_ir: bool = False) -> Any:
        env: dict[torch.fx.Node, Any] = dict(zip(plan.placeholders, flat))
        for node in plan.module.graph.nodes:
            if node.op == "get_attr":
                env[node] = getattr(plan.module, node.target)
        sources = []
        for step in plan.steps:
            if step.index is None:
                for node in step.nodes:
                    env[node] = _run_node(node, env, sizes.__getitem__, plan.trace_sizes)
                continue
            count = sizes[step.count_class]
            inputs = [env[n] for n in step.inputs]
            for k in step.segment_tables:
                inputs[k] = self._segment_rows(plan, step, step.inputs[k], inputs[k], count)
            args = inputs + [env[n.args[0]] for n in step.tables] + [env[step.index], count]
            if want_ir:
                sources.append(step.kernel.mlir(*args))
            results = step.kernel._run(*args)
            results = results if isinstance(results, tuple) else (results,)
            env.update(zip(step.outputs, results))
        return sources if want_ir else env


def _is_plain(value: Any) -> bool:
    """A tensor with data to read (not a fake one of torch.compile's)."""
    return type(value) in (Tensor, torch.nn.Parameter)


def _is_free_view(node: torch.fx.Node) -> bool:
    """A view of an argument, or one the function returns (an (N, 1)
    column in and out of the library ops' (N,) tensors): taken as it is,
    outside kernels, which neither take nor return columns."""
    packet = getattr(node.target, "__name__", "").split(".")[0]
    if getattr(node.target, "namespace", "") != "aten" or packet not in VIEWS:
        return False
    source = node.args[0]
    return (isinstance(source, torch.fx.Node) and source.op == "placeholder") or \
        any(user.op == "output" for user in node.users)


def _reduces(step: _Step) -> bool:
    """Whether a step holds a reduction into its index's segments."""
    return any(_segment_op(node) is not None
               and OPS[_segment_op(node)].result_space == SEGMENT for node in step.nodes)


def _run_node(node: torch.fx.Node, env: dict[torch.fx.Node, Any],
              size_of: Callable[[int], Any], trace_sizes: dict[int, int]) -> Any:
    """Runs one traced node on `env`'s values, the sizes it was traced with
    replaced by the call's (`size_of(class)`)."""
    def size(value: Any) -> Any:
        if type(value) is int and value in trace_sizes:
            return size_of(trace_sizes[value])
        if isinstance(value, (list, tuple)):
            return type(value)(size(v) for v in value)
        return value

    args = torch.fx.node.map_arg(node.args, lambda n: env[n])
    kwargs = torch.fx.node.map_arg(node.kwargs, lambda n: env[n])
    return node.target(*size(tuple(args)), **{k: size(v) for k, v in kwargs.items()})
