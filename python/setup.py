"""Build hook of the attn Python package: builds libattn.so from this repository with
`make lib` (the parent directory of python/) and ships it inside the package, next to
attn/_ffi.py, which opens it with cffi's ABI mode (nothing else is compiled).

Environment:
  ATTN_LIBRARY=/path/libattn.so   ship this prebuilt library instead of running make
  ATTN_SOURCE_DIR=/path/to/attn   the repository to build (default: the parent of python/)
"""
import os
import subprocess

from setuptools import setup
from setuptools.command.build_py import build_py
from setuptools.dist import Distribution

HERE = os.path.dirname(os.path.abspath(__file__))


class BuildPyWithLibattn(build_py):
    def run(self):
        super().run()
        lib = os.environ.get("ATTN_LIBRARY")
        if not lib:
            root = os.environ.get("ATTN_SOURCE_DIR") or os.path.dirname(HERE)
            if not os.path.isfile(os.path.join(root, "include", "attn.h")):
                raise RuntimeError(
                    f"attn: the libattn sources are not at {root} (expected include/attn.h there). "
                    "Install from a checkout of the attn repository (`pip install ./python`), or set "
                    "ATTN_SOURCE_DIR to the repository or ATTN_LIBRARY to a built libattn.so.")
            jobs = os.environ.get("ATTN_MAKE_JOBS", "2")
            subprocess.check_call(["make", "-C", root, f"-j{jobs}", "lib"])
            lib = os.path.join(root, "build", "libattn.so")
        self.copy_file(lib, os.path.join(self.build_lib, "attn", "libattn.so"), preserve_mode=True)


class BinaryDistribution(Distribution):
    """The wheel carries a shared library: tag it for this platform, not 'any'."""

    def has_ext_modules(self):
        return True


setup(cmdclass={"build_py": BuildPyWithLibattn}, distclass=BinaryDistribution)
