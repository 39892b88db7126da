"""The public API's semantics: scopes, metrics, sessions, errors at the call."""

import json
import os
import threading

import pytest

import proton_core as proton
from proton_core.testing import child as node, get_plugins, load_profile as load, run_threads
from proton_core.context import THREAD
from proton_core.errors import ProtonError
from proton_core.session import MANAGER


class Scalar:
    """A stand-in for a 0-d framework tensor (has shape, dtype, item)."""

    def __init__(self, value, shape=(), dtype="float32"):
        self.value, self.shape, self.dtype = value, shape, dtype
        self.reads = 0

    def item(self):
        self.reads += 1
        return self.value


def test_scope_metrics_inclusive_exclusive_property(tmp_path, fake):
    proton.start(str(tmp_path / "p"), backend="fake")
    for _ in range(2):
        with proton.scope("outer", {"bytes": 1000, "flops16": 2.5, "tokens (n)(exc)": 3, "batch (n)(pty)": 8}):
            with proton.scope("inner", {"bytes": 10}):
                fake.launch("k", 50)
    proton.finalize()
    root, _ = load(tmp_path / "p.hatchet")
    outer = node(root, "outer")["metrics"]
    assert outer == {"bytes": 2000, "flops16": 5.0, "tokens (n)(exc)": 6, "batch (n)(pty)": 8}
    assert node(root, "outer", "inner")["metrics"] == {"bytes": 20}


def test_tree_inclusive_sums_only_inclusive_metrics(fake):
    sid = proton.start("unused", backend="fake")
    with proton.scope("a", {"bytes": 5, "x (exc)": 1}):
        with proton.cpu_timed_scope("b", {"bytes": 7}):
            fake.launch("k", 40)
    session = MANAGER.sessions[sid]
    MANAGER.flush(session.backend_state)
    tree = session.profile.tree
    a = tree.find("a")
    assert tree.inclusive("bytes", a) == 12
    assert tree.inclusive("time (ns)", a) == 40
    assert tree.inclusive("x (exc)", a) == 1
    assert tree.inclusive("cpu_time (ns)", a) == 0  # cpu_time never propagates
    assert tree.find("a", "b").metrics["cpu_time (ns)"] > 0


def test_cpu_timed_scope_is_exclusive_and_positive(tmp_path):
    proton.start(str(tmp_path / "p"), backend="host")
    with proton.cpu_timed_scope("test0"):
        with proton.cpu_timed_scope("test1"):
            sum(range(10000))
    proton.finalize()
    root, devices = load(tmp_path / "p.hatchet")
    t0, t1 = node(root, "test0"), node(root, "test0", "test1")
    assert t0["metrics"]["cpu_time (ns)"] >= t1["metrics"]["cpu_time (ns)"] > 0
    assert devices == {}


def test_tensor_metrics_are_read_at_flush_not_at_the_call(tmp_path):
    value = Scalar(4.0)
    proton.start(str(tmp_path / "p"), backend="host")
    with proton.scope("s", {"bytes": value}):
        pass
    assert value.reads == 0
    proton.finalize()
    assert value.reads == 1
    assert node(load(tmp_path / "p.hatchet")[0], "s")["metrics"]["bytes"] == 4.0


class Vector(Scalar):
    """A stand-in for a 1-d framework tensor (tolist)."""

    def tolist(self):
        self.reads += 1
        return list(self.value)


def test_a_1d_tensor_metric_is_read_at_finalize_as_a_list(tmp_path):
    """upstream's 1-d tensor metrics (``{"vec": torch.arange(4)}``): element by element, summed over entries."""
    vec = Vector([0, 1, 2, 3], shape=(4,))
    proton.start(str(tmp_path / "p"), backend="host")
    for _ in range(2):
        with proton.scope("s", {"vec": vec}):
            pass
    assert vec.reads == 0
    proton.finalize()
    assert node(load(tmp_path / "p.hatchet")[0], "s")["metrics"]["vec"] == [0, 2, 4, 6]


@pytest.mark.parametrize("metrics, message", [
    ({"time": 1}, "reserved"),
    ({"count (n)": 1}, "reserved"),
    ({"cpu_time": 1}, "reserved"),
    ({"bytes": -1}, "negative"),
    ({"bytes": "12"}, "text value '12': only properties"),
    ({"bytes": True}, "bool"),
    ({"bytes": float("nan")}, "finite"),
    ({"bad name here": 1}, "malformed"),
    ({"bytes": Scalar(1.0, shape=(3, 2))}, "0-d tensor .* or a 1-d one"),
    ({"bytes": Scalar(1.0, dtype="bool")}, "dtype"),
    ([("bytes", 1)], "must be a dict"),
])
def test_bad_metrics_fail_at_the_call(tmp_path, metrics, message):
    proton.start(str(tmp_path / "p"), backend="host")
    with pytest.raises(ProtonError, match=message):
        proton.scope("s", metrics)
    with pytest.raises(ProtonError, match=message):
        proton.enter_scope("s", metrics=metrics)


@pytest.mark.parametrize("kwargs, message", [
    ({"context": "frames"}, "unknown context 'frames'"),
    ({"data": "table"}, "unknown data 'table'"),
    ({"output_format": "xml"}, "unknown output_format 'xml'"),
    ({"data": "tree", "output_format": "chrome_trace"}, "cannot write data='tree'"),
    ({"hook": "nosuch"}, "unknown hook 'nosuch'"),
    ({"backend": "nosuch"}, "unknown backend 'nosuch'.*installed backends: .*host"),
    ({"backend": "host", "mode": "pcsampling"}, "has no mode 'pcsampling'"),
])
def test_bad_start_arguments_are_clear_errors(tmp_path, kwargs, message):
    with pytest.raises(ProtonError, match=message):
        proton.start(str(tmp_path / "p"), **kwargs)
    assert MANAGER.sessions == {}


def test_mode_is_passed_when_the_backend_supports_it(tmp_path):
    proton.start(str(tmp_path / "p"), backend="fake", mode="fastmode")
    proton.finalize()


def test_enter_exit_scope_and_mismatch_in_strict_mode(tmp_path, fake, monkeypatch):
    """PROTON_STRICT_SCOPES=1 keeps a bookkeeping error an error (tests/test_unbalanced_scopes.py: the default)."""
    monkeypatch.setenv("PROTON_STRICT_SCOPES", "1")
    proton.start(str(tmp_path / "p"), backend="fake")
    proton.enter_scope("a")
    proton.enter_scope("b")
    fake.launch("k")
    with pytest.raises(ProtonError, match="does not match the innermost open scope 'b'"):
        proton.exit_scope("a")
    proton.exit_scope("b")
    proton.exit_scope()
    with pytest.raises(ProtonError, match="no open scope"):
        proton.exit_scope()
    proton.finalize()
    assert node(load(tmp_path / "p.hatchet")[0], "a", "b", "k")["metrics"]["count"] == 1


def test_scope_as_decorator_and_profile_decorator(tmp_path, fake):
    @proton.scope("decorated")
    def work():
        fake.launch("k")

    @proton.profile(name=str(tmp_path / "prof"), backend="fake")
    def run():
        work()
        return 42

    assert run() == 42
    assert node(load(tmp_path / "prof.hatchet")[0], "decorated", "k")["metrics"]["count"] == 1
    assert MANAGER.sessions == {}
    assert proton.profile(lambda: 7, name=str(tmp_path / "q"), backend="host")() == 7
    assert os.path.exists(tmp_path / "q.hatchet")


def test_unwritable_path_keeps_data_for_a_second_finalize(tmp_path, fake):
    """The directory vanishes during the run (start() checked it): an explicit finalize raises and keeps the data."""
    import shutil

    (tmp_path / "gone").mkdir()
    sid = proton.start(str(tmp_path / "gone" / "p"), backend="fake")
    fake.launch("k", 9)
    shutil.rmtree(tmp_path / "gone")
    with pytest.raises(ProtonError, match=r"cannot write session \d+'s profile .*finalize\(\d+, name="):
        proton.finalize(sid)
    paths = proton.finalize(sid, name=str(tmp_path / "second"))
    assert paths == [str(tmp_path / "second.hatchet")]
    assert node(load(paths[0])[0], "k")["metrics"]["time (ns)"] == 9


def test_a_full_disk_keeps_data_and_leaves_no_partial_file(tmp_path, fake, monkeypatch):
    import dataclasses
    import errno

    def full_disk(profile, path):
        with open(path, "w") as f:
            f.write("[{")  # the device fills up part-way
        raise OSError(errno.ENOSPC, "No space left on device")

    sid = proton.start(str(tmp_path / "p"), backend="fake")
    fake.launch("k", 9)
    sinks = get_plugins().sinks.items
    monkeypatch.setitem(sinks, "hatchet", dataclasses.replace(sinks["hatchet"], writer=full_disk))
    with pytest.raises(ProtonError) as err:
        proton.finalize(sid)
    assert "No space left on device" in str(err.value) and "\n" not in str(err.value)
    assert list(tmp_path.iterdir()) == []  # neither the profile nor a partial temp file
    monkeypatch.undo()
    assert proton.finalize(sid) == [str(tmp_path / "p.hatchet")]
    assert node(load(tmp_path / "p.hatchet")[0], "k")["metrics"]["time (ns)"] == 9


def test_unknown_session_id_is_an_error():
    with pytest.raises(ProtonError, match="no session 5 is open"):
        proton.deactivate(5)


def test_scopes_are_thread_safe_under_contention(tmp_path, fake):
    proton.start(str(tmp_path / "p"), backend="fake")

    def work(i):
        for j in range(200):
            with proton.scope("loop"):
                with proton.scope(f"t{i % 2}"):
                    fake.launch("k", 1)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    proton.finalize()
    root, _ = load(tmp_path / "p.hatchet")
    assert node(root, "loop", "t0", "k")["metrics"]["count"] == 800
    assert node(root, "loop", "t1", "k")["metrics"]["count"] == 800


def test_one_scope_object_reused_by_recursion_and_threads(tmp_path, fake):
    """What an entry must undo lives on the entering thread, not on the object."""
    shared = proton.scope("shared")
    before = proton.scope("before")
    before.__enter__()  # opened while profiling is off: its exit must pop nothing
    proton.start(str(tmp_path / "p"), backend="fake")

    @shared
    def recurse(n):
        fake.launch("k", 1)
        if n:
            recurse(n - 1)

    recurse(2)  # shared/k, shared/shared/k, shared/shared/shared/k
    barrier = threading.Barrier(4)

    def worker():
        with shared:
            barrier.wait()  # all four threads inside the same object at once
            fake.launch("t", 1)

    run_threads(worker, 4)

    with proton.state("s1"):
        with proton.state("s2"):
            fake.launch("in_s2", 1)
        fake.launch("in_s1", 1)
    fake.launch("after", 1)
    before.__exit__(None, None, None)
    assert THREAD.stack == []
    proton.finalize()
    root, _ = load(tmp_path / "p.hatchet")
    assert node(root, "shared", "k")["metrics"]["count"] == 1
    assert node(root, "shared", "shared", "shared", "k")["metrics"]["count"] == 1
    assert node(root, "shared", "t")["metrics"]["count"] == 4
    assert node(root, "s2", "in_s2")["metrics"]["count"] == 1
    assert node(root, "s1", "in_s1")["metrics"]["count"] == 1
    assert node(root, "after")["metrics"]["count"] == 1


def test_trace_data_writes_chrome_trace_with_flows(tmp_path, fake):
    proton.start(str(tmp_path / "t"), backend="fake", data="trace")
    with proton.scope("outer"):
        fake.launch("k1", 2000)
        fake.launch("k2", 3000, stream=9)
    paths = proton.finalize()
    assert paths == [str(tmp_path / "t.chrome_trace")]
    with open(paths[0]) as f:  # chrome trace JSON, not hatchet
        events = json.load(f)["traceEvents"]
    kernels = [e for e in events if e.get("cat") == "kernel"]
    assert [(e["name"], e["dur"], e["args"]["path"]) for e in kernels] == [("k1", 2.0, "outer"), ("k2", 3.0, "outer")]
    scopes = [e for e in events if e.get("cat") == "scope"]
    assert [e["name"] for e in scopes] == ["outer"]
    names = {(e["name"], e["args"]["name"]) for e in events if e["ph"] == "M"}
    assert ("process_name", "CUDA 0") in names and ("thread_name", "stream 9") in names
    flows = [e for e in events if e["ph"] in "sf"]
    assert len(flows) == 4 and {e["id"] for e in flows} == {1, 2}
    # the same trace session can also be written as a tree
    sid = proton.start(str(tmp_path / "t2"), backend="fake", data="trace")
    fake.launch("k1", 5)
    assert proton.finalize(sid, output_format="hatchet") == [str(tmp_path / "t2.hatchet")]


def test_host_backend_is_chosen_automatically_with_one_warning(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("PROTON_BACKEND", raising=False)
    monkeypatch.chdir(tmp_path)
    MANAGER._warned_host = False
    for _ in range(2):
        sid = proton.start(str(tmp_path / "p"))
        assert MANAGER.sessions[sid].backend in ("host", "cupti")
        proton.finalize(sid)
    err = capsys.readouterr().err
    if "host-only" in err:
        assert err.count("\n") == 1 and err.startswith("proton: no GPU backend can run")


def test_backend_choice_precedence(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "pyproject.toml").write_text('[tool.proton]\nbackend = "fake"\n')
    from proton_core import config
    config._read.cache_clear()
    monkeypatch.delenv("PROTON_BACKEND", raising=False)
    sid = proton.start("p")
    assert MANAGER.sessions[sid].backend == "fake"
    proton.finalize(sid)
    monkeypatch.setenv("PROTON_BACKEND", "host")
    sid = proton.start("p")
    assert MANAGER.sessions[sid].backend == "host"
    proton.finalize(sid)
    sid = proton.start("p", backend="fake")
    assert MANAGER.sessions[sid].backend == "fake"
    proton.finalize(sid)
    monkeypatch.setenv("PROTON_BACKEND", "nosuch")
    with pytest.raises(ProtonError, match="unknown backend 'nosuch' \\(from PROTON_BACKEND\\)"):
        proton.start("p")
    (tmp_path / "pyproject.toml").write_text('[tool.proton]\nbackendd = "fake"\n')
    config._read.cache_clear()
    with pytest.raises(ProtonError, match="unknown keys \\['backendd'\\]"):
        proton.start("p", backend="host")
    config._read.cache_clear()


def test_outputs_are_valid_json_documents(tmp_path, fake):
    proton.start(str(tmp_path / "p"), backend="fake")
    fake.launch("k")
    proton.finalize()
    doc = load(tmp_path / "p.hatchet")
    assert isinstance(doc, list) and len(doc) == 2
    assert doc[0]["frame"] == {"name": "ROOT", "type": "function"}


def test_a_hook_that_fails_to_install_leaves_no_session(tmp_path):
    from proton_core.context import ContextSource
    from proton_core.plugins import get_plugins

    class Failing(ContextSource):
        def install(self, session):
            raise ProtonError("framework 'x' is not installed: pip install x")

    class Plugin:
        @staticmethod
        @proton.hookimpl
        def proton_register_contexts(register):
            register("failing", Failing)

    get_plugins().register(Plugin, name="failing_hook")
    try:
        with pytest.raises(ProtonError, match="pip install x"):
            proton.start(str(tmp_path / "p"), backend="fake", hook="failing")
        assert MANAGER.sessions == {} and MANAGER.backends == {}
    finally:
        get_plugins().unregister("failing_hook")


def test_profile_decorator_accumulates_calls(tmp_path, fake):
    @proton.profile(name=str(tmp_path / "acc"), backend="fake")
    def step(n):
        with proton.scope("step"):
            for _ in range(n):
                fake.launch("k", 10)
        if n > 1:
            step(n - 1)  # a recursive call records into the same session

    step(1)
    assert node(load(tmp_path / "acc.hatchet")[0], "step", "k")["metrics"]["count"] == 1
    step(2)
    k = node(load(tmp_path / "acc.hatchet")[0], "step", "k")["metrics"]
    assert (k["count"], k["time (ns)"]) == (4, 40)


def test_same_name_sessions_share_one_session(tmp_path, fake):
    first = proton.start(str(tmp_path / "same"), backend="fake")
    with proton.scope("a"):
        fake.launch("k")
    second = proton.start(str(tmp_path / "same"), backend="fake")
    assert second == first
    with proton.scope("b"):
        fake.launch("k")
    with pytest.raises(proton.ProtonError, match=r"already writes .* context='shadow' \(asked: 'python'\)"):
        proton.start(str(tmp_path / "same"), backend="fake", context="python")
    proton.finalize()
    names = [c["frame"]["name"] for c in load(tmp_path / "same.hatchet")[0]["children"]]
    assert names == ["a", "b"]


def test_a_negative_tensor_metric_is_left_out_not_the_profile(tmp_path, fake, caplog):
    proton.start(str(tmp_path / "neg"), backend="fake")
    with proton.scope("good", {"bytes": Scalar(5.0)}):
        fake.launch("k")
    with proton.scope("bad", {"bytes": Scalar(-1.0)}):
        fake.launch("k")
    assert proton.finalize() == [str(tmp_path / "neg.hatchet")]
    root = load(tmp_path / "neg.hatchet")[0]
    assert node(root, "good")["metrics"]["bytes"] == 5.0 and "bytes" not in node(root, "bad")["metrics"]
    assert node(root, "bad", "k")["metrics"]["count"] == 1
    (message,) = [r.getMessage() for r in caplog.records]
    assert "negative value -1.0" in message and "at bad" in message and "left out" in message


@pytest.mark.parametrize("name", ["TIME", "Count", "CPU_TIME (ns)", "Device_Id"])
def test_reserved_metric_names_are_caseless(name):
    with pytest.raises(proton.ProtonError, match="reserved name"):
        proton.scope("s", {name: 1})
