# segops: the two commands are `make demo` and `make test`. Both install what
# they need (scripts/bootstrap.sh), configure and build incrementally.

PYTHON     ?= python3
BUILD_DIR  ?= build
BUILD_TYPE ?= Release
MLIR_DIR   ?= /usr/lib/llvm-19/lib/cmake/mlir
LIT        ?= $(firstword $(wildcard /usr/lib/llvm-19/build/utils/lit/lit.py) $(shell command -v lit))
JOBS       ?=

NINJA := ninja -C $(BUILD_DIR) $(if $(JOBS),-j$(JOBS))

.PHONY: all bootstrap configure build develop demo examples-cpp test test-quick test-lint test-lit test-python test-fuzz test-wheel wheel wheel-full wheel-runtime fuzz sanitize bench clean device-bundle

all: build

bootstrap:
	@PYTHON=$(PYTHON) scripts/bootstrap.sh

$(BUILD_DIR)/build.ninja: | bootstrap
	cmake -S . -B $(BUILD_DIR) -G Ninja \
	  -DCMAKE_BUILD_TYPE=$(BUILD_TYPE) \
	  -DMLIR_DIR=$(MLIR_DIR) \
	  -DLLVM_EXTERNAL_LIT=$(LIT) \
	  -DPython3_EXECUTABLE=$$(command -v $(PYTHON))

configure: bootstrap $(BUILD_DIR)/build.ninja

build: configure
	$(NINJA)

# Make `import segops` work in the default interpreter: a .pth file pointing at
# python/, where the build placed the native parts (python/segops/_native).
develop: build
	@$(PYTHON) scripts/develop.py

demo: develop
	$(PYTHON) scripts/demo.py

test-lit: build
	$(NINJA) check-seg

# pytest-xdist workers (the time it saves: docs/benchmarks.md, "make test
# time"); PYTEST_WORKERS=0 runs the tests in one process.
PYTEST_WORKERS ?= 2
test-python: develop
	$(PYTHON) -m pytest -q -n $(PYTEST_WORKERS) --dist loadgroup --durations=25

# Python lint (configured in pyproject.toml).
test-lint: bootstrap
	$(PYTHON) -m ruff check python bench scripts test examples

# A tier for iterating, under 2 minutes after a build: lint, lit, and the
# tests not marked slow in the op, index and JIT suites.
QUICK_TESTS ?= test/python/test_segmented_sum.py test/python/test_native_ops.py \
  test/python/test_index_check.py test/python/test_jit.py test/python/test_oplib.py \
  test/python/test_op_table.py
test-quick: test-lint test-lit develop
	$(PYTHON) -m pytest -q -x -m "not slow" $(QUICK_TESTS)

# The seg-opt mutation fuzzer: a short fixed run in `make test`, a longer
# one here (FUZZ_SECONDS, FUZZ_SEED). Failures land in build/fuzz/.
FUZZ_SECONDS ?= 600
FUZZ_SEED    ?= $(shell date +%s)

test-fuzz: build
	$(PYTHON) scripts/fuzz_seg_opt.py --seg-opt $(BUILD_DIR)/bin/seg-opt --seconds 45 --seed 0

fuzz: build
	$(PYTHON) scripts/fuzz_seg_opt.py --seg-opt $(BUILD_DIR)/bin/seg-opt --seconds $(FUZZ_SECONDS) --seed $(FUZZ_SEED)

# The wheel (dist/): the package, segrt, the extensions, the op library
# prebuilt in $(BUILD_DIR)/oplib and the compiler module _segc as the main
# build linked it (with LLVM/MLIR's static libraries): segops.jit and
# segops.fusion with no LLVM/MLIR installed. Built by pip through
# scikit-build-core against this interpreter's PyTorch. `make
# wheel-runtime` leaves the compiler out (the library ops only).
WHEEL_DIR ?= dist
SEGC_MODULE = $(firstword $(wildcard python/segops/_native/_segc.*.so))
WHEEL_BUILD = $(PYTHON) -m pip wheel . --no-build-isolation --no-deps --quiet \
	  --disable-pip-version-check -w $(WHEEL_DIR) \
	  -C cmake.define.SEGOPS_BUILD_COMPILER=OFF \
	  -C cmake.define.SEGOPS_PREBUILT_OPLIB=$(abspath $(BUILD_DIR))/oplib

wheel: build
	rm -f $(WHEEL_DIR)/segops-*.whl
	$(WHEEL_BUILD) -C build-dir=build-wheel \
	  -C cmake.define.SEGOPS_PREBUILT_COMPILER=$(abspath $(SEGC_MODULE))

# The name issue 39 gave the complete wheel: the same target.
wheel-full: wheel

wheel-runtime: build
	rm -f $(WHEEL_DIR)/segops-*.whl
	$(WHEEL_BUILD) -C build-dir=build-wheel-runtime -C cmake.define.SEGOPS_PREBUILT_COMPILER=

# The wheel installed into a fresh venv, checked from outside the source
# tree with the system's LLVM/MLIR out of reach.
test-wheel: wheel
	$(PYTHON) scripts/check_wheel.py $(wildcard $(WHEEL_DIR)/segops-*.whl)

test: test-lint test-lit test-python test-fuzz test-wheel

# The compiler bundle the GPU machine (no LLVM) runs segops.jit and fusion
# from: the compiler's answers for test_jit_devices.py's programs, with PTX
# for sm_90 (SEGOPS_BUNDLE_CHIPS). Carried there with the op library; see
# scripts/device-check.sh.
DEVICE_BUNDLE ?= $(BUILD_DIR)/device-bundle

device-bundle: develop
	rm -rf $(DEVICE_BUNDLE)
	$(PYTHON) scripts/record_bundle.py record $(DEVICE_BUNDLE) test/python/test_jit_devices.py

# ASan + UBSan with assertions over the compiler, the runtime and the
# extensions, in $(SANITIZE_DIR): lit, the fuzzer, and the pytest files of
# the native path (PyTorch itself is not instrumented: the sanitizer
# runtimes are preloaded into Python).
SANITIZE_DIR   ?= build-sanitize
SANITIZE_TESTS ?= test/python/test_native_ops.py test/python/test_index_check.py \
  test/python/test_segmented_sum.py test/python/test_ops.py test/python/test_unsorted_index.py \
  test/python/test_memory_safety.py test/python/test_host_workers.py test/python/test_fusion.py \
  test/python/test_segment_lengths.py test/python/test_wide.py \
  test/python/test_message_passing.py test/python/test_sums_by_chunks.py \
  test/python/test_gather_rows.py test/python/test_fusion_message_passing.py \
  test/python/test_hostile_inputs.py test/python/test_op_library.py \
  test/python/test_manifest_record.py test/python/test_feature_lanes.py \
  test/python/test_striped_rows.py test/python/test_striped_reductions.py \
  test/python/test_own_row_inputs.py
SANITIZE_ENV    = LD_PRELOAD="$$(g++ -print-file-name=libasan.so) $$(g++ -print-file-name=libubsan.so)" \
  ASAN_OPTIONS=detect_leaks=0:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1

sanitize: bootstrap
	cmake -S . -B $(SANITIZE_DIR) -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
	  -DSEGOPS_SANITIZE=ON -DMLIR_DIR=$(MLIR_DIR) -DLLVM_EXTERNAL_LIT=$(LIT) \
	  -DPython3_EXECUTABLE=$$(command -v $(PYTHON)) \
	  -DSEGOPS_PYTHON_NATIVE_DIR=$(CURDIR)/$(SANITIZE_DIR)/python/segops/_native
	ninja -C $(SANITIZE_DIR) $(if $(JOBS),-j$(JOBS))
	ninja -C $(SANITIZE_DIR) check-seg
	$(PYTHON) scripts/fuzz_seg_opt.py --seg-opt $(SANITIZE_DIR)/bin/seg-opt --seconds 120 \
	  --seed 0 --out $(SANITIZE_DIR)/fuzz
	cp python/segops/*.py $(SANITIZE_DIR)/python/segops/
	$(SANITIZE_ENV) PYTHONPATH=$(CURDIR)/$(SANITIZE_DIR)/python SEGOPS_BUILD_DIR=$(CURDIR)/$(SANITIZE_DIR) \
	  $(PYTHON) -m pytest -q -p no:cacheprovider $(SANITIZE_TESTS)

# The C++ programs that run exported models with no Python (docs/deploy.md).
examples-cpp: develop
	$(PYTHON) examples/cpp/build.py $(BUILD_DIR)/examples-cpp

bench: develop
	$(PYTHON) -m bench

clean:
	rm -rf $(BUILD_DIR) python/segops/_native
