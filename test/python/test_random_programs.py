"""Random compositions of seg ops and elementwise arithmetic, compiled as
fused kernels (forward and derived gradient, CPU backend), against the same
formula in PyTorch: exercises pass scheduling, per-segment epilogues and
gradient accumulation on programs nobody wrote by hand."""

from __future__ import annotations

import random

import harness
import pytest
import torch

from segops import _compiler

pytestmark = pytest.mark.compiler

COUNTS = [3, 0, 2, 4, 1, 0]
IDX = torch.repeat_interleave(torch.arange(len(COUNTS)), torch.tensor(COUNTS)).to(torch.int32)
N, S = int(IDX.shape[0]), len(COUNTS)
SEG = IDX.long()
T = {
    "row": "tensor<?x3xf64>",
    "seg": "tensor<?xf64>",
    "vec": "tensor<?x3xf64>",
    "mat": "tensor<?x3x3xf64>",
}


def _sums(t: torch.Tensor) -> torch.Tensor:
    return torch.zeros((S,) + t.shape[1:], dtype=t.dtype).index_add(0, SEG, t)


class Program:
    """Builds MLIR text and a PyTorch function side by side."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.lines: list[str] = []
        self.count = 0
        # kind -> list of (ssa name, torch builder taking the env)
        self.values: dict[str, list[tuple[str, object]]] = {
            "row": [("%x", lambda e: e["x"]), ("%y", lambda e: e["y"])],
            "seg": [("%w", lambda e: e["w"])],
            "vec": [],
            "mat": [("%m", lambda e: e["m"])],
        }
        # Values computed through at least one seg op.
        self.through_seg: set[str] = set()

    def fresh(self) -> str:
        self.count += 1
        return f"%v{self.count}"

    def pick(self, kind: str):
        return self.rng.choice(self.values[kind])

    def add(self, kind: str, text: str, fn) -> None:
        name = self.fresh()
        self.lines.append(f"  {name} = {text}")
        self.values[kind].append((name, fn))
        operands = {token.rstrip(",") for token in text.split() if token.startswith("%")}
        if text.startswith("seg.") or operands & self.through_seg:
            self.through_seg.add(name)

    def step(self) -> None:
        choice = self.rng.randrange(9)
        r1, r2 = self.pick("row"), self.pick("row")
        if choice == 0:
            self.add("vec", f"seg.sum {r1[0]}, %idx, %n : {T['row']}, tensor<?xi32> -> {T['vec']}",
                     lambda e, a=r1[1]: _sums(a(e)))
        elif choice == 1:
            self.add("vec", f"seg.mean {r1[0]}, %idx, %n : {T['row']}, tensor<?xi32> -> {T['vec']}",
                     lambda e, a=r1[1]: _sums(a(e)) / e["c"][:, None])
        elif choice == 2:
            self.add(
                "seg",
                f"seg.rms_norm {r1[0]}, %idx, %n : {T['row']}, tensor<?xi32> -> {T['seg']}",
                lambda e, a=r1[1]: (
                    torch.sqrt(_sums((a(e) * a(e)).sum(-1)) / e["c"] + 1e-30)
                    * (_sums((a(e) * a(e)).sum(-1)) > 0)
                ),
            )
        elif choice == 3:
            self.add(
                "seg",
                f"seg.dot {r1[0]}, {r2[0]}, %idx, %n : {T['row']}, {T['row']}, tensor<?xi32> -> {T['seg']}",
                lambda e, a=r1[1], b=r2[1]: _sums((a(e) * b(e)).sum(-1)),
            )
        elif choice == 4:
            s = self.pick("seg")
            self.add(
                "row",
                f"seg.mul {r1[0]}, {s[0]}, %idx : {T['row']}, {T['seg']}, tensor<?xi32> -> {T['row']}",
                lambda e, a=r1[1], b=s[1]: a(e) * b(e)[SEG][:, None],
            )
        elif choice == 5:
            m = self.pick("mat")
            self.add(
                "row",
                f"seg.matvec {r1[0]}, {m[0]}, %idx : {T['row']}, {T['mat']}, tensor<?xi32> -> {T['row']}",
                lambda e, a=r1[1], b=m[1]: torch.einsum("nij,ni->nj", b(e)[SEG], a(e)),
            )
        elif choice == 6:
            self.add(
                "mat",
                f"seg.outer_sum {r1[0]}, {r2[0]}, %idx, %n : {T['row']}, {T['row']}, tensor<?xi32> -> {T['mat']}",
                lambda e, a=r1[1], b=r2[1]: _sums(a(e)[:, :, None] * b(e)[:, None, :]),
            )
        elif choice == 7 and self.values["vec"]:
            v = self.pick("vec")
            self.add("row", f"seg.gather {v[0]}, %idx : {T['vec']}, tensor<?xi32> -> {T['row']}",
                     lambda e, a=v[1]: a(e)[SEG])
        else:
            kind = self.rng.choice(["row", "seg"])
            a, b = self.pick(kind), self.pick(kind)
            op, fn = self.rng.choice(
                [
                    ("arith.addf", lambda p, q: p + q),
                    ("arith.mulf", lambda p, q: p * q),
                    ("arith.subf", lambda p, q: p - q),
                ]
            )
            self.add(kind, f"{op} {a[0]}, {b[0]} : {T[kind]}",
                     lambda e, a=a[1], b=b[1], fn=fn: fn(a(e), b(e)))

    def finish(self) -> tuple[str, object, str]:
        # The result goes through a seg op, so that every derived function
        # has one too (elementwise-only code has no segments to run over).
        kind = self.rng.choice([k for k in ("row", "seg", "vec", "mat") if any(
            name in self.through_seg for name, _ in self.values[k])])
        name, fn = [v for v in self.values[kind] if v[0] in self.through_seg][-1]
        text = (f"func.func @p(%x: {T['row']}, %y: {T['row']}, %w: {T['seg']}, %m: {T['mat']}, "
                f"%idx: tensor<?xi32>, %n: index) -> {T[kind]} {{\n" + "\n".join(self.lines)
                + f"\n  return {name} : {T[kind]}\n}}\n")
        return text, fn, kind


@pytest.mark.parametrize("seed", range(40))
def test_random_program_and_its_gradient(seed: int) -> None:
    rng = random.Random(seed)
    program = Program(rng)
    for _ in range(rng.randrange(3, 8)):
        program.step()
    while not program.through_seg:
        program.step()
    source, reference, _ = program.finish()
    module = harness.CompiledModule(_compiler.seg_opt(source, "--seg-derive=order=1"))

    generator = torch.Generator().manual_seed(seed)
    inputs = {
        "x": torch.randn(N, 3, dtype=torch.float64, generator=generator),
        "y": torch.randn(N, 3, dtype=torch.float64, generator=generator),
        "w": torch.randn(S, dtype=torch.float64, generator=generator),
        "m": torch.randn(S, 3, 3, dtype=torch.float64, generator=generator),
    }
    leaves = {k: v.clone().requires_grad_() for k, v in inputs.items()}
    env = dict(leaves, c=torch.tensor(COUNTS, dtype=torch.float64).clamp(min=1))
    expected = reference(env)
    args = [inputs["x"], inputs["y"], inputs["w"], inputs["m"], IDX]
    (got,) = module.run("p", args, N, S)
    torch.testing.assert_close(got, expected.detach(), msg=lambda m: f"{m}\n{source}")

    cotangent = torch.randn(expected.shape, dtype=torch.float64, generator=generator)
    grads = module.run("p_grad", args + [cotangent], N, S)
    # The gradient function covers the arguments the result depends on, and m
    # (a matrix is always per segment, so its zero gradient has a length).
    probe = torch.autograd.grad(expected.sum(), list(leaves.values()), allow_unused=True,
                                retain_graph=True)
    used = [name for name, g in zip(leaves, probe) if g is not None or name == "m"]
    want = torch.autograd.grad(expected, [leaves[name] for name in used], cotangent,
                               allow_unused=True)
    assert len(grads) == len(used)
    for name, g, w in zip(used, grads, want):
        w = torch.zeros_like(g) if w is None else w
        torch.testing.assert_close(g, w, msg=lambda m: f"d/d{name}: {m}\n{source}")
