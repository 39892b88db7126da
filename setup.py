"""Builds proton_core._scope_fast: proton.scope's enter and exit in C, and the scope engine's C API for other
extensions (proton_core/include/proton_core/scope_api.h); CPython's C API only.

Metadata is in pyproject.toml; this file only adds the extension.  It is optional: where it cannot be
compiled (no C compiler), the install still succeeds and the Python scope path runs, with the same results.
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "proton_core._scope_fast",
            ["csrc/scope_fast.c", "csrc/engine.c"],
            include_dirs=["proton_core/include", "csrc"],
            extra_compile_args=["-O2", "-Wall", "-Wextra", "-Wno-unused-parameter", "-Wno-missing-field-initializers",
                                "-fvisibility=hidden"],
            optional=True,
        ),
        Extension(  # the merged view's per-file hot path (decision 0275); absent: the same results in Python
            "proton_core._rank_numbers",
            ["csrc/rank_numbers.c"],
            extra_compile_args=["-O2", "-Wall", "-Wextra", "-Wno-unused-parameter", "-Wno-missing-field-initializers",
                                "-ffp-contract=off", "-fvisibility=hidden"],
            optional=True,
        ),
    ]
)
