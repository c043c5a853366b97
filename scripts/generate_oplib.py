"""Writes oplib/segops.mlir, the op library's source, from the op table
(segops._op_table.library_source); --check only compares."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from segops import _op_table

OPLIB = Path(__file__).resolve().parents[1] / "oplib" / "segops.mlir"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true",
                        help="exit 1 if oplib/segops.mlir is not the table's")
    options = parser.parse_args()
    text = _op_table.library_source()
    if options.check:
        if OPLIB.read_text() != text:
            print(f"{OPLIB} is not generated from the op table; run "
                  "`python scripts/generate_oplib.py`", file=sys.stderr)
            return 1
        return 0
    OPLIB.write_text(text)
    print(f"wrote {OPLIB}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
