"""Written pprof files read by pprof itself (``go tool pprof``, Debian's golang-go), the numbers checked.

``scripts/install.sh`` installs golang-go where it runs as root (or with
passwordless sudo); elsewhere these tests are skipped, saying why.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess

import pytest

import proton_core as proton

GO = shutil.which("go")
pytestmark = pytest.mark.skipif(GO is None, reason="no `go` on PATH: install Debian's golang-go for go tool pprof "
                                                   "(scripts/install.sh does, as root)")
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
UPSTREAM = os.path.join(ROOT, "tests", "data", "upstream", "upstream.hatchet")




def go_pprof(*args) -> str:
    run = subprocess.run([GO, "tool", "pprof", *map(str, args)], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    return run.stdout


def raw_samples(path) -> dict:
    """``go tool pprof -raw``'s samples as {(function names outermost first, labels text): [values]}."""
    text = go_pprof("-raw", path)
    names = {int(m[1]): m[2] for m in re.finditer(r"^\s+(\d+): 0x[0-9a-f]+ M=\d+ (\S+) ", text, re.M)}
    samples, key = {}, None
    body = text.split("Samples:\n", 1)[1].split("Locations\n", 1)[0].splitlines()[1:]  # after the types' line
    for line in body:
        m = re.match(r"^\s*([-\d ]+):((?: \d+)*)\s*$", line)
        if m:
            stack = tuple(names[int(i)] for i in reversed(m[2].split()))
            key = (stack, "")
            samples[key] = [int(v) for v in m[1].split()]
        elif line.strip():
            samples[(key[0], line.strip())] = samples.pop(key)
            key = (key[0], line.strip())
    return samples


def top_total(path, *args, unit="ns") -> str:
    """The total ``go tool pprof -top`` reports (``Showing nodes accounting for X, 100% of X total``)."""
    text = go_pprof("-top", *([f"-unit={unit}"] if unit else []), *args, path)
    return re.search(r"of (\S+) total", text)[1]


def test_go_pprof_reads_kernels_per_path_and_device(tmp_path, fake):
    proton.start(str(tmp_path / "run"), backend="fake", output_format="pprof")
    with proton.scope("step"):
        fake.launch("gemm", 1000, device=0)
        fake.launch("gemm", 1500, device=0)
        fake.launch("gemm", 700, device=1)
        with proton.scope("attention"):
            fake.launch("softmax", 90, device=1)
    proton.finalize()
    path = tmp_path / "run.pb.gz"
    assert raw_samples(path) == {
        (("step", "gemm"), "cuda_device:[0]"): [2, 2500],
        (("step", "gemm"), "cuda_device:[1]"): [1, 700],
        (("step", "attention", "softmax"), "cuda_device:[1]"): [1, 90],
    }
    assert top_total(path) == "3290ns"
    assert top_total(path, "-sample_index=gpu_kernel_launches", unit=None) == "4"
    assert top_total(path, "-tagfocus=cuda_device=^1$").startswith("3290ns")  # the filter keeps the total
    shown = go_pprof("-top", "-unit=ns", "-tagfocus=cuda_device=^1$", path)
    assert "Showing nodes accounting for 790ns" in shown


def test_go_pprof_reads_instruction_samples_by_stall_reason(tmp_path, fake):
    proton.start(str(tmp_path / "pc"), backend="fake", output_format="pprof")
    fake.launch("gemm", 1000, inner=[(("/src/k.py:42",), {"samples": 7, "stall_wait": 5, "stall_selected": 2}),
                                     (("/src/k.py:50",), {"samples": 1, "stall_wait": 1})])
    proton.finalize()
    path = tmp_path / "pc.pb.gz"
    tags = go_pprof("-tags", "-sample_index=gpu_pcsample", path)
    assert re.search(r"stall_reason: Total 8(\.0)?\n", tags), tags
    assert re.search(r" 6(\.0)? \(75\.00%\): wait\n", tags), tags
    assert re.search(r" 2(\.0)? \(25\.00%\): selected\n", tags), tags
    lines = go_pprof("-top", "-lines", "-sample_index=gpu_pcsample", path)
    assert re.search(r"^\s+7\s.*gemm /src/k\.py:42$", lines, re.M), lines
    assert re.search(r"^\s+1\s.*gemm /src/k\.py:50$", lines, re.M), lines


def test_go_pprof_reads_an_empty_profile_and_the_comments(tmp_path):
    proton.start(str(tmp_path / "empty"), backend="fake", output_format="pprof")
    proton.finalize()
    path = tmp_path / "empty.pb.gz"
    assert raw_samples(path) == {}
    assert go_pprof("-comments", path).startswith("proton-profiler ")


def test_go_pprof_reads_odd_names(tmp_path, fake):
    odd = ["quote\"d", "ümlaut☃名前", "per%cent", "semi;colon|pipe", "{braces}", "x" * 3000]
    proton.start(str(tmp_path / "odd"), backend="fake", output_format="pprof")
    for i, name in enumerate(odd):
        with proton.scope(name):
            fake.launch("k", i + 1)
    proton.finalize()
    assert raw_samples(tmp_path / "odd.pb.gz") == {((name, "k"), "cuda_device:[0]"): [1, i + 1]
                                                   for i, name in enumerate(odd)}


def test_go_pprof_reads_a_converted_upstream_file(tmp_path):
    from proton_core.viewer import main

    out = tmp_path / "up.pb.gz"
    assert main(["--pprof", str(out), UPSTREAM]) == 0
    samples = raw_samples(out)
    assert samples[(("test0", "kernel_a"), "cuda_device:[0]")][:2] == [1, 864]
    assert samples[(("test0", "test1", "kernel_b"), "cuda_device:[0]")][:2] == [1, 897]
    assert top_total(out) == "1761ns"
