#!/usr/bin/env python3
"""Records a compiler bundle (segops._bundle): runs pytest with the compiler's
answers recorded into DIR, then asks for the PTX of every program level the
tests ran, so that a machine without the compiler (the GPU machine) can run
them from the bundle.

    python scripts/record_bundle.py record DIR [pytest arguments]

SEGOPS_BUNDLE_CHIPS (default sm_90) names the PTX targets.
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

# The tests' harness asks for the GPU code of every program they ran.
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "test" / "python"))


def _main(argv: list[str]) -> int:
    if len(argv) < 2 or argv[0] != "record":
        print("usage: python scripts/record_bundle.py record DIR [pytest arguments]",
              file=sys.stderr)
        return 2
    directory = Path(argv[1]).resolve()
    os.environ["SEGOPS_RECORD_BUNDLE"] = str(directory)
    # A fresh disk cache: every compilation reaches the compiler, and so
    # the bundle.
    os.environ["SEGOPS_CACHE_DIR"] = tempfile.mkdtemp(prefix="segops-bundle-cache-")
    import pytest

    status = pytest.main(["-q", "-p", "no:cacheprovider", *argv[2:]])
    if status != 0:
        return int(status)
    chips = os.environ.get("SEGOPS_BUNDLE_CHIPS", "sm_90").split(",")
    import harness  # after the environment is set: it imports segops

    count = harness.record_gpu_code(chips)
    files = list(directory.glob("*.json"))
    size = sum(f.stat().st_size for f in files)
    print(f"segops bundle {directory}: {count} program levels, PTX for {', '.join(chips)}; "
          f"{len(files)} files, {size / 2**20:.1f} MiB")
    return 0


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))
