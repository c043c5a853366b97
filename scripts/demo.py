"""The segops demo: run segmented_sum on CPU (and CUDA when present) beside a
PyTorch reference, show what the op library compiled, then what segops
does beyond the first ops: rows of 64 features, message passing over a
neighbour list (segops.jit), a PyG-style layer fused inside torch.compile
(segops.fusion), and a model exported with its forces and run by a Python
that never imports segops (segops.export)."""

from __future__ import annotations

import re
import subprocess
import sys
import tempfile
import textwrap
import time
import warnings
from pathlib import Path

import torch

import segops
from segops import _library


def show_sum(device: str) -> None:
    # Three "molecules" of 2, 0 and 3 atoms with 3-vector forces.
    idx = torch.tensor([0, 0, 2, 2, 2], dtype=torch.int32, device=device)
    x = torch.arange(15, dtype=torch.float32, device=device).reshape(5, 3)
    out = segops.segmented_sum(x, idx, 3)
    reference = torch.zeros(3, 3, device=device).index_add_(0, idx.long(), x)
    print(f"segmented_sum on {device}: x (5, 3), idx {idx.tolist()}, num_segments 3")
    for s in range(3):
        print(f"  segment {s}: segops {out[s].tolist()}   torch index_add_ {reference[s].tolist()}")
    print(f"  equal to the reference: {torch.equal(out, reference)}")

    scalars = torch.randn(10_000, dtype=torch.float64, device=device)
    many = torch.sort(torch.randint(0, 1000, (10_000,), device=device)).values.to(torch.int32)
    reference = torch.zeros(1000, dtype=torch.float64, device=device)
    reference.index_add_(0, many.long(), scalars)
    error = (segops.segmented_sum(scalars, many, 1000) - reference).abs().max().item()
    print(f"  10000 rows in 1000 segments (float64): max |segops - index_add_| = {error:.3g}")


def show_all_ops(device: str) -> None:
    """Every public op against plain PyTorch, and a derived gradient."""
    generator = torch.Generator().manual_seed(0)
    counts = torch.tensor([3, 0, 4, 1])
    idx = torch.repeat_interleave(torch.arange(4), counts).to(device=device, dtype=torch.int32)
    seg = idx.long()
    x = torch.randn(8, 3, dtype=torch.float64, generator=generator).to(device)
    y = torch.randn(8, 3, dtype=torch.float64, generator=generator).to(device)
    w = torch.randn(4, dtype=torch.float64, generator=generator).to(device)
    m = torch.randn(4, 3, 3, dtype=torch.float64, generator=generator).to(device)
    def sums(t):
        return torch.zeros((4,) + t.shape[1:], dtype=t.dtype, device=device).index_add(0, seg, t)
    count = counts.to(device=device, dtype=torch.float64).clamp(min=1)
    checks = {
        "segmented_sum": (segops.segmented_sum(x, idx, 4), sums(x)),
        "segmented_mean": (segops.segmented_mean(x, idx, 4), sums(x) / count[:, None]),
        "segmented_rms_norm": (segops.segmented_rms_norm(x, idx, 4),
                               torch.sqrt(sums((x * x).sum(-1)) / count)),
        "segmented_dot": (segops.segmented_dot(x, y, idx, 4), sums((x * y).sum(-1))),
        "segmented_mul": (segops.segmented_mul(x, w, idx, 4), x * w[seg][:, None]),
        "segmented_matvec": (segops.segmented_matvec(x, m, idx, 4),
                             torch.einsum("nij,ni->nj", m[seg], x)),
    }
    print(f"all six ops on {device} (float64, segment 1 empty): max |segops - PyTorch|")
    for name, (got, want) in checks.items():
        print(f"  {name:20s} {(got - want).abs().max().item():.2e}")
    leaf = x.clone().requires_grad_()
    (grad,) = torch.autograd.grad(segops.segmented_rms_norm(leaf, idx, 4).sum(), leaf)
    ref_leaf = x.clone().requires_grad_()
    reference_norm = torch.sqrt(sums((ref_leaf * ref_leaf).sum(-1)) / count)
    (ref,) = torch.autograd.grad(reference_norm.sum(), ref_leaf)
    error = (grad - ref).abs().max().item()
    print(f"  d rms_norm / dx (compiler-derived kernel) vs autograd: {error:.2e}")


def show_library() -> None:
    info = segops.library_info()
    print(f"op library: {len(info['kernels'])} kernels in {info['native_dir']}")
    print(f"  host code: {info['host_library']} (compiled for {info['host_cpu']}; "
          f"builds: {', '.join(info['host_builds'])})")
    for chip, file_name in sorted(info["ptx"].items()):
        ptx = (_library.NATIVE_DIR / file_name).read_text()
        entries = re.findall(r"\.visible \.entry (\w+)\(", ptx)
        print(f"  PTX {chip}: {file_name}, {len(ptx)} bytes, {len(entries)} entries")
        # Size of one kernel's PTX text, from its .entry to the next one.
        name = "segmented_sum_f32_w3"
        start = ptx.index(f".visible .entry {name}(")
        end = ptx.find(".visible .entry", start + 1)
        body = ptx[start:end if end >= 0 else len(ptx)]
        print(f"    entry {name}: {len(body)} bytes of PTX, {body.count(chr(10))} lines")


def show_jit() -> None:
    """segops.jit: a user's energy, fused into one kernel, and its forces
    from the compiler-derived gradient kernel, against eager PyTorch."""
    @segops.jit
    def energy(x, q, idx, num_segments):
        d = x - segops.segmented_gather(segops.segmented_mean(x, idx, num_segments), idx)
        return segops.segmented_sum(q * (d * d).sum(-1), idx, num_segments)

    generator = torch.Generator().manual_seed(0)
    idx = torch.sort(torch.randint(0, 100, (1000,), generator=generator)).values.to(torch.int32)
    x = torch.randn(1000, 3, dtype=torch.float64, generator=generator, requires_grad=True)
    q = torch.rand(1000, dtype=torch.float64, generator=generator)
    forces = -torch.autograd.grad(energy(x, q, idx, 100).sum(), x)[0]
    reference = -torch.autograd.grad(energy.fn(x, q, idx, 100).sum(), x)[0]
    print("segops.jit energy E_s = sum q |x - mean_s x|^2 over 1000 rows, 100 segments:")
    print(f"  forces -dE/dx (derived kernel) vs eager autograd: "
          f"max |difference| = {(forces - reference).abs().max().item():.2e}")
    ir = energy.mlir(x.detach(), q, idx, 100)
    ops = re.findall(r"= (seg\.\w+)", ir)
    print(f"  its seg IR: {len(ops)} seg ops ({', '.join(ops)}), compiled to one kernel")


def has_compiler() -> bool:
    try:
        from segops._native import _segc  # noqa: F401 - the compiler module
    except ImportError:
        return False
    return True


def show_wide_rows() -> None:
    """Rows of 64 features: the op library ships widths 1 and 3, others
    compile at run time on first use (then come from the disk cache)."""
    generator = torch.Generator().manual_seed(1)
    idx = torch.sort(torch.randint(0, 500, (20000,), generator=generator)).values
    x = torch.randn(20000, 64, dtype=torch.float64, generator=generator)
    start = time.perf_counter()
    mean = segops.segmented_mean(x, idx, 500)
    first = time.perf_counter() - start
    counts = torch.bincount(idx, minlength=500).clamp(min=1).unsqueeze(-1)
    reference = torch.zeros(500, 64, dtype=torch.float64).index_add_(0, idx, x) / counts
    print(f"rows of 64 features: segmented_mean of (20000, 64) into 500 segments, first call "
          f"{first:.2f} s (compiled at run time or read from the cache); max |segops - "
          f"index_add_ / counts| = {(mean - reference).abs().max().item():.2e}")


def _neighbours(atoms: int, per_atom: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Receivers i (sorted) and senders j of a random neighbour list."""
    generator = torch.Generator().manual_seed(2)
    i = torch.arange(atoms).repeat_interleave(per_atom)
    j = (i + torch.randint(1, atoms, (i.shape[0],), generator=generator)) % atoms
    return i, j


def show_message_passing() -> None:
    """A pair potential over a neighbour list in one segops.jit function:
    gathers by senders and receivers, pair energies, sums into atoms and
    molecules; forces from the derived kernel."""

    @segops.jit
    def pair_energy(pos, i, j, batch, num_atoms: int, num_molecules: int):
        rij = segops.segmented_gather(pos, j) - segops.segmented_gather(pos, i)
        e = torch.exp(-(rij * rij).sum(-1))
        return segops.segmented_sum(segops.segmented_sum(e, i, num_atoms), batch,
                                    num_molecules)

    i, j = _neighbours(2000, 16)
    batch = torch.arange(2000) // 100
    pos = torch.randn(2000, 3, dtype=torch.float64, requires_grad=True)
    energy = pair_energy(pos, i, j, batch, 2000, 20)
    forces = -torch.autograd.grad(energy.sum(), pos)[0]
    rij = pos[j] - pos[i]
    eager = torch.zeros(20, dtype=torch.float64).index_add(
        0, batch[i], torch.exp(-(rij * rij).sum(-1)))
    eager_forces = -torch.autograd.grad(eager.sum(), pos)[0]
    print("message passing (segops.jit, 2000 atoms, 32000 edges, three indices): "
          f"energy max |difference| {(energy - eager).abs().max().item():.2e}, "
          f"forces {(forces - eager_forces).abs().max().item():.2e}")


def show_fusion() -> None:
    """A PyG-style layer (gather, message, index_add) compiled with
    segops.fusion: its segment ops and elementwise neighbours become one
    segops kernel inside the compiled graph."""
    import segops.fusion

    def layer(x, w, i, j):
        message = torch.tanh(x[j] * w)
        return torch.zeros_like(x).index_add(0, i, message)

    i, j = _neighbours(2000, 16)
    x = torch.randn(2000, 16, dtype=torch.float64)
    w = torch.randn(16, dtype=torch.float64)
    segops.fusion.clear_reports()
    compiled = torch.compile(layer, options=segops.fusion.options())
    # Compiled here, not replayed from Inductor's cache: the pass reports.
    with torch._inductor.config.patch(fx_graph_cache=False):
        difference = (compiled(x, w, i, j) - layer(x, w, i, j)).abs().max().item()
    fused = [report for report in segops.fusion.reports() if not report.backward]
    ops = [op.split(".")[-2] for report in fused for op in report.ops]  # aten.tanh.default
    print(f"segops.fusion: a PyG-style layer under torch.compile, {len(fused)} fused "
          f"cluster(s) of {', '.join(ops)}; max |compiled - eager| = {difference:.2e}")


def show_export() -> None:
    """A model with forces, exported and packaged with its segops programs,
    run by a fresh Python that loads only libsegops_ops.so (C++ programs do
    the same: docs/deploy.md, examples/cpp)."""
    import segops.export

    @segops.jit
    def energy(pos, i, j, batch, num_atoms: int, num_molecules: int):
        rij = segops.segmented_gather(pos, j) - segops.segmented_gather(pos, i)
        e = 1.0 / (1.0 + (rij * rij).sum(-1))
        return segops.segmented_sum(segops.segmented_sum(e, i, num_atoms), batch,
                                    num_molecules)

    class Model(torch.nn.Module):
        def forward(self, pos, i, j, batch, bias):
            pos = pos.detach().requires_grad_(True)
            e = energy(pos, i, j, batch, pos.shape[0], bias.shape[0]) + bias
            return e, -torch.autograd.grad(e.sum(), pos)[0]

    def inputs(molecules: int) -> tuple[torch.Tensor, ...]:
        i, j = _neighbours(10 * molecules, 4)
        j = (i // 10) * 10 + j % 10  # neighbours in the same molecule
        j = torch.where(j == i, (j + 1) % 10 + (i // 10) * 10, j)
        return (torch.randn(10 * molecules, 3, dtype=torch.float64), i, j,
                torch.arange(10 * molecules) // 10,
                torch.zeros(molecules, dtype=torch.float64))

    rows = lambda name: torch.export.Dim(name, min=2, max=2**31 - 1)  # noqa: E731
    atoms, edges, molecules = rows("atoms"), rows("edges"), rows("molecules")
    start = time.perf_counter()
    with warnings.catch_warnings():  # PyTorch's own deprecation notices
        warnings.simplefilter("ignore", FutureWarning)
        exported = segops.export.export(Model(), inputs(3), dynamic_shapes=(
            {0: atoms}, {0: edges}, {0: edges}, {0: atoms}, {0: molecules}))
        out = Path(tempfile.mkdtemp(prefix="segops-demo-"))
        package = segops.export.package(exported, out / "model.pt2")
    seconds = time.perf_counter() - start
    test_inputs = inputs(8)
    torch.save(list(test_inputs), out / "inputs.pt")
    torch.save([t.detach() for t in Model()(*test_inputs)], out / "expected.pt")
    run = textwrap.dedent(f"""
        import sys, torch
        torch.ops.load_library({str(segops.export.operator_library())!r})
        torch.ops.segops.load_programs({str(segops.export.programs_directory(package))!r})
        model = torch._inductor.aoti_load_package({str(package)!r})
        outputs = model(*torch.load({str(out / "inputs.pt")!r}))
        expected = torch.load({str(out / "expected.pt")!r})
        print(max((a - b).abs().max().item() for a, b in zip(outputs, expected)),
              "segops" in sys.modules)
    """)
    result = subprocess.run([sys.executable, "-c", run], capture_output=True, text=True)
    if result.returncode != 0:
        raise RuntimeError(f"the exported model failed to run:\n{result.stderr[-2000:]}")
    difference, imported = result.stdout.split()[-2:]
    if imported != "False":
        raise RuntimeError("the exported model's process imported segops")
    programs = len(list(segops.export.programs_directory(package).iterdir()))
    print(f"segops.export: energy and forces exported (3 molecules) and packaged with "
          f"{programs} program levels in {seconds:.0f} s; run at 8 molecules by a fresh "
          f"Python that never imports segops: max |difference| from eager = "
          f"{float(difference):.2e}")


def main() -> None:
    print(f"segops {segops.__version__}, torch {torch.__version__}")
    show_library()
    show_sum("cpu")
    show_all_ops("cpu")
    if has_compiler():
        show_jit()
        show_wide_rows()
        show_message_passing()
        show_fusion()
        show_export()
    else:
        print("segops.jit, fusion and export: this build has no compiler module "
              "(the runtime wheel)")
    if torch.cuda.is_available():
        show_sum("cuda")
        show_all_ops("cuda")
    else:
        print("CUDA: no GPU here; CUDA tensors run the PTX above where one is present")


if __name__ == "__main__":
    main()
