#!/usr/bin/env bash
# The one script run on a lent GPU machine (no LLVM/MLIR there): build the
# runtime and Python extension against the op library compiled on the
# development machine, run the whole pytest suite (CUDA tests included), check
# every kernel for out-of-bounds accesses under compute-sanitizer, and
# benchmark. Everything it prints also goes to $OUT/device-check.log.
#
# From the development machine (see docs/benchmarks.md):
#   make build            # compiles build/oplib (PTX + host objects + manifest)
#   device run: bash scripts/device-check.sh   with carry: ["build/oplib"]
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/segops-device-check}
mkdir -p "$OUT"
exec > >(tee "$OUT/device-check.log") 2>&1

status=0
step() { echo; echo "=== $* ($(date +%T))"; }

step "machine"
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv
python3 -c "import sys, torch; print('python', sys.version.split()[0], 'torch', torch.__version__, 'cuda', torch.version.cuda, torch.cuda.get_device_name())"

step "build runtime and extension (prebuilt op library: build/oplib)"
test -f build/oplib/manifest.json || { echo "build/oplib is missing: carry it"; exit 2; }
cmake -S . -B build-device -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DSEGOPS_BUILD_COMPILER=OFF -DSEGOPS_PREBUILT_OPLIB="$PWD/build/oplib" \
  -DPython3_EXECUTABLE="$(command -v python3)" > "$OUT/cmake.log" || { cat "$OUT/cmake.log"; exit 2; }
if ! ninja -C build-device > "$OUT/ninja.log" 2>&1; then
  # The C++ operator kernels build against this machine's PyTorch; if its
  # headers disagree, fall back (CUDA kernels from Python, then all kernels
  # from Python) and say so.
  tail -30 "$OUT/ninja.log"
  echo "C++ operator kernels failed to build; retrying with SEGOPS_BUILD_TORCH_CUDA_OPS=OFF"
  status=1
  cmake -S . -B build-device -DSEGOPS_BUILD_TORCH_CUDA_OPS=OFF > /dev/null
  if ! ninja -C build-device > "$OUT/ninja2.log" 2>&1; then
    tail -30 "$OUT/ninja2.log"
    echo "retrying with SEGOPS_BUILD_TORCH_OPS=OFF"
    cmake -S . -B build-device -DSEGOPS_BUILD_TORCH_OPS=OFF > /dev/null
    ninja -C build-device || exit 2
  fi
fi
export PYTHONPATH="$PWD/python:$PWD"
python3 -c "from segops._native import _torchops as t; print('C++ CUDA operator kernels:', t.has_cuda_kernels())" \
  || echo "C++ operator kernels not importable: Python kernels"
python3 -c "import segops; info = segops.library_info(); print('host kernels:', info['host_cpu'], 'of', info['host_builds'])"

step "pytest (CPU and CUDA)"
timeout 400 python3 -m pytest -q -p no:cacheprovider test/python || status=1

step "compute-sanitizer memcheck: every kernel on garbage indices"
if command -v compute-sanitizer >/dev/null; then
  timeout 240 compute-sanitizer --tool memcheck --error-exitcode 9 python3 scripts/oob_check.py || status=1
else
  echo "compute-sanitizer not found; skipped"
fi

step "benchmark suite (CUDA): host overhead, then every op without the compiled baseline"
# One segment of every N included: long segments run on tiles (issue 5).
timeout 200 python3 -m bench --device cuda --sections overhead,ops --no-compiled-baseline \
  --budget 0.2 --out "$OUT/bench-cuda" || status=1

step "benchmark suite (CUDA): with torch.compile baselines, N = 1e3, 1e6, 1e7"
timeout 240 python3 -m bench --device cuda --sections ops --sizes 1000,1000000,10000000 \
  --budget 0.2 --out "$OUT/bench-cuda-compiled" || status=1

step "done: status $status"
exit $status
