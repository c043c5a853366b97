"""Pointwise coverage of segops.jit, measured with PyTorch's OpInfo database.

For every elementwise OpInfo (unary and binary ufuncs, and every other
entry whose aten op is tagged pointwise) that supports float32 and float64,
its first sample input whose arguments broadcast to the input's shape is
flattened to rows and put through a segops.jit function that sums the op's
result into segments (a bool result, such as a comparison's, selects
between two rows first). Values are compared with eager in float32 and
float64, first and second derivatives (where the OpInfo supports them) in
float64. Each op ends as "pass", "refused" (a JitError, with its message)
or "wrong" (a value or derivative that differs from eager's: a defect).

    python -m bench.opinfo_coverage            # the table and the figures
    python -m bench.opinfo_coverage --fusion   # also through segops.fusion

The figures are quoted in docs/jit.md; test_opinfo_pointwise.py runs this.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import time
from collections.abc import Callable
from typing import Any

import torch

# Conversions whose result is not a float of the input's dtype, and ops
# whose result is random: nothing to compare row by row.
_CONVERSIONS = frozenset({
    "bfloat16", "bool", "byte", "cdouble", "cfloat", "chalf", "char", "complex", "double",
    "float", "half", "int", "long", "short", "polar", "real", "angle", "conj", "isreal",
    "frexp", "fill", "view_as_real", "imag",
})
_RANDOM = frozenset({"nn.functional.rrelu", "nn.functional.dropout", "bernoulli"})
# Derivatives that differ from eager's only where eager's own come from a
# formula of its kernel rather than from its value (documented in
# docs/jit.md): torch.special.entr's at x <= 0 (eager: +inf at 0, 1 for
# x < 0 in the second derivative; the decomposition's where(): NaN, 0).
KNOWN_DIFFERENCES = {"special.entr": "derivatives at x <= 0, where entr is 0 or -inf"}


@dataclasses.dataclass
class Result:
    name: str
    status: str  # "pass", "refused", "differs" (KNOWN_DIFFERENCES), "wrong", "skipped"
    why: str = ""
    core: bool = False  # in the core ATen set (after PyTorch's core decompositions)
    seconds: float = 0.0


def _aten_op(info: Any) -> Any:
    packet = getattr(torch.ops.aten, info.aten_name or info.name.split(".")[-1], None)
    if packet is None:
        return None
    names = packet.overloads()
    return getattr(packet, "default" if "default" in names else names[0]) if names else None


def _in_core_aten(apply: Callable, rows: list[torch.Tensor]) -> bool:
    """Whether the op is in PyTorch's core ATen set: traced with the core
    decompositions (Inductor's starting point: silu and softplus become
    core ops, lgamma stays lgamma), only core-tagged aten ops remain."""
    import operator

    from torch._decomp import core_aten_decompositions
    from torch.fx.experimental.proxy_tensor import make_fx

    try:
        graph = make_fx(apply, decomposition_table=core_aten_decompositions())(*rows).graph
    except Exception:  # noqa: BLE001 - not traceable: not in the set
        return False
    return all(node.target is operator.getitem
               or (isinstance(node.target, torch._ops.OpOverload)
                   and torch.Tag.core in node.target.tags)
               for node in graph.nodes if node.op == "call_function")


def elementwise_infos() -> list[Any]:
    from torch.testing._internal.common_methods_invocations import op_db
    from torch.testing._internal.opinfo.core import BinaryUfuncInfo, UnaryUfuncInfo

    chosen = []
    for info in op_db:
        op = _aten_op(info)
        pointwise = isinstance(info, (UnaryUfuncInfo, BinaryUfuncInfo)) or (
            op is not None and torch.Tag.pointwise in op.tags)
        dtypes = info.supported_dtypes("cpu")
        if pointwise and torch.float32 in dtypes and torch.float64 in dtypes:
            chosen.append(info)
    return chosen


def _rows_sample(info: Any, dtype: torch.dtype) -> tuple[list[torch.Tensor], Callable] | None:
    """The first sample whose tensors broadcast to its input's shape, as
    flat rows, and the op applied to them (non-tensor arguments bound)."""
    for sample in info.sample_inputs("cpu", dtype, requires_grad=False):
        x = sample.input
        if not isinstance(x, torch.Tensor) or x.numel() < 2:
            continue
        flat, spec = torch.utils._pytree.tree_flatten((list(sample.args), dict(sample.kwargs)))
        positions = [i for i, a in enumerate(flat) if isinstance(a, torch.Tensor)]
        try:
            shape = torch.broadcast_shapes(x.shape, *(flat[i].shape for i in positions))
        except RuntimeError:
            continue
        if shape != x.shape or any(flat[i].dtype != dtype for i in positions):
            continue
        rows = [x.reshape(-1)] + [flat[i].expand(x.shape).reshape(-1) for i in positions]

        def apply(*tensors: torch.Tensor, flat=flat, spec=spec, positions=positions) -> Any:
            values = list(flat)
            for i, t in zip(positions, tensors[1:]):
                values[i] = t
            args, kwargs = torch.utils._pytree.tree_unflatten(values, spec)
            return info.op(tensors[0], *args, **kwargs)

        try:
            out = apply(*rows)
        except Exception:  # noqa: BLE001 - a sample eager rejects
            continue
        if not isinstance(out, torch.Tensor) or out.shape != rows[0].shape \
                or out.dtype not in (dtype, torch.bool):
            continue
        return [r.detach().clone().contiguous() for r in rows], apply
    return None


def _summed(apply: Callable, arity: int) -> Callable:
    """f(rows..., idx, num_segments) = segmented_sum of the op (a bool
    result chooses between the first row and its double)."""
    import segops

    def body(tensors: tuple[torch.Tensor, ...], idx: torch.Tensor, num_segments: int) -> Any:
        out = apply(*tensors)
        if out.dtype == torch.bool:
            out = torch.where(out, tensors[0], tensors[0] * 2.0)
        return segops.segmented_sum(out, idx, num_segments)

    # segops.jit reads the function's parameters: one per row tensor.
    if arity == 1:
        return lambda a, idx, n: body((a,), idx, n)
    if arity == 2:
        return lambda a, b, idx, n: body((a, b), idx, n)
    if arity == 3:
        return lambda a, b, c, idx, n: body((a, b, c), idx, n)
    return lambda a, b, c, d, idx, n: body((a, b, c, d), idx, n)


def _close(a: Any, b: Any, dtype: torch.dtype) -> bool:
    if a is None or b is None:
        zero = (a is None or not a.any()) and (b is None or not b.any())
        return zero
    rtol, atol = (1e-6, 1e-8) if dtype == torch.float64 else (1e-4, 1e-5)
    return torch.allclose(a, b, rtol=rtol, atol=atol, equal_nan=True)


def check(info: Any, fusion: bool = False) -> Result:
    import segops
    from segops._jit_trace import JitError

    name = info.name + (f".{info.variant_test_name}" if info.variant_test_name else "")
    result = Result(name, "pass")
    if info.name in _CONVERSIONS:
        return dataclasses.replace(result, status="skipped", why="a conversion, not float rows")
    if info.name in _RANDOM:
        return dataclasses.replace(result, status="skipped", why="random")
    start = time.perf_counter()
    for dtype in (torch.float64, torch.float32):
        found = _rows_sample(info, dtype)
        if found is None and dtype == torch.float32:
            continue  # float32 samples of another shape (float_power's are float64)
        if found is None:
            return dataclasses.replace(result, status="skipped",
                                       why="no sample broadcasts to its input's shape")
        rows, apply = found
        if dtype == torch.float64:
            result.core = _in_core_aten(apply, rows)
        n = rows[0].shape[0]
        idx = torch.arange(n) * 3 // n
        fn = _summed(apply, len(rows))
        differentiable = dtype == torch.float64 and info.supports_autograd and \
            apply(*rows).dtype != torch.bool
        inputs = [r.clone().requires_grad_(differentiable) for r in rows]
        try:
            if fusion:
                import segops.fusion

                segops.fusion.clear_reports()
                torch._dynamo.reset()  # one code object for every op: no recompile limit
                with torch._inductor.config.patch(force_disable_caches=True):
                    got = torch.compile(fn, options=segops.fusion.options())(*inputs, idx, 3)
                if not any(r.ops for r in segops.fusion.reports()):
                    return dataclasses.replace(result, status="refused",
                                               why="left to Inductor (no cluster)",
                                               seconds=time.perf_counter() - start)
            else:
                got = segops.jit(fn)(*inputs, idx, 3)
        except JitError as error:
            return dataclasses.replace(result, status="refused",
                                       why=str(error).splitlines()[0].removeprefix("segops.jit: "),
                                       seconds=time.perf_counter() - start)
        expected = fn(*inputs, idx, 3)
        if not _close(got, expected, dtype):
            return dataclasses.replace(result, status="wrong", why=f"{dtype} values",
                                       seconds=time.perf_counter() - start)
        if not differentiable:
            continue
        weights = torch.linspace(0.5, 1.5, 3, dtype=dtype)
        first = torch.autograd.grad((got * weights).sum(), inputs, create_graph=True,
                                    allow_unused=True)
        first_ref = torch.autograd.grad((expected * weights).sum(), inputs, create_graph=True,
                                        allow_unused=True)
        if not all(_close(a, b, dtype) for a, b in zip(first, first_ref)):
            return dataclasses.replace(result, status="wrong", why="first derivative",
                                       seconds=time.perf_counter() - start)
        if not info.supports_gradgrad or fusion:  # compiled graphs: no double backward
            continue
        second = _second(first, inputs)
        second_ref = _second(first_ref, inputs)
        if not all(_close(a, b, dtype) for a, b in zip(second, second_ref)):
            if name in KNOWN_DIFFERENCES:
                return dataclasses.replace(result, status="differs",
                                           why=KNOWN_DIFFERENCES[name],
                                           seconds=time.perf_counter() - start)
            return dataclasses.replace(result, status="wrong", why="second derivative",
                                       seconds=time.perf_counter() - start)
    return dataclasses.replace(result, seconds=time.perf_counter() - start)


def _second(first: tuple[Any, ...], inputs: list[torch.Tensor]) -> tuple[Any, ...]:
    active = [g for g in first if g is not None and g.requires_grad]
    if not active:
        return tuple(None for _ in inputs)
    total = sum((g * torch.linspace(0.5, 1.5, g.shape[0], dtype=g.dtype)).sum() for g in active)
    return torch.autograd.grad(total, inputs, allow_unused=True)


def run(fusion: bool = False, names: set[str] | None = None) -> list[Result]:
    results = []
    for info in elementwise_infos():
        if names is not None and info.name not in names:
            continue
        try:
            results.append(check(info, fusion))
        except Exception as error:  # noqa: BLE001 - anything else is a defect, reported
            results.append(Result(info.name, "wrong", f"{type(error).__name__}: {error}"[:200]))
    return results


def figures(results: list[Result]) -> str:
    tried = [r for r in results if r.status != "skipped"]
    core = [r for r in tried if r.core]
    passed = sum(r.status == "pass" for r in tried)
    core_passed = sum(r.status == "pass" for r in core)
    wrong = sum(r.status == "wrong" for r in tried)
    return (f"core ATen ops (after PyTorch's core decompositions): {core_passed}/{len(core)} "
            f"pass ({100 * core_passed / max(len(core), 1):.0f}%); all elementwise OpInfos: "
            f"{passed}/{len(tried)} ({100 * passed / max(len(tried), 1):.0f}%); wrong: {wrong}; "
            f"skipped: {len(results) - len(tried)}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--fusion", action="store_true",
                        help="through torch.compile with segops.fusion, not segops.jit")
    parser.add_argument("ops", nargs="*", help="only these OpInfo names")
    options = parser.parse_args(argv)
    results = run(options.fusion, set(options.ops) or None)
    for r in sorted(results, key=lambda r: (r.status, r.name)):
        print(f"{r.status:8} {'core' if r.core else '    '} {r.name:40} {r.seconds:5.2f}s  {r.why}")
    print(figures(results))
    return 1 if any(r.status == "wrong" for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
