"""One fusion cluster (an FX subgraph of a compiled graph) -> seg IR.

The cluster's aten ops go through the JIT's Translator. Its segops ops, at
any derivative level, are inlined from the compiler's own derivative: the
op's level-0 function is derived by seg-derive to the node's level and the
body of that function is pasted in with its values renamed. No gradient is
written here twice.
"""

from __future__ import annotations

import operator
import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from typing import Any

import sympy
import torch

from segops import _extensions, _library
from segops._jit_trace import _SEGMENT_OPS, JitError, Translator, Value

_GRAD = "_grad"


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
    base = target.__name__.split(".")[0]
    level = 0
    while base.endswith(_GRAD):
        base, level = base[: -len(_GRAD)], level + 1
    return (base, level) if base in _SEGMENT_OPS else None


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
    from segops import _jit

    name = node.args[0]
    if not isinstance(name, str) or not isinstance(node.args[1], (list, tuple)):
        return None
    try:
        return _jit.split_program(name)
    except ValueError:
        return None


class ClusterError(JitError):
    """A cluster node the translation cannot express; the pass leaves it out."""

    def __init__(self, message: str, node: torch.fx.Node) -> None:
        super().__init__(message)
        self.node = node


@dataclass(frozen=True)
class _DerivedFunction:
    params: tuple[tuple[str, str, str], ...]  # (name, type, space) per argument
    body: tuple[str, ...]
    results: tuple[str, ...]
    result_types: tuple[str, ...]


_FUNC = re.compile(r"^\s*func\.func @(\w+)\((.*)\) -> (.*) \{$")
_PARAM = re.compile(r"(%\w+): (tensor<[^>]*>|index)(?: \{seg\.space = \"(\w+)\"\})?")
_SSA = re.compile(r"%([A-Za-z0-9_$.\-]+)")


def _tensor_type(tail: Sequence[int], element: str) -> str:
    return f"tensor<?x{''.join(f'{d}x' for d in tail)}{element}>"


def _tail(mlir_type: str) -> tuple[int, ...]:
    dims = mlir_type[len("tensor<"):-1].split("x")[1:-1]
    return tuple(int(d) for d in dims)


@cache
def _derived(op: str, tails: tuple[tuple[int, ...], ...], result_tail: tuple[int, ...],
             element: str, takes_count: bool, level: int) -> _DerivedFunction:
    """The seg op's derivative level `level` as seg IR, parsed."""
    types = [_tensor_type(t, element) for t in tails]
    result = _tensor_type(result_tail, element)
    params = [f"%x{i}: {t}" for i, t in enumerate(types)] + ["%idx: tensor<?xi32>"]
    operands = [f"%x{i}" for i in range(len(types))] + ["%idx"]
    if takes_count:
        params.append("%n: index")
        operands.append("%n")
    source = (f"func.func @f({', '.join(params)}) -> {result} {{\n"
              f"  %r = {op} {', '.join(operands)} : {', '.join(types)}, tensor<?xi32> -> "
              f"{result}\n  return %r : {result}\n}}\n")
    return derived_function(source, "f", level)


@cache
def derived_function(source: str, name: str, level: int) -> _DerivedFunction:
    """Derivative level `level` of the function @name in `source` (seg-derive's
    @name_grad..., or the function itself for level 0), parsed."""
    text = _extensions.segc().derive(source, max(level, 1))
    wanted = name + _GRAD * level
    lines = text.splitlines()
    for start, line in enumerate(lines):  # noqa: B007 (start is read after the loop)
        header = _FUNC.match(line)
        if header and header.group(1) == wanted:
            break
    else:
        raise AssertionError(f"seg-derive gave no @{wanted}")
    parameters = tuple((m.group(1), m.group(2), m.group(3) or "")
                       for m in _PARAM.finditer(header.group(2)))
    body = []
    for line in lines[start + 1:]:
        stripped = line.strip()
        if stripped == "}":
            break
        body.append(stripped)
    returned = body.pop()
    names, _, result_types = returned[len("return "):].partition(" : ")
    return _DerivedFunction(parameters, tuple(body), tuple(n.strip() for n in names.split(",")),
                            tuple(t.strip() for t in result_types.split(", ")))


def _cluster_function() -> None:
    """Stands for the user's function in the translator's messages."""


_cluster_function.__name__ = "the fused cluster"


class ClusterTranslator(Translator):
    """Translator for a cluster copied into its own graph: placeholders are
    the cluster's inputs (float tensors, idx, num_segments), the outputs
    the values used outside it."""

    def __init__(self, name: str, args: Sequence[Any], rows: Any, segments: Any) -> None:
        super().__init__(fn=_cluster_function, name=name, args=args)
        self.rows = size_expr(rows)
        self.segments = size_expr(segments)
        self.inlined = 0
        # Derivative-level segops nodes -> the graph's node of their forward
        # op on the same operands: its value replaces the derivative's own
        # recomputation of the forward (a max's backward finds the max).
        self.forward_results: dict[torch.fx.Node, torch.fx.Node] = {}

    def fail(self, node: torch.fx.Node, why: str) -> JitError:
        return ClusterError(f"segops.fusion: {why} (node {node.name})", node)

    def space(self, position: int) -> str:
        value = self.args[position]
        if value.dim() == 3:
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
        found = segment_op_level(node.target)
        if found is not None:
            return self.inline(node, *found)
        program = jit_program_level(node)
        if program is not None:
            return self.inline_program(node, *program)
        if is_unused_placeholder(node):
            return None  # stands for zeros, made where an op reads it
        return super().call(node)

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
        segment_op = _SEGMENT_OPS[public]
        op, num_tensors, takes_count = segment_op.op, segment_op.num_tensors, segment_op.takes_count
        floats, idx = list(node.args[:-2]), node.args[-2]
        if not self.is_index(idx):
            raise self.fail(node, f"{public}: idx is not the cluster's index")
        first = floats[0].meta["val"]
        kernel = f"{public}_{self.element}_w{1 if first.dim() == 1 else 3}"
        output = next(b for b in _library.kernel_entry(kernel)["buffers"]
                      if b["role"] == "output")
        tails = tuple(tuple(int(d) for d in f.meta["val"].shape[1:]) for f in floats[:num_tensors])
        function = _derived(op, tails, tuple(int(d) for d in output["shape"][1:]),
                            self.element, takes_count, level)
        # The derived function's arguments: the op's tensors, idx, the
        # count (if the op takes one), then the cotangents of each level.
        operands = floats[:num_tensors] + ["idx"] + (["count"] if takes_count else []) + \
            floats[num_tensors:]
        recomputation = None
        forward = self.values.get(self.forward_results.get(node))
        if level > 0 and isinstance(forward, Value):
            level0 = [p for p, _, _ in function.params[:len(operands) - len(floats)
                                                       + num_tensors]]
            recomputation = (f" = {op} {', '.join(level0)} : ", forward)
        return self.paste(node, public, function, operands, recomputation)

    def inline_program(self, node: torch.fx.Node, program: Any, level: int) -> Any:
        """A jit_call: its program's derivative level, pasted in. The
        function's index-typed argument is num_segments; its other arguments
        are jit_call's tensors in order (idx among them), then cotangents."""
        tensors = list(node.args[1])
        if not self.is_index(tensors[program.idx_position]):
            raise self.fail(node, "jit_call: its index is not the cluster's")
        function = derived_function(program.source, program.name, level)
        remaining = iter(tensors)
        operands = []
        for _, mlir_type, _ in function.params:
            if mlir_type == "index":
                operands.append("count")
            else:
                operand = next(remaining)
                operands.append("idx" if self.is_index(operand) else operand)
        return self.paste(node, "jit_call", function, operands, None)

    def paste(self, node: torch.fx.Node, what: str, function: _DerivedFunction,
              operands: list, recomputation: tuple[str, Value] | None) -> Any:
        """Emits `function`'s body with its arguments bound to `operands`
        ("idx", "count" or graph nodes) and its other values renamed apart;
        a body line containing recomputation[0] is not emitted, its result
        bound to recomputation[1]. Returns its results."""
        self.inlined += 1
        prefix = f"i{self.inlined}_"
        renames: dict[str, str] = {}
        for (param, mlir_type, space), operand in zip(function.params, operands):
            if operand == "idx":
                renames[param] = "%idx"
            elif operand == "count":
                renames[param] = self.size().name
            elif is_unused_placeholder(operand):
                renames[param] = self.placeholder_zeros(mlir_type, space)
            else:
                value = self.tensor(node, operand)
                if self.ty(value) != mlir_type:
                    raise self.fail(node, f"{what}: operand {self.ty(value)} where it "
                                          f"takes {mlir_type}")
                renames[param] = value.name

        def rename(match: re.Match) -> str:
            name = "%" + match.group(1)
            return renames.get(name, "%" + prefix + match.group(1))

        for line in function.body:
            if recomputation and recomputation[0] in line:
                renames[line.split(" = ", 1)[0]] = recomputation[1].name
                continue
            self.emit(_SSA.sub(rename, line))
        values = tuple(Value(_SSA.sub(rename, name), "float", _tail(t))
                       for name, t in zip(function.results, function.result_types))
        return values if _returns_tuple(node) else values[0]


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
