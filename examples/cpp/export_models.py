"""Exports the models of models.py and packages them for C++:

    python examples/cpp/export_models.py OUT_DIR

writes OUT_DIR/demo.pt2 and demo.segops/ (its programs), with inputs of
another size than the export's and eager PyTorch's outputs for them
(demo_inputs.pt, demo_expected.pt), and OUT_DIR/lj.pt2 and lj.segops/ for
the MD loop."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))

import models  # noqa: E402

import segops.export  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("out", type=Path)
    out = parser.parse_args().out
    out.mkdir(parents=True, exist_ok=True)

    demo = models.Demo().eval()
    exported = segops.export.export(demo, models.demo_inputs(4, seed=0),
                                   dynamic_shapes=models.demo_dynamic_shapes())
    segops.export.package(exported, out / "demo.pt2")
    inputs = models.demo_inputs(7, seed=1)
    torch.save(list(inputs), out / "demo_inputs.pt")
    torch.save([t.detach() for t in demo(*inputs)], out / "demo_expected.pt")

    exported = segops.export.export(models.LennardJones(), models.lj_inputs(),
                                   dynamic_shapes=models.lj_dynamic_shapes())
    segops.export.package(exported, out / "lj.pt2")
    print(f"wrote {out}/demo.pt2, {out}/lj.pt2 and their programs")


if __name__ == "__main__":
    main()
