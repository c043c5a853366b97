"""segops.fusion on three model-like workloads: eager, torch.compile without
the pass and torch.compile with it, forward and training step, f32, on
molecules of 10-50 atoms.

    python -m bench.fusion [--sizes 100000,1000000] [--budget 2.0] [--device cpu|cuda]
                           [--workloads potential,readout,attention] [--static]

Workloads:
  potential  an interatomic potential: per-atom MLP (2 -> 64 -> 64 -> 1, tanh)
             of radial features of the atoms' offsets from their molecule's
             centroid, energy by segmented_sum, forces -dE/dx by
             autograd.grad(create_graph=True), loss on energies and forces;
             forward = energies and forces, step = forward + loss.backward();
  readout    GNN readout: per-node MLP (16 -> 64 -> 64 -> 3) to vec3 node
             features, a segment layer norm, mean pooling of tanh of them,
             a linear head on the pooled (S, 3) values, MSE loss;
  attention  attention pooling: per-node MLP scores, segment softmax (max,
             exp, sum), softmax-weighted sum of vec3 values, linear head.

Each workload also runs with its MLP replaced by the MLP's output given as
an input tensor ("segment part": everything but the dense layers, the same
segment and elementwise code). The target is on that part: fused <= 0.5x
compiled. End-to-end numbers (with the MLP) are printed beside it.

Kernels: per step, eager counts the ops it dispatches (views excluded);
compiled counts the kernels Inductor generated plus its extern calls (mm,
segops ops, jit_call), with Inductor's caches off so that every mode is
compiled here.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import nn
from torch.utils._python_dispatch import TorchDispatchMode

import segops
import segops.fusion
from bench.timing import interleaved_median_seconds

SIZES = [100_000, 1_000_000]
WORKLOADS = ["potential", "readout", "attention"]
MODES = ["eager", "compiled", "fused"]


def molecules(num_rows: int, seed: int = 0) -> tuple[torch.Tensor, int]:
    """A sorted int32 index of molecules of 10-50 atoms, `num_rows` atoms."""
    generator = torch.Generator().manual_seed(seed)
    sizes = torch.randint(10, 51, (num_rows // 10 + 1,), generator=generator)
    sizes = sizes[: int((sizes.cumsum(0) < num_rows).sum()) + 1]
    sizes[-1] -= int(sizes.sum()) - num_rows
    idx = torch.repeat_interleave(torch.arange(len(sizes), dtype=torch.int32), sizes)
    return idx, len(sizes)


def mlp(inputs: int, outputs: int) -> nn.Module:
    return nn.Sequential(nn.Linear(inputs, 64), nn.Tanh(), nn.Linear(64, 64), nn.Tanh(),
                         nn.Linear(64, outputs))


# ---- the workloads ---------------------------------------------------------


class Potential(nn.Module):
    """E_s = sum_i mlp(r2_i, exp(-r2_i)) + q_i r2_i / 2 over the atoms of
    molecule s, r2_i = |x_i - mean_s x|^2; without the MLP its output u_i
    is an input and the per-atom energy u_i exp(-r2_i) + q_i r2_i / 2."""

    def __init__(self, dense: bool) -> None:
        super().__init__()
        self.mlp = mlp(2, 1) if dense else None

    def forward(self, x, q, u, idx, num_segments: int, create_graph: bool):
        d = x - segops.segmented_gather(segops.segmented_mean(x, idx, num_segments), idx)
        r2 = (d * d).sum(-1)
        g = torch.exp(-r2)
        if self.mlp is not None:
            e = self.mlp(torch.stack([r2, g], -1)).squeeze(-1)
        else:
            e = u * g
        energy = segops.segmented_sum(e + 0.5 * q * r2, idx, num_segments)
        forces = -torch.autograd.grad(energy.sum(), x, create_graph=create_graph)[0]
        # Without create_graph the energy's graph is spent: returning it
        # attached would break the compiled graph in two.
        return (energy if create_graph else energy.detach()), forces


class Readout(nn.Module):
    def __init__(self, dense: bool) -> None:
        super().__init__()
        self.mlp = mlp(16, 3) if dense else None
        self.head = nn.Linear(3, 1)

    def forward(self, h, v, idx, num_segments: int):
        if self.mlp is not None:
            v = self.mlp(h)
        c = v - segops.segmented_gather(segops.segmented_mean(v, idx, num_segments), idx)
        variance = segops.segmented_mean((c * c).sum(-1), idx, num_segments) / 3
        y = c * torch.rsqrt(segops.segmented_gather(variance, idx) + 1e-5)[:, None]
        pooled = segops.segmented_mean(torch.tanh(y), idx, num_segments)
        return self.head(pooled).squeeze(-1)


class Attention(nn.Module):
    def __init__(self, dense: bool) -> None:
        super().__init__()
        self.score = mlp(16, 1) if dense else None
        self.value = nn.Linear(16, 3) if dense else None
        self.head = nn.Linear(3, 1)

    def forward(self, h, s, v, idx, num_segments: int):
        if self.score is not None:
            s, v = self.score(h).squeeze(-1), self.value(h)
        shifted = s - segops.segmented_gather(segops.segmented_max(s, idx, num_segments), idx)
        a = torch.exp(shifted)
        w = a / segops.segmented_gather(segops.segmented_sum(a, idx, num_segments), idx)
        pooled = segops.segmented_sum(w[:, None] * v, idx, num_segments)
        return self.head(pooled).squeeze(-1)


@dataclass
class Case:
    """One workload at one size: its forward and training step."""

    forward: Callable[[], object]
    step: Callable[[], object]


def make_case(workload: str, dense: bool, num_rows: int,
              compile_with: Callable[[Callable], Callable] | None,
              device: str = "cpu") -> Case:
    torch.manual_seed(0)
    idx, num_segments = molecules(num_rows)
    idx = idx.to(device)
    wrap = compile_with or (lambda f: f)

    def randn(*shape: int, requires_grad: bool = False) -> torch.Tensor:
        return torch.randn(*shape, device=device, requires_grad=requires_grad)

    if workload == "potential":
        model = Potential(dense).to(device)
        x = randn(num_rows, 3, requires_grad=True)
        q = torch.rand(num_rows, device=device)
        u = randn(num_rows, requires_grad=True)
        e_ref, f_ref = randn(num_segments), randn(num_rows, 3)
        inputs = [x, u]

        def loss_of(create_graph: bool):
            energy, forces = model(x, q, u, idx, num_segments, create_graph)
            return ((energy - e_ref) ** 2).mean() + ((forces - f_ref) ** 2).mean()

        forward = wrap(lambda: model(x, q, u, idx, num_segments, False))
        loss = wrap(lambda: loss_of(True))
    else:
        h = randn(num_rows, 16)
        v = randn(num_rows, 3, requires_grad=True)
        target = randn(num_segments)
        inputs = [v]
        if workload == "readout":
            model = Readout(dense).to(device)
            run = lambda: model(h, v, idx, num_segments)  # noqa: E731
        else:
            model = Attention(dense).to(device)
            s = randn(num_rows, requires_grad=True)
            inputs.append(s)
            run = lambda: model(h, s, v, idx, num_segments)  # noqa: E731
        compiled_run = wrap(run)

        def forward():
            with torch.no_grad():
                return compiled_run()

        # The loss inside the compiled function, as for the potential.
        loss = wrap(lambda: ((run() - target) ** 2).mean())

    def step():
        # Input gradients are not accumulated from step to step (an input's
        # .grad would add an N-row add_ to every step, in every mode).
        model.zero_grad(set_to_none=True)
        for tensor in inputs:
            tensor.grad = None
        loss().backward()

    return Case(forward, step)


# ---- kernel counts -----------------------------------------------------------


class _OpCounter(TorchDispatchMode):
    def __init__(self) -> None:
        super().__init__()
        self.count = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if not any(r.alias_info is not None for r in func._schema.returns):
            self.count += 1
        return func(*args, **(kwargs or {}))


def eager_kernels(fn: Callable[[], object]) -> int:
    counter = _OpCounter()
    with counter:
        fn()
    return counter.count


def compiled_kernels(fn: Callable[[], object]) -> int:
    """Kernels Inductor generated and extern calls, over the compilation
    that the first call of `fn` triggers."""
    from torch._dynamo.utils import counters
    from torch._inductor import metrics

    metrics.reset()
    extern_before = counters["inductor"]["extern_calls"]
    fn()
    return metrics.generated_kernel_count + counters["inductor"]["extern_calls"] - extern_before


# ---- the run ---------------------------------------------------------------


def compile_for(mode: str, dynamic: bool) -> Callable[[Callable], Callable] | None:
    if mode == "eager":
        return None
    options = segops.fusion.options() if mode == "fused" else {}
    return lambda f: torch.compile(f, dynamic=dynamic, options=options)


def _kernels(counts: dict, key: tuple, count: int) -> int:
    """A compiled mode's count, remembered per (workload, part, phase,
    mode): with dynamic shapes a later size reuses the compiled code (and
    so generates nothing to count)."""
    if count or key not in counts:
        counts[key] = count
    return counts[key]


def run(sizes: list[int], workloads: list[str], budget: float, dynamic: bool,
        device: str = "cpu") -> list[dict]:
    torch._dynamo.config.trace_autograd_ops = True  # autograd.grad inside compiled code
    torch._dynamo.config.cache_size_limit = 64
    torch._inductor.config.fx_graph_cache = False
    torch._functorch.config.enable_autograd_cache = False
    rows = []
    counts: dict[tuple, int] = {}
    for workload in workloads:
        for num_rows in sizes:
            for dense in (False, True):
                cases = {m: make_case(workload, dense, num_rows, compile_for(m, dynamic), device)
                         for m in MODES}
                row = {"workload": workload, "N": num_rows,
                       "part": "end-to-end" if dense else "segment part"}
                for phase in ("forward", "step"):
                    fns = [getattr(cases[m], phase) for m in MODES]
                    row[f"{phase} kernels"] = {"eager": eager_kernels(fns[0])}
                    for mode, fn in zip(MODES[1:], fns[1:]):
                        row[f"{phase} kernels"][mode] = _kernels(
                            counts, (workload, dense, phase, mode), compiled_kernels(fn))
                    times = interleaved_median_seconds(fns, device, repeats=30, budget_s=budget)
                    row[f"{phase} ms"] = {m: 1e3 * t for m, t in zip(MODES, times)}
                rows.append(row)
                print(format_row(row), flush=True)
    return rows


def format_row(row: dict) -> str:
    parts = [f"{row['workload']:9s} N={row['N']:>8d} {row['part']:12s}"]
    for phase in ("forward", "step"):
        ms, kernels = row[f"{phase} ms"], row[f"{phase} kernels"]
        parts.append(f"{phase}: eager {ms['eager']:8.2f} ms ({kernels['eager']:3d} k), "
                     f"compiled {ms['compiled']:8.2f} ms ({kernels['compiled']:3d} k), "
                     f"fused {ms['fused']:8.2f} ms ({kernels['fused']:3d} k), "
                     f"fused/compiled {ms['fused'] / ms['compiled']:.2f}")
    return " | ".join(parts)


def flat_rows(rows: list[dict]) -> list[dict]:
    """One CSV row per (workload, N, part, phase, mode)."""
    return [{"workload": r["workload"], "N": r["N"], "part": r["part"], "phase": phase,
             "mode": mode, "ms": r[f"{phase} ms"][mode], "kernels": r[f"{phase} kernels"][mode]}
            for r in rows for phase in ("forward", "step") for mode in MODES]


def summarize(rows: list[dict]) -> list[str]:
    lines = []
    for row in rows:
        if row["part"] != "segment part":
            continue
        for phase in ("forward", "step"):
            ms = row[f"{phase} ms"]
            lines.append(f"{row['workload']} N={row['N']} {phase}: segment part fused/compiled "
                         f"= {ms['fused'] / ms['compiled']:.2f} (target <= 0.5)")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default=",".join(map(str, SIZES)))
    parser.add_argument("--workloads", default=",".join(WORKLOADS))
    parser.add_argument("--budget", type=float, default=2.0,
                        help="seconds of sampling per (workload, size, part, phase)")
    parser.add_argument("--static", action="store_true",
                        help="compile with static shapes (default: dynamic=True)")
    parser.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    args = parser.parse_args()
    rows = run([int(s) for s in args.sizes.split(",")], args.workloads.split(","),
               args.budget, dynamic=not args.static, device=args.device)
    print("\n".join(summarize(rows)))


if __name__ == "__main__":
    main()
