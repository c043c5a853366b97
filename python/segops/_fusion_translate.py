"""One fusion cluster (an FX subgraph of a compiled graph) -> seg IR.

The cluster's aten ops go through the JIT's Translator. Its segops ops and
jit_calls, at any derivative level, become calls of the compiler's own
derivative (seg-derive's function at the node's level), which the compiler
links in and inlines (MLIR's inliner); CSE then merges a derivative's
recomputation of its forward with the forward in the cluster. No gradient
is written here twice, and no IR is pasted as text.
"""

from __future__ import annotations

import operator
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from typing import Any

import sympy
import torch

from segops import _extensions, _jit, ops
from segops._fusion_index import IndexOp
from segops._jit_trace import ROW, SEGMENT, TABLE, JitError, Translator, Value
from segops._op_table import OPS, SAVED_RESULTS, op_level


def size_expr(size: Any) -> sympy.Expr:
    """A size (int or SymInt) as a sympy expression: sizes compared
    structurally, without guards on the graph's shape environment."""
    if isinstance(size, torch.SymInt):
        return size.node.expr
    return sympy.Integer(int(size))


def segment_op_level(target: Any) -> tuple[str, int] | None:
    """(public op name, derivative level) of a segops library op overload,
    e.g. segmented_mean_grad_grad -> ("segmented_mean", 2); None otherwise."""
    if getattr(target, "namespace", "") != "segops":
        return None
    found = op_level(target.__name__.split(".")[0])
    return (found[0].name, found[1]) if found is not None else None


def library_call(node: torch.fx.Node) -> ops.OperatorCall | None:
    """A library op node's arguments, placed by the operator's signature;
    None for other nodes."""
    if segment_op_level(node.target) is None:
        return None
    return ops.operator_call(node.target.__name__.split(".")[0], node.args)


@dataclass(frozen=True)
class SymbolicSize:
    """A size in the graph other than num_segments (expand's shape, a mean's
    divisor): kernels take only N and S, so ops that read one as a value
    stay outside clusters."""

    name: str


def jit_program_level(node: torch.fx.Node) -> tuple[Any, int] | None:
    """(program, derivative level) of a segops::jit_call node (a segops.jit
    function, or a cluster fused before) with a constant program name."""
    if node.op != "call_function" or node.target is not torch.ops.segops.jit_call.default:
        return None
    name = node.args[0]
    if not isinstance(name, str) or not isinstance(node.args[1], (list, tuple)):
        return None
    try:
        return _jit.split_program(name)
    except ValueError:
        return None


# scatter_reduce's reductions by the cluster's index -> segops ops.
_REDUCTIONS = {"sum": "segmented_sum", "mean": "segmented_mean", "amax": "segmented_max",
               "amin": "segmented_min"}


class ClusterError(JitError):
    """A cluster node the translation cannot express; the pass leaves it out."""

    def __init__(self, message: str, node: torch.fx.Node) -> None:
        super().__init__(message)
        self.node = node


@dataclass(frozen=True)
class DerivedFunction:
    """Derivative level `level` of function `name` in `source` (seg-derive's
    name_grad..., or the function itself at level 0), as the compiler gives
    its signature. A cluster calls it and the compiler inlines it."""

    source: str
    name: str
    level: int
    params: tuple[tuple[str, str], ...]  # (MLIR type, seg.space or "") each


@cache
def derived_function(source: str, name: str, level: int) -> DerivedFunction:
    params, _ = _extensions.segc().derived_signature(source, name, level)
    return DerivedFunction(source, name, level, tuple((t, space) for t, space in params))


def _tensor_type(tail: Sequence[int], element: str) -> str:
    return f"tensor<?x{''.join(f'{d}x' for d in tail)}{element}>"


def _tail(value: Any) -> tuple[int, ...]:
    return tuple(int(d) for d in value.shape[1:])


def _segment_op_function(op: str, tails: tuple[tuple[int, ...], ...],
                         result_tail: tuple[int, ...], element: str, takes_count: bool) -> str:
    """A module of one function, @f, applying seg op `op` to its arguments."""
    types = [_tensor_type(t, element) for t in tails]
    result = _tensor_type(result_tail, element)
    params = [f"%x{i}: {t}" for i, t in enumerate(types)] + ["%idx: tensor<?xi32>"]
    operands = [f"%x{i}" for i in range(len(types))] + ["%idx"]
    if takes_count:
        params.append("%n: index")
        operands.append("%n")
    return (f"func.func @f({', '.join(params)}) -> {result} attributes {{{SAVED_RESULTS}}} {{\n"
            f"  %r = {op} {', '.join(operands)} : {', '.join(types)}, tensor<?xi32> -> "
            f"{result}\n  return %r : {result}\n}}\n")


def _cluster_function() -> None:
    """Stands for the user's function in the translator's messages."""


_cluster_function.__name__ = "the fused cluster"


class ClusterTranslator(Translator):
    """Translator for a cluster copied into its own graph: placeholders are
    the cluster's inputs (float tensors, idx, num_segments), the outputs
    the values used outside it."""

    def __init__(self, name: str, args: Sequence[Any], rows: Any, segments: Any,
                 spaces: Sequence[str | None] | None = None,
                 index_ops: dict[torch.fx.Node, IndexOp] | None = None) -> None:
        """`spaces`: per argument "uniform" (a 0-d or (F,) tensor), TABLE (read by a
        second index) or None (rows or segments, from its length);
        `index_ops`: the cluster graph's gathers and sums by index tensors
        (their nodes, values, index and zeros are the graph's copies)."""
        super().__init__(fn=_cluster_function, name=name, args=args,
                         spaces=spaces if spaces is not None else [None] * len(args))
        self.rows = size_expr(rows)
        self.segments = size_expr(segments)
        self.index_ops = dict(index_ops or {})
        # The derived functions the kernel calls: (symbol, source, function,
        # level, whether it takes its forward's results) each.
        self.callees: list[tuple[str, str, str, int, bool]] = []
        # Derivative-level segops nodes -> the graph's node of their forward
        # op on the same operands: its value is passed to the derivative,
        # which then does not recompute it (a max's backward finds the max).
        self.forward_results: dict[torch.fx.Node, torch.fx.Node] = {}

    def fail(self, node: torch.fx.Node, why: str) -> JitError:
        return ClusterError(f"segops.fusion: {why} (node {node.name})", node)

    def space(self, position: int) -> str:
        value = self.args[position]
        if self.spaces[position] == "uniform":
            return ' {seg.space = "segment"}'
        if value.dim() == 3 or self.spaces[position] == TABLE:
            return ""
        length = size_expr(value.shape[0])
        if length == self.rows and length != self.segments:
            return ' {seg.space = "row"}'
        if length == self.segments and length != self.rows:
            return ' {seg.space = "segment"}'
        return ""

    def call(self, node: torch.fx.Node) -> Any:
        if node.target is operator.getitem:
            results = self.values[node.args[0]]
            if not isinstance(results, tuple):
                raise self.fail(node, "getitem of a single value")
            return results[node.args[1]]
        index_op = self.index_ops.get(node)
        if index_op is not None:
            return self.by_index(node, index_op)
        found = segment_op_level(node.target)
        if found is not None:
            return self.inline(node, *found)
        program = jit_program_level(node)
        if program is not None:
            return self.inline_program(node, *program)
        if is_unused_placeholder(node):
            return None  # stands for zeros, made where an op reads it
        return super().call(node)

    def length(self, size: Any) -> Any:
        """Sizes compared structurally, as sympy expressions (symbolic ones
        have no int without a guard)."""
        return size_expr(size)

    def by_index(self, node: torch.fx.Node, op: IndexOp) -> Value:
        """A gather or sum by an index tensor: by the cluster's index, a
        segment gather or sum; by a second index, seg.gather_rows of a
        table argument or seg.scatter_sum into as many rows as its zeros
        argument (the kernel writes the rows, the runtime sums them)."""
        index = self.values[op.index]
        values = self.tensor(node, op.values)
        if index.kind == "idx":
            name = "segmented_gather" if op.kind == "gather" else _REDUCTIONS[op.reduce]
            space = SEGMENT if op.kind == "gather" else ROW
            result = self.apply_segment_op(node, name, [self.place(node, values, space)])
            if op.include_self:  # the zeros' 0 takes part in the extremum
                result = self.elementwise(node, "arith.maximumf" if op.reduce == "amax"
                                          else "arith.minimumf", [result, 0.0])
            return result
        if index.kind != "gidx":
            raise self.fail(node, "the index is neither the cluster's nor an argument")
        if op.reduce != "sum":
            raise self.fail(node, f"a scatter_reduce '{op.reduce}' by a second index has no "
                                  "kernel (only sums)")
        if op.kind == "gather":
            return self.gather_rows(node, values, index)
        if values.uniform:
            values = self.place(node, values, ROW)
        base = self.tensor(node, op.base)
        zero, rows = self.fresh(), self.fresh()
        result = Value(self.fresh(), "float", values.tail)
        self.emit(f"{zero} = arith.constant 0 : index")
        self.emit(f"{rows} = tensor.dim {base.name}, {zero} : {self.ty(base)}")
        self.emit(f"{result.name} = seg.scatter_sum {values.name}, {index.name}, {rows} : "
                  f"{self.ty(values)}, tensor<?xi32> -> {self.ty(result)}")
        return result

    def is_index(self, node: Any) -> bool:
        value = self.values.get(node) if isinstance(node, torch.fx.Node) else None
        return isinstance(value, Value) and value.kind == "idx"

    def length_of(self, space: str) -> str:
        """An index value holding the length of `space` (rows or segments)."""
        if space == "row":
            zero, length = self.fresh(), self.fresh()
            self.emit(f"{zero} = arith.constant 0 : index")
            self.emit(f"{length} = tensor.dim %idx, {zero} : tensor<?xi32>")
            return length
        return self.size().name

    def placeholder_zeros(self, mlir_type: str, space: str) -> str:
        """Zeros standing in for an input the op's kernel never reads (the
        graph passes an empty tensor there)."""
        constant, splat = self.fresh(), self.fresh()
        self.emit(f"{constant} = arith.constant 0.0 : {self.element}")
        self.emit(f"{splat} = tensor.splat {constant}[{self.length_of(space)}] : {mlir_type}")
        return splat

    def inline(self, node: torch.fx.Node, public: str, level: int) -> Any:
        """A segops library op at derivative level `level`: a call of the
        compiler's derivative of the op's level-0 function."""
        segment_op = OPS[public]
        takes_count = segment_op.takes_count
        call = library_call(node)
        if call is None:
            raise self.fail(node, f"{public}: arguments unlike its operator's")
        if not self.is_index(call.idx):
            raise self.fail(node, f"{public}: idx is not the cluster's index")
        # The forward's result: this node's value at level 0; above, the
        # first input a level adds (the saved result, or its cotangent) has
        # its shape.
        result = node.meta["val"] if level == 0 else call.level_inputs[0].meta["val"]
        source = _segment_op_function(
            segment_op.seg_op, tuple(_tail(f.meta["val"]) for f in call.arguments),
            _tail(result), self.element, takes_count)
        # The derived function's arguments (the compiler's order, seg-derive):
        # the op's tensors, idx, the count (if the op takes one), then the
        # saved results and cotangents of each level.
        operands = call.arguments + ["idx"] + (["count"] if takes_count else []) + \
            call.level_inputs
        forward = self.values.get(self.forward_results.get(node))
        return self.call_derived(node, public, derived_function(source, "f", level), operands,
                                 forward if level > 0 and isinstance(forward, Value) else None)

    def inline_program(self, node: torch.fx.Node, program: Any, level: int) -> Any:
        """A jit_call: a call of its program's derivative level. The
        function's index-typed argument is num_segments; its other arguments
        are jit_call's tensors in order (idx among them), then cotangents."""
        tensors = list(node.args[1])
        if not self.is_index(tensors[program.idx_position]):
            raise self.fail(node, "jit_call: its index is not the cluster's")
        function = derived_function(program.source, program.name, level)
        remaining = iter(tensors)
        operands = []
        for mlir_type, _ in function.params:
            if mlir_type == "index":
                operands.append("count")
            else:
                operand = next(remaining)
                operands.append("idx" if self.is_index(operand) else operand)
        return self.call_derived(node, "jit_call", function, operands)

    def call_derived(self, node: torch.fx.Node, what: str, function: DerivedFunction,
                     operands: list, forward: Value | None = None) -> Any:
        """Emits a call of `function` (linked in and inlined by translate())
        with its arguments bound to `operands` ("idx", "count" or graph
        nodes) and, if given, the result of its level-0 function on the same
        operands, `forward` (then the derivative does not recompute it); its
        results have the shapes of the node's values."""
        arguments, types = [], [t for t, _ in function.params]
        for (mlir_type, space), operand in zip(function.params, operands):
            if operand == "idx":
                arguments.append("%idx")
            elif operand == "count":
                arguments.append(self.size().name)
            elif is_unused_placeholder(operand):
                arguments.append(self.placeholder_zeros(mlir_type, space))
            else:
                value = self.tensor(node, operand)
                if self.ty(value) != mlir_type:
                    raise self.fail(node, f"{what}: operand {self.ty(value)} where it "
                                          f"takes {mlir_type}")
                arguments.append(value.name)
        if forward is not None:
            arguments.append(forward.name)
            types.append(self.ty(forward))
        examples = node.meta["val"]
        examples = list(examples) if _returns_tuple(node) else [examples]
        symbol = f"segops_derived_{len(self.callees)}"
        self.callees.append((symbol, function.source, function.name, function.level,
                             forward is not None))
        result = self.fresh()
        values = [Value(f"{result}#{k}" if len(examples) > 1 else result, "float", _tail(e))
                  for k, e in enumerate(examples)]
        defined = f"{result}:{len(values)}" if len(values) > 1 else result
        self.emit(f"{defined} = func.call @{symbol}({', '.join(arguments)}) : "
                  f"({', '.join(types)}) -> "
                  f"({', '.join(self.ty(v) for v in values)})")
        return tuple(values) if _returns_tuple(node) else values[0]

    def translate(self, graph: torch.fx.Graph | torch.fx.GraphModule, signature: Any,
                  element: str) -> str:
        """The cluster's kernel function, with the derived functions it
        calls inlined by the compiler (a ValueError if it rejects them)."""
        self.callees = []
        draft = super().translate(graph, signature, element)
        if not self.callees:
            return draft
        return _extensions.segc().inline_derived(draft, self.callees)


def _returns_tuple(node: torch.fx.Node) -> bool:
    return isinstance(node.meta.get("val"), (tuple, list))


def is_unused_placeholder(node: Any) -> bool:
    """The empty tensor the op library's autograd passes for an input its
    kernel never reads."""
    if not isinstance(node, torch.fx.Node) or node.op != "call_function":
        return False
    value = node.meta.get("val")
    return (getattr(node.target, "namespace", "") == "aten"
            and node.target.__name__.startswith("empty.")
            and isinstance(value, torch.Tensor) and value.dim() >= 1
            and isinstance(value.shape[0], int) and value.shape[0] == 0)
