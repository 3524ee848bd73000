"""Build hook: compiles tracekit's optional C module (tracekit/_native.c: the Kineto reader's
column scanner and the events nesting pass).

Where no C compiler (or no Python headers) is found the build goes on without it, with a
warning: tracekit then uses the pure-Python (and SQL) twins, which give the same results,
slower on large traces.  TRACEKIT_NO_EXTENSION=1 skips the compile.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from hatchling.builders.hooks.plugin.interface import BuildHookInterface


class CustomBuildHook(BuildHookInterface):
    def initialize(self, version, build_data):
        if self.target_name != "wheel" or os.environ.get("TRACEKIT_NO_EXTENSION") == "1":
            return
        built = self._compile()
        if built is None:
            return
        build_data["pure_python"] = False
        build_data["infer_tag"] = True
        if version != "editable":  # an editable install imports it from the source tree
            build_data["force_include"][str(built)] = built.relative_to(self.root).as_posix()

    def _compile(self) -> Path | None:
        try:
            from setuptools import Distribution, Extension

            dist = Distribution({"ext_modules": [Extension(
                "tracekit._native", ["tracekit/_native.c"],
                extra_compile_args=["-O3"] if os.name != "nt" else [])]})
            cmd = dist.get_command_obj("build_ext")
            cmd.inplace = True
            cwd = os.getcwd()
            os.chdir(self.root)
            try:
                cmd.ensure_finalized()
                cmd.run()
                return Path(self.root) / cmd.get_ext_fullpath("tracekit._native")
            finally:
                os.chdir(cwd)
        except Exception as e:  # no compiler, no headers: the pure-Python reader is used
            print(f"tracekit: the optional C module was not built ({type(e).__name__}: {e}); "
                  "its pure-Python twins are used (same results, slower on large traces)",
                  file=sys.stderr)
            return None
