# -*- Python -*-
import os
import shutil

import lit.formats
from lit.llvm import llvm_config

config.name = "SEG"
config.test_format = lit.formats.ShTest(not llvm_config.use_lit_shell)
config.suffixes = [".mlir"]
config.excludes = ["CMakeLists.txt", "lit.cfg.py", "lit.site.cfg.py", "python"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.seg_obj_root, "test")
config.environment["FILECHECK_OPTS"] = "--enable-var-scope"
# libdevice is never needed; a stale CUDA path must not leak into the tests.
for var in ("CUDA_HOME", "CUDA_ROOT", "CUDA_PATH"):
    config.environment.pop(var, None)

llvm_config.with_system_environment(["HOME", "INCLUDE", "LIB", "TMP", "TEMP"])
llvm_config.use_default_substitutions()

tool_dirs = [config.seg_tools_dir, config.llvm_tools_dir]
llvm_config.with_environment("PATH", config.llvm_tools_dir, append_path=True)
llvm_config.add_tool_substitutions(
    ["seg-opt", "seg-compile", "FileCheck", "not", "count", "llvm-nm", "llvm-objdump"], tool_dirs)

# ptxas validates generated PTX where the CUDA toolkit is installed.
ptxas = config.cuda_ptxas or shutil.which("ptxas")
if ptxas and os.path.exists(ptxas):
    config.available_features.add("ptxas")
    config.substitutions.append(("%ptxas", ptxas))
