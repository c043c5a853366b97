"""Point the default interpreter at this checkout's python/ package (a .pth
file in site-packages), so that `import segops` works from anywhere."""

from __future__ import annotations

import site
import sys
from pathlib import Path

PACKAGE_ROOT = Path(__file__).resolve().parent.parent / "python"


def main() -> int:
    candidates = [Path(p) for p in site.getsitepackages()] + [Path(site.getusersitepackages())]
    for directory in candidates:
        pth = directory / "segops.pth"
        try:
            if pth.exists() and pth.read_text().strip() == str(PACKAGE_ROOT):
                return 0
            directory.mkdir(parents=True, exist_ok=True)
            pth.write_text(f"{PACKAGE_ROOT}\n")
        except OSError:
            continue
        print(f"develop: {pth} -> {PACKAGE_ROOT}")
        return 0
    print("develop: no writable site-packages directory", file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())
