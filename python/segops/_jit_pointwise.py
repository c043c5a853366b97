"""Pointwise aten ops in the few arith/math primitives seg IR holds.

segops lowers a small set of primitives directly (arith add/sub/mul/div,
max/min, select, comparisons, remf; math exp/log/sqrt/rsqrt/tanh/abs and
sin/cos/atan/erf/expm1/log1p/floor), each with a derivative rule in the seg
dialect, so every op written here differentiates to any order. The ops of
PyTorch's core ATen set are written in those primitives below, in forms
whose values and derivatives stay finite where eager's do; any other op
with an entry in PyTorch's decomposition tables (silu, gelu, softplus,
mish, elu, hardtanh, ...) is decomposed into ops of this table, as Inductor
does (`Translator.decompose`).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, Protocol

import torch

Value = Any  # a value of the kernel function being built (_jit_trace.Value)
Operand = Any  # a Value, or a Python float


class Translator(Protocol):
    """What the primitives are emitted through: _jit_trace's Translator,
    which decomposes the ops it does not lower directly with this module."""

    def as_float(self, value: Operand) -> Operand: ...

    def elementwise(self, node: torch.fx.Node, op: str, operands: list[Operand]) -> Value: ...

    def compare(self, node: torch.fx.Node, predicate: str, operands: list[Operand]) -> Value: ...

    def select(self, node: torch.fx.Node, condition: Value, a: Operand, b: Operand) -> Value: ...

    def constant_like(self, constant: float, like: Value) -> Value: ...


class Emitter:
    """Primitive ops for one aten node: every op emitted is reported at
    the node's source line."""

    def __init__(self, translator: Translator, node: torch.fx.Node) -> None:
        self.t = translator
        self.node = node

    def op(self, name: str, *operands: Operand) -> Value:
        return self.t.elementwise(self.node, name, list(operands))

    def cmp(self, predicate: str, a: Operand, b: Operand) -> Value:
        return self.t.compare(self.node, predicate, [self.t.as_float(a), self.t.as_float(b)])

    def where(self, condition: Value, a: Operand, b: Operand) -> Value:
        return self.t.select(self.node, condition, a, b)

    def constant(self, value: float, like: Value) -> Value:
        return self.t.constant_like(value, like)

    def add(self, a: Operand, b: Operand) -> Value:
        return self.op("arith.addf", a, b)

    def sub(self, a: Operand, b: Operand) -> Value:
        return self.op("arith.subf", a, b)

    def mul(self, a: Operand, b: Operand) -> Value:
        return self.op("arith.mulf", a, b)

    def div(self, a: Operand, b: Operand) -> Value:
        return self.op("arith.divf", a, b)

    def neg(self, a: Operand) -> Value:
        return self.op("arith.negf", a)

    def floor(self, x: Operand) -> Value:
        return self.op("math.floor", x)

    def ceil(self, x: Operand) -> Value:
        return self.neg(self.floor(self.neg(x)))

    def trunc(self, x: Operand) -> Value:
        return self.where(self.cmp("olt", x, 0.0), self.ceil(x), self.floor(x))

    def odd(self, x: Operand) -> Value:
        """Whether x (positive or negative, the row's sign) names an
        odd integer."""
        return self.cmp("une", self.floor(self.mul(x, 0.5)), self.mul(x, 0.5))

    def round_half_even(self, x: Operand) -> Value:
        """torch.round: to the nearest integer, ties to even, from floor
        (x - floor(x) is exact; x + 0.5 would round up 0.49999997)."""
        low = self.floor(x)
        fraction = self.sub(x, low)
        up = self.add(low, 1.0)
        tie = self.where(self.odd(low), up, low)
        nearest = self.where(self.cmp("olt", fraction, 0.5), low, up)
        return self.where(self.cmp("oeq", fraction, 0.5), tie, nearest)

    def odd_extension(self, x: Operand, positive: Callable[[Operand], Value]) -> Value:
        """An odd function from its branch for x >= 0, as two selected
        branches (|x| would zero the derivative at 0)."""
        return self.where(self.cmp("olt", x, 0.0), self.neg(positive(self.neg(x))), positive(x))

    def is_nan(self, x: Operand) -> Value:
        return self.cmp("uno", x, x)

    def magnitude(self, x: Operand) -> Value:
        return self.op("math.absf", x)

    def bool_of(self, x: Operand) -> Value:
        """A bool row (a comparison, or a float read as nonzero)."""
        if getattr(x, "kind", None) == "bool":
            return x
        return self.cmp("une", x, 0.0)


Lowering = Callable[[Emitter, list[Any], dict[str, Any]], Any]


def _unary(body: Callable[[Emitter, Operand], Value]) -> Lowering:
    return lambda e, args, kwargs: body(e, args[0])


def _binary(body: Callable[[Emitter, Operand, Operand], Value]) -> Lowering:
    return lambda e, args, kwargs: body(e, args[0], args[1])


def _asin(e: Emitter, x: Operand) -> Value:
    # atan(x / sqrt((1 - x)(1 + x))): +-pi/2 at +-1 (x / 0), NaN beyond.
    return e.op("math.atan", e.div(x, e.op("math.sqrt", e.mul(e.sub(1.0, x), e.add(1.0, x)))))


def _acos(e: Emitter, x: Operand) -> Value:
    # 2 atan(sqrt((1 - x) / (1 + x))): no cancellation near 1, pi at -1.
    return e.mul(2.0, e.op("math.atan", e.op("math.sqrt", e.div(e.sub(1.0, x), e.add(1.0, x)))))


def _atan2(e: Emitter, y: Operand, x: Operand) -> Value:
    """The angle of (x, y) from atan of the smaller over the larger
    component, derivatives correct everywhere but the origin (0 there)."""
    half_pi = math.pi / 2
    by_x = e.op("math.atan", e.div(y, x))
    turn = e.where(e.cmp("oge", y, 0.0), e.constant(math.pi, by_x), e.constant(-math.pi, by_x))
    wide = e.where(e.cmp("olt", x, 0.0), e.add(by_x, turn), by_x)
    by_y = e.op("math.atan", e.div(x, y))
    tall = e.where(e.cmp("oge", y, 0.0), e.sub(half_pi, by_y), e.sub(-half_pi, by_y))
    angle = e.where(e.cmp("oge", e.magnitude(x), e.magnitude(y)), wide, tall)
    both_zero = e.cmp("oeq", e.add(e.magnitude(x), e.magnitude(y)), 0.0)
    at_origin = e.where(e.cmp("olt", x, 0.0),
                        e.where(e.cmp("oge", y, 0.0), e.constant(math.pi, by_x),
                                e.constant(-math.pi, by_x)),
                        e.mul(y, 0.0))
    return e.where(both_zero, at_origin, angle)


def _asinh(e: Emitter, x: Operand) -> Value:
    # log1p(a + a^2 / (1 + sqrt(1 + a^2))) for a >= 0: exact near 0.
    def positive(a: Operand) -> Value:
        square = e.mul(a, a)
        return e.op("math.log1p", e.add(a, e.div(square, e.add(1.0, e.op(
            "math.sqrt", e.add(1.0, square))))))
    return e.odd_extension(x, positive)


def _acosh(e: Emitter, x: Operand) -> Value:
    below = e.sub(x, 1.0)
    return e.op("math.log1p", e.add(below, e.op("math.sqrt", e.mul(below, e.add(x, 1.0)))))


def _atanh(e: Emitter, x: Operand) -> Value:
    return e.mul(0.5, e.op("math.log1p", e.div(e.mul(2.0, x), e.sub(1.0, x))))


# pi/2 in three parts (Cody and Waite): k * the first is exact for the
# quotients of any float32 row, the others carry the rest.
_HALF_PI_HIGH = 1.5703125
_HALF_PI_MID = round((math.pi / 2 - _HALF_PI_HIGH) * 2.0**23) / 2.0**23
_HALF_PI_LOW = math.pi / 2 - _HALF_PI_HIGH - _HALF_PI_MID


def _tan(e: Emitter, x: Operand) -> Value:
    """sin(r) / cos(r) of x reduced by multiples of pi/2 (r in [-pi/4,
    pi/4]; -cos(r) / sin(r) for odd multiples): near a pole, r is small and
    sin(r) exact to its last bits, where sin(x) / cos(x) divides by a
    cos(x) that has lost them."""
    k = e.round_half_even(e.mul(x, 2.0 / math.pi))
    r = e.sub(e.sub(e.sub(x, e.mul(k, _HALF_PI_HIGH)), e.mul(k, _HALF_PI_MID)),
              e.mul(k, _HALF_PI_LOW))
    sine, cosine = e.op("math.sin", r), e.op("math.cos", r)
    return e.where(e.odd(k), e.neg(e.div(cosine, sine)), e.div(sine, cosine))


def _sinh(e: Emitter, x: Operand) -> Value:
    return e.mul(0.5, e.sub(e.op("math.expm1", x), e.op("math.expm1", e.neg(x))))


def _cosh(e: Emitter, x: Operand) -> Value:
    return e.mul(0.5, e.add(e.op("math.exp", x), e.op("math.exp", e.neg(x))))


def _sign(e: Emitter, x: Operand) -> Value:
    # x * 0 where neither > 0 nor < 0: 0 stays 0, NaN stays NaN, and the
    # derivative is 0 everywhere, as torch's.
    return e.where(e.cmp("ogt", x, 0.0), e.constant(1.0, x),
                   e.where(e.cmp("olt", x, 0.0), e.constant(-1.0, x), e.mul(x, 0.0)))


def _remainder(e: Emitter, a: Operand, b: Operand) -> Value:
    # Python's %: fmod moved into the divisor's sign where the signs differ.
    r = e.op("arith.remf", a, b)
    return e.where(e.cmp("olt", e.mul(r, b), 0.0), e.add(r, b), r)


def _copysign(e: Emitter, a: Operand, b: Operand) -> Value:
    size = e.magnitude(a)
    return e.where(e.cmp("olt", b, 0.0), e.neg(size), size)


def _logaddexp(e: Emitter, a: Operand, b: Operand) -> Value:
    high = e.op("arith.maximumf", a, b)
    low = e.op("arith.minimumf", a, b)
    sum_ = e.add(high, e.op("math.log1p", e.op("math.exp", e.sub(low, high))))
    # Equal operands: high + log 2 (equal infinities would make inf - inf).
    return e.where(e.cmp("oeq", low, high), e.add(high, math.log(2.0)), sum_)


def _xlogy(e: Emitter, x: Operand, y: Operand) -> Value:
    product = e.mul(x, e.op("math.log", y))
    zero = e.where(e.is_nan(y), y, e.mul(x, 0.0)) if not isinstance(y, float) \
        else e.mul(x, 0.0)
    return e.where(e.cmp("oeq", x, 0.0), zero, product)


def _pow(e: Emitter, args: list[Any], kwargs: dict[str, Any]) -> Value:
    base, exponent = args[0], args[1]
    if isinstance(exponent, float):
        return e.t.power(e.node, base, exponent)
    if isinstance(base, float):
        if base > 0:
            return e.op("math.exp", e.mul(exponent, math.log(base)))
        base = e.constant(base, exponent)
    # Tensor exponents: |x|^y, negated for a negative base and an odd
    # integer y, NaN for a negative base and a fractional y; 0^y is 0, 1 or
    # inf. Logs are taken of 1 where x is 0, so no branch's derivative is NaN.
    size = e.magnitude(base)
    nonzero = e.cmp("une", size, 0.0)
    safe = e.where(nonzero, size, 1.0)
    magnitude = e.op("math.exp", e.mul(exponent, e.op("math.log", safe)))
    integral = e.cmp("oeq", e.floor(exponent), exponent)
    negative = e.where(e.odd(exponent), e.neg(magnitude), magnitude)
    # NaN by a factor that is NaN only in the rows whose result is that NaN
    # (so the derivatives there are NaN, as eager's, and no select's zero
    # cotangent meets a NaN elsewhere).
    undefined = e.cmp("une", e.mul(e.t.as_float(e.cmp("olt", base, 0.0)),
                                   e.t.as_float(e.cmp("une", e.floor(exponent), exponent))), 0.0)
    factor = e.where(undefined, e.constant(math.nan, magnitude), e.constant(1.0, magnitude))
    below = e.where(integral, negative, e.mul(magnitude, factor))
    general = e.where(e.cmp("olt", base, 0.0), below, magnitude)
    at_zero = e.where(e.cmp("ogt", exponent, 0.0), e.mul(magnitude, 0.0),
                      e.where(e.cmp("oeq", exponent, 0.0), e.constant(1.0, magnitude),
                              e.constant(math.inf, magnitude)))
    return e.where(nonzero, general, at_zero)


def _round(e: Emitter, args: list[Any], kwargs: dict[str, Any]) -> Value:
    decimals = args[1] if len(args) > 1 else kwargs.get("decimals", 0)
    if not decimals:
        return e.round_half_even(args[0])
    scale = 10.0 ** decimals
    return e.div(e.round_half_even(e.mul(args[0], scale)), scale)


def _div(e: Emitter, args: list[Any], kwargs: dict[str, Any]) -> Value:
    mode = args[2] if len(args) > 2 else kwargs.get("rounding_mode")
    quotient = e.div(args[0], args[1])
    if mode is None:
        return quotient
    if mode == "trunc":
        return e.trunc(quotient)
    if mode == "floor":
        return _floor_divide(e, args[0], args[1])
    raise e.t.fail(e.node, f"div() rounding_mode {mode!r} is not supported")


def _floor_divide(e: Emitter, a: Operand, b: Operand) -> Value:
    # As eager's: (a - fmod(a, b)) / b, one less where fmod's sign differs
    # from b's, rounded to the nearest integer (the quotient is one).
    r = e.op("arith.remf", a, b)
    quotient = e.div(e.sub(a, r), b)
    adjusted = e.where(e.cmp("olt", e.mul(r, b), 0.0), e.sub(quotient, 1.0), quotient)
    nearest = e.round_half_even(adjusted)
    return e.where(e.cmp("oeq", b, 0.0), e.div(a, b), nearest)


def _add_sub(op: str) -> Lowering:
    def lower(e: Emitter, args: list[Any], kwargs: dict[str, Any]) -> Value:
        alpha = args[2] if len(args) > 2 else kwargs.get("alpha", 1)
        other = args[1] if alpha == 1 else e.mul(args[1], float(alpha))
        return e.op(op, args[0], other)
    return lower


def _nan_to_num(e: Emitter, args: list[Any], kwargs: dict[str, Any]) -> Value:
    x = args[0]
    nan, posinf, neginf = (list(args[1:]) + [None, None, None])[:3]
    nan = kwargs.get("nan", nan) or 0.0
    limit = torch.finfo(torch.float32 if e.t.element == "f32" else torch.float64).max
    posinf = kwargs.get("posinf", posinf)
    neginf = kwargs.get("neginf", neginf)
    posinf = limit if posinf is None else posinf
    neginf = -limit if neginf is None else neginf
    cleaned = e.where(e.is_nan(x), e.constant(float(nan), x), x)
    cleaned = e.where(e.cmp("oeq", x, math.inf), e.constant(float(posinf), x), cleaned)
    return e.where(e.cmp("oeq", x, -math.inf), e.constant(float(neginf), x), cleaned)


def _logical(combine: Callable[[Emitter, Value, Value], Value]) -> Lowering:
    """A logical op of bools (or floats read as nonzero), through floats:
    seg IR holds i1 rows only as comparisons' results."""
    def lower(e: Emitter, args: list[Any], kwargs: dict[str, Any]) -> Value:
        a = e.t.as_float(e.bool_of(args[0]))
        b = e.t.as_float(e.bool_of(args[1]))
        return combine(e, a, b)
    return lower


def _heaviside(e: Emitter, x: Operand, at_zero: Operand) -> Value:
    step = e.where(e.cmp("ogt", x, 0.0), e.constant(1.0, x), e.mul(x, 0.0))
    return e.where(e.cmp("oeq", x, 0.0), at_zero, step)


def _relu(e: Emitter, x: Operand) -> Value:
    # 0 where x <= 0 (gradient 0 at 0, as torch's); NaN stays NaN.
    return e.where(e.cmp("ole", x, 0.0), e.constant(0.0, x), x)


def _lerp(e: Emitter, args: list[Any], kwargs: dict[str, Any]) -> Value:
    start, end, weight = args[0], args[1], args[2]
    difference = e.sub(end, start)
    # Eager's two forms: exact at weight 0 and at weight 1.
    if isinstance(weight, float):
        return e.add(start, e.mul(difference, weight)) if abs(weight) < 0.5 \
            else e.sub(end, e.mul(difference, 1.0 - weight))
    low = e.add(start, e.mul(weight, difference))
    high = e.sub(end, e.mul(difference, e.sub(1.0, weight)))
    return e.where(e.cmp("olt", e.magnitude(weight), 0.5), low, high)


def _addc(op: str) -> Lowering:
    def lower(e: Emitter, args: list[Any], kwargs: dict[str, Any]) -> Value:
        value = args[3] if len(args) > 3 else kwargs.get("value", 1)
        term = e.op(op, args[1], args[2])
        return e.add(args[0], term if value == 1 else e.mul(term, float(value)))
    return lower


def _full_like(value_position: int | None, fill: float | None = None) -> Lowering:
    def lower(e: Emitter, args: list[Any], kwargs: dict[str, Any]) -> Value:
        value = fill if value_position is None else args[value_position]
        like = args[0]
        if getattr(like, "kind", None) != "float":
            like = e.t.as_float(like)
        return e.constant(float(value), like)
    return lower


def _to_copy(e: Emitter, args: list[Any], kwargs: dict[str, Any]) -> Any:
    """A dtype conversion inside a kernel of one float type: between float
    types a no-op (the kernel computes in its own type), bool to float as
    0/1, float to bool as nonzero."""
    dtype = kwargs.get("dtype") or (args[1] if len(args) > 1 else None)
    x = args[0]
    if dtype is None or dtype in (torch.float32, torch.float64):
        return e.t.as_float(x)
    if dtype == torch.bool:
        return e.bool_of(x)
    raise e.t.fail(e.node, f"a conversion to {dtype} is not supported (segops.jit holds "
                           "float rows and comparisons)")


LOWERINGS: dict[str, Lowering] = {
    "sin": _unary(lambda e, x: e.op("math.sin", x)),
    "cos": _unary(lambda e, x: e.op("math.cos", x)),
    "tan": _unary(_tan),
    "atan": _unary(lambda e, x: e.op("math.atan", x)),
    "asin": _unary(_asin),
    "acos": _unary(_acos),
    "atan2": _binary(_atan2),
    "sinh": _unary(_sinh),
    "cosh": _unary(_cosh),
    "asinh": _unary(_asinh),
    "acosh": _unary(_acosh),
    "atanh": _unary(_atanh),
    "erf": _unary(lambda e, x: e.op("math.erf", x)),
    "erfc": _unary(lambda e, x: e.sub(1.0, e.op("math.erf", x))),
    "expm1": _unary(lambda e, x: e.op("math.expm1", x)),
    "log1p": _unary(lambda e, x: e.op("math.log1p", x)),
    "exp2": _unary(lambda e, x: e.op("math.exp", e.mul(x, math.log(2.0)))),
    "log2": _unary(lambda e, x: e.mul(e.op("math.log", x), 1.0 / math.log(2.0))),
    "log10": _unary(lambda e, x: e.mul(e.op("math.log", x), 1.0 / math.log(10.0))),
    "floor": _unary(lambda e, x: e.floor(x)),
    "ceil": _unary(lambda e, x: e.ceil(x)),
    "trunc": _unary(lambda e, x: e.trunc(x)),
    "frac": _unary(lambda e, x: e.sub(x, e.trunc(x))),
    "round": _round,
    "sign": _unary(_sign),
    "sgn": _unary(_sign),
    "relu": _unary(_relu),
    "fmod": _binary(lambda e, a, b: e.op("arith.remf", a, b)),
    "remainder": _binary(_remainder),
    "floor_divide": _binary(_floor_divide),
    "copysign": _binary(_copysign),
    "hypot": _binary(lambda e, a, b: e.op("math.sqrt", e.add(e.mul(a, a), e.mul(b, b)))),
    "logaddexp": _binary(_logaddexp),
    "xlogy": _binary(_xlogy),
    "heaviside": _binary(_heaviside),
    "fmax": _binary(lambda e, a, b: e.where(e.is_nan(b), a, e.where(
        e.is_nan(a), b, e.op("arith.maximumf", a, b)))),
    "fmin": _binary(lambda e, a, b: e.where(e.is_nan(b), a, e.where(
        e.is_nan(a), b, e.op("arith.minimumf", a, b)))),
    "pow": _pow,
    "div": _div,
    "true_divide": _div,
    "add": _add_sub("arith.addf"),
    "sub": _add_sub("arith.subf"),
    "lerp": _lerp,
    "addcmul": _addc("arith.mulf"),
    "addcdiv": _addc("arith.divf"),
    "nan_to_num": _nan_to_num,
    "isnan": _unary(lambda e, x: e.is_nan(x)),
    "isinf": _unary(lambda e, x: e.cmp("oeq", e.magnitude(x), math.inf)),
    "isposinf": _unary(lambda e, x: e.cmp("oeq", x, math.inf)),
    "isneginf": _unary(lambda e, x: e.cmp("oeq", x, -math.inf)),
    "isfinite": _unary(lambda e, x: e.cmp("olt", e.magnitude(x), math.inf)),
    "signbit": _unary(lambda e, x: e.cmp("olt", x, 0.0)),
    "logical_not": _unary(lambda e, x: e.cmp("oeq", e.t.as_float(e.bool_of(x)), 0.0)),
    "bitwise_not": _unary(lambda e, x: e.cmp("oeq", e.t.as_float(e.bool_of(x)), 0.0)),
    "logical_and": _logical(lambda e, a, b: e.cmp("une", e.mul(a, b), 0.0)),
    "bitwise_and": _logical(lambda e, a, b: e.cmp("une", e.mul(a, b), 0.0)),
    "logical_or": _logical(lambda e, a, b: e.cmp("une", e.add(a, b), 0.0)),
    "bitwise_or": _logical(lambda e, a, b: e.cmp("une", e.add(a, b), 0.0)),
    "logical_xor": _logical(lambda e, a, b: e.cmp("une", a, b)),
    "bitwise_xor": _logical(lambda e, a, b: e.cmp("une", a, b)),
    "positive": _unary(lambda e, x: x),
    "conj_physical": _unary(lambda e, x: x),
    "full_like": _full_like(1),
    "zeros_like": _full_like(None, 0.0),
    "ones_like": _full_like(None, 1.0),
    "_to_copy": _to_copy,
    "type_as": _unary(lambda e, x: e.t.as_float(x)),
}


def scalar_constant(node: torch.fx.Node) -> float | None:
    """A 0-d constant a decomposition builds (scalar_tensor, full([])),
    as a float; None for any other node."""
    name = getattr(node.target, "__name__", "").split(".")[0]
    if name == "scalar_tensor" and node.args:
        return float(node.args[0])
    if name == "full" and len(node.args) >= 2 and list(node.args[0]) == []:
        return float(node.args[1])
    return None
