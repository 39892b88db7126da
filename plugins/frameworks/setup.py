"""Builds proton_frameworks._triton_fast, hook="triton"'s launch hooks in C (CPython's C API only).

Metadata is in pyproject.toml; this file only adds the extension.  It is optional: where it cannot be
compiled (no C compiler), the install still succeeds and the Python hooks run, with the same results.
"""

import os

from setuptools import Extension, setup


def core_include() -> list[str]:
    """Where <proton_core/scope_api.h> is: $PROTON_CORE_INCLUDE, the core in this checkout, or the installed core."""
    if os.environ.get("PROTON_CORE_INCLUDE"):
        return [os.environ["PROTON_CORE_INCLUDE"]]
    here = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "proton_core", "include")
    if os.path.exists(os.path.join(here, "proton_core", "scope_api.h")):
        return [here]
    try:
        from proton_core.native_api import get_include
    except ImportError:  # the extension is optional: without the header it is not built, the Python hooks run
        return []
    return [get_include()]


setup(
    ext_modules=[
        Extension(
            "proton_frameworks._triton_fast",
            ["csrc/triton_fast.c"],
            include_dirs=core_include(),
            extra_compile_args=["-O2", "-Wall", "-Wextra", "-Wno-unused-parameter", "-fvisibility=hidden"],
            optional=True,
        )
    ]
)
