"""segops.jit against the same composites unfused: three programs, each
JIT'd, written as separate segops calls plus torch ops (unfused), in eager
PyTorch (index_add_ / scatter_reduce), and torch.compile of the eager code;
forward and forward+backward, f32, sampled in turn. Then cold compile times
(forward, then each derivative level) and warm-call host overhead at N=100
against a library op call.

    python -m bench.jit [--sizes 100000,1000000,10000000] [--lengths 10,1000]
                        [--budget 1.0] [--no-compile]
    python -m bench.jit --cold    # cold compile of 4-7-op composites, by phase

Composites: (a) layer norm over vec3 rows, y = c / rms_s(c), c = x - mean_s x;
(b) energy E_s = sum_i q_i |x_i - mean_s x|^2 with forces -dE/dx;
(c) softmax pooling, out_s = sum_i softmax_s(a)_i v_i.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from collections.abc import Callable

import torch

import segops
from bench.timing import interleaved_median_seconds

SIZES = [100_000, 1_000_000, 10_000_000]
LENGTHS = [10, 1000]

# ---- the composites, written once over an `ops` namespace -----------------


class SegopsOps:
    sum = staticmethod(segops.segmented_sum)
    mean = staticmethod(segops.segmented_mean)
    rms = staticmethod(segops.segmented_rms_norm)
    max = staticmethod(segops.segmented_max)
    gather = staticmethod(lambda y, idx, n: segops.segmented_gather(y, idx))


class EagerOps:
    """Pure PyTorch (idx int64 for index ops)."""

    @staticmethod
    def sum(x, idx, n):
        return x.new_zeros((n,) + x.shape[1:]).index_add_(0, idx, x)

    @staticmethod
    def mean(x, idx, n):
        count = torch.bincount(idx, minlength=n).clamp(min=1).to(x.dtype)
        total = EagerOps.sum(x, idx, n)
        return total / (count[:, None] if x.dim() == 2 else count)

    @staticmethod
    def rms(x, idx, n):
        squares = (x * x).sum(-1) if x.dim() == 2 else x * x
        return EagerOps.mean(squares, idx, n).sqrt()

    @staticmethod
    def max(x, idx, n):
        return x.new_zeros(n).scatter_reduce(0, idx, x, "amax", include_self=False)

    @staticmethod
    def gather(y, idx, n):
        return y.index_select(0, idx)


def layer_norm(ops, x, idx, n):
    c = x - ops.gather(ops.mean(x, idx, n), idx, n)
    return c / ops.gather(ops.rms(c, idx, n), idx, n)[:, None]


def energy(ops, x, q, idx, n):
    d = x - ops.gather(ops.mean(x, idx, n), idx, n)
    return ops.sum(q * (d * d).sum(-1), idx, n)


def softmax_pool(ops, a, v, idx, n):
    e = torch.exp(a - ops.gather(ops.max(a, idx, n), idx, n))
    w = e / ops.gather(ops.sum(e, idx, n), idx, n)
    return ops.sum(w[:, None] * v, idx, n)


COMPOSITES = {"layer_norm": (layer_norm, ("x",)), "energy": (energy, ("x", "q")),
              "softmax_pool": (softmax_pool, ("a", "v"))}


def _jit_versions() -> dict[str, Callable]:
    """The composites as segops.jit functions (fresh, so compile is cold)."""
    def ln(x, idx, n):
        return layer_norm(SegopsOps, x, idx, n)

    def en(x, q, idx, n):
        return energy(SegopsOps, x, q, idx, n)

    def sp(a, v, idx, n):
        return softmax_pool(SegopsOps, a, v, idx, n)

    return {"layer_norm": segops.jit(ln), "energy": segops.jit(en),
            "softmax_pool": segops.jit(sp)}


def _data(num_rows: int, length: int) -> dict:
    num_segments = max(1, num_rows // length)
    idx = torch.sort(torch.randint(0, num_segments, (num_rows,))).values
    return dict(x=torch.randn(num_rows, 3), v=torch.randn(num_rows, 3),
                q=torch.rand(num_rows), a=torch.randn(num_rows),
                idx32=idx.to(torch.int32), idx64=idx, n=num_segments)


def _step(fn: Callable, inputs: list, backward: bool) -> Callable[[], object]:
    """One forward (and backward of the output's sum) call."""
    def run():
        leaves = [t.detach().requires_grad_(backward) for t in inputs[:-2]]
        out = fn(*leaves, *inputs[-2:])
        if backward:
            out.sum().backward()
        return out
    return run


def time_composites(sizes: list[int], lengths: list[int], budget: float,
                    with_compile: bool) -> None:
    jitted = _jit_versions()
    print(f"{'composite':>13} {'N':>9} {'len':>5} {'pass':>8} {'jit ms':>9} {'unfused':>9} "
          f"{'eager':>9} {'compiled':>9} {'jit/unfused':>11} {'jit/compiled':>12}")
    for name, (composite, names) in COMPOSITES.items():
        compiled = torch.compile(lambda *a, c=composite: c(EagerOps, *a), dynamic=True) \
            if with_compile else None
        for num_rows in sizes:
            for length in lengths:
                data = _data(num_rows, length)
                floats = [data[k] for k in names]
                for backward in (False, True):
                    fns = [
                        _step(jitted[name], floats + [data["idx32"], data["n"]], backward),
                        _step(lambda *a: composite(SegopsOps, *a),
                              floats + [data["idx32"], data["n"]], backward),
                        _step(lambda *a: composite(EagerOps, *a),
                              floats + [data["idx64"], data["n"]], backward),
                    ]
                    if compiled is not None:
                        fns.append(_step(compiled, floats + [data["idx64"], data["n"]],
                                         backward))
                    times = interleaved_median_seconds(fns, "cpu", budget_s=budget)
                    jit_t, unfused_t, eager_t = times[:3]
                    compiled_t = times[3] if compiled is not None else float("nan")
                    print(f"{name:>13} {num_rows:>9} {length:>5} "
                          f"{'fwd+bwd' if backward else 'fwd':>8} {jit_t * 1e3:>9.3f} "
                          f"{unfused_t * 1e3:>9.3f} {eager_t * 1e3:>9.3f} "
                          f"{compiled_t * 1e3:>9.3f} {jit_t / unfused_t:>11.2f} "
                          f"{jit_t / compiled_t:>12.2f}", flush=True)


def time_cold_compile() -> None:
    """Cold compile (empty disk cache, fresh functions): the forward, then
    the first and second derivative levels, each on first use."""
    import os

    with tempfile.TemporaryDirectory() as cache:
        os.environ["SEGOPS_CACHE_DIR"] = cache
        data = _data(1000, 10)
        for name, fn in _jit_versions().items():
            names = COMPOSITES[name][1]
            leaves = [data[k].clone().requires_grad_() for k in names]
            start = time.perf_counter()
            out = fn(*leaves, data["idx32"], data["n"])
            forward = time.perf_counter() - start
            start = time.perf_counter()
            grads = torch.autograd.grad(out.sum(), leaves, create_graph=True)
            first = time.perf_counter() - start
            start = time.perf_counter()
            torch.autograd.grad(sum(g.sum() for g in grads), leaves)
            second = time.perf_counter() - start
            print(f"cold compile {name:>13}: forward {forward * 1e3:7.1f} ms, first derivative "
                  f"{first * 1e3:7.1f} ms (forward + first {(forward + first) * 1e3:7.1f} ms), "
                  f"second derivative {second * 1e3:7.1f} ms")
        del os.environ["SEGOPS_CACHE_DIR"]


# Composites of 4-7 segment ops for the cold-compile row (--cold), unlike
# the three above: a dipole energy, tanh-normalised pooling, attention
# pooling with a residual mean.
def dipole_energy(x, q, idx, n):
    S = segops
    qc = q - S.segmented_gather(S.segmented_mean(q, idx, n), idx)
    c = x - S.segmented_gather(S.segmented_mean(x, idx, n), idx)
    mu = S.segmented_sum(qc[:, None] * c, idx, n)
    return S.segmented_dot(S.segmented_gather(mu, idx), c, idx, n) + S.segmented_sum(
        qc * qc, idx, n
    )


def tanh_pool(a, v, idx, n):
    S = segops
    t = torch.tanh(a)
    top, low = S.segmented_max(t, idx, n), S.segmented_min(t, idx, n)
    w = (t - S.segmented_gather(low, idx)) / (S.segmented_gather(top - low, idx) + 1e-3)
    r = S.segmented_rms_norm(v, idx, n)
    return S.segmented_sum(w[:, None] * v, idx, n) / (r[:, None] + 1.0)


def attention_pool(a, v, idx, n):
    S = segops
    e = torch.exp(a - S.segmented_gather(S.segmented_max(a, idx, n), idx))
    w = e / S.segmented_gather(S.segmented_sum(e, idx, n), idx)
    return S.segmented_sum(w[:, None] * v, idx, n) - S.segmented_mean(v, idx, n)


COLD = {"dipole_energy": (dipole_energy, ((3,), ())), "tanh_pool": (tanh_pool, ((), (3,))),
        "attention_pool": (attention_pool, ((), (3,)))}


def time_cold_phases(num_rows: int = 100_000) -> None:
    """Cold compile of the COLD composites at N = num_rows (~10-row
    segments, empty disk cache, fresh functions, f32): the first forward
    and first backward, and the time spent in each phase: trace (to seg
    IR, both traces), the compiler's calls (derive, lower, LLVM: one
    number, as they run in one C++ call, partly on a background thread)
    and loading (ORC)."""
    import os

    from segops import _compiler, _jit

    phases: dict[str, float] = {}

    def timed(key: str, call: Callable) -> Callable:
        def run(*args, **kwargs):
            start = time.perf_counter()
            try:
                return call(*args, **kwargs)
            finally:
                phases[key] = phases.get(key, 0.0) + time.perf_counter() - start
        return run

    segc = _compiler._segc()

    class TimedCompiler:
        __file__ = segc.__file__

        def __getattr__(self, name: str) -> Callable:
            key = "load" if name == "load_host_object" else "compile"
            return timed(key, getattr(segc, name))

    original_trace, original_segc = _jit.to_mlir, _compiler._segc
    _jit.to_mlir = timed("trace", original_trace)
    _compiler._segc = lambda: TimedCompiler()
    try:
        with tempfile.TemporaryDirectory() as cache:
            os.environ["SEGOPS_CACHE_DIR"] = cache
            generator = torch.Generator().manual_seed(0)
            idx = torch.sort(torch.randint(0, num_rows // 10, (num_rows,), generator=generator,
                                           dtype=torch.int32)).values
            for name, (fn, tails) in COLD.items():
                phases.clear()
                leaves = [torch.randn(num_rows, *tail, generator=generator).requires_grad_()
                          for tail in tails]
                jitted = segops.jit(fn)
                start = time.perf_counter()
                out = jitted(*leaves, idx, num_rows // 10)
                forward = time.perf_counter() - start
                start = time.perf_counter()
                torch.autograd.grad(out.sum(), leaves)
                backward = time.perf_counter() - start
                detail = ", ".join(f"{k} {v * 1e3:.0f}" for k, v in sorted(phases.items()))
                print(f"cold {name:>15} N={num_rows}: forward {forward * 1e3:6.1f} ms, forward + "
                      f"backward {(forward + backward) * 1e3:6.1f} ms ({detail} ms)", flush=True)
            del os.environ["SEGOPS_CACHE_DIR"]
    finally:
        _jit.to_mlir, _compiler._segc = original_trace, original_segc


def time_overhead(budget: float) -> None:
    """Host time per warm call at N=100: the JIT'd energy (one kernel)
    against one library op call (segmented_sum)."""
    data = _data(100, 10)
    fn = _jit_versions()["energy"]
    args = (data["x"], data["q"], data["idx32"], data["n"])
    fn(*args)
    jit_t, op_t = interleaved_median_seconds(
        [lambda: fn(*args), lambda: segops.segmented_sum(data["q"], data["idx32"], data["n"])],
        "cpu", inner=200, budget_s=budget)
    print(f"warm call at N=100: jit {jit_t * 1e6:.1f} us, library op {op_t * 1e6:.1f} us, "
          f"ratio {jit_t / op_t:.2f}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default=",".join(map(str, SIZES)))
    parser.add_argument("--lengths", default=",".join(map(str, LENGTHS)))
    parser.add_argument("--budget", type=float, default=1.0, help="seconds per line")
    parser.add_argument("--no-compile", action="store_true",
                        help="skip the torch.compile baseline")
    parser.add_argument("--cold", action="store_true",
                        help="only the cold-compile composites, with a per-phase breakdown")
    options = parser.parse_args()
    torch.manual_seed(0)
    if options.cold:
        time_cold_phases()
        return 0
    time_cold_compile()
    time_overhead(options.budget)
    time_composites([int(s) for s in options.sizes.split(",")],
                    [int(s) for s in options.lengths.split(",")], options.budget,
                    not options.no_compile)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
