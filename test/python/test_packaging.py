"""The package's build record: the PyTorch release its extensions were
compiled against is checked at import, and installs without the compiler
say so. (`make test-wheel` installs the runtime wheel into a venv.)"""

from __future__ import annotations

import json

import pytest
import torch

from segops import _compiler, _extensions, _library


def test_build_records_torch_and_compiler():
    info = json.loads((_library.NATIVE_DIR / "build_info.json").read_text())
    assert info["torch"].split("+")[0] == torch.__version__.split("+")[0]
    assert info["compiler"] in (True, False)


def test_torch_mismatch_is_a_clear_import_error(monkeypatch):
    monkeypatch.setattr(torch, "__version__", "2.99.1+cpu")
    with pytest.raises(ImportError, match=r"built against PyTorch 2\.13.*2\.99\.1.*same release"):
        _library.check_build()


def test_patch_releases_match(monkeypatch):
    monkeypatch.setattr(torch, "__version__", "2.13.7")
    _library.check_build()


def test_runtime_install_says_the_compiler_is_missing(monkeypatch):
    monkeypatch.setattr(_extensions, "has_compiler", lambda: False)
    import builtins

    real_import = builtins.__import__

    def no_segc(name, *args, **kwargs):
        if name == "segops._native" and args and args[2] and "_segc" in args[2]:
            raise ImportError("no _segc")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_segc)
    with pytest.raises(RuntimeError, match="not part of this install"):
        _compiler._segc()
