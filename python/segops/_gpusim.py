"""Runs the op library's GPU kernels on the CPU, through the SIMT simulator
(runtime/include/segrt/GpuSimulator.h): the same gpu.func kernels as the PTX,
compiled to host code by `seg-compile --gpu-simulator`. A testing aid for
machines without a GPU: it checks what the kernels compute, that their
collectives are convergent, and (with guard pages) that they stay inside
their buffers; it says nothing about speed. With SEGOPS_SIMULATE_GPU=1 (read
at import), the ops run CPU tensors through segrt's GPU launcher over the
simulated driver instead of the host kernels, so that every op test
exercises the GPU kernels and the launcher that ships. The library exists
only in builds with the compiler. The harness that runs one kernel on it
(GpuSimulator) is a test aid: test/python/harness.py."""

from __future__ import annotations

import os
from pathlib import Path

from segops import _library

LIBRARY_PATH = Path(_library.NATIVE_DIR) / "libsegops_gpusim.so"
ENABLED = os.environ.get("SEGOPS_SIMULATE_GPU", "") not in ("", "0")
