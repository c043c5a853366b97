"""Data-parallel training with segops: DistributedDataParallel over two gloo
ranks (CPU) runs force-matching steps of a model of library ops and a
segops.jit function, and the ranks end with bitwise identical parameters,
equal to one process taking the same steps over both ranks' batches
(docs/distributed.md)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

import segops

STEPS = 3
ATOMS, MOLECULES, FEATURES = 60, 6, 8


@segops.jit
def _pair_energy(r: torch.Tensor, scale: torch.Tensor, idx: torch.Tensor,
                 num_segments: int) -> torch.Tensor:
    """A per-molecule energy of the atoms' distances to their molecule's
    centre, one fused kernel."""
    centre = segops.segmented_mean(r, idx, num_segments)
    d = r - segops.segmented_gather(centre, idx)
    return segops.segmented_sum(scale * (d * d).sum(-1), idx, num_segments)


class _Model(torch.nn.Module):
    """Per-atom energies from an MLP of the positions' features, summed per
    molecule (library op), plus the JIT'd term."""

    def __init__(self) -> None:
        super().__init__()
        generator = torch.Generator().manual_seed(3)
        self.embed = torch.nn.Linear(3, FEATURES, dtype=torch.float64)
        self.out = torch.nn.Linear(FEATURES, 1, dtype=torch.float64)
        self.scale = torch.nn.Parameter(torch.tensor(0.3, dtype=torch.float64))
        with torch.no_grad():
            for parameter in [*self.embed.parameters(), *self.out.parameters()]:
                parameter.copy_(torch.randn(parameter.shape, generator=generator,
                                            dtype=torch.float64) * 0.5)

    def forward(self, r: torch.Tensor, idx: torch.Tensor) -> torch.Tensor:
        atom = self.out(torch.tanh(self.embed(r))).squeeze(-1)
        energy = segops.segmented_sum(atom, idx, MOLECULES)
        return energy + _pair_energy(r, self.scale * torch.ones_like(atom), idx, MOLECULES)


def _batch(rank: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(100 + rank)
    r = torch.randn(ATOMS, 3, generator=generator, dtype=torch.float64)
    idx = torch.sort(torch.randint(0, MOLECULES, (ATOMS,), generator=generator,
                                   dtype=torch.int32)).values
    forces = torch.randn(ATOMS, 3, generator=generator, dtype=torch.float64)
    energies = torch.randn(MOLECULES, generator=generator, dtype=torch.float64)
    return r, idx, forces, energies


def _loss(model: torch.nn.Module, batch: tuple[torch.Tensor, ...]) -> torch.Tensor:
    """Energy and force matching: forces are -dE/dr, so the loss's gradient
    runs second derivatives of every op."""
    r, idx, target_forces, target_energies = batch
    r = r.clone().requires_grad_()
    energy = model(r, idx)
    (gradient,) = torch.autograd.grad(energy.sum(), r, create_graph=True)
    return ((energy - target_energies) ** 2).mean() + ((-gradient - target_forces) ** 2).mean()


def _worker(rank: int, world_size: int, store: str, out: str) -> None:
    dist.init_process_group("gloo", init_method=f"file://{store}", rank=rank,
                            world_size=world_size)
    try:
        torch.set_num_threads(1)
        model = torch.nn.parallel.DistributedDataParallel(_Model())
        optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
        batch = _batch(rank)
        for _ in range(STEPS):
            optimizer.zero_grad()
            _loss(model, batch).backward()
            optimizer.step()
        torch.save({name: p.detach() for name, p in model.module.named_parameters()},
                   os.path.join(out, f"rank{rank}.pt"))
    finally:
        dist.destroy_process_group()
    # Leave without the interpreter's teardown: there the DDP reducer drops
    # the last reference to the gloo process group, whose destructor joins
    # its run-loop thread holding the GIL while that thread may need the GIL
    # to free a finished all-reduce (its thread-local state holds a Python
    # object). Seen here as a rank that never exits (PyTorch 2.13; gdb:
    # ~Reducer -> ~ProcessGroupGloo -> thread::join against
    # ~AsyncAllreduceWork -> take_gil).
    os._exit(0)


def _one_process(world_size: int) -> dict[str, torch.Tensor]:
    """The same steps in one process: DDP averages the ranks' gradients, so
    the loss is the mean of the batches' losses."""
    torch.set_num_threads(1)
    model = _Model()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    batches = [_batch(rank) for rank in range(world_size)]
    for _ in range(STEPS):
        optimizer.zero_grad()
        sum(_loss(model, batch) / world_size for batch in batches).backward()
        optimizer.step()
    return {name: p.detach() for name, p in model.named_parameters()}


@pytest.mark.skipif(not dist.is_available() or not dist.is_gloo_available(),
                    reason="torch.distributed with gloo")
def test_data_parallel_force_matching_matches_one_process(tmp_path: Path) -> None:
    world_size = 2
    mp.spawn(_worker, args=(world_size, str(tmp_path / "store"), str(tmp_path)),
             nprocs=world_size, join=True)
    ranks = [torch.load(tmp_path / f"rank{rank}.pt") for rank in range(world_size)]
    expected = _one_process(world_size)
    initial = dict(_Model().named_parameters())
    for name, value in expected.items():
        assert not torch.equal(value, initial[name]), f"{name} did not train"
        for rank, parameters in enumerate(ranks):
            assert torch.equal(parameters[name], ranks[0][name]), f"rank {rank} {name}"
        # DDP averages g0 / 2 + g1 / 2; the one process sums the same
        # halves: bitwise equal.
        assert torch.equal(ranks[0][name], value), f"{name}: DDP differs from one process"
