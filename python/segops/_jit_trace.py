"""From a Python function of segment ops and torch code to seg IR.

The function is traced with ``make_fx`` on meta tensors (no data, no
kernels: aten ops and the segops custom ops, whose fake kernels give
shapes), and the graph is translated op by op into one MLIR kernel
function. Anything outside the supported set raises JitError naming the
construct and the user's source line.
"""

from __future__ import annotations

import inspect
import operator
import sys
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
from torch.fx.experimental.proxy_tensor import make_fx
from torch.utils import _pytree as pytree
from torch.utils._python_dispatch import TorchDispatchMode, _disable_current_modes

from segops import _columns, _jit_pointwise
from segops._dtypes import INDEX_DTYPES
from segops._op_table import OPS, ROW, SEGMENT
from segops.ops import operator_call

# The space of a table: an argument read at the rows a second index names
# (any length), with no space of its own in the kernel.
TABLE = "table"


class JitError(ValueError):
    """A function segops.jit cannot compile (an unsupported construct)."""



# A uniform value (a 0-d tensor, or a small one every row shares, such as a
# per-feature weight of F features) by its shape -> its element shape.
# Kernels take it as a per-segment value equal in every segment (see
# JitFunction).
def uniform_tail(shape: tuple[int, ...]) -> tuple[int, ...] | None:
    """The element shape of a uniform value of `shape` (0-d or (1,): a
    scalar; (F,): F features), or None if it cannot be one."""
    if shape in ((), (1,)):
        return ()
    if len(shape) == 1 and shape[0] >= 1:
        return shape
    return None


def is_feature_tail(tail: tuple[int, ...]) -> bool:
    """Whether an element shape is a row of F features, F static ((3,)
    vectors, wide rows; not the (1,) of a scalar column)."""
    return len(tail) == 1 and isinstance(tail[0], int) and tail[0] >= 2

# Elementwise aten ops with one tensor operand -> MLIR op.
_UNARY = {
    "neg": "arith.negf",
    "exp": "math.exp",
    "log": "math.log",
    "sqrt": "math.sqrt",
    "rsqrt": "math.rsqrt",
    "tanh": "math.tanh",
    "abs": "math.absf",
}
_BINARY = {
    "add": "arith.addf",
    "sub": "arith.subf",
    "mul": "arith.mulf",
    "div": "arith.divf",
    "maximum": "arith.maximumf",
    "minimum": "arith.minimumf",
}
_COMPARISONS = {"gt": "ogt", "ge": "oge", "lt": "olt", "le": "ole", "eq": "oeq", "ne": "une"}
_IDENTITIES = {"alias", "detach", "clone", "contiguous", "lift_fresh_copy"}
# Ops that only change how a value is viewed (per-row scalar columns).
VIEWS = frozenset({"unsqueeze", "view", "reshape", "_unsafe_view", "squeeze", "expand",
                   "expand_as", "slice"}) | _IDENTITIES
# aten ops (overload packet names) -> how Translator.call lowers them
# (handler(translator, node, args, kwargs)); filled by @lowers below the
# Translator. The other pointwise ops go through _jit_pointwise
# (is_supported says which).
_HANDLERS: dict[str, Callable[..., Any]] = {}


def lowers(*packets: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Registers a handler of aten ops `packets` for Translator.call."""
    def register(handler: Callable[..., Any]) -> Callable[..., Any]:
        for packet in packets:
            _HANDLERS[packet] = handler
        return handler
    return register


@dataclass
class Value:
    """An SSA value of the kernel function: a float or i1 tensor whose
    elements have shape `tail` (() scalar, (3,) vector, (3, 3) matrix, (1,)
    a scalar column `w[:, None]`, stored as the (L,) tensor), or the index
    or segment count arguments."""

    name: str
    kind: str  # "float", "bool", "idx", "size", "gidx" (a second index)
    tail: tuple[int, ...] = ()
    # The same in every row and segment (a uniform argument or constant, or
    # arithmetic on them only): held per segment, gathered where rows use it.
    uniform: bool = False

    def mlir_type(self, element: str) -> str:
        if self.kind in ("idx", "gidx"):
            return "tensor<?xi32>"
        if self.kind == "size":
            return "index"
        dims = "".join(f"{d}x" for d in self.tail if self.tail != (1,))
        return f"tensor<?x{dims}{'i1' if self.kind == 'bool' else element}>"


@dataclass
class Signature:
    """How a call's arguments map to the kernel function."""

    tensor_positions: list[int]  # positions of tensor arguments, in order
    idx_position: int
    size_position: int | None
    scalar_values: dict[int, Any] = field(default_factory=dict)  # baked in
    # Second indices: read only by gathers of tables (space TABLE), in any
    # order (seg.gather_rows); the index above is the reductions'.
    gather_indices: tuple[int, ...] = ()


def source_line(fn: Callable, frames: Sequence[traceback.FrameSummary]) -> str:
    """The innermost frame of `frames` in the user's function's file, as
    'file:line: code'."""
    # Functions segops.jit makes (the steps of a several-index function)
    # name the user's function they come from.
    fn = getattr(fn, "segops_source", fn)
    filename = inspect.getsourcefile(fn) or fn.__code__.co_filename
    for frame in reversed(list(frames)):
        if frame.filename == filename:
            return f"{frame.filename}:{frame.lineno}: {(frame.line or '').strip()}"
    return f"{filename}:{fn.__code__.co_firstlineno} (in {fn.__name__})"


class _CallRecorder(TorchDispatchMode):
    """Records the user's source line of every aten op a function calls, by
    op, in call order (the order make_fx records them in)."""

    def __init__(self, fn: Callable) -> None:
        super().__init__()
        self.fn = fn
        self.lines: dict[str, list[str]] = {}

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        line = source_line(self.fn, traceback.extract_stack())
        self.lines.setdefault(str(func), []).append(line)
        return func(*args, **(kwargs or {}))


def concrete(size: Any) -> int:
    """A size as an int; a symbolic one (inside torch.compile) as its
    example value, without a guard: the trace depends on no size."""
    if isinstance(size, torch.SymInt):
        return int(size.node.hint)
    return int(size)


def meta_like(value: Any) -> Any:
    if isinstance(value, torch.Tensor):
        return torch.empty([concrete(d) for d in value.shape], dtype=value.dtype,
                           device="meta")
    if isinstance(value, torch.SymInt):
        return concrete(value)
    return value


class Translator:
    """One traced graph -> the MLIR text of one kernel function."""

    def __init__(self, fn: Callable, name: str, args: Sequence[Any],
                 spaces: Sequence[str | None] | None = None,
                 rows: int | None = None, segments: int | None = None) -> None:
        """`spaces`: per argument "row", "segment" or "uniform" (None for
        the index and scalars); without it, spaces follow from lengths.
        `rows`, `segments`: the distinct lengths the trace used, which tell
        where a uniform value meets rows."""
        self.fn = fn
        self.name = name
        self.args = list(args)
        self.spaces = list(spaces) if spaces is not None else None
        self.rows, self.segments = rows, segments
        self.constants: list[torch.Tensor] = []  # lifted to trailing arguments
        self.constant_params: list[str] = []  # their parameters in the header
        self.gathered: dict[str, Value] = {}
        self.tables: set[str] = set()  # arguments read by a second index
        self.lines: list[str] = []
        self.values: dict[torch.fx.Node, Value | float] = {}
        self.counter = 0
        self.element = ""
        self.idx_node: torch.fx.Node | None = None
        self.size_value: Value | None = None
        self.recorded: dict[str, list[str]] | None = None
        self.single = True
        self.column_results: list[int] = []  # results of shape (L, 1), held as (L,)
        # Nodes of a decomposition -> the graph's node they stand for.
        self.stand_in: dict[torch.fx.Node, torch.fx.Node] = {}
        # Ops whose decompositions are being translated (none recurses).
        self.decomposing: set[Any] = set()

    # -- errors ------------------------------------------------------------

    def where(self, node: torch.fx.Node) -> str:
        """The user's source line of `node` (found by rerunning the function
        on meta tensors under a recording mode, on the first error only)."""
        node = self.stand_in.get(node, node)
        if self.recorded is None:
            recorder = _CallRecorder(self.fn)
            try:
                with recorder:
                    self.fn(*[meta_like(a) for a in self.args])
            except Exception:  # noqa: BLE001 - lines recorded so far suffice
                pass
            self.recorded = recorder.lines
        key = str(node.target)
        occurrence = sum(1 for other in self.ordered[: self.ordered.index(node)]
                         if str(other.target) == key)
        lines = self.recorded.get(key, [])
        if occurrence < len(lines):
            return lines[occurrence]
        return source_line(self.fn, [])

    def fail(self, node: torch.fx.Node, why: str) -> JitError:
        return JitError(f"segops.jit: {why}\n  at {self.where(node)}")

    # -- emission ----------------------------------------------------------

    def fresh(self) -> str:
        self.counter += 1
        return f"%v{self.counter}"

    def emit(self, text: str) -> None:
        self.lines.append("  " + text)

    def ty(self, value: Value) -> str:
        return value.mlir_type(self.element)

    def constant_like(self, constant: float, like: Value) -> Value:
        """A splat of `constant` shaped like `like` (a scalar column splats
        its (L,) storage)."""
        c, zero, length, splat = self.fresh(), self.fresh(), self.fresh(), self.fresh()
        literal = (
            _float_literal(float(constant))
            if constant == constant and abs(constant) != float("inf")
            else {"nan": "0x7FC00000", "inf": "0x7F800000", "-inf": "0xFF800000"}[
                str(float(constant))
            ]
        )
        if literal.startswith("0x") and self.element == "f64":
            literal = {"0x7FC00000": "0x7FF8000000000000", "0x7F800000": "0x7FF0000000000000",
                       "0xFF800000": "0xFFF0000000000000"}[literal]
        self.emit(f"{c} = arith.constant {literal} : {self.element}")
        self.emit(f"{zero} = arith.constant 0 : index")
        self.emit(f"{length} = tensor.dim {like.name}, {zero} : {self.ty(like)}")
        result = Value(splat, "float", like.tail, like.uniform)
        self.emit(f"{splat} = tensor.splat {c}[{length}] : {self.ty(result)}")
        return result

    def broadcast(self, value: Value, tail: tuple[int, ...]) -> Value:
        """A scalar (or scalar column) per element as a row of `tail`'s
        features."""
        result = Value(self.fresh(), "float", tail, value.uniform)
        self.emit(f"{result.name} = seg.broadcast {value.name} : "
                  f"{Value('', 'float', ()).mlir_type(self.element)} -> {self.ty(result)}")
        return result

    def node_space(self, node: torch.fx.Node) -> str | None:
        """Whether `node`'s value is per row or per segment, from the
        trace's distinct lengths (None where they are not known)."""
        value = self.stand_in.get(node, node).meta.get("val")
        if self.rows is None or not isinstance(value, torch.Tensor) or value.dim() == 0:
            return None
        length = self.length(value.shape[0])
        return ROW if length == self.rows else SEGMENT if length == self.segments else None

    def length(self, size: Any) -> Any:
        """A leading size as `rows` and `segments` hold them (an int)."""
        return concrete(size)

    def gather_uniform(self, value: Value) -> Value:
        """A uniform value per row: its (equal) per-segment values gathered
        (once per value)."""
        found = self.gathered.get(value.name)
        if found is None:
            found = Value(self.fresh(), value.kind, value.tail)
            self.emit(f"{found.name} = seg.gather {value.name}, %idx : {self.ty(value)}, "
                      f"tensor<?xi32> -> {self.ty(found)}")
            self.gathered[value.name] = found
        return found

    def place(self, node: torch.fx.Node, value: Value, space: str) -> Value:
        """A uniform `value` in `space`: gathered to rows, or as it is (it
        is held per segment)."""
        if not value.uniform:
            return value
        if space == ROW:
            return self.gather_uniform(value)
        if space == SEGMENT:
            return Value(value.name, value.kind, value.tail)
        raise self.fail(node, f"'{node.target}' combines a uniform value with values that "
                              "are neither per row nor per segment")

    def place_uniform(
        self, node: torch.fx.Node, operands: list[Value | float]
    ) -> list[Value | float]:
        """Where uniform values meet row or segment values, the uniform
        ones placed there."""
        tensors = [o for o in operands if isinstance(o, Value)]
        if all(t.uniform for t in tensors) or not any(t.uniform for t in tensors):
            return operands
        space = self.node_space(node)
        return [self.place(node, o, space) if isinstance(o, Value) else o for o in operands]

    def unify(self, node: torch.fx.Node, operands: list[Value | float]) -> list[Value]:
        """Operands of one elementwise op brought to one shape: constants
        splatted, uniform values placed, scalars (columns) broadcast against
        rows of features."""
        # Columns and uniform scalars broadcast against rows of F features.
        broadcastable = all(len(o.tail) == 1 or (o.uniform and o.tail == ())
                            for o in operands if isinstance(o, Value))
        # A uniform scalar meets a scalar column w[:, None] (both stored as
        # one value per row): the result is the column.
        column = broadcastable and any(isinstance(o, Value) and o.tail == (1,)
                                       for o in operands)
        operands = self.place_uniform(node, operands)
        if column:
            operands = [Value(o.name, o.kind, (1,), o.uniform)
                        if isinstance(o, Value) and o.tail == () else o for o in operands]
        tensors = [o for o in operands if isinstance(o, Value)]
        if not tensors:
            raise self.fail(node, f"'{node.target}' has no tensor operand")
        tails = {t.tail for t in tensors}
        features = {t for t in tails if is_feature_tail(t)}
        if len(tails) > 1:
            if broadcastable and len(features) == 1:
                (target,) = features
            else:
                shapes = ", ".join(sorted(str(t) for t in tails))
                raise self.fail(node, f"'{node.target}' mixes element shapes {shapes}: "
                                      "broadcast a per-row scalar w against (N, F) rows as "
                                      "w[:, None]")
        else:
            target = tensors[0].tail
        like = next(t for t in tensors if t.tail == target)
        result = []
        for operand in operands:
            if not isinstance(operand, Value):
                operand = self.constant_like(operand, like)
            elif operand.tail != target:
                operand = self.broadcast(operand, target)
            result.append(operand)
        return result

    def as_float(self, value: Value | float) -> Value | float:
        """A comparison's result as eager's type promotion makes it in
        arithmetic (`m * (m > t)`): 1.0 where true, 0.0 where false."""
        if not isinstance(value, Value) or value.kind != "bool":
            return value
        one, zero = self.constant_like(1.0, value), self.constant_like(0.0, value)
        result = Value(self.fresh(), "float", value.tail, value.uniform)
        self.emit(f"{result.name} = arith.select {value.name}, {one.name}, {zero.name} : "
                  f"{self.ty(value)}, {self.ty(result)}")
        return result

    def elementwise(self, node: torch.fx.Node, op: str, operands: list[Value | float]) -> Value:
        values = self.unify(node, [self.as_float(o) for o in operands])
        result = Value(self.fresh(), "float", values[0].tail, values[0].uniform)
        self.emit(f"{result.name} = {op} {', '.join(v.name for v in values)} : {self.ty(result)}")
        if all(isinstance(o, Value) and o.kind == "bool" for o in operands):
            # Arithmetic of bools is bool in eager (a * b: and, a + b: or).
            return self.compare(node, "une", [result, 0.0])
        return result

    def compare(self, node: torch.fx.Node, predicate: str, operands: list[Value | float]) -> Value:
        values = self.unify(node, operands)
        result = Value(self.fresh(), "bool", values[0].tail, values[0].uniform)
        self.emit(f"{result.name} = arith.cmpf {predicate}, {values[0].name}, {values[1].name} "
                  f": {self.ty(values[0])}")
        return result

    def select(self, node: torch.fx.Node, condition: Value, a: Value | float,
               b: Value | float) -> Value:
        if not isinstance(a, Value) and not isinstance(b, Value):
            a = self.constant_like(a, condition)  # where(c, 0.0, -inf)
        values = self.unify(node, [a, b])
        if condition.tail in ((), (1,)) and is_feature_tail(values[0].tail) \
                and condition.uniform == values[0].uniform:
            # A per-row condition against rows of features: broadcast as
            # floats (seg.broadcast takes floats), then read as bool again.
            spread = self.broadcast(self.as_float(Value(condition.name, condition.kind, (),
                                                         condition.uniform)),
                                    values[0].tail)
            condition = self.compare(node, "une", [spread, 0.0])
        if condition.tail != values[0].tail or condition.uniform != values[0].uniform:
            raise self.fail(node, "where(): the condition must have the shape of its values")
        result = Value(self.fresh(), "float", values[0].tail, values[0].uniform)
        self.emit(f"{result.name} = arith.select {condition.name}, {values[0].name}, "
                  f"{values[1].name} : {self.ty(condition)}, {self.ty(result)}")
        return result

    def sigmoid(self, node: torch.fx.Node, x: Value) -> Value:
        """1 / (1 + e^-x) for x >= 0 and e^x / (1 + e^x) below, both from
        e = exp(-|x|) <= 1: no infinity in the value or any derivative
        (1 / (1 + exp(-x)) has NaN gradients where exp(-x) overflows).
        -|x| is a select, not absf, whose derivative at 0 would be 0."""
        nonnegative = self.compare(node, "oge", [x, 0.0])
        e = self.elementwise(node, "math.exp", [
            self.select(node, nonnegative, self.elementwise(node, "arith.negf", [x]), x)])
        reciprocal = self.elementwise(node, "arith.divf",
                                      [1.0, self.elementwise(node, "arith.addf", [e, 1.0])])
        numerator = self.select(node, nonnegative, 1.0, e)
        return self.elementwise(node, "arith.mulf", [numerator, reciprocal])

    def power(self, node: torch.fx.Node, x: Value, exponent: float) -> Value:
        """x ** p with a constant p, in forms whose values and derivatives
        are finite where torch's are: products for integers (any sign of x),
        sqrt and rsqrt for halves, otherwise exp(p log x) on x > 0 only
        (x = 0 gives 0, or inf for p < 0; x < 0 NaN, as in torch), with log
        taken of 1 elsewhere so that no branch's derivative is NaN."""
        if exponent == 1:
            return x
        if exponent == 0:
            return self.constant_like(1.0, x)
        if exponent == 0.5:
            return self.elementwise(node, "math.sqrt", [x])
        if exponent == -0.5:
            return self.elementwise(node, "math.rsqrt", [x])
        if float(exponent).is_integer() and abs(exponent) <= 1 << 20:
            # x^-n as (1/x)^n: at 0 its derivative is -inf, as torch's, not
            # the NaN of -(x^n)'/(x^n)^2.
            base = x if exponent > 0 else self.elementwise(node, "arith.divf", [1.0, x])
            return self.integer_power(node, base, int(abs(exponent)))
        positive = self.compare(node, "ogt", [x, 0.0])
        safe = self.select(node, positive, x, 1.0)
        logarithm = self.elementwise(node, "math.log", [safe])
        general = self.elementwise(
            node, "math.exp", [self.elementwise(node, "arith.mulf", [logarithm, float(exponent)])]
        )
        at_zero = self.constant_like(0.0 if exponent > 0 else float("inf"), x)
        otherwise = self.select(node, self.compare(node, "oeq", [x, 0.0]), at_zero, float("nan"))
        return self.select(node, positive, general, otherwise)

    def integer_power(self, node: torch.fx.Node, x: Value, exponent: int) -> Value:
        """x ** n for n >= 1 by repeated squaring: about 2 log2(n) products."""
        result: Value | None = None
        square = x
        while exponent:
            if exponent & 1:
                result = square if result is None else \
                    self.elementwise(node, "arith.mulf", [result, square])
            exponent >>= 1
            if exponent:
                square = self.elementwise(node, "arith.mulf", [square, square])
        assert result is not None
        return result

    def component_sum(self, node: torch.fx.Node, x: Value, op: str = "component_sum") -> Value:
        """A reduction of each element's features: seg.component_sum (or
        seg.component_max / seg.component_min)."""
        if x.tail == (1,):  # a scalar column's one feature: the scalar itself
            return Value(x.name, x.kind, (), x.uniform)
        if not is_feature_tail(x.tail):
            raise self.fail(node, "only the last dimension of (N, F) rows can be reduced "
                                  f"(a reduction over a {x.tail or 'scalar'} element)")
        result = Value(self.fresh(), "float", (), x.uniform)
        self.emit(f"{result.name} = seg.{op} {x.name} : {self.ty(x)} -> {self.ty(result)}")
        return result

    # -- the graph ---------------------------------------------------------

    def operand(self, node: torch.fx.Node, value: Any) -> Value | float:
        if isinstance(value, torch.fx.Node):
            result = self.values[value]
            if isinstance(result, Value) and result.kind in ("size", "idx", "gidx"):
                what = "num_segments" if result.kind == "size" else "an index"
                raise self.fail(node, f"'{node.target}' uses {what} as a value, which "
                                      "segops.jit cannot hold")
            return result
        if isinstance(value, (bool, int, float)) and not isinstance(value, bool):
            return float(value)
        raise self.fail(node, f"'{node.target}' has an argument of type "
                              f"{type(value).__name__}, which segops.jit cannot hold")

    def tensor(self, node: torch.fx.Node, value: Any) -> Value:
        result = self.operand(node, value)
        if not isinstance(result, Value) or result.kind != "float":
            raise self.fail(node, f"'{node.target}' needs a float tensor here")
        return result

    def viewed(self, node: torch.fx.Node, value: Any) -> Value:
        """The operand of a view: a float tensor, or a bool one (a
        comparison viewed as a column for where())."""
        result = self.operand(node, value)
        if isinstance(result, Value) and result.kind == "bool":
            return result
        return self.tensor(node, value)

    def segment_op(self, node: torch.fx.Node, name: str) -> Value:
        segment_op = OPS[name]
        call = operator_call(name, node.args)
        if call is None:
            raise self.fail(node, f"{name}: arguments do not fit its signature")
        tensors = []
        for a, space in zip(call.arguments, segment_op.operand_spaces):
            tensor = self.tensor(node, a)
            if tensor.uniform and space == ROW:
                raise self.fail(node, f"{name} takes rows here, not a uniform value (a 0-d "
                                      "or per-feature tensor)")
            tensors.append(self.place(node, tensor, space))
        idx = call.idx
        if name == "segmented_gather" and isinstance(idx, torch.fx.Node) \
                and isinstance(self.values.get(idx), Value) and self.values[idx].kind == "gidx":
            return self.gather_rows(node, tensors[0], self.values[idx])
        if not isinstance(idx, torch.fx.Node) or self.values.get(idx) is None \
                or self.values[idx].kind != "idx":
            raise self.fail(node, f"{name}: idx must be the function's index argument")
        if self.idx_node is not None and idx is not self.idx_node:
            raise self.fail(node, f"{name}: all segment ops must share one idx (this one "
                                  "uses a different index tensor)")
        self.idx_node = idx
        return self.apply_segment_op(node, name, tensors)

    def apply_segment_op(self, node: torch.fx.Node, name: str, tensors: list[Value]) -> Value:
        """Seg op `name` of `tensors` (placed in its operands' spaces) by
        the function's index; its result has the shape of `node`'s value."""
        segment_op = OPS[name]
        if any(t.tail == (1,) for t in tensors):
            raise self.fail(node, f"{name}: a scalar column (N, 1) is not a row tensor")
        tail = tuple(node.meta["val"].shape[1:])
        result = Value(self.fresh(), "float", tail)
        operands = ", ".join(t.name for t in tensors) + ", %idx"
        types = ", ".join(self.ty(t) for t in tensors) + ", tensor<?xi32>"
        if segment_op.takes_count:
            operands += f", {self.size().name}"
        self.emit(f"{result.name} = {segment_op.seg_op} {operands} : {types} -> "
                  f"{self.ty(result)}")
        return result

    def gather_rows(self, node: torch.fx.Node, table: Value, index: Value) -> Value:
        """x[j] by a second index j: the table's rows read in the kernel
        (seg.gather_rows), where the table is an argument."""
        if table.name not in self.tables:
            raise self.fail(node, "a gather by a second index reads a table argument, not a "
                                  "value computed in the function")
        result = Value(self.fresh(), "float", table.tail)
        self.emit(f"{result.name} = seg.gather_rows {table.name}, {index.name} : "
                  f"{self.ty(table)}, tensor<?xi32> -> {self.ty(result)}")
        return result

    def size(self) -> Value:
        if self.size_value is None:
            raise JitError("segops.jit: the function needs a num_segments (int) argument")
        return self.size_value

    def call(self, node: torch.fx.Node) -> Value | float:
        target = node.target
        namespace = getattr(target, "namespace", "")
        packet = target.__name__.split(".")[0] if hasattr(target, "__name__") else str(target)
        args, kwargs = list(node.args), dict(node.kwargs)
        if target is operator.getitem and isinstance(self.values.get(args[0]), tuple):
            return self.values[args[0]][args[1]]  # one of a decomposition's results
        if namespace == "segops" and packet in OPS:
            return self.segment_op(node, packet)
        if namespace == "prims" and packet == "convert_element_type":
            packet, kwargs = "_to_copy", {"dtype": args[1]}
        elif isinstance(target, type) and issubclass(target, tuple):
            return tuple(self.values.get(a, a) if isinstance(a, torch.fx.Node) else a
                         for a in args)  # a decomposition's named results
        elif namespace == "prims" and (packet in _UNARY or packet in _BINARY
                                       or packet in _jit_pointwise.LOWERINGS):
            pass  # a prim of the same name and meaning as the aten op
        elif namespace != "aten":
            raise self.fail(node, f"'{target}' is not supported in segops.jit functions")
        constant = _jit_pointwise.scalar_constant(node)
        if constant is not None:
            return constant
        if packet in VIEWS and packet not in _IDENTITIES and \
                isinstance(self.values.get(args[0]), Value) and self.values[args[0]].uniform:
            return self.uniform_view(node, self.tensor(node, args[0]))
        handler = _HANDLERS.get(packet)
        if handler is not None:
            return handler(self, node, packet, args, kwargs)
        return self.lower_otherwise(node, packet, args, kwargs)

    def lower_otherwise(self, node: torch.fx.Node, packet: str, args: list[Any],
                        kwargs: dict[str, Any]) -> Value | float:
        """An op no handler takes (or takes in this form): a pointwise
        lowering of _jit_pointwise, else PyTorch's decomposition of it."""
        lowering = _jit_pointwise.LOWERINGS.get(packet)
        if lowering is not None:
            return lowering(_jit_pointwise.Emitter(self, node),
                            [self.lowering_argument(node, a) for a in args], kwargs)
        return self.decompose(node)

    def lowering_argument(self, node: torch.fx.Node, value: Any) -> Any:
        """An argument of a pointwise lowering: values and numbers as
        operands; anything else (a rounding mode, a dtype) as it is."""
        if isinstance(value, torch.fx.Node) or \
                (isinstance(value, (int, float)) and not isinstance(value, bool)):
            return self.operand(node, value)
        return value

    def decompose(self, node: torch.fx.Node) -> Value | float:
        """An op outside the table through its entry in PyTorch's
        decomposition table: the decomposition traced on stand-ins of the
        node's operands and its ops translated in place (reported at the
        node's line)."""
        graph = None
        if _is_decomposed(node.target) and node.target not in self.decomposing:
            graph = _decomposition_graph(node)
        if graph is None:
            raise self.fail(node, f"'{node.target}' is not supported in segops.jit functions "
                                  "(see docs/jit.md for the supported operations)")
        placeholders = [n for n in graph.nodes if n.op == "placeholder"]
        for placeholder, argument in zip(placeholders, _node_operands(node)):
            self.values[placeholder] = self.values[argument]
        result: Any = None
        self.decomposing.add(node.target)  # a decomposition into itself is refused
        for sub in graph.nodes:
            if sub.op == "call_function":
                self.stand_in[sub] = self.stand_in.get(node, node)
                self.values[sub] = self.call(sub)
            elif sub.op == "get_attr":
                raise self.fail(node, f"the decomposition of '{node.target}' builds a tensor "
                                      "constant, which segops.jit cannot hold")
            elif sub.op == "output":
                out = sub.args[0]
                if isinstance(out, (list, tuple)):
                    result = tuple(self.values[o] if isinstance(o, torch.fx.Node) else o
                                   for o in out)
                else:
                    result = self.values[out] if isinstance(out, torch.fx.Node) else out
        self.decomposing.discard(node.target)
        return result

    def uniform_view(self, node: torch.fx.Node, x: Value) -> Value:
        """A view of a uniform value: another uniform shape, or the value
        expanded over rows or segments."""
        shape = tuple(concrete(d) for d in node.meta["val"].shape)
        if uniform_tail(shape) == x.tail or (shape[:1] == (1,) and x.tail and shape[1:] == x.tail):
            return x  # (1, F) broadcasts over rows as (F,) does
        space = self.node_space(node)
        tail = shape[1:]
        if space is not None and (tail == () or is_feature_tail(tail)) and \
                x.tail in ((), tail):
            placed = self.place(node, x, space)
            return self.broadcast(placed, tail) if tail and placed.tail == () else placed
        raise self.fail(node, f"'{node.target}' of a uniform value to shape {shape} is not "
                              "supported")

    def constant(self, node: torch.fx.Node, tensor: Any) -> Value:
        """A tensor constant of the function (built in its body, or
        captured): a trailing uniform argument of the kernel."""
        shape = tuple(tensor.shape) if isinstance(tensor, torch.Tensor) else None
        tail = uniform_tail(shape) if shape is not None else None
        if tail is None or tensor.dtype == torch.bool or tensor.is_complex():
            raise JitError(f"segops.jit: {self.fn.__name__} uses a tensor constant of shape "
                           f"{shape}; constants must be 0-d or (F,) real tensors "
                           "(pass larger ones as arguments)")
        if tensor.requires_grad:
            raise JitError(f"segops.jit: {self.fn.__name__} uses a captured tensor that requires "
                           "grad; pass it as an argument to get its gradient")
        self.constants.append(tensor)
        value = Value(f"%c{len(self.constants)}", "float", tail, uniform=True)
        self.constant_params.append(f"{value.name}: {value.mlir_type(self.element)}"
                                    ' {seg.space = "segment"}')
        return value

    def is_table(self, position: int) -> bool:
        """Whether argument `position` is read by a second index."""
        return self.spaces is not None and self.spaces[position] == TABLE

    def space(self, position: int) -> str:
        """The argument's space: as given, or where its length tells it (the
        compiler infers the rest from the seg ops): rows of idx, or
        num_segments."""
        if self.spaces is not None:
            space = self.spaces[position]
            return ' {seg.space = "segment"}' if space in (SEGMENT, "uniform") \
                else ' {seg.space = "row"}' if space == ROW else ""
        rows = concrete(self.args[self.idx_position].shape[0])
        segments = concrete(self.args[self.size_position])
        length = concrete(self.args[position].shape[0])
        if self.args[position].dim() == 3:
            return ""  # matrices are per segment anyway
        if length == rows and length != segments:
            return ' {seg.space = "row"}'
        if length == segments and length != rows:
            return ' {seg.space = "segment"}'
        return ""

    def translate(self, graph: torch.fx.Graph | torch.fx.GraphModule, signature: Signature,
                  element: str) -> str:
        """The kernel function of `graph` (of a GraphModule: its tensor
        constants become trailing uniform arguments, self.constants)."""
        module = graph if isinstance(graph, torch.fx.GraphModule) else None
        graph = module.graph if module is not None else graph
        self.element = element
        self.idx_position = signature.idx_position
        self.size_position = signature.size_position
        self.ordered = [n for n in graph.nodes if n.op == "call_function"]
        placeholders = [n for n in graph.nodes if n.op == "placeholder"]
        params = []
        for position, node in enumerate(placeholders):
            value = self.args[position]
            if isinstance(value, torch.Tensor):
                if position == signature.idx_position:
                    v = Value("%idx", "idx")
                elif position in signature.gather_indices:
                    v = Value(f"%j{position}", "gidx")
                elif self.spaces is not None and self.spaces[position] == "uniform":
                    v = Value(f"%a{position}", "float", uniform_tail(tuple(value.shape)),
                              uniform=True)
                else:
                    v = Value(f"%a{position}", "float",
                              tuple(concrete(d) for d in value.shape[1:]))
                    if self.is_table(position):
                        self.tables.add(v.name)
                self.values[node] = v
                params.append(f"{v.name}: {v.mlir_type(element)}{self.space(position)}")
            elif position == signature.size_position:
                self.size_value = Value("%num_segments", "size")
                params.append("%num_segments: index")
                self.values[node] = self.size_value
            else:
                self.values[node] = float(value)
        results: list[Value] = []
        for node in graph.nodes:
            if node.op == "get_attr" and module is not None:
                self.values[node] = self.constant(node, getattr(module, node.target))
            elif node.op == "call_function":
                self.values[node] = self.call(node)
            elif node.op == "output":
                flat = node.args[0]
                self.single = not isinstance(flat, (list, tuple))
                flat = [flat] if self.single else flat
                for out in flat:
                    value = self.values.get(out) if isinstance(out, torch.fx.Node) else None
                    if isinstance(value, Value) and value.uniform:
                        raise JitError(f"segops.jit: {self.fn.__name__} returns a value computed "
                                       "from uniform values only (0-d or per-feature tensors): "
                                       "return it from outside the function")
                    if not isinstance(value, Value) or value.kind != "float":
                        raise JitError(f"segops.jit: {self.fn.__name__} must return float "
                                       f"tensors of shape (N,), (N, F), (S,), (S, F) or "
                                       f"(S, 3, 3); got {out!r}")
                    if value.tail == (1,):
                        self.column_results.append(len(results))
                    results.append(value)
        if not results:
            raise JitError(f"segops.jit: {self.fn.__name__} returns nothing")
        params += self.constant_params
        header = (f"func.func @{self.name}({', '.join(params)}) -> "
                  f"({', '.join(self.ty(r) for r in results)}) {{")
        ret = (f"  return {', '.join(r.name for r in results)} : "
               f"{', '.join(self.ty(r) for r in results)}")
        return "\n".join([header, *self.lines, ret, "}", ""])


# --------------------------------------------------------------------------
# The aten ops Translator.call lowers itself: handler(translator, node,
# packet, args, kwargs). A form a handler does not take goes on to
# Translator.lower_otherwise.
# --------------------------------------------------------------------------


@lowers(*_IDENTITIES)
def _identity(t: Translator, node: torch.fx.Node, packet: str, args: list, kwargs: dict) -> Any:
    return t.operand(node, args[0])


@lowers(*_UNARY)
def _unary(t: Translator, node: torch.fx.Node, packet: str, args: list, kwargs: dict) -> Any:
    return t.elementwise(node, _UNARY[packet], [t.tensor(node, args[0])])


@lowers("sigmoid")
def _sigmoid(t: Translator, node: torch.fx.Node, packet: str, args: list, kwargs: dict) -> Any:
    return t.sigmoid(node, t.tensor(node, args[0]))


@lowers("reciprocal")
def _reciprocal(t: Translator, node: torch.fx.Node, packet: str, args: list,
                kwargs: dict) -> Any:
    return t.elementwise(node, "arith.divf", [1.0, t.tensor(node, args[0])])


@lowers(*_BINARY)
def _binary(t: Translator, node: torch.fx.Node, packet: str, args: list, kwargs: dict) -> Any:
    if len(args) != 2 or kwargs:  # add(x, y, alpha=...): decomposed
        return t.lower_otherwise(node, packet, args, kwargs)
    return t.elementwise(node, _BINARY[packet], [t.operand(node, a) for a in args[:2]])


@lowers("rsub")
def _rsub(t: Translator, node: torch.fx.Node, packet: str, args: list, kwargs: dict) -> Any:
    return t.elementwise(node, "arith.subf",
                         [t.operand(node, args[1]), t.operand(node, args[0])])


@lowers(*_COMPARISONS)
def _comparison(t: Translator, node: torch.fx.Node, packet: str, args: list,
                kwargs: dict) -> Any:
    return t.compare(node, _COMPARISONS[packet], [t.operand(node, a) for a in args[:2]])


@lowers("where")
def _where(t: Translator, node: torch.fx.Node, packet: str, args: list, kwargs: dict) -> Any:
    condition = t.operand(node, args[0])
    if not isinstance(condition, Value) or condition.kind != "bool":
        raise t.fail(node, "where() needs a comparison as its condition")
    return t.select(node, condition, t.operand(node, args[1]), t.operand(node, args[2]))


@lowers("clamp", "clamp_min", "clamp_max")
def _clamp(t: Translator, node: torch.fx.Node, packet: str, args: list, kwargs: dict) -> Any:
    x = t.tensor(node, args[0])
    if packet == "clamp":
        low = args[1] if len(args) > 1 else kwargs.get("min")
        high = args[2] if len(args) > 2 else kwargs.get("max")
    else:
        low, high = (args[1], None) if packet == "clamp_min" else (None, args[1])
    # torch.clamp's gradient flows where low <= x <= high: selects.
    if low is not None:
        low = t.operand(node, low)
        x = t.select(node, t.compare(node, "olt", [x, low]), low, x)
    if high is not None:
        high = t.operand(node, high)
        x = t.select(node, t.compare(node, "ogt", [x, high]), high, x)
    return x


@lowers("square")
def _square(t: Translator, node: torch.fx.Node, packet: str, args: list, kwargs: dict) -> Any:
    x = t.tensor(node, args[0])
    return t.elementwise(node, "arith.mulf", [x, x])


@lowers("sum")
def _sum(t: Translator, node: torch.fx.Node, packet: str, args: list, kwargs: dict) -> Any:
    if len(args) < 2:  # a sum of everything: decomposed
        return t.lower_otherwise(node, packet, args, kwargs)
    dims = [d % 2 for d in args[1]] if isinstance(args[1], (list, tuple)) else []
    keepdim = args[2] if len(args) > 2 else kwargs.get("keepdim", False)
    if dims != [1]:
        raise t.fail(node, "only x.sum(-1) over (N, F) rows is supported (a "
                           "reduction over rows is segops.segmented_sum)")
    total = t.component_sum(node, t.tensor(node, args[0]))
    return Value(total.name, total.kind, (1,)) if keepdim else total


@lowers("amax", "amin")
def _extreme(t: Translator, node: torch.fx.Node, packet: str, args: list, kwargs: dict) -> Any:
    dims = args[1] if len(args) > 1 else kwargs.get("dim", [])
    keepdim = args[2] if len(args) > 2 else kwargs.get("keepdim", False)
    if [d % 2 for d in dims] != [1]:
        raise t.fail(node, f"only x.{packet}(-1) over (N, F) rows is supported (a "
                           "reduction over rows is segops.segmented_max/min)")
    op = "component_max" if packet == "amax" else "component_min"
    total = t.component_sum(node, t.tensor(node, args[0]), op)
    return Value(total.name, total.kind, (1,)) if keepdim else total


@lowers("linalg_vector_norm")
def _vector_norm(t: Translator, node: torch.fx.Node, packet: str, args: list,
                 kwargs: dict) -> Any:
    order = args[1] if len(args) > 1 else kwargs.get("ord", 2)
    dims = args[2] if len(args) > 2 else kwargs.get("dim")
    keepdim = args[3] if len(args) > 3 else kwargs.get("keepdim", False)
    if order != 2 or list(dims or []) not in ([-1], [1]) or keepdim:
        raise t.fail(node, "only torch.linalg.vector_norm(x, dim=-1) (2-norm of "
                           "(N, F) rows) is supported")
    x = t.tensor(node, args[0])
    squares = t.elementwise(node, "arith.mulf", [x, x])
    return t.elementwise(node, "math.sqrt", [t.component_sum(node, squares)])


@lowers("unsqueeze", "view", "reshape", "_unsafe_view")
def _view(t: Translator, node: torch.fx.Node, packet: str, args: list, kwargs: dict) -> Any:
    x = t.viewed(node, args[0])
    shape = tuple(node.meta["val"].shape)
    if x.tail == () and len(shape) == 2 and shape[1] == 1:
        return Value(x.name, x.kind, (1,))
    if x.tail == (1,) and len(shape) == 1:
        return Value(x.name, x.kind, ())  # the column back to its scalars
    if tuple(node.meta["val"].shape[1:]) == x.tail:
        return x
    raise t.fail(node, f"'{node.target}' to shape {tuple(shape)} is not supported "
                       "(only w[:, None] for a per-row scalar w)")


@lowers("slice")
def _slice(t: Translator, node: torch.fx.Node, packet: str, args: list, kwargs: dict) -> Any:
    if _is_whole_slice(node, args):
        return t.tensor(node, args[0])  # x[:, None] begins with x[:]
    return t.lower_otherwise(node, packet, args, kwargs)


@lowers("slice_scatter")
def _slice_scatter(t: Translator, node: torch.fx.Node, packet: str, args: list,
                   kwargs: dict) -> Any:
    if _is_whole_slice(node, [args[0]] + args[2:]):
        return t.tensor(node, args[1])  # its backward: the whole of src
    return t.lower_otherwise(node, packet, args, kwargs)


@lowers("squeeze")
def _squeeze(t: Translator, node: torch.fx.Node, packet: str, args: list, kwargs: dict) -> Any:
    x = t.viewed(node, args[0])
    shape = tuple(node.meta["val"].shape)
    if x.tail == (1,) and len(shape) == 1:
        return Value(x.name, x.kind, ())
    if shape[1:] == x.tail:
        return x
    raise t.fail(node, f"'{node.target}' to shape {shape} is not supported")


@lowers("expand", "expand_as")
def _expand(t: Translator, node: torch.fx.Node, packet: str, args: list, kwargs: dict) -> Any:
    x = t.tensor(node, args[0])
    tail = tuple(node.meta["val"].shape[1:])
    if tail == x.tail and x.tail != (1,):
        return x  # to its own shape
    if x.tail == (1,) and is_feature_tail(tail):
        return t.broadcast(x, tail)
    raise t.fail(node, f"'{node.target}' is only supported from (N, 1) to (N, F)")


# The aten ops (overload packet names) Translator.call lowers itself.
SUPPORTED_ATEN = frozenset(_HANDLERS)



def is_supported(node: torch.fx.Node) -> bool:
    """Whether Translator.call takes an aten node: in its table, or through
    a decomposition into ops it takes."""
    target = node.target
    if target is torch.ops.prims.convert_element_type.default:
        return True  # a mask to floats (max's backward): call translates it
    if getattr(target, "namespace", "") != "aten":
        return False
    packet = target.__name__.split(".")[0]
    if packet in SUPPORTED_ATEN or packet in _jit_pointwise.LOWERINGS:
        return True
    if not _is_decomposed(target):
        return False
    key = (target, _signature_of(node))
    found = _DECOMPOSABLE.get(key)
    if found is None:
        graph = _decomposition_graph(node)
        found = graph is not None and all(
            is_supported(sub) or _jit_pointwise.scalar_constant(sub) is not None
            or (getattr(sub.target, "namespace", "") == "prims"
                and sub.target.__name__.startswith("convert_element_type"))
            for sub in graph.nodes if sub.op == "call_function")
        _DECOMPOSABLE[key] = found
    return found


def _is_decomposed(target: Any) -> bool:
    """Only pointwise ops are decomposed: not mm or softmax, and not views,
    whose decompositions are other views (slice <-> as_strided, endlessly)."""
    return torch.Tag.pointwise in getattr(target, "tags", ())


# (op, argument signature) -> whether its decomposition is supported: the
# fusion pass asks about every node, several times per graph.
_DECOMPOSABLE: dict[tuple[Any, tuple], bool] = {}


def _signature_of(node: torch.fx.Node) -> tuple:
    """What a decomposition may depend on: the operands' dtypes and ranks,
    and the other arguments as they are."""
    flat, _ = pytree.tree_flatten((node.args, node.kwargs))
    signature = []
    for a in flat:
        value = a.meta.get("val") if isinstance(a, torch.fx.Node) else a
        if isinstance(value, torch.Tensor):
            signature.append((value.dtype, value.dim()))
        elif isinstance(value, (int, float, bool, str, type(None), torch.dtype)):
            signature.append(value)
        else:
            signature.append(type(value).__name__)
    return tuple(signature)


def _node_operands(node: torch.fx.Node) -> list[torch.fx.Node]:
    """The graph values among a node's arguments, in argument order."""
    flat, _ = pytree.tree_flatten((node.args, node.kwargs))
    return [a for a in flat if isinstance(a, torch.fx.Node)]


def _decompositions() -> dict[Any, Callable]:
    from torch._decomp import decomposition_table
    return decomposition_table


def _decomposition_graph(node: torch.fx.Node) -> torch.fx.Graph | None:
    """The aten graph of `node`'s decomposition, traced on meta stand-ins
    of its operands (None where PyTorch has none, or it cannot be traced)."""
    decomposition = _decompositions().get(node.target)
    if decomposition is None:
        return None
    flat, spec = pytree.tree_flatten((node.args, node.kwargs))
    positions = [i for i, a in enumerate(flat) if isinstance(a, torch.fx.Node)]
    stand_ins = []
    for position in positions:
        value = flat[position].meta.get("val")
        if not isinstance(value, torch.Tensor):
            return None
        stand_ins.append(meta_like(value))

    def run(*tensors: torch.Tensor) -> Any:
        values = list(flat)
        for position, tensor in zip(positions, tensors):
            values[position] = tensor
        args, kwargs = pytree.tree_unflatten(values, spec)
        return decomposition(*args, **kwargs)

    try:
        return make_fx(run)(*stand_ins).graph
    except Exception:  # noqa: BLE001 - an untraceable decomposition is no decomposition
        return None


def _float_literal(value: float) -> str:
    """A float as MLIR parses it: the mantissa needs a point (1.0e-05, not
    Python's 1e-05)."""
    text = repr(value)
    mantissa, e, exponent = text.partition("e")
    if "." not in mantissa:
        mantissa += ".0"
    return mantissa + e + exponent


def _is_whole_slice(node: torch.fx.Node, args: list) -> bool:
    """Whether slice-like args (x, dim, start, end, step) take all rows."""
    dim, start, end, step = (list(args[1:]) + [0, None, None, 1][len(args) - 1:])[:4]
    return (dim == 0 and start in (None, 0) and step == 1
            and (end is None or (isinstance(end, int) and end >= sys.maxsize)))


def trace(fn: Callable, args: Sequence[Any]) -> torch.fx.GraphModule:
    """The aten graph of `fn` on fake copies of `args` (tensor constants
    of the function kept as the module's attributes)."""
    try:
        with _columns.rows_as_written():
            return make_fx(fn, tracing_mode="fake", _allow_non_fake_inputs=True)(*args)
    except JitError:
        raise
    except Exception as error:  # noqa: BLE001 - reported with the user's line
        line = source_line(fn, traceback.extract_tb(sys.exc_info()[2]))
        message = str(error).splitlines()[0] if str(error) else type(error).__name__
        if "data-dependent" in str(error) or "_local_scalar_dense" in str(error):
            message = ("data-dependent Python control flow (a branch or loop on a "
                       "tensor's values) cannot be compiled; use torch.where")
        raise JitError(f"segops.jit: cannot trace {fn.__name__}: {message}\n  at {line}") from None


# The lengths of rows and segments a function is traced with: distinct from
# each other and from uniform values' lengths, so a traced value's length
# tells its space; a second pair tells whether the function uses a length
# as a value (its IR then differs). Arguments whose space their length
# cannot tell (rows and segments alike long) are placed by a trace with
# both lengths equal.
_TRACE_LENGTHS = ((13, 7), (19, 11))
_EQUAL_LENGTHS = 17
# Tables (read at rows a second index names) have a length of their own.
_TABLE_LENGTH = 23


def trace_arguments(args: Sequence[Any], spaces: Sequence[str | None], signature: Signature,
                    rows: int, segments: int) -> list[Any]:
    """Stand-ins for `args` with `rows` rows and `segments` segments (CPU
    tensors of the arguments' dtypes; no data is read)."""
    result: list[Any] = []
    for position, (value, space) in enumerate(zip(args, spaces)):
        if position == signature.size_position:
            result.append(segments)
        elif isinstance(value, torch.Tensor):
            tail = tuple(concrete(d) for d in value.shape[1:])
            if position == signature.idx_position or space == ROW \
                    or position in signature.gather_indices:
                shape = (rows, *tail)
            elif space == TABLE:
                shape = (_TABLE_LENGTH, *tail)
            elif space == "uniform":
                shape = tuple(concrete(d) for d in value.shape)
            else:  # per segment, or placed by the equal-lengths trace
                shape = (segments if space == SEGMENT else rows, *tail)
            result.append(torch.empty(shape, dtype=value.dtype))
        else:
            result.append(value)
    return result


def infer_spaces(fn: Callable, module: torch.fx.GraphModule, spaces: Sequence[str | None],
                 length: int) -> list[str | None]:
    """Spaces for the "ambiguous" arguments, from the data flow of a trace
    in which rows and segments are both `length` long: segment ops fix
    their operands' and results' spaces, elementwise ops and views share
    theirs. An argument nothing places is taken per row."""
    parent: dict[torch.fx.Node, torch.fx.Node] = {}
    fixed: dict[torch.fx.Node, str] = {}

    def find(node: torch.fx.Node) -> torch.fx.Node:
        while parent.get(node, node) is not node:
            node = parent[node]
        return node

    def conflict() -> JitError:
        return JitError(f"segops.jit: {fn.__name__} uses a value both per row and per segment")

    def fix(node: torch.fx.Node, space: str) -> None:
        root = find(node)
        if fixed.setdefault(root, space) != space:
            raise conflict()

    def union(a: torch.fx.Node, b: torch.fx.Node) -> None:
        ra, rb = find(a), find(b)
        if ra is rb:
            return
        if ra in fixed and rb in fixed and fixed[ra] != fixed[rb]:
            raise conflict()
        parent[ra] = rb
        if ra in fixed:
            fixed[rb] = fixed.pop(ra)

    def spans(node: Any) -> bool:
        value = node.meta.get("val") if isinstance(node, torch.fx.Node) else None
        return (isinstance(value, torch.Tensor) and value.dim() >= 1
                and value.dtype not in INDEX_DTYPES and concrete(value.shape[0]) == length)

    placeholders = [n for n in module.graph.nodes if n.op == "placeholder"]
    for node, space in zip(placeholders, spaces):
        if space in (ROW, SEGMENT):
            fix(node, space)
    for node in module.graph.nodes:
        if node.op != "call_function":
            continue
        packet = node.target.__name__.split(".")[0] if hasattr(node.target, "__name__") else ""
        if getattr(node.target, "namespace", "") == "segops" and packet in OPS:
            op = OPS[packet]
            for operand, space in zip(node.args, op.operand_spaces):
                if spans(operand):
                    fix(operand, space)
            fix(node, op.result_space)
        elif spans(node):
            for operand in _flat_nodes((node.args, node.kwargs)):
                if spans(operand):
                    union(operand, node)
    return [fixed.get(find(node), ROW) if space == "ambiguous" else space
            for node, space in zip(placeholders, spaces)]


def _flat_nodes(tree: Any) -> list[torch.fx.Node]:
    nodes: list[torch.fx.Node] = []
    torch.fx.node.map_arg(tree, nodes.append)
    return nodes


@dataclass
class Traced:
    """A function's kernel function for one specialization."""

    source: str
    single: bool  # it returns one tensor, not a tuple
    spaces: list[str | None]  # per argument, as traced
    constants: list[torch.Tensor]  # its tensor constants: trailing arguments
    column_results: tuple[int, ...] = ()  # results of shape (L, 1): the kernel's are (L,)


def to_mlir(fn: Callable, name: str, args: Sequence[Any], signature: Signature,
            element: str, spaces: Sequence[str | None],
            on_source: Callable[[str], None] | None = None) -> Traced:
    """The seg IR of `fn` for arguments like `args`, whose spaces are
    "row", "segment", "uniform", or "ambiguous" (rows and segments alike
    long: placed from the data flow). Traced with lengths of its own, so no
    coincidence of the call's sizes shapes the kernel; a function that uses
    a length as a value is a JitError. `on_source(source)` runs between the
    first trace and the check (compilation may start meanwhile)."""
    # Inside torch.compile: real stand-ins, and make_fx's own fake mode (not
    # the compile's, whose shape environment would get guards it cannot
    # source).
    with torch._guards.tracing(None), _disable_current_modes():
        spaces = list(spaces)
        if "ambiguous" in spaces:
            equal = trace(fn, trace_arguments(args, spaces, signature, _EQUAL_LENGTHS,
                                              _EQUAL_LENGTHS))
            spaces = infer_spaces(fn, equal, spaces, _EQUAL_LENGTHS)

        def translate(rows: int, segments: int) -> tuple[str, Translator]:
            stand_ins = trace_arguments(args, spaces, signature, rows, segments)
            translator = Translator(fn, name, stand_ins, spaces, rows, segments)
            return translator.translate(trace(fn, stand_ins), signature, element), translator

        (rows, segments), (other_rows, other_segments) = _TRACE_LENGTHS
        source, translator = translate(rows, segments)
        if on_source is not None:
            on_source(source)
        if translate(other_rows, other_segments)[0] != source:
            what = ("the number of rows (a tensor's length)"
                    if translate(other_rows, segments)[0] != source else "num_segments")
            raise JitError(f"segops.jit: {fn.__name__} uses {what} as a value (in arithmetic "
                           "or a shape), which segops.jit cannot hold: kernels take it only as "
                           "the segment count of segment ops")
    return Traced(source, translator.single, spaces, translator.constants,
                  tuple(translator.column_results))
