"""NVTX ranges become scopes: from Python (the nvtx package), from native threads, with any backend."""

from __future__ import annotations

import ctypes
import json
import os
import subprocess
import sys
import threading

import pytest

import proton_core as proton
from proton_core.plugin_api import context_names, innermost_scope, register_settler, unregister_settler
from proton_core.testing import PendingScope, child, load_profile

from nvtxtest import run_thread

nvtx = pytest.importorskip("nvtx")
from proton_nvtx import _inject  # noqa: E402


@pytest.fixture(autouse=True)
def fresh_counters():
    _inject.reset_stats()
    yield


def names_below(node) -> list[str]:
    return [c["frame"]["name"] for c in node["children"]]


def test_nvtx_ranges_nest_with_proton_scopes_in_program_order(tmp_path, fake):
    proton.start(str(tmp_path / "p"), backend="fake")
    with proton.scope("outer"):
        nvtx.push_range("fwd")
        with proton.scope("layer"):
            nvtx.push_range("attn")
            fake.launch("k", 100)
            fake.launch("k", 100)
            nvtx.pop_range()
        fake.launch("j", 50)
        nvtx.pop_range()
    proton.finalize()
    root = load_profile(str(tmp_path / "p.hatchet"))[0]
    k = child(root, "outer", "fwd", "layer", "attn", "k")
    assert k["metrics"]["count"] == 2
    assert child(root, "outer", "fwd", "j")["metrics"]["count"] == 1
    assert _inject.stats()["unbalanced_pops"] == 0


def test_a_range_pushed_with_the_gil_settles_plugins_frames_first(tmp_path, fake):
    """Before a range opens as a scope, the core's settlers run (a plugin's own frames, such as the torch
    plugin's module calls, become scopes): the range nests under what they open."""
    frame = PendingScope()
    proton.start(str(tmp_path / "p"), backend="fake")
    register_settler(frame)
    try:
        frame.keep()
        nvtx.push_range("range")
        fake.launch("k", 100)
        nvtx.pop_range()
        frame.close()
    finally:
        unregister_settler(frame)
    proton.finalize()
    root = load_profile(str(tmp_path / "p.hatchet"))[0]
    assert child(root, "frame", "range", "k")["metrics"]["count"] == 1


def test_host_backend_records_each_range_time_as_cpu_time(tmp_path):
    proton.start(str(tmp_path / "h"), backend="host")
    for _ in range(3):
        with nvtx.annotate("step"):
            with nvtx.annotate("inner"):
                pass
    proton.finalize()
    root = load_profile(str(tmp_path / "h.hatchet"))[0]
    step = child(root, "step")
    inner = child(step, "inner")
    assert step["metrics"]["cpu_time (ns)"] >= inner["metrics"]["cpu_time (ns)"] > 0


def test_domains_are_a_prefix_that_can_be_turned_off(tmp_path, fake, monkeypatch):
    proton.start(str(tmp_path / "d"), backend="fake")
    with nvtx.annotate("op", domain="nccl"):
        fake.launch("k")
    proton.finalize()
    assert child(load_profile(str(tmp_path / "d.hatchet"))[0], "nccl::op", "k")["metrics"]["count"] == 1
    monkeypatch.setenv("PROTON_NVTX_DOMAIN_PREFIX", "0")
    proton.start(str(tmp_path / "e"), backend="fake")
    with nvtx.annotate("op", domain="nccl"):
        fake.launch("k")
    proton.finalize()
    assert child(load_profile(str(tmp_path / "e.hatchet"))[0], "op", "k")["metrics"]["count"] == 1


def test_emit_nvtx_call_counters_are_cut_so_calls_aggregate(tmp_path, fake, monkeypatch):
    proton.start(str(tmp_path / "o"), backend="fake")
    for op_id in (225, 226, 227):
        with nvtx.annotate(f"aten::linear, seq = {op_id - 200}, op_id = {op_id}"):
            fake.launch("gemm")
    with nvtx.annotate("aten::add, op_id = 9, sizes = [[8, 128]]"):
        fake.launch("add")
    proton.finalize()
    root = load_profile(str(tmp_path / "o.hatchet"))[0]
    assert child(root, "aten::linear", "gemm")["metrics"]["count"] == 3
    assert child(root, "aten::add, sizes = [[8, 128]]", "add")["metrics"]["count"] == 1
    monkeypatch.setenv("PROTON_NVTX_KEEP_IDS", "1")
    proton.start(str(tmp_path / "k"), backend="fake")
    with nvtx.annotate("aten::linear, op_id = 5"):
        fake.launch("gemm")
    proton.finalize()
    assert child(load_profile(str(tmp_path / "k.hatchet"))[0], "aten::linear, op_id = 5", "gemm")


def test_a_session_started_with_nvtx_false_sees_no_ranges(tmp_path, fake):
    proton.start(str(tmp_path / "n"), backend="fake", nvtx=False)
    with nvtx.annotate("hidden"):
        fake.launch("k")
    proton.finalize()
    root = load_profile(str(tmp_path / "n.hatchet"))[0]
    assert names_below(root) == ["k"]


def test_nvtx_must_be_a_bool():
    with pytest.raises(proton.ProtonError, match="nvtx must be True or False"):
        proton.start("x", backend="fake", nvtx="yes")


def test_ranges_without_a_session_cost_no_state():
    nvtx.push_range("nobody listens")
    nvtx.pop_range()
    stats = _inject.stats()
    assert stats["open_ranges_this_thread"] == 0 and stats["native_pushes"] == 0


def test_native_thread_ranges_are_scopes_without_the_gil(tmp_path, client):
    proton.start(str(tmp_path / "t"), backend="host")
    run_thread(client, ["allreduce", "ring"], iterations=5)
    proton.finalize()
    assert _inject.stats()["native_pushes"] == 10
    root = load_profile(str(tmp_path / "t.hatchet"))[0]
    outer = child(root, "allreduce")
    assert outer["metrics"]["cpu_time (ns)"] >= child(outer, "ring")["metrics"]["cpu_time (ns)"] > 0


def test_native_threads_publish_their_context_to_backends_natively(client, fake):
    """What a backend's native setter is told on a thread that never holds the GIL (the capsule path)."""
    capsule = ctypes.pythonapi.PyCapsule_New
    capsule.restype = ctypes.py_object
    capsule.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
    setter = capsule(ctypes.addressof(ctypes.c_char.in_dll(client, "client_native_context")),
                     b"proton.native_context.v1", None)
    fake.backend.__class__.native_context = setter
    try:
        proton.start("x", backend="fake")
        with proton.scope("train"):
            base = innermost_scope()
            run_thread(client, ["nccl", "kernel"], start_ctx=base)  # the thread starts under "train"
        seen = client.client_innermost_seen()
        assert context_names(seen) == ["train", "nccl", "kernel"]
        assert seen >= 1 << 40  # interned natively, not by the core
    finally:
        del fake.backend.__class__.native_context


def test_per_thread_stacks_stay_separate(tmp_path, client):
    proton.start(str(tmp_path / "s"), backend="host")
    threads = [threading.Thread(target=run_thread, args=(client, [f"t{i}", "work"], 50)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    proton.finalize()
    root = load_profile(str(tmp_path / "s.hatchet"))[0]
    assert sorted(names_below(root)) == ["t0", "t1", "t2", "t3"]
    for i in range(4):
        assert names_below(child(root, f"t{i}")) == ["work"]


def test_bad_input_is_handled_and_explained(tmp_path, client):
    proton.start(str(tmp_path / "b"), backend="host")
    client.client_push(b"bad \xff\xfe bytes")
    client.client_pop()
    client.client_push(b"")
    client.client_pop()
    client.client_push(b"x" * 10_000)
    client.client_pop()
    client.client_push_w("wide \u00e9")
    client.client_pop()
    assert client.client_pop() == -1  # one pop too many: ignored and counted
    run_thread(client, ["a"], extra_pops=2)
    proton.finalize()
    assert _inject.stats()["unbalanced_pops"] == 3
    names = names_below(load_profile(str(tmp_path / "b.hatchet"))[0])
    assert "bad \ufffd\ufffd bytes" in names and "<empty>" in names and "wide \u00e9" in names and "a" in names
    long = [n for n in names if n.startswith("xxx")]
    assert len(long) == 1 and long[0] == "x" * 1024 + "..."


def test_push_on_one_thread_and_pop_on_another_pops_nothing_there(tmp_path, client):
    proton.start(str(tmp_path / "c"), backend="host")
    t = threading.Thread(target=client.client_push, args=(b"left open",))
    t.start()
    t.join()
    assert client.client_pop() == -1
    proton.finalize()
    assert _inject.stats()["unbalanced_pops"] == 1


def test_start_end_ranges_and_marks_are_trace_events(tmp_path, client):
    proton.start(str(tmp_path / "tr"), backend="host", data="trace")
    with proton.scope("phase"):
        rid = client.client_start(b"io")
        client.client_mark(b"checkpoint")
        nvtx.mark("py mark")
    t = threading.Thread(target=client.client_end, args=(rid,))  # ended on another thread
    t.start()
    t.join()
    proton.finalize()
    events = json.load(open(tmp_path / "tr.chrome_trace"))
    events = events["traceEvents"] if isinstance(events, dict) else events
    by_name = {e["name"]: e for e in events if e.get("name") in ("io", "checkpoint", "py mark")}
    assert set(by_name) == {"io", "checkpoint", "py mark"}
    assert by_name["io"].get("dur", 0) > 0


@pytest.mark.parametrize("case", ["sets", "keeps_other", "disabled"])
def test_import_points_nvtx_at_proton_unless_told_otherwise(case, tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ("NVTX_INJECTION64_PATH", "PROTON_ENABLE_NVTX")}
    if case == "keeps_other":
        env["NVTX_INJECTION64_PATH"] = "/opt/other/libtool.so"
    if case == "disabled":
        env["PROTON_ENABLE_NVTX"] = "0"
    code = ("import os, proton_core as proton; print(os.environ.get('NVTX_INJECTION64_PATH'));"
            f"proton.start({str(tmp_path / '_nvtx_env')!r}, backend='host'); proton.finalize()")
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    path = r.stdout.strip().splitlines()[0]
    if case == "sets":
        assert path.endswith(".so") and "_inject" in path and r.stderr.count("NVTX") == 0
    elif case == "keeps_other":
        assert path == "/opt/other/libtool.so"
        assert len([line for line in r.stderr.splitlines() if "NVTX_INJECTION64_PATH already names" in line]) == 1
    else:
        assert path == "None"


def test_a_library_that_initialised_nvtx_before_proton_gets_one_warning(tmp_path):
    code = ("import nvtx; nvtx.push_range('early'); nvtx.pop_range();"
            f"import proton_core as proton; proton.start({str(tmp_path / '_nvtx_late')!r}, backend='host');"
            f"proton.start({str(tmp_path / '_nvtx_late2')!r}, backend='host'); proton.finalize()")
    env = {k: v for k, v in os.environ.items() if k != "NVTX_INJECTION64_PATH"}
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    lines = [line for line in r.stderr.splitlines() if "before Proton was imported" in line]
    assert len(lines) == 1 and "the nvtx package" in lines[0], r.stderr
