#!/usr/bin/env bash
# The one script run on a lent GPU machine (no LLVM/MLIR there): build the
# runtime and Python extension against the op library compiled on the
# development machine, run the whole pytest suite (CUDA tests included), check
# every kernel for out-of-bounds accesses under compute-sanitizer, and
# benchmark. Everything it prints also goes to $OUT/device-check.log.
#
# From the development machine (see docs/benchmarks.md):
#   make build            # compiles build/oplib (PTX + host object + manifest)
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
ninja -C build-device || exit 2
export PYTHONPATH="$PWD/python:$PWD"

step "pytest (CPU and CUDA)"
timeout 400 python3 -m pytest -q -p no:cacheprovider test/python || status=1

step "compute-sanitizer memcheck: every kernel on garbage indices"
if command -v compute-sanitizer >/dev/null; then
  timeout 240 compute-sanitizer --tool memcheck --error-exitcode 9 python3 scripts/oob_check.py || status=1
else
  echo "compute-sanitizer not found; skipped"
fi

step "benchmark (CUDA)"
timeout 200 python3 -m bench --device cuda --max-single-segment 1000000 --csv "$OUT/bench-cuda.csv" || status=1

step "benchmark: all six ops, forward and forward+backward (CUDA)"
timeout 150 python3 -m bench.ops --device cuda --sizes 1000000,10000000 || status=1

step "done: status $status"
exit $status
