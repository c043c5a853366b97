"""Where the C++ CPU kernels' parallel calls run: on PyTorch's intra-op
threads (no thread started per call), and in a forked child, whose copy of
that pool has no threads, on threads of its own. Each case runs in a fresh
interpreter: the threads a process has depend on everything it ran before."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from segops import ops

pytestmark = pytest.mark.skipif(ops.native_kernels() is None, reason="C++ kernels not in use")

# Enough rows for two workers (segrt::parallelMinRows), few segments. The
# inputs are made on one thread, so that only segops' calls use PyTorch's
# pool (and start it).
_SETUP = """
import os, torch, segops
torch.set_num_threads(1)
N, S = 1 << 18, 64
idx = (torch.arange(N, dtype=torch.int32) * S) // N
x = torch.arange(N, dtype=torch.float64) % 7
expected = [float(v) for v in torch.zeros(S, dtype=torch.float64).index_add_(0, idx.long(), x)]
torch.set_num_threads(2)
def tasks():
    return set(os.listdir("/proc/self/task"))
"""


def _run(code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", _SETUP + code], capture_output=True,
                          text=True, timeout=120)


@pytest.mark.skipif(not os.path.isdir("/proc/self/task"), reason="needs /proc")
def test_parallel_calls_reuse_the_intra_op_threads() -> None:
    """The first parallel call leaves PyTorch's pool thread behind (threads
    started per call would be gone); later calls start none."""
    result = _run("""
before = tasks()
assert segops.segmented_sum(x, idx, S).tolist() == expected
first = tasks()
for _ in range(5):
    assert segops.segmented_sum(x, idx, S).tolist() == expected
print(len(first - before), len(tasks() - first))
""")
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["1", "0"]


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_forked_child_computes_in_parallel() -> None:
    """A child forked after the parent's parallel calls computes in parallel
    too: an OpenMP pool used before a fork deadlocks in the child, so the
    child's workers get threads of their own."""
    result = _run("""
import time
assert segops.segmented_sum(x, idx, S).tolist() == expected
pid = os.fork()
if pid == 0:
    status = 1
    try:
        status = 0 if segops.segmented_sum(x, idx, S).tolist() == expected else 2
    finally:
        os._exit(status)
deadline = time.monotonic() + 60
while True:
    done, status = os.waitpid(pid, os.WNOHANG)
    if done:
        print("exit", os.waitstatus_to_exitcode(status))
        break
    if time.monotonic() > deadline:
        os.kill(pid, 9)
        print("hung")
        break
    time.sleep(0.05)
""")
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["exit", "0"]
