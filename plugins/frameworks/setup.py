"""Builds proton_frameworks._triton_fast, hook="triton"'s launch hooks in C (CPython's C API only).

Metadata is in pyproject.toml; this file only adds the extension.  It is optional: where it cannot be
compiled (no C compiler), the install still succeeds and the Python hooks run, with the same results.
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "proton_frameworks._triton_fast",
            ["csrc/triton_fast.c"],
            extra_compile_args=["-O2", "-Wall", "-Wextra", "-Wno-unused-parameter", "-fvisibility=hidden"],
            optional=True,
        )
    ]
)
