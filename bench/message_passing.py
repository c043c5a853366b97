"""Message passing: a Lennard-Jones potential and a SchNet-style filter
convolution over a neighbour list, segops against eager PyTorch and
torch.compile, in one run.

    python -m bench.message_passing [--atoms 4000,32000] [--budget 2]

(a) Lennard-Jones after LAMMPS bench/in.lj: an fcc lattice at density
    0.8442 (each atom displaced by up to 0.05 sigma, so forces are not
    zero), cutoff 2.5 sigma, a full neighbour list (both directions of each
    pair, about 55 per atom) built once, with the minimum image as a
    per-edge shift. Energy + forces, and a force-matching training step:
    the loss on the energy and forces and its gradient with respect to
    epsilon and sigma (0-d learnable tensors; a double backward).
(b) SchNet-style convolution: F = 32 features per atom, a radial filter
    W(r) = exp(-gamma (r - mu_f)^2) * envelope(r) per feature (Gaussians;
    a polynomial envelope, as segops.jit has no cos), x_i' = sum_j x_j * W(r_ij),
    energy = sum_i x_i' . w; energy + forces.

Variants: `eager` (index_select / index_add_), `compile` (torch.compile of
the same code; steps with forces compiled with trace_autograd_ops),
`segops` (a segops.jit function of three indices: receivers i, senders j,
batch), and `fusion` (torch.compile with segops.fusion of PyTorch-style
code: for LJ `lj_per_atom`, which sums pair energies into atoms with
index_add as PyG and MACE do; for SchNet the eager code itself).
torch_scatter is a baseline where installed. Peak memory is the rise of
the process's resident set (VmHWM, reset through /proc/self/clear_refs)
during one call, after warm-up.
"""

from __future__ import annotations

import argparse
import gc
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import torch
from torch import Tensor

import segops
import segops.fusion
from bench import report
from bench.timing import interleaved_median_seconds

DENSITY = 0.8442
CUTOFF = 2.5
ATOMS = (4000, 32000)
FEATURES = 32


# -- the system ---------------------------------------------------------------


def fcc_system(atoms: int, seed: int = 0) -> tuple[Tensor, float]:
    """Positions of `atoms` (4 n^3) atoms on an fcc lattice at DENSITY,
    displaced by up to 0.05, and the box length."""
    cells = round((atoms / 4) ** (1 / 3))
    if 4 * cells**3 != atoms:
        raise ValueError(f"an fcc box holds 4 n^3 atoms, not {atoms}")
    lattice = (4 / DENSITY) ** (1 / 3)
    basis = torch.tensor([[0, 0, 0], [0.5, 0.5, 0], [0.5, 0, 0.5], [0, 0.5, 0.5]],
                         dtype=torch.float64)
    grid = torch.stack(torch.meshgrid(*[torch.arange(cells)] * 3, indexing="ij"), -1)
    pos = (grid.reshape(-1, 1, 3) + basis).reshape(-1, 3) * lattice
    generator = torch.Generator().manual_seed(seed)
    pos += (torch.rand(pos.shape, generator=generator, dtype=torch.float64) - 0.5) * 0.1
    return pos, cells * lattice


def neighbour_list(pos: Tensor, box: float) -> tuple[Tensor, Tensor, Tensor]:
    """A full list within CUTOFF under the minimum image: receivers i
    (sorted), senders j, and the per-edge image shift (pos[j] - pos[i] +
    shift is the minimum-image vector)."""
    receivers, senders, shifts = [], [], []
    for begin in range(0, pos.shape[0], 1024):
        d = pos[None, :, :] - pos[begin:begin + 1024, None, :]
        shift = -box * torch.round(d / box)
        r2 = ((d + shift) ** 2).sum(-1)
        a, b = torch.nonzero((r2 < CUTOFF**2) & (r2 > 0), as_tuple=True)
        receivers.append(a + begin)
        senders.append(b)
        shifts.append(shift[a, b])
    return torch.cat(receivers), torch.cat(senders), torch.cat(shifts)


# -- the potentials -----------------------------------------------------------


def lj_torch(pos: Tensor, eps: Tensor, sigma: Tensor, i: Tensor, j: Tensor,
             shift: Tensor) -> Tensor:
    rij = pos.index_select(0, j) - pos.index_select(0, i) + shift
    s6 = (sigma * sigma / (rij * rij).sum(-1)) ** 3
    e = 2.0 * eps * (s6 * s6 - s6)  # 4 eps (...) / 2: each pair twice
    return e.sum().reshape(1)


def lj_per_atom(pos: Tensor, eps: Tensor, sigma: Tensor, i: Tensor, j: Tensor,
                shift: Tensor) -> Tensor:
    """lj_torch as message-passing code writes it: pair energies summed
    into their receiving atoms first (what segops.fusion fuses)."""
    rij = pos[j] - pos[i] + shift
    s6 = (sigma * sigma / (rij * rij).sum(-1)) ** 3
    e = 2.0 * eps * (s6 * s6 - s6)
    e_atom = torch.zeros(pos.shape[0], dtype=pos.dtype, device=pos.device).index_add(0, i, e)
    return e_atom.sum().reshape(1)


@segops.jit
def lj_segops(pos: Tensor, eps: Tensor, sigma: Tensor, i: Tensor, j: Tensor,
              shift: Tensor, batch: Tensor, num_atoms: int, num_systems: int) -> Tensor:
    rij = segops.segmented_gather(pos, j) - segops.segmented_gather(pos, i) + shift
    s6 = (sigma * sigma / (rij * rij).sum(-1)) ** 3
    e = 2.0 * eps * (s6 * s6 - s6)
    return segops.segmented_sum(segops.segmented_sum(e, i, num_atoms), batch, num_systems)


def _envelope(r: Tensor) -> Tensor:
    """A smooth polynomial cutoff: 1 at r = 0, 0 with two derivatives at
    CUTOFF (for r < CUTOFF, which the list guarantees)."""
    u = r * (1.0 / CUTOFF)
    u3 = u * u * u
    return 1.0 - u3 * (10.0 - 15.0 * u + 6.0 * u * u)


def schnet_torch(pos: Tensor, x: Tensor, mu: Tensor, w: Tensor, i: Tensor, j: Tensor,
                 shift: Tensor) -> Tensor:
    rij = pos.index_select(0, j) - pos.index_select(0, i) + shift
    r = torch.sqrt((rij * rij).sum(-1))
    d = r[:, None] - mu
    filt = torch.exp(-4.0 * d * d) * _envelope(r)[:, None]
    message = x.index_select(0, j) * filt
    h = torch.zeros_like(x).index_add_(0, i, message)
    return (h * w).sum().reshape(1)


@segops.jit
def schnet_segops(pos: Tensor, x: Tensor, mu: Tensor, w: Tensor, i: Tensor, j: Tensor,
                  shift: Tensor, batch: Tensor, num_atoms: int, num_systems: int) -> Tensor:
    rij = segops.segmented_gather(pos, j) - segops.segmented_gather(pos, i) + shift
    r = torch.sqrt((rij * rij).sum(-1))
    d = r[:, None] - mu
    filt = torch.exp(-4.0 * d * d) * _envelope(r)[:, None]
    h = segops.segmented_sum(segops.segmented_gather(x, j) * filt, i, num_atoms)
    return segops.segmented_sum((h * w).sum(-1), batch, num_systems)


# -- measurement --------------------------------------------------------------


def _status_kib(field: str) -> int:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise KeyError(field)


def _forward_peak_here(workload: str, atoms: int, variant: str) -> int:
    """In a process started by forward_peak: the rise of the resident set
    above its level before one forward (energy, with positions that require
    grad, so what the backward needs is kept), after two warm-up calls."""
    fns = _forwards(workload, atoms)
    fn = fns[variant]
    fn()
    fn()
    gc.collect()
    with open("/proc/self/clear_refs", "w") as refs:
        refs.write("5")  # VmHWM := VmRSS
    before = _status_kib("VmRSS")
    result = fn()
    peak = _status_kib("VmHWM")
    del result
    return (peak - before) * 1024


def forward_peak(workload: str, atoms: int, variant: str) -> int | None:
    """A forward's peak memory, measured in a fresh process in which every
    large allocation is its own mapping (glibc's mmap threshold fixed, no
    output buffer cache), so that memory freed by earlier calls is not
    reused unseen: the resident set's rise is what the call holds at its
    peak. None where /proc/self/clear_refs is missing."""
    env = dict(os.environ, MALLOC_MMAP_THRESHOLD_="65536", SEGOPS_OUTPUT_CACHE_MB="0",
               PYTHONPATH=os.pathsep.join([str(Path(__file__).resolve().parents[1]),
                                           os.environ.get("PYTHONPATH", "")]))
    result = subprocess.run([sys.executable, "-m", "bench.message_passing", "--peak-of",
                             f"{workload}:{atoms}:{variant}"], env=env, capture_output=True,
                            text=True)
    if result.returncode != 0:
        print(f"peak memory of {workload} {variant}: {result.stderr.strip()[-500:]}")
        return None
    return int(result.stdout.split()[-1])


def _energy_forces(energy: Callable[..., Tensor]) -> Callable[..., tuple[Tensor, Tensor]]:
    def run(pos: Tensor, *args: object) -> tuple[Tensor, Tensor]:
        e = energy(pos, *args)
        return e, -torch.autograd.grad(e.sum(), pos)[0]
    return run


def _loss(energy: Callable[..., Tensor], e_ref: Tensor, f_ref: Tensor
          ) -> Callable[..., Tensor]:
    def loss(pos: Tensor, *args: object) -> Tensor:
        e = energy(pos, *args)
        forces = -torch.autograd.grad(e.sum(), pos, create_graph=True)[0]
        return ((e - e_ref) ** 2).sum() + ((forces - f_ref) ** 2).mean()
    return loss


def _forwards(workload: str, atoms: int) -> dict[str, Callable[[], object]]:
    """Each variant's forward (the energy) of a workload, for peak memory."""
    pos0, box = fcc_system(atoms)
    i, j, shift = neighbour_list(pos0, box)
    dtype = torch.float32
    pos = pos0.to(dtype).requires_grad_()
    shift = shift.to(dtype)
    i32, j32 = i.to(torch.int32), j.to(torch.int32)
    batch = torch.zeros(atoms, dtype=torch.int32)
    if workload == "lj":
        eps = torch.tensor(1.0, dtype=dtype, requires_grad=True)
        sigma = torch.tensor(1.0, dtype=dtype, requires_grad=True)
        reference, fused, plain = lj_torch, lj_segops, lj_per_atom
        torch_args: tuple = (eps, sigma, i, j, shift)
        segops_args: tuple = (eps, sigma, i32, j32, shift, batch, atoms, 1)
    else:
        generator = torch.Generator().manual_seed(1)
        x = torch.randn(atoms, FEATURES, generator=generator, dtype=dtype)
        mu = torch.linspace(0.5, CUTOFF, FEATURES, dtype=dtype)
        w = torch.randn(FEATURES, generator=generator, dtype=dtype)
        reference, fused, plain = schnet_torch, schnet_segops, schnet_torch
        torch_args = (x, mu, w, i, j, shift)
        segops_args = (x, mu, w, i32, j32, shift, batch, atoms, 1)
    compiled = torch.compile(reference)
    with_fusion = torch.compile(plain, options=segops.fusion.options())
    return {"eager": lambda: reference(pos, *torch_args),
            "compile": lambda: compiled(pos, *torch_args),
            "segops": lambda: fused(pos, *segops_args),
            "fusion": lambda: with_fusion(pos, *torch_args)}


def run_lj(atoms: int, budget: float) -> list[dict]:
    pos0, box = fcc_system(atoms)
    started = time.perf_counter()
    i, j, shift = neighbour_list(pos0, box)
    list_seconds = time.perf_counter() - started
    dtype = torch.float32
    pos = pos0.to(dtype).requires_grad_()
    shift = shift.to(dtype)
    i32, j32 = i.to(torch.int32), j.to(torch.int32)
    batch = torch.zeros(atoms, dtype=torch.int32)
    eps = torch.tensor(1.0, dtype=dtype, requires_grad=True)
    sigma = torch.tensor(1.0, dtype=dtype, requires_grad=True)
    started = time.perf_counter()
    segops.Graph(receivers=i32, senders=j32, num_nodes=atoms)  # the transposed order
    order_seconds = time.perf_counter() - started
    torch_args = (eps, sigma, i, j, shift)
    segops_args = (eps, sigma, i32, j32, shift, batch, atoms, 1)

    def segops_energy(p: Tensor, *a: object) -> Tensor:
        return lj_segops(p, *a)

    torch._dynamo.config.trace_autograd_ops = True
    compiled_energy = torch.compile(lj_torch)
    with torch.no_grad():
        e_ref = lj_torch(pos0.to(dtype), eps, sigma, i, j, shift) * 1.01
    f_ref = -torch.autograd.grad(lj_torch(pos, eps, sigma, i, j, shift).sum(), pos)[0] * 0.99

    variants = {
        "eager": (lj_torch, torch_args),
        "compile": (compiled_energy, torch_args),
        "segops": (segops_energy, segops_args),
        "fusion": (lj_per_atom, torch_args),
    }
    rows = []
    for task in ("energy+forces", "training step"):
        fns, peaks = {}, {}
        for name, (energy, args) in variants.items():
            if task == "energy+forces":
                step = _energy_forces(energy)
                if name == "compile":
                    step = torch.compile(_energy_forces(lj_torch))
                elif name == "fusion":
                    step = torch.compile(step, options=segops.fusion.options())

                def call(step=step, args=args) -> object:
                    return step(pos, *args)
            else:
                loss = _loss(energy if name != "compile" else lj_torch, e_ref, f_ref)
                if name == "compile":
                    loss = torch.compile(loss)
                elif name == "fusion":
                    loss = torch.compile(loss, options=segops.fusion.options())

                def call(loss=loss, args=args) -> object:
                    return torch.autograd.grad(loss(pos, *args), (eps, sigma))
            fns[name] = call
            if task == "energy+forces":
                peaks[name] = forward_peak("lj", atoms, name)
        _check(fns)
        seconds = dict(zip(fns, interleaved_median_seconds(list(fns.values()), "cpu",
                                                           budget_s=budget)))
        row = {"workload": "lennard-jones", "atoms": atoms, "edges": int(i.shape[0]),
               "task": task, **_ratios(seconds, peaks),
               "neighbour list s": list_seconds, "transposed order ms": order_seconds * 1e3}
        rows.append(row)
        print(_line(row), flush=True)
    return rows


def run_schnet(atoms: int, budget: float) -> list[dict]:
    pos0, box = fcc_system(atoms)
    i, j, shift = neighbour_list(pos0, box)
    dtype = torch.float32
    generator = torch.Generator().manual_seed(1)
    pos = pos0.to(dtype).requires_grad_()
    shift = shift.to(dtype)
    x = torch.randn(atoms, FEATURES, generator=generator, dtype=dtype)
    mu = torch.linspace(0.5, CUTOFF, FEATURES, dtype=dtype)
    w = torch.randn(FEATURES, generator=generator, dtype=dtype)
    i32, j32 = i.to(torch.int32), j.to(torch.int32)
    batch = torch.zeros(atoms, dtype=torch.int32)
    torch_args = (x, mu, w, i, j, shift)
    segops_args = (x, mu, w, i32, j32, shift, batch, atoms, 1)
    compiled = torch.compile(_energy_forces(schnet_torch))
    with_fusion = torch.compile(_energy_forces(schnet_torch), options=segops.fusion.options())
    fns = {
        "eager": lambda: _energy_forces(schnet_torch)(pos, *torch_args),
        "compile": lambda: compiled(pos, *torch_args),
        "segops": lambda: _energy_forces(schnet_segops)(pos, *segops_args),
        "fusion": lambda: with_fusion(pos, *torch_args),
    }
    _check(fns)
    peaks = {name: forward_peak("schnet", atoms, name) for name in fns}
    seconds = dict(zip(fns, interleaved_median_seconds(list(fns.values()), "cpu",
                                                       budget_s=budget)))
    row = {"workload": "schnet F=32", "atoms": atoms, "edges": int(i.shape[0]),
           "task": "energy+forces", **_ratios(seconds, peaks)}
    print(_line(row), flush=True)
    return [row]


_FUSED = ("segops", "fusion")


def _ratios(seconds: dict[str, float], peaks: dict[str, int | None]) -> dict[str, float]:
    """A row's times, peaks, and the fused variants' ratios to torch.compile
    and eager PyTorch."""
    row = {f"{k} ms": v * 1e3 for k, v in seconds.items()}
    for name in _FUSED:
        row[f"{name} vs compile"] = seconds[name] / seconds["compile"]
        row[f"{name} vs eager"] = seconds[name] / seconds["eager"]
    row.update({f"{k} forward peak MiB": (v or 0) / 2**20 for k, v in peaks.items()})
    if peaks.get("compile"):
        for name in _FUSED:
            if peaks.get(name) is not None:
                row[f"{name} vs compile peak"] = peaks[name] / peaks["compile"]
    return row


def _check(fns: dict[str, Callable[[], object]]) -> None:
    """Every variant computes what eager PyTorch does."""
    def flat(value: object) -> list[Tensor]:
        return [t.detach() for t in (value if isinstance(value, tuple) else (value,))]

    want = flat(fns["eager"]())
    for name, fn in fns.items():
        for got, expected in zip(flat(fn()), want):
            torch.testing.assert_close(got.reshape(expected.shape), expected,
                                       rtol=2e-3, atol=1e-3 * expected.abs().max().item(),
                                       msg=lambda m, name=name: f"{name}: {m}")


def _line(row: dict) -> str:
    times = ", ".join(f"{k[:-3]} {row[k]:.1f} ms" for k in row if k.endswith(" ms")
                      and not k.startswith("transposed"))
    text = (f"{row['workload']:14s} {row['atoms']:6d} atoms {row['edges']:8d} edges "
            f"{row['task']:14s} {times}")
    for name in _FUSED:
        text += f"; {name}/compile {row[f'{name} vs compile']:.2f}"
        if f"{name} vs compile peak" in row:
            text += f", forward peak {row[f'{name} vs compile peak']:.2f}"
    return text


def summarize(rows: list[dict]) -> list[str]:
    """Against the issue's targets: <= 0.3x torch.compile for LJ at 32,000
    atoms, forward peak memory <= 0.5x."""
    lines = []
    for row in rows:
        if row["workload"] != "lennard-jones" or row["atoms"] != max(ATOMS):
            continue
        for name in _FUSED:
            ratio = row[f"{name} vs compile"]
            lines.append(f"LJ {row['task']} at {row['atoms']} atoms, {name}: {ratio:.2f}x "
                         f"torch.compile (target <= 0.3x): {'met' if ratio <= 0.3 else 'NOT met'}")
            if f"{name} vs compile peak" in row:
                peak = row[f"{name} vs compile peak"]
                lines.append(f"LJ forward peak memory, {name}: {peak:.2f}x torch.compile "
                             f"(target <= 0.5x): {'met' if peak <= 0.5 else 'NOT met'}")
    return lines


def run(atoms: list[int], budget: float) -> list[dict]:
    rows = []
    for count in atoms:
        rows += run_lj(count, budget)
    for count in atoms:
        rows += run_schnet(count, budget)
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--atoms", default=",".join(map(str, ATOMS)))
    parser.add_argument("--budget", type=float, default=2.0,
                        help="seconds of timing per table row")
    parser.add_argument("--out", default="docs/benchmarks")
    parser.add_argument("--peak-of", help=argparse.SUPPRESS)  # workload:atoms:variant
    args = parser.parse_args()
    if args.peak_of:
        workload, atoms, variant = args.peak_of.split(":")
        print(_forward_peak_here(workload, int(atoms), variant))
        return 0
    rows = run([int(a) for a in args.atoms.split(",")], args.budget)
    for line in summarize(rows):
        print(line)
    report.write_csv(Path(args.out) / "message_passing_cpu.csv", rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
