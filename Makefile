# segops: the two commands are `make demo` and `make test`. Both install what
# they need (scripts/bootstrap.sh), configure and build incrementally.

PYTHON     ?= python3
BUILD_DIR  ?= build
BUILD_TYPE ?= Release
MLIR_DIR   ?= /usr/lib/llvm-19/lib/cmake/mlir
LIT        ?= $(firstword $(wildcard /usr/lib/llvm-19/build/utils/lit/lit.py) $(shell command -v lit))
JOBS       ?=

NINJA := ninja -C $(BUILD_DIR) $(if $(JOBS),-j$(JOBS))

.PHONY: all bootstrap configure build develop demo test test-lit test-python bench clean

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

test-python: develop
	$(PYTHON) -m pytest -q

test: test-lit test-python

bench: develop
	$(PYTHON) -m bench

clean:
	rm -rf $(BUILD_DIR) python/segops/_native
