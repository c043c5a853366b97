"""The models examples/cpp runs from C++: written here, exported with
torch.export and packaged with segops.export (export_models.py), and
checked against eager PyTorch by test/python/test_deploy.py.

- `Demo`: energy and forces of a batch of molecules from library ops
  (segmented_sum on rows of 8 features, segmented_mean), a segops.jit function of three indices
  (receivers i, senders j and the molecule of each atom) and PyTorch code
  that segops.fusion fuses (index_add message passing).
- `LennardJones`: energy and forces of the Lennard-Jones system of
  bench/message_passing.py over a neighbour list with a skin, switched off
  smoothly between SWITCH_ON and CUTOFF so that energy and forces stay
  continuous as pairs cross the cutoff (what an MD loop needs to conserve
  energy); the C++ MD loop md_lj.cpp calls it every step.
"""

from __future__ import annotations

import torch
from torch import Tensor

import segops

CUTOFF = 2.5
SWITCH_ON = 2.0
DENSITY = 0.8442


@segops.jit
def pair_energy(pos: Tensor, i: Tensor, j: Tensor, shift: Tensor, batch: Tensor,
                num_atoms: int, num_molecules: int) -> Tensor:
    """Per molecule: a soft pair repulsion summed into atoms (by i), then
    into molecules (by batch)."""
    rij = segops.segmented_gather(pos, j) - segops.segmented_gather(pos, i) + shift
    r2 = (rij * rij).sum(-1)
    e = torch.exp(-r2) * 0.5
    return segops.segmented_sum(segops.segmented_sum(e, i, num_atoms), batch, num_molecules)


class Demo(torch.nn.Module):
    """Energy (S,) and forces (N, 3) of S molecules of N atoms with E
    edges; features x (N, F)."""

    def __init__(self, features: int = 8) -> None:
        super().__init__()
        self.w = torch.nn.Parameter(torch.linspace(-0.5, 0.5, features, dtype=torch.float64))

    def forward(self, pos: Tensor, x: Tensor, i: Tensor, j: Tensor, shift: Tensor,
                batch: Tensor, molecule_bias: Tensor) -> tuple[Tensor, Tensor]:
        pos = pos.detach().requires_grad_(True)
        num_molecules = molecule_bias.shape[0]
        e_pairs = pair_energy(pos, i, j, shift, batch, pos.shape[0], num_molecules)
        # Message passing as PyG writes it: segops.fusion fuses it.
        rij = pos[j] - pos[i] + shift
        message = x[j] * torch.exp(-(rij * rij).sum(-1, keepdim=True))
        h = torch.zeros_like(x).index_add(0, i, message)
        # Rows of 8 features: a width the op library does not ship.
        e_features = segops.segmented_sum(torch.tanh(h), batch, num_molecules) @ self.w
        centre = segops.segmented_mean(pos, batch, num_molecules)
        e_centre = (centre * centre).sum(-1) * 1e-3
        energy = e_pairs + e_features + e_centre + molecule_bias
        forces, = torch.autograd.grad(energy.sum(), pos, create_graph=self.training)
        return energy, -forces


@segops.jit
def lj_energy(pos: Tensor, i: Tensor, j: Tensor, shift: Tensor, batch: Tensor,
              num_atoms: int, num_systems: int) -> Tensor:
    rij = segops.segmented_gather(pos, j) - segops.segmented_gather(pos, i) + shift
    r2 = (rij * rij).sum(-1)
    s6 = (1.0 / r2) ** 3
    # A smoothstep from 1 at SWITCH_ON to 0 at CUTOFF (0 beyond): energy and
    # forces continuous.
    t = torch.clamp((r2 - SWITCH_ON**2) * (1.0 / (CUTOFF**2 - SWITCH_ON**2)), 0.0, 1.0)
    switch = 1.0 - t * t * (3.0 - 2.0 * t)
    e = 2.0 * (s6 * s6 - s6) * switch  # 4 (...) / 2: each pair twice in a full list
    return segops.segmented_sum(segops.segmented_sum(e, i, num_atoms), batch, num_systems)


class LennardJones(torch.nn.Module):
    """Energy (1,) and forces (N, 3) from positions and a full neighbour
    list (receivers i sorted, senders j, minimum-image shifts)."""

    def forward(self, pos: Tensor, i: Tensor, j: Tensor, shift: Tensor) -> tuple[Tensor, Tensor]:
        pos = pos.detach().requires_grad_(True)
        batch = torch.zeros(pos.shape[0], dtype=torch.int64, device=pos.device)
        energy = lj_energy(pos, i, j, shift, batch, pos.shape[0], 1)
        forces, = torch.autograd.grad(energy.sum(), pos)
        return energy, -forces


# -- inputs -------------------------------------------------------------------


def demo_inputs(molecules: int, seed: int, features: int = 8) -> tuple[Tensor, ...]:
    """Molecules of 5 to 12 atoms, each atom with 3 to 6 neighbours in its
    molecule (receivers sorted)."""
    generator = torch.Generator().manual_seed(seed)
    sizes = torch.randint(5, 13, (molecules,), generator=generator)
    batch = torch.repeat_interleave(torch.arange(molecules), sizes)
    first = torch.cumsum(sizes, 0) - sizes
    atoms = int(sizes.sum())
    degree = torch.randint(3, 7, (atoms,), generator=generator)
    i = torch.repeat_interleave(torch.arange(atoms), degree)
    size_of_i = sizes[batch[i]]
    offset = 1 + (torch.rand(i.shape[0], generator=generator) * (size_of_i - 1)).long()
    j = first[batch[i]] + (i - first[batch[i]] + offset) % size_of_i
    pos = torch.rand(atoms, 3, generator=generator, dtype=torch.float64) * 3
    x = torch.randn(atoms, features, generator=generator, dtype=torch.float64)
    shift = torch.zeros(i.shape[0], 3, dtype=torch.float64)
    bias = torch.randn(molecules, generator=generator, dtype=torch.float64)
    return pos, x, i, j, shift, batch, bias


# segops indexes rows and segments with int32.
MAX_ROWS = 2**31 - 1


def demo_dynamic_shapes() -> tuple[dict[int, torch.export.Dim], ...]:
    atoms = torch.export.Dim("atoms", min=2, max=MAX_ROWS)
    edges = torch.export.Dim("edges", min=2, max=MAX_ROWS)
    molecules = torch.export.Dim("molecules", min=2, max=MAX_ROWS)
    return ({0: atoms}, {0: atoms}, {0: edges}, {0: edges}, {0: edges}, {0: atoms},
            {0: molecules})


def fcc_lattice(atoms: int) -> tuple[Tensor, float]:
    """`atoms` = 4 n^3 positions on an fcc lattice at DENSITY, and the box
    length (md_lj.cpp builds the same lattice)."""
    cells = round((atoms / 4) ** (1 / 3))
    lattice = (4 / DENSITY) ** (1 / 3)
    basis = torch.tensor([[0, 0, 0], [0.5, 0.5, 0], [0.5, 0, 0.5], [0, 0.5, 0.5]],
                         dtype=torch.float64)
    grid = torch.stack(torch.meshgrid(*[torch.arange(cells)] * 3, indexing="ij"), -1)
    return (grid.reshape(-1, 1, 3) + basis).reshape(-1, 3) * lattice, cells * lattice


def neighbour_list(pos: Tensor, box: float, cutoff: float) -> tuple[Tensor, Tensor, Tensor]:
    """A full list within `cutoff` under the minimum image: receivers i
    (sorted), senders j and the shifts."""
    d = pos[None, :, :] - pos[:, None, :]
    shift = -box * torch.round(d / box)
    r2 = ((d + shift) ** 2).sum(-1)
    i, j = torch.nonzero((r2 < cutoff**2) & (r2 > 0), as_tuple=True)
    return i, j, shift[i, j]


def lj_inputs(cells: int = 3, seed: int = 0, skin: float = 0.3) -> tuple[Tensor, ...]:
    pos, box = fcc_lattice(4 * cells**3)
    generator = torch.Generator().manual_seed(seed)
    pos = pos + (torch.rand(pos.shape, generator=generator, dtype=torch.float64) - 0.5) * 0.1
    return (pos, *neighbour_list(pos, box, CUTOFF + skin))


def lj_dynamic_shapes() -> tuple[dict[int, torch.export.Dim], ...]:
    atoms = torch.export.Dim("atoms", min=2, max=MAX_ROWS)
    edges = torch.export.Dim("edges", min=2, max=MAX_ROWS)
    return ({0: atoms}, {0: edges}, {0: edges}, {0: edges})
