"""The C++ CPU and autograd kernels (segops._native._torchops): what the
generic checks reject, and the clear error where they are missing."""

from __future__ import annotations

import subprocess
import sys

import pytest
import torch
from conftest import layout
from torch.utils._python_dispatch import TorchDispatchMode

import segops
from segops import ops

pytestmark = pytest.mark.skipif(ops._native is None, reason="C++ kernels not in use")


def test_cpu_kernels_and_autograd_are_cpp() -> None:
    x = torch.randn(5, 3, requires_grad=True)
    out = segops.segmented_rms_norm(x, layout([2, 3]), 2)
    assert out.grad_fn.name() == "segmented_rms_norm_gradBackward"


@pytest.mark.parametrize("bad, message", [
    # the cotangent of sum must have S rows
    (lambda x, g, idx: (x, g[:1], idx, 2), "argument 1 has shape"),
    (lambda x, g, idx: (x, g.double(), idx, 2), "argument 1 must be a Float"),
    (lambda x, g, idx: (x, g, idx.float(), 2), "idx must be a 1-D int32 or int64"),
    (lambda x, g, idx: (x, g, idx, -1), "num_segments"),
])
def test_derivative_ops_check_their_arguments(bad, message: str) -> None:
    """Derivative levels called directly get the same buffer checks (the
    kernel would otherwise read or write out of bounds)."""
    idx = layout([2, 3])
    x, grad = torch.randn(5, 3), torch.randn(2, 3)
    with pytest.raises(ValueError, match=message):
        torch.ops.segops.segmented_sum_grad(*bad(x, grad, idx))


def test_read_inputs_must_have_n_rows() -> None:
    idx = layout([2, 3])
    with pytest.raises(ValueError, match="argument 0 has shape"):
        # x, the saved norm, the cotangent
        torch.ops.segops.segmented_rms_norm_grad(torch.randn(5, 3), torch.randn(2),
                                                 torch.randn(2), idx[:3], 2)


def test_unread_inputs_may_be_empty() -> None:
    """sum's backward never reads x: an empty stand-in is accepted."""
    idx = layout([2, 3])
    grad = torch.randn(2, 3)
    result = torch.ops.segops.segmented_sum_grad(torch.empty(0, 3), grad, idx, 2)
    torch.testing.assert_close(result, grad[idx.long()])


def test_large_outputs_match_the_reference() -> None:
    """Outputs over the huge-page threshold (8 MiB), threaded kernels."""
    n = 1_000_000
    idx = torch.sort(torch.randint(0, 1000, (n,))).values.int()
    x, y = torch.randn(n, 3), torch.randn(1000)
    torch.testing.assert_close(segops.segmented_mul(x, y, idx, 1000), x * y[idx.long()][:, None])


class _IndexDtypes(TorchDispatchMode):
    """Records the index dtype of every segops operator call."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[tuple[str, torch.dtype]] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if func.namespace == "segops":
            index = next(a for a in args if isinstance(a, torch.Tensor)
                         and a.dtype in (torch.int32, torch.int64))
            self.calls.append((func.__name__, index.dtype))
        return func(*args, **(kwargs or {}))


def test_an_int64_index_is_narrowed_once_for_every_level() -> None:
    """With an int64 index and inputs requiring grad, the autograd kernel
    narrows idx once: the forward and every backward level get the int32
    index, with results bitwise those of an int32 index."""
    idx32 = layout([3, 0, 2, 4])
    x = torch.randn(9, 3, dtype=torch.float64, requires_grad=True)

    def forces(idx: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        energy = segops.segmented_rms_norm(x, idx, 4).pow(2).sum()
        (grad,) = torch.autograd.grad(energy, x, create_graph=True)
        (grad_grad,) = torch.autograd.grad(grad.pow(2).sum(), x)
        return grad, grad_grad

    with _IndexDtypes() as recorded:
        results = forces(idx32.long())
    assert [name for name, _ in recorded.calls][:3] == [
        "segmented_rms_norm.default", "segmented_rms_norm_grad.saved",
        "segmented_rms_norm_grad_grad.saved"]
    assert {dtype for _, dtype in recorded.calls} == {torch.int32}, recorded.calls
    for got, want in zip(results, forces(idx32)):
        assert torch.equal(got, want)


@pytest.mark.parametrize("values, message", [
    ([0, 5], "idx value 5 at row 1 is out of range"),
    ([0, 2**32], "not representable as int32"),
    ([0, -3], "idx value -3 at row 1 is negative"),
])
def test_a_bad_int64_index_requiring_grad_gets_the_forward_error(values, message: str) -> None:
    x = torch.randn(2, requires_grad=True)
    with pytest.raises(ValueError, match=message):
        segops.segmented_sum(x, torch.tensor(values), 2)


def test_a_build_without_the_cpp_kernels_says_so() -> None:
    """The C++ kernels are the only ones: where they fail to load, every op
    (and jit_call) raises an error that says what is missing."""
    script = """
import sys
sys.modules["segops._native._torchops"] = None  # as if it failed to import
import torch, segops
idx = torch.tensor([0, 0, 1], dtype=torch.int32)
try:
    segops.segmented_sum(torch.ones(3), idx, 2)
except segops.ops.MissingKernelsError as error:
    print("raised:", error)
"""
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                            check=True)
    assert "raised: segops::segmented_sum: segops' C++ operator kernels" in result.stdout, \
        result.stdout + result.stderr
