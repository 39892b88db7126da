"""pprof output: written by the ``pprof`` sink and by ``proton-view --pprof``, parsed back with protobuf.

Every number is checked per call path and label set against what the
synthetic backend launched (or what the hatchet file holds), so a sample put
under the wrong path, device, stream or stall reason, or a value lost, fails.
"""

from __future__ import annotations

import gzip
import os
import re
import time

import pytest

import proton_core as proton
from proton_core.formats import pprof_read, pprof_schema

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
UPSTREAM = os.path.join(ROOT, "tests", "data", "upstream", "upstream.hatchet")
PROTO = os.path.join(ROOT, "proton_core", "formats", "pprof_profile.proto")
LINE = "/src/kern.py:42"




def by_path(profile) -> dict:
    """{(path, frozenset of labels): {type: value}} with the zero values left out."""
    out = {}
    for s in profile.samples:
        key = (s.path, frozenset(s.labels.items()))
        assert key not in out, f"two samples for {key}"
        out[key] = {t: v for t, v in s.values.items() if v}
    return out


def record(tmp_path, name="run", **start):
    return proton.start(str(tmp_path / name), backend="fake", output_format="pprof", **start)


# ------------------------------------------------------------------ round trip ----
def test_round_trip_exact_values_per_path_and_device(tmp_path, fake):
    record(tmp_path)
    with proton.scope("step", {"bytes (B)": 100, "flops": 7}):
        fake.launch("gemm", 1000, device=0)
        fake.launch("gemm", 1500, device=0)
        fake.launch("gemm", 500, device=1)
        with proton.scope("inner"):
            fake.launch("relu", 30, device=1)
    fake.launch("top", 9)
    proton.finalize()
    p = pprof_read.read(tmp_path / "run.pb.gz")
    assert p.sample_types[:2] == [("gpu_kernel_launches", "count"), ("gpu_kernel_time", "nanoseconds")]
    assert ("bytes", "bytes") in p.sample_types and ("flops", "count") in p.sample_types
    assert p.default_sample_type == "gpu_kernel_time" and p.period_type == ("gpu_kernel_time", "nanoseconds")
    d0, d1 = frozenset({("cuda_device", "0")}), frozenset({("cuda_device", "1")})
    assert by_path(p) == {
        (("step",), frozenset()): {"bytes": 100, "flops": 7},
        (("step", "gemm"), d0): {"gpu_kernel_launches": 2, "gpu_kernel_time": 2500},
        (("step", "gemm"), d1): {"gpu_kernel_launches": 1, "gpu_kernel_time": 500},
        (("step", "inner", "relu"), d1): {"gpu_kernel_launches": 1, "gpu_kernel_time": 30},
        (("top",), d0): {"gpu_kernel_launches": 1, "gpu_kernel_time": 9},
    }
    assert p.total("gpu_kernel_time") == 3039 and p.total("gpu_kernel_launches") == 5
    assert any(c.startswith("device CUDA 1: ") for c in p.comments)


def test_several_devices_each_its_own_sample_and_label(tmp_path, fake):
    record(tmp_path)
    with proton.scope("all_devices"):
        for device in range(4):
            for _ in range(device + 1):
                fake.launch("allreduce", 100 * (device + 1), device=device)
    proton.finalize()
    p = pprof_read.read(tmp_path / "run.pb.gz")
    found = {s.labels["cuda_device"]: s.values for s in p.samples if s.path == ("all_devices", "allreduce")}
    assert {d: (v["gpu_kernel_launches"], v["gpu_kernel_time"]) for d, v in found.items()} == {
        "0": (1, 100), "1": (2, 400), "2": (3, 900), "3": (4, 1600)}


def test_empty_profile_is_a_valid_file_with_the_kernel_sample_types(tmp_path):
    record(tmp_path)
    proton.finalize()
    p = pprof_read.read(tmp_path / "run.pb.gz")
    assert p.samples == []
    assert p.sample_types == [("gpu_kernel_launches", "count"), ("gpu_kernel_time", "nanoseconds")]


def test_profile_time_is_the_session_start_and_duration_runs_to_the_write(tmp_path, fake):
    before = time.time_ns()
    record(tmp_path)
    fake.launch("k", 5)
    time.sleep(0.05)
    proton.finalize()
    after = time.time_ns()
    p = pprof_read.read(tmp_path / "run.pb.gz")
    assert before <= p.time_nanos <= before + (after - before) // 2
    assert 50_000_000 <= p.duration_nanos <= after - before


def test_periodic_parts_each_span_from_the_previous_write(tmp_path, fake):
    sid = record(tmp_path, mode="periodic_flushing:interval=3600")
    fake.launch("a", 1)
    proton.data.advance_phase(sid)
    time.sleep(0.02)
    fake.launch("b", 2)
    proton.finalize()
    parts = sorted(tmp_path.glob("run.part_*.pb.gz"))
    assert len(parts) == 2
    first, second = (pprof_read.read(p) for p in parts)
    assert [s.path for s in first.samples] == [("a",)] and [s.path for s in second.samples] == [("b",)]
    assert second.time_nanos >= first.time_nanos + first.duration_nanos


# --------------------------------------------------------------------- frames ----
ODD = ["quote \" and 'apostrophe'", "new\nline", "tab\tand\rreturn", "\x1b[31mescape", "ümlaut ☃ 名前",
       "percent %s %d {}", "x" * 5000, "ROOT", "0", "a.py:3", "semi;colon|pipe", "ends with space "]


def test_odd_names_survive_exactly(tmp_path, fake):
    record(tmp_path)
    for name in ODD:
        with proton.scope(name):
            fake.launch(f"k<{name[:20]}>", 7)
    proton.finalize()
    p = pprof_read.read(tmp_path / "run.pb.gz")
    paths = {s.path for s in p.samples}
    assert paths == {(name, f"k<{name[:20]}>") for name in ODD}


def test_python_frames_are_functions_with_file_and_line(tmp_path, fake):
    record(tmp_path)
    with proton.scope("/home/u/train.py:12@main"):
        with proton.scope("/home/u/model.py:40@forward"):
            fake.launch("_ZN5torch4gemmEv", 11)
    proton.finalize()
    (s,) = pprof_read.read(tmp_path / "run.pb.gz").samples
    assert [(f.function, f.filename, f.line) for f in s.frames] == [
        ("main", "/home/u/train.py", 12), ("forward", "/home/u/model.py", 40), ("_ZN5torch4gemmEv", "", 0)]


# ---------------------------------------------------------------- pcsampling ----
def test_instruction_samples_one_per_stall_reason_with_device_and_line(tmp_path, fake):
    record(tmp_path)
    with proton.scope("step"):
        fake.launch("gemm", 1000, device=1, inner=[
            ((LINE,), {"samples": 9, "stall_long_scoreboard": 6, "stall_wait": 3, "stall_wait_not_issued": 2}),
            (("sass+0x1a0",), {"samples": 4, "stall_selected": 4})])
    proton.finalize()
    p = pprof_read.read(tmp_path / "run.pb.gz")
    assert ("gpu_pcsample", "count") in p.sample_types and ("gpu_pcsample_not_issued", "count") in p.sample_types
    d1 = ("cuda_device", "1")
    assert by_path(p) == {
        (("step", "gemm"), frozenset({d1})): {"gpu_kernel_launches": 1, "gpu_kernel_time": 1000},
        (("step", "gemm", "gemm"), frozenset({d1, ("stall_reason", "long_scoreboard")})): {"gpu_pcsample": 6},
        (("step", "gemm", "gemm"), frozenset({d1, ("stall_reason", "wait")})): {
            "gpu_pcsample": 3, "gpu_pcsample_not_issued": 2},
        (("step", "gemm", "gemm"), frozenset({d1, ("stall_reason", "selected")})): {"gpu_pcsample": 4},
    }
    leaves = {(s.frames[-1].filename, s.frames[-1].line, s.frames[-1].address) for s in p.samples
              if len(s.frames) == 3}
    assert leaves == {("/src/kern.py", 42, 0), ("", 0, 0x1a0)}
    assert p.total("gpu_pcsample") == 13


def test_stall_reasons_that_do_not_add_up_are_kept_as_they_are(tmp_path, fake):
    record(tmp_path)
    fake.launch("k", 10, inner=[((LINE,), {"samples": 5, "stall_wait": 2})])
    proton.finalize()
    p = pprof_read.read(tmp_path / "run.pb.gz")
    (line,) = [s for s in p.samples if len(s.frames) == 2]
    assert "stall_reason" not in line.labels
    assert {t: v for t, v in line.values.items() if v} == {"gpu_pcsample": 5, "stall_wait": 2}


def test_samples_of_a_kernel_without_a_record_are_still_the_kernels_lines(tmp_path, fake):
    record(tmp_path)
    fake.backend.sample("k", [((LINE,), {"samples": 2, "stall_wait": 2})])
    proton.finalize()
    (line,) = pprof_read.read(tmp_path / "run.pb.gz").samples
    assert [(f.function, f.filename, f.line) for f in line.frames] == [("k", "", 0), ("k", "/src/kern.py", 42)]
    assert line.labels == {"stall_reason": "wait"} and line.values["gpu_pcsample"] == 2


def test_a_kernel_on_several_devices_leaves_its_lines_without_a_device(tmp_path, fake):
    record(tmp_path)
    fake.launch("k", 10, device=0, inner=[((LINE,), {"samples": 1, "stall_wait": 1})])
    fake.launch("k", 10, device=1, inner=[((LINE,), {"samples": 2, "stall_wait": 2})])
    proton.finalize()
    p = pprof_read.read(tmp_path / "run.pb.gz")
    (line,) = [s for s in p.samples if len(s.frames) == 2]
    assert line.labels == {"stall_reason": "wait"} and line.values["gpu_pcsample"] == 3


# ----------------------------------------------------------------- streams ----
def test_trace_sessions_label_kernels_with_their_stream(tmp_path, fake):
    record(tmp_path, data="trace")
    fake.launch("k", 10, stream=7)
    fake.launch("k", 20, stream=7)
    fake.launch("k", 40, stream=9)
    fake.launch("k", 80, device=1, stream=9)
    proton.finalize()
    p = pprof_read.read(tmp_path / "run.pb.gz")
    got = {(s.labels["cuda_device"], s.labels["cuda_stream"]): (s.values["gpu_kernel_launches"],
                                                                s.values["gpu_kernel_time"]) for s in p.samples}
    assert got == {("0", "7"): (2, 30), ("0", "9"): (1, 40), ("1", "9"): (1, 80)}


def test_a_trace_sessions_timeline_is_said_to_be_left_out(tmp_path, fake, caplog):
    record(tmp_path, data="trace")
    with proton.scope("s"):
        fake.launch("k", 10)
    with caplog.at_level("WARNING", logger="proton"):
        proton.finalize()
    said = [r.getMessage() for r in caplog.records if "timeline" in r.getMessage()]
    assert len(said) == 1 and "1 scope events" in said[0] and "chrome_trace" in said[0]
    assert any("1 scope events" in c for c in pprof_read.read(tmp_path / "run.pb.gz").comments)


# ---------------------------------------------------------------- metrics ----
def test_every_metric_kind_has_a_place_or_is_said(tmp_path, fake, caplog):
    record(tmp_path)
    with proton.scope("s", {"bytes (B)": 64, "cpu_wait (ns)(exc)": 5, "peak (B)(pty)": 4096, "note (pty)": "warm-up",
                            "ratio": 2.5}):
        fake.launch("k", 3)
    with proton.scope("lists", {"per_rank": [1, 2, 3]}):
        pass
    with caplog.at_level("WARNING", logger="proton"):
        proton.finalize()
    p = pprof_read.read(tmp_path / "run.pb.gz")
    assert {"bytes": "bytes", "cpu_wait": "nanoseconds", "ratio": "count"}.items() <= dict(p.sample_types).items()
    (scope,) = [s for s in p.samples if s.path == ("s",)]
    assert scope.labels == {"peak": 4096, "note": "warm-up"}
    assert {t: v for t, v in scope.values.items() if v} == {"bytes": 64, "cpu_wait": 5, "ratio": 2}
    said = [r.getMessage() for r in caplog.records]
    assert any("per_rank (a list of values" in m for m in said), said
    assert any("1 metric values with a fraction were rounded" in m for m in said), said
    assert any("per_rank" in c for c in p.comments)


def test_dropped_kernels_and_the_session_are_said_in_comments(tmp_path, fake):
    record(tmp_path)
    fake.launch("k", 3)
    fake.backend.dropped = 4
    proton.finalize()
    p = pprof_read.read(tmp_path / "run.pb.gz")
    head = p.comments[0]
    assert head.startswith("proton-profiler ") and f"session {tmp_path / 'run'}" in head and "backend fake" in head
    assert "ROOT dropped: 4" in p.comments


def test_values_past_int64_are_clamped_and_said(tmp_path, fake, caplog):
    record(tmp_path)
    with proton.scope("big", {"flops": 2 ** 70}):
        fake.launch("k", 1)
    with caplog.at_level("WARNING", logger="proton"):
        proton.finalize()
    (big,) = [s for s in pprof_read.read(tmp_path / "run.pb.gz").samples if s.path == ("big",)]
    assert big.values["flops"] == 2 ** 63 - 1
    assert any("past pprof's int64" in r.getMessage() for r in caplog.records)


# ------------------------------------------------------------------ schema ----
def test_the_proto_file_and_the_descriptor_built_at_import_agree():
    text = open(PROTO, encoding="utf-8").read()
    found = {}
    for name, body in re.findall(r"message (\w+) \{(.*?)\n\}", text, re.S):
        found[name] = [(f, int(n), t, bool(r)) for r, t, f, n in
                       re.findall(r"^\s*(repeated )?(\w+) (\w+) = (\d+);", body, re.M)]
    assert found == pprof_schema.MESSAGES
    assert re.search(r"^package perftools\.profiles;", text, re.M)


def test_bytes_are_gzipped_profile_proto():
    from proton_core.formats.pprof_builder import Builder

    b = Builder()
    b.add((b.location(b.function("f")),), {b.sample_type("x", "count"): 3})
    data = b.encode()
    profile = pprof_schema.Profile.FromString(gzip.decompress(data))
    assert profile.string_table[0] == "" and list(profile.sample[0].value) == [3]


# ------------------------------------------------------------------ viewer ----
def test_viewer_converts_our_hatchet_to_the_samples_the_sink_writes(tmp_path, fake):
    proton.start(str(tmp_path / "direct"), backend="fake", output_format="pprof")
    proton.start(str(tmp_path / "file"), backend="fake")
    with proton.scope("step", {"bytes (B)": 8}):
        fake.launch("gemm", 1000, device=0)
        fake.launch("gemm", 700, device=1)
        fake.launch("attn", 300, inner=[((LINE,), {"samples": 5, "stall_wait": 2, "stall_math": 3})])
    proton.finalize()
    from proton_core.viewer import main

    assert main(["--pprof", str(tmp_path / "conv.pb.gz"), str(tmp_path / "file.hatchet")]) == 0
    direct, converted = pprof_read.read(tmp_path / "direct.pb.gz"), pprof_read.read(tmp_path / "conv.pb.gz")
    assert by_path(converted) == by_path(direct)
    assert len(by_path(direct)) == 6
    assert converted.sample_types == direct.sample_types


def test_viewer_converts_upstreams_file(tmp_path, capsys):
    from proton_core.viewer import main

    out = tmp_path / "up.pb.gz"
    assert main(["--pprof", str(out), UPSTREAM]) == 0
    assert f"wrote {out} (6 samples)" in capsys.readouterr().out
    p = pprof_read.read(out)
    kernels = {s.path: (s.labels, s.values["gpu_kernel_launches"], s.values["gpu_kernel_time"])
               for s in p.samples if s.values["gpu_kernel_time"]}
    assert kernels == {("test0", "kernel_a"): ({"cuda_device": "0"}, 1, 864),
                       ("test0", "test1", "kernel_b"): ({"cuda_device": "0"}, 1, 897)}
    assert p.time_nanos == os.stat(UPSTREAM).st_mtime_ns


def test_viewer_sums_several_files_into_one(tmp_path, fake):
    for name in ("a", "b"):
        proton.start(str(tmp_path / name), backend="fake")
        fake.launch("k", 10 if name == "a" else 32)
        proton.finalize()
    from proton_core.viewer import main

    assert main(["--pprof", str(tmp_path / "ab.pb.gz"), str(tmp_path / "a.hatchet"), str(tmp_path / "b.hatchet")]) == 0
    (s,) = pprof_read.read(tmp_path / "ab.pb.gz").samples
    assert (s.values["gpu_kernel_launches"], s.values["gpu_kernel_time"]) == (2, 42)


@pytest.mark.parametrize("argv, words", [
    (["-d", "2"], "--pprof converts the whole profile; leave out -d"),
    (["--html", "x.html"], "leave out --html"),
    ([], "no such file"),
])
def test_viewer_errors_are_one_line(tmp_path, capsys, argv, words):
    from proton_core.viewer import main

    missing = str(tmp_path / "missing.hatchet")
    assert main(["--pprof", str(tmp_path / "o.pb.gz"), *argv, UPSTREAM if argv else missing]) == 2
    err = capsys.readouterr().err
    assert words in err and err.count("\n") == 1 and err.startswith("proton-view: ")
    assert not (tmp_path / "o.pb.gz").exists()


# --------------------------------------------------------------------- CLI ----
def test_cli_writes_pprof(tmp_path):
    import subprocess
    import sys

    script = tmp_path / "s.py"
    script.write_text("import proton_core as proton\nwith proton.scope('x'):\n    pass\n")
    run = subprocess.run([sys.executable, "-m", "proton_core", "-n", str(tmp_path / "cli"), "-o", "pprof",
                          "-b", "host", str(script)], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    assert pprof_read.read(tmp_path / "cli.pb.gz").sample_types[1] == ("gpu_kernel_time", "nanoseconds")


def test_viewer_converts_hatchet_msgpack_as_hatchet(tmp_path, fake):
    proton.start(str(tmp_path / "j"), backend="fake")
    proton.start(str(tmp_path / "m"), backend="fake", output_format="hatchet_msgpack")
    with proton.scope("s", {"flops": 3}):
        fake.launch("k", 10, device=2)
    proton.finalize()
    from proton_core.viewer import main

    assert main(["--pprof", str(tmp_path / "j.pb.gz"), str(tmp_path / "j.hatchet")]) == 0
    assert main(["--pprof", str(tmp_path / "m.pb.gz"), str(tmp_path / "m.hatchet_msgpack")]) == 0
    json_form, msgpack_form = (by_path(pprof_read.read(tmp_path / f"{n}.pb.gz")) for n in "jm")
    assert json_form == msgpack_form == {
        (("s",), frozenset()): {"flops": 3},
        (("s", "k"), frozenset({("cuda_device", "2")})): {"gpu_kernel_launches": 1, "gpu_kernel_time": 10}}
