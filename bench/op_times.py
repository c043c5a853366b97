"""Times of the public ops, forward and forward+backward, at chosen layouts.

    python -m bench.op_times [--configs sum:1:100000:10,mean:3:1000000:10]
                             [--label NAME] [--budget 0.4]

Each config is op:width:N:mean segment length (0: one segment); prints one
line of `fwd/fwd+bwd` medians in µs per run. An extension module cannot be
swapped inside a running process, so two builds of `_torchops` (the C++
kernels and the runtime linked into them) are compared by running this once
per build, alternating, on the same machine state as far as a noisy VM
allows:

    SO=python/segops/_native/_torchops.cpython-311-x86_64-linux-gnu.so
    for round in 1 2; do
      cp OLD.so $SO; python -m bench.op_times --label before
      cp NEW.so $SO; python -m bench.op_times --label after
    done
"""

from __future__ import annotations

import argparse

import torch

from bench import references
from bench.ops import _forward, _forward_backward
from bench.timing import median_seconds

DEFAULT_CONFIGS = ("sum:1:32768:10,sum:1:100000:10,sum:3:100000:1000,dot:1:100000:10,"
                   "mul:1:100000:10,mean:3:1000000:10,rms_norm:3:1000000:1000")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--configs", default=DEFAULT_CONFIGS)
    parser.add_argument("--label", default="")
    parser.add_argument("--budget", type=float, default=0.4,
                        help="seconds of samples per measurement (at least 10 samples)")
    args = parser.parse_args()
    results = []
    for config in args.configs.split(","):
        op, width, num_rows, length = config.split(":")
        floats, idx, num_segments = references.make_case(op, int(width), int(num_rows),
                                                         int(length))
        fn = references.SEGOPS[op]
        forward = median_seconds(_forward(fn, floats, idx, num_segments), "cpu",
                                 budget_s=args.budget, min_repeats=10)
        both = median_seconds(_forward_backward(fn, floats, idx, num_segments), "cpu",
                              budget_s=args.budget, min_repeats=10)
        results.append(f"{op} w{width} N={int(num_rows)} len {length}: "
                       f"{forward * 1e6:.0f}/{both * 1e6:.0f}")
    print(f"{args.label} ({torch.get_num_threads()} threads, µs fwd/fwd+bwd): "
          + " | ".join(results), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
