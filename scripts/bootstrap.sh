#!/usr/bin/env bash
# Installs what segops needs to build and test, and nothing that is already
# there: Debian packages (LLVM/MLIR 19, Ninja, CMake) and pinned Python
# packages for the default python3. Idempotent; a no-op taking well under a
# second when everything is present. Works on Debian 12 (bookworm) and 13
# (trixie), as root or with sudo.
set -euo pipefail

PYTHON=${PYTHON:-python3}
APT_PACKAGES=(llvm-19-dev libmlir-19-dev mlir-19-tools llvm-19-tools ninja-build cmake g++ make ccache nlohmann-json3-dev)
# torch_geometric (pure Python): the docs' PyG recipe runs PyG's own SchNet.
# expecttest: torch.testing._internal (the OpInfo database) imports it.
# mace-torch (pure Python, with e3nn): bench/models.py and test_models.py
# run a MACE model.
PIP_PACKAGES=(torch==2.13.0 pybind11==3.1.0 pytest==9.0.3 lit==23.1.5 numpy==2.4.6 matplotlib==3.10.7 scikit-build-core==1.1.2 ruff==0.17.6 torch_geometric==2.8.1 expecttest==0.3.0 pytest-xdist==3.8.0 mace-torch==0.3.16 e3nn==0.4.4)

as_root() {
  if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi
}

# Python headers for the extension module, when the default python3 is
# Debian's own (pyenv and similar builds ship their headers).
if ! "$PYTHON" -c 'import os, sysconfig, sys; sys.exit(not os.path.exists(os.path.join(sysconfig.get_paths()["include"], "Python.h")))'; then
  APT_PACKAGES+=(python3-dev)
fi
# venv with pip (make test-wheel installs the wheel into a fresh venv):
# Debian's python3 needs python3-venv for ensurepip.
if ! "$PYTHON" -c 'import ensurepip' 2>/dev/null; then
  APT_PACKAGES+=(python3-venv)
fi

missing=()
for package in "${APT_PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$package")
  fi
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "bootstrap: installing Debian packages: ${missing[*]}"
  as_root apt-get update -qq
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

# Python packages: check the pinned versions without invoking pip (fast).
if ! "$PYTHON" - "${PIP_PACKAGES[@]}" <<'PYEOF'
import sys
from importlib import metadata
for requirement in sys.argv[1:]:
    name, version = requirement.split("==")
    try:
        installed = metadata.version(name)
    except metadata.PackageNotFoundError:
        sys.exit(1)
    # torch reports local versions such as 2.13.0+cpu.
    if installed.split("+")[0] != version:
        sys.exit(1)
PYEOF
then
  echo "bootstrap: installing Python packages: ${PIP_PACKAGES[*]}"
  pip_flags=(--quiet --disable-pip-version-check)
  # Debian 12+ marks its system Python as externally managed (PEP 668).
  if "$PYTHON" -c 'import sys, sysconfig, os; sys.exit(not os.path.exists(os.path.join(sysconfig.get_paths()["stdlib"], "EXTERNALLY-MANAGED")))'; then
    pip_flags+=(--break-system-packages)
  fi
  "$PYTHON" -m pip install "${pip_flags[@]}" "${PIP_PACKAGES[@]}"
fi
