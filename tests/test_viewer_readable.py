"""proton-view's first screen: a header per column, '-' for no value, a root line saying what the profile is,
long and mangled kernel names made readable, and upstream commands that name absent metrics still answered."""

import json
import re
import shutil

import pytest

import proton_core as proton
from proton_core import viewer
from proton_core.viewer import names as viewer_names
from test_viewer import bad, row, show  # one reading of the printed tree


@pytest.fixture
def mixed(tmp_path, fake):
    """train_step{cpu_time} / backward / gemm (GPU time) and a CPU-only scope beside it."""
    proton.start(str(tmp_path / "mixed"), backend="fake")
    with proton.cpu_timed_scope("train_step"):
        with proton.scope("backward"):
            fake.launch("gemm", 4000)
    proton.finalize()
    return tmp_path / "mixed.hatchet"


def test_header_names_every_column_and_blanks_are_dashes(capsys, mixed):
    out = show(capsys, "-m", "time/ns,cpu_time/ns", mixed)
    header = out.splitlines()[0].split()
    assert header == ["time/ns", "cpu_time/ns", "name"]
    assert "nan" not in out
    assert row(out, "ROOT") == [4000.0, None]  # ROOT has no cpu_time of its own: '-'
    assert row(out, "backward") == [4000.0, None]
    assert row(out, "gemm") == [4000.0, None]
    step = row(out, "train_step")
    assert step[0] == 4000.0 and step[1] > 0
    # the columns are aligned: each value ends where its header ends
    lines = out.splitlines()
    ends = [m.end() for m in re.finditer(r"\S+", lines[0])][:-1]
    for line in lines[1:]:
        for end in ends:
            assert line[end - 1] in "0123456789-" and line[end] == " ", (line, end)


def test_default_header_is_time_ns(capsys, mixed):
    assert show(capsys, mixed).splitlines()[0].split() == ["time/ns", "name"]


def test_root_line_says_what_the_profile_is(capsys, mixed):
    out = show(capsys, "-m", "time/ns", mixed)
    root_line = out.splitlines()[1]
    words = root_line.split(" — ", 1)[1]
    assert words.startswith(f"profile {mixed.with_suffix('')}")  # the session's name, from the file's metadata
    assert "context shadow" in words
    assert "CUDA 0 (arch 90, 132 SMs)" in words  # the fake backend's device


def test_root_line_of_an_upstream_file_uses_its_name_and_devices(capsys, tmp_path):
    from test_viewer import UPSTREAM

    path = tmp_path / "upstream_run.hatchet"
    path.write_text(json.dumps(UPSTREAM))
    root_line = show(capsys, "-m", "time/ms", path).splitlines()[1]
    assert root_line.endswith(" — profile upstream_run, CUDA 0 (arch 90, 132 SMs), "
                              "HIP 0 (arch gfx942:sramecc+:xnack-, 304 CUs)")


def test_the_writer_records_what_the_profile_is(tmp_path, fake):
    proton.start(str(tmp_path / "named"), backend="fake", context="shadow")
    with proton.scope("s"):
        fake.launch("k", 10)
    proton.finalize()
    root = json.loads((tmp_path / "named.hatchet").read_text())[0]
    assert root["metadata"]["name"] == str(tmp_path / "named")
    assert root["metadata"]["context"] == "shadow" and root["metadata"]["data"] == "tree"
    assert root["metadata"]["writer"].startswith("proton-profiler ")
    assert set(root) == {"frame", "metrics", "children", "metadata"}  # hatchet reads the first three only


LONG = "matmul_kernel_" + "BLOCK_SIZE_M_128_" * 10  # 184 characters
MANGLED = "_ZN5flash16flash_fwd_kernelILi128ELi64ELb1EEEvNS_6ParamsE"


@pytest.fixture
def named(tmp_path):
    doc = [{"frame": {"name": "ROOT", "type": "function"}, "metrics": {"time (ns)": 0, "count": 0}, "children": [
        {"frame": {"name": LONG}, "metrics": {"time (ns)": 30, "count": 1, "device_id": "0", "device_type": "CUDA"}},
        {"frame": {"name": MANGLED}, "metrics": {"time (ns)": 20, "count": 1, "device_id": "0",
                                                 "device_type": "CUDA"}}]}, {}]
    path = tmp_path / "names.hatchet"
    path.write_text(json.dumps(doc))
    return path


def test_long_names_are_cut_as_upstream_cuts_them(capsys, named):
    out = show(capsys, named)
    assert LONG[:100] + "..." in out and LONG not in out
    assert show(capsys, "--print-sorted", named).count(LONG[:100] + "...") == 2  # tree and kernel list
    full = show(capsys, "--full-names", "--print-sorted", named)
    assert full.count(LONG) == 2


@pytest.mark.skipif(shutil.which("c++filt") is None, reason="c++filt (binutils) is not installed")
def test_mangled_names_are_demangled(capsys, named):
    out = show(capsys, named)
    assert "void flash::flash_fwd_kernel<128, 64, true>(flash::Params)" in out
    assert MANGLED not in out
    assert row(show(capsys, "-i", "flash::flash_fwd", named), "ROOT") == [20.0]  # filters see readable names


def test_names_stay_as_they_are_without_a_demangler(capsys, named, monkeypatch):
    monkeypatch.setattr(viewer_names.shutil, "which", lambda name: None)
    assert MANGLED in show(capsys, named)


def test_demangling_is_one_call_for_all_names(monkeypatch):
    calls = []
    real = viewer_names.subprocess.run

    def counting(*args, **kwargs):
        calls.append(kwargs["input"])
        return real(*args, **kwargs)

    if shutil.which("c++filt") is None:
        pytest.skip("c++filt (binutils) is not installed")
    monkeypatch.setattr(viewer_names.subprocess, "run", counting)
    out = viewer_names.demangle([MANGLED, "_Z6kernelPfS_i", "plain_kernel", MANGLED])
    assert out == {MANGLED: "void flash::flash_fwd_kernel<128, 64, true>(flash::Params)",
                   "_Z6kernelPfS_i": "kernel(float*, float*, int)"}
    assert len(calls) == 1 and "plain_kernel" not in calls[0]


# --------------------------------------------------------- forgiving metrics ----
@pytest.fixture
def cpu_only(tmp_path):
    proton.start(str(tmp_path / "cpu"), backend="host")
    with proton.cpu_timed_scope("step", metrics={"m (exc)": 3}):
        pass
    proton.finalize()
    return tmp_path / "cpu.hatchet"


def test_missing_metrics_are_left_out_with_one_warning(capsys, cpu_only):
    rc = viewer.main(["-m", "time/ns,cpu_time/ns,tflop16/s", str(cpu_only)])
    out, err = capsys.readouterr()
    assert rc == 0
    assert out.splitlines()[0].split() == ["cpu_time/ns", "name"]
    assert row(out, "step")[0] > 0
    assert err.count("\n") == 1 and err.startswith("proton-view: warning: ")
    assert "time/ns (needs 'time')" in err and "tflop16/s (needs 'flops16')" in err


def test_no_requested_metric_present_is_an_error(capsys, cpu_only):
    err = bad(capsys, "-m", "time/ns,tflop16/s", cpu_only)
    assert "none of the metrics time/ns, tflop16/s is in this profile" in err


def test_metric_names_keep_their_spelling(capsys, cpu_only):
    listed = show(capsys, "-l", cpu_only)
    assert "m (exc)" in listed and "m(exc)" not in listed  # as the program spelled it
    for spelling in ("m (exc)", "m(exc)", "M (EXC)"):
        out = show(capsys, "-m", spelling, cpu_only)
        assert out.splitlines()[0].split("  ")[0].strip() == spelling  # the header says what was asked
        assert row(out, "step") == [3.0]


# ------------------------------------------------------------ deep trees ----
def test_deep_trees_stop_indenting(capsys, tmp_path):
    depth = 300
    node = {"frame": {"name": "leaf"}, "metrics": {"time (ns)": 5}, "children": []}
    for i in reversed(range(depth)):
        node = {"frame": {"name": f"f{i}"}, "metrics": {}, "children": [node]}
    path = tmp_path / "deep.hatchet"
    path.write_text(json.dumps([{"frame": {"name": "ROOT"}, "metrics": {}, "children": [node]}, {}]))
    out = show(capsys, path)
    lines = out.splitlines()
    assert len(lines) == depth + 3  # header, ROOT, the chain, the leaf
    assert max(len(line) for line in lines) < 300  # not 3 characters per level
    assert f"[level {depth + 2}] leaf" in lines[-1]
    assert row(out, "leaf") == [5.0] and row(out, "f0") == [5.0]
