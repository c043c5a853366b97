"""The Python snippets of README.md and docs/*.md run as written: each
file's blocks in order, in a fresh interpreter, as a newcomer would paste
them."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import segops

ROOT = Path(__file__).resolve().parents[2]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
_BLOCK = re.compile(r"^```python\n(.*?)^```", re.MULTILINE | re.DOTALL)


def snippets(path: Path) -> list[str]:
    return _BLOCK.findall(path.read_text())


@pytest.mark.long
@pytest.mark.parametrize("path", [p for p in DOCS if snippets(p)], ids=lambda p: p.name)
def test_snippets_run(path: Path, tmp_path: Path) -> None:
    needs_compiler = "segops.jit" in path.read_text() or "segops.fusion" in path.read_text()
    if needs_compiler:
        pytest.importorskip("segops._native._segc", reason="segops.jit needs the compiler")
    script = "\n\n".join(snippets(path))
    env = dict(os.environ, SEGOPS_CACHE_DIR=str(tmp_path / "segops"),
               TORCHINDUCTOR_CACHE_DIR=str(tmp_path / "inductor"))
    # The segops this process imported (a sanitizer build's, under make sanitize).
    package_root = str(Path(segops.__file__).resolve().parents[1])
    env["PYTHONPATH"] = os.pathsep.join([package_root, env.get("PYTHONPATH", "")])
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                            timeout=600, env=env, cwd=tmp_path)
    assert result.returncode == 0, f"{path.name}:\n{script}\n{result.stderr[-3000:]}"
