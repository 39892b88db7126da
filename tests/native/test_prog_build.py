"""tests/native/prog.cu builds wherever nvcc is (no GPU needed), as a program and as the benchmark's library,
and a program that cannot run says why in one line."""

from __future__ import annotations

import ctypes
import subprocess

import pytest

import native_prog


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    reason = native_prog.missing_reason()
    if reason:
        pytest.skip(reason)
    folder = str(tmp_path_factory.mktemp("prog"))
    return native_prog.build(folder), native_prog.build_library(folder)


def test_the_program_checks_its_arguments(built):
    prog, _ = built
    for bad in (["--iters"], ["--iters", "x"], ["--exit", "later"], ["--what", "1"], ["--exit", "exit:-1"]):
        proc = subprocess.run([prog, *bad], capture_output=True, text=True, timeout=60)
        assert proc.returncode == 64 and proc.stderr.startswith("usage: prog"), (bad, proc.stderr)


def test_a_cuda_failure_is_one_line_and_status_2(built):
    from proton_core.testing import gpu_missing_reason

    if gpu_missing_reason() is None:
        pytest.skip("a GPU is here: the program runs (tests/native/test_injection_gpu.py)")
    prog, _ = built
    proc = subprocess.run([prog, "--iters", "1"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2
    assert len(proc.stderr.splitlines()) == 1 and proc.stderr.startswith("prog: "), proc.stderr


def test_the_library_exports_the_timed_loop(built):
    _, library = built
    lib = ctypes.CDLL(library)
    assert lib.np_bench is not None
    report = native_prog.report('noise\n{"pid": 1, "kernels": {"np_fill": 2, "np_noop": 0}}\n')
    assert native_prog.launched(report) == {"np_fill": 2}
