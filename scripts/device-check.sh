#!/usr/bin/env bash
# The one script run on a lent GPU machine (no LLVM/MLIR there): build the
# runtime and Python extension against the op library compiled on the
# development machine, then one of two parts, each sized for one device
# call of at most 8 minutes (a session has 15 minutes of device time):
#
#   correctness  pytest (CUDA tests included), compute-sanitizer on every
#                kernel with garbage indices, then segops.jit and fusion on
#                CUDA from the compiler bundle                (~7 min at most)
#   bench        the benchmark suite on CUDA: host overhead, every op, and
#                the torch.compile baselines at N = 1e3, 1e6, 1e7 (~7 min)
#
# Correctness first: run `correctness`, then `bench` if time is left. Each
# step writes its output to $OUT as it goes (device-check.log, one log per
# step, the benchmark CSVs), so a call cut short still brings back what ran.
#
# The GPU machine has no compiler: segops.jit and fusion run there from a
# compiler bundle (segops._bundle: the compiler's answers and the PTX of
# test_jit_devices.py's programs), made here by `make device-bundle`.
#
# --dry-run builds the same runtime-only configuration on this CPU machine
# against build/oplib, imports it and runs the library ops on CPU, then runs
# test_jit_devices.py on CPU with the development build's compiler replaced
# by the bundle (host code still compiled here): every program it traces,
# and every level's PTX, must come from the bundle. The GPU steps are
# listed, not run. It proves the script before a device is lent.
#
# From the development machine (see docs/benchmarks.md):
#   make build device-bundle            # build/oplib and build/device-bundle
#   bash scripts/device-check.sh --dry-run
#   device run: bash scripts/device-check.sh correctness   carry: ["build/oplib", "build/device-bundle"]
#   device run: bash scripts/device-check.sh bench         carry: ["build/oplib"]
set -uo pipefail
cd "$(dirname "$0")/.."

dry_run=0
part=correctness
for argument in "$@"; do
  case "$argument" in
    --dry-run) dry_run=1 ;;
    correctness|bench) part=$argument ;;
    *) echo "usage: $0 [--dry-run] [correctness|bench]"; exit 2 ;;
  esac
done

OUT=${OUT:-/tmp/segops-device-check}
mkdir -p "$OUT"
exec > >(tee -a "$OUT/device-check.log") 2>&1

status=0
step() { echo; echo "=== $* ($(date +%T))"; }
# run SECONDS NAME COMMAND...: a step's command under a timeout, its output
# in $OUT/NAME.log too; in a dry run, only said.
run() {
  local seconds=$1 name=$2
  shift 2
  if [ "$dry_run" = 1 ]; then
    echo "dry run: would run (timeout ${seconds}s): $*"
    return 0
  fi
  timeout "$seconds" "$@" 2>&1 | tee "$OUT/$name.log"
  local code=${PIPESTATUS[0]}
  [ "$code" = 0 ] || { echo "step $name: exit $code"; status=1; }
}

step "machine (part: $part$([ $dry_run = 1 ] && echo ', dry run'))"
if [ "$dry_run" = 0 ]; then
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv
fi
python3 -c "import sys, torch; print('python', sys.version.split()[0], 'torch', torch.__version__, 'cuda', torch.version.cuda, torch.cuda.is_available() and torch.cuda.get_device_name())"

step "build runtime and extension (prebuilt op library: build/oplib)"
test -f build/oplib/manifest.json || { echo "build/oplib is missing: run make build here, carry it there"; exit 2; }
# Native parts beside a copy of the package, in the build directory: a dry
# run must not replace the development build's python/segops/_native.
BUILD=build-device
NATIVE="$PWD/$BUILD/python/segops/_native"
# The system compiler where there is one: the GPU machine's default g++
# (/opt/gcc) links libstdc++ statically into shared libraries, and a second
# libstdc++ beside PyTorch's breaks exceptions thrown across the two.
compilers=()
if [ "$dry_run" = 0 ] && [ -x /usr/bin/g++ ]; then
  compilers=(-DCMAKE_CXX_COMPILER=/usr/bin/g++ -DCMAKE_C_COMPILER=/usr/bin/gcc)
fi
configure() {
  cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DSEGOPS_BUILD_COMPILER=OFF -DSEGOPS_PREBUILT_OPLIB="$PWD/build/oplib" \
    -DSEGOPS_PYTHON_NATIVE_DIR="$NATIVE" \
    -DPython3_EXECUTABLE="$(command -v python3)" "${compilers[@]}" "$@" >> "$OUT/cmake.log"
}
configure || { cat "$OUT/cmake.log"; exit 2; }
if ! timeout 300 ninja -C "$BUILD" > "$OUT/ninja.log" 2>&1; then
  # The C++ operator kernels (the only kernels) build against this
  # machine's PyTorch; if its headers disagree there is nothing to test.
  tail -40 "$OUT/ninja.log"
  echo "the C++ operator kernels failed to build against this PyTorch (see ninja.log)"
  exit 2
fi
cp python/segops/*.py "$BUILD/python/segops/"
# pytest puts python/ first on the path (pytest.ini): there, the package
# finds these native parts where the development build would put them.
if [ "$dry_run" = 0 ] && [ ! -e python/segops/_native ]; then
  ln -s "$NATIVE" python/segops/_native
fi
export PYTHONPATH="$PWD/$BUILD/python:$PWD"
python3 -c "from segops._native import _torchops as t; print('C++ CUDA operator kernels:', t.has_cuda_kernels())" \
  || { echo "the C++ operator kernels do not import"; exit 2; }
python3 -c "import segops; info = segops.library_info(); print('host kernels:', info['host_cpu'], 'of', info['host_builds'])" \
  || exit 2

if [ "$dry_run" = 1 ]; then
  step "dry run: the library ops on CPU from the runtime-only build"
  python3 - <<'EOF' || status=1
import segops, torch
idx = torch.tensor([0, 0, 2, 1, 2], dtype=torch.int32)
x = torch.randn(5, 3, dtype=torch.float64, requires_grad=True)
ref = torch.zeros(3, 3, dtype=torch.float64).index_add(0, idx.long(), x)
torch.testing.assert_close(segops.segmented_sum(x, idx, 3), ref)
assert torch.autograd.gradcheck(lambda v: segops.segmented_mean(v, idx, 3), (x,))
print("segmented_sum and a mean gradcheck: ok, from", segops.__file__)
EOF
fi

if [ "$part" = correctness ]; then
  step "pytest (CPU and CUDA)"
  run 240 pytest python3 -m pytest -q -p no:cacheprovider test/python/test_cuda.py \
    test/python/test_cuda_kernels_compile.py test/python/test_ops.py \
    test/python/test_unsorted_index.py test/python/test_segmented_sum.py
  step "compute-sanitizer memcheck: every kernel on garbage indices"
  if [ "$dry_run" = 1 ] || command -v compute-sanitizer >/dev/null; then
    run 90 memcheck compute-sanitizer --tool memcheck --error-exitcode 9 python3 scripts/oob_check.py
  else
    echo "compute-sanitizer not found; skipped"
  fi
  step "segops.jit and fusion on CUDA from the compiler bundle (build/device-bundle)"
  if [ -f build/device-bundle/bundle.json ]; then
    jit_cache=$(mktemp -d)
    if [ "$dry_run" = 1 ]; then
      # Here: the development build (its compiler makes the host code), on
      # CPU, every compiler answer and every level's PTX from the bundle.
      dry_run=0 run 120 jit-bundle env PYTHONPATH="$PWD/python" SEGOPS_CACHE_DIR="$jit_cache" \
        SEGOPS_COMPILER_BUNDLE="$PWD/build/device-bundle" \
        python3 -m pytest -q -p no:cacheprovider test/python/test_jit_devices.py
    else
      run 120 jit-bundle env SEGOPS_CACHE_DIR="$jit_cache" \
        SEGOPS_COMPILER_BUNDLE="$PWD/build/device-bundle" \
        python3 -m pytest -q -p no:cacheprovider test/python/test_jit_devices.py -k "cuda or bundle"
    fi
  else
    echo "build/device-bundle is missing: run make device-bundle here, carry it there"
    status=1
  fi
else
  step "benchmark suite (CUDA): host overhead, then every op without the compiled baseline"
  # One segment of every N included: long segments run on tiles (issue 5).
  run 180 bench-cuda python3 -m bench --device cuda --sections overhead,ops --no-compiled-baseline \
    --budget 0.2 --out "$OUT/bench-cuda"
  step "benchmark suite (CUDA): with torch.compile baselines, N = 1e3, 1e6, 1e7"
  run 200 bench-cuda-compiled python3 -m bench --device cuda --sections ops \
    --sizes 1000,1000000,10000000 --budget 0.2 --out "$OUT/bench-cuda-compiled"
fi

step "done: part $part, status $status"
exit $status
