"""API parity with ``triton.profiler`` (issue 44 item 1): names and behaviours a Proton program relies on."""

import sys
import types

import pytest

import proton_core as proton
from proton_core import mode
from proton_core.errors import ProtonError
from proton_core.session import MANAGER
from proton_core.testing import child as node, load_profile as load


def test_unnamed_profile_decorator_writes_the_default_name(tmp_path, monkeypatch, fake):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PROTON_BACKEND", "fake")
    assert proton.DEFAULT_PROFILE_NAME == "proton"

    @proton.profile
    def step():
        fake.launch("k", 5)
        return 7

    assert step() == 7
    assert sorted(p.name for p in tmp_path.iterdir()) == ["proton.hatchet"]
    assert node(load(tmp_path / "proton.hatchet")[0], "k")["metrics"]["time (ns)"] == 5


def test_unnamed_profile_decorator_follows_the_project_name(tmp_path, monkeypatch):
    (tmp_path / "pyproject.toml").write_text('[tool.proton]\nname = "mine"\nbackend = "fake"\n')
    monkeypatch.chdir(tmp_path)
    proton.profile(lambda: None)()
    assert (tmp_path / "mine.hatchet").exists() and not (tmp_path / "proton.hatchet").exists()


def test_enter_state_files_scope_metrics_under_the_state(tmp_path, fake):
    proton.start(str(tmp_path / "p"), backend="fake")
    proton.enter_scope("outer")
    proton.enter_state("s")
    proton.enter_scope("inner", metrics={"a": 2})
    fake.launch("k", 3)
    proton.exit_scope()
    proton.exit_state()
    fake.launch("after", 4)
    proton.exit_scope()
    proton.finalize()
    root, _ = load(tmp_path / "p.hatchet")
    assert node(root, "outer", "inner", "s")["metrics"] == {"a": 2}
    assert node(root, "outer", "inner", "s", "k")["metrics"]["time (ns)"] == 3
    assert node(root, "outer", "after")["metrics"]["time (ns)"] == 4  # the state ended with exit_state


def test_exit_state_restores_the_state_set_before(tmp_path, fake):
    proton.start(str(tmp_path / "p"), backend="fake")
    with proton.state("outer_state"):
        proton.enter_state("inner_state")
        proton.exit_state()
        fake.launch("k", 1)
    proton.exit_state()  # nothing open: clears, as upstream, never an error
    proton.finalize()
    root, _ = load(tmp_path / "p.hatchet")
    assert node(root, "outer_state", "k")["metrics"]["time (ns)"] == 1


def test_enter_state_checks_its_name():
    with pytest.raises(ProtonError, match="non-empty string"):
        proton.enter_state("")


def test_context_depth_counts_open_scopes_per_session(tmp_path):
    assert proton.context.depth(0) is None  # profiling off
    sid = proton.start(str(tmp_path / "p"), backend="fake")
    assert proton.context.depth(sid) == 0
    with proton.scope("a"):
        proton.enter_scope("b")
        assert proton.context.depth(sid) == 2
        proton.exit_scope()
        assert proton.context.depth(sid) == 1
    with pytest.raises(ProtonError, match=f"Session has not been initialized: {sid + 1}"):
        proton.context.depth(sid + 1)
    proton.finalize()
    assert proton.context.depth(sid) is None


def test_context_depth_of_a_python_session_counts_frames(tmp_path):
    sid = proton.start(str(tmp_path / "p"), backend="fake", context="python")

    def deeper():
        return proton.context.depth(sid)

    here = proton.context.depth(sid)
    assert here > 0 and deeper() == here + 1
    proton.finalize()


def test_exit_scope_metrics_land_on_the_exited_scope(tmp_path):
    proton.start(str(tmp_path / "p"), backend="fake")
    proton.enter_scope("outer")
    proton.enter_scope("inner")
    proton.exit_scope(metrics={"b": 1.5})
    proton.exit_scope("outer", metrics={"c": 2})
    proton.finalize()
    root, _ = load(tmp_path / "p.hatchet")
    assert node(root, "outer")["metrics"] == {"c": 2}
    assert node(root, "outer", "inner")["metrics"] == {"b": 1.5}


def test_mode_objects_keep_upstreams_fields_and_strings():
    assert str(mode.PCSampling()) == "pcsampling:interval=1000"
    assert mode.PCSampling(interval=7).interval == 7
    with pytest.raises(ValueError, match="Interval must be a positive integer"):
        mode.PCSampling(interval=0)
    default = mode.Default(granularity="warp_group", optimizations="clock32,time_shift")
    assert isinstance(default, mode.InstrumentationMode) and default.name == "default"
    assert default.optimizations == [mode.Optimize.CLOCK32, mode.Optimize.TIMESHIFT]
    assert str(default) == ("default:metric_type=cycle:sampling_strategy=none:sampling_options=:granularity=warp_group"
                            ":buffer_strategy=circular:buffer_type=shared:buffer_size=0:optimizations=clock32,time_shift")
    assert mode.MMA().name == "mma"
    with pytest.raises(ValueError, match="Unknown granularity: bogus"):
        mode.Default(granularity="bogus")
    with pytest.raises(ValueError, match="Unknown optimization: fast"):
        mode.Default(optimizations="fast")


def test_start_hands_the_backend_a_mode_objects_option(tmp_path, monkeypatch):
    seen = []
    real = MANAGER.start
    monkeypatch.setattr(MANAGER, "start", lambda *a, **k: seen.append(k["mode"]) or real(*a, **{**k, "mode": None}))
    proton.start(str(tmp_path / "a"), backend="fake", mode=mode.PCSampling(interval=5000))
    default = mode.Default(buffer_type="global")
    proton.start(str(tmp_path / "b"), backend="fake", mode=default)
    proton.start(str(tmp_path / "c"), backend="fake", mode="pcsampling:interval=12")
    proton.finalize()
    # upstream ignores PCSampling's interval (ours: "pcsampling:interval=<5..31>"); instrumentation reads the object
    assert seen == ["pcsampling", default, "pcsampling:interval=12"]


def test_instrumentation_reads_a_mode_object():
    parse_mode = pytest.importorskip("proton_instrumentation.mode").parse_mode
    parsed = parse_mode(mode.Default(granularity="warp_group", buffer_type="global", optimizations="clock32"))
    assert (parsed.granularity, parsed.buffer_type, parsed.optimizations) == ("warp_group", "global", ("clock32",))


@pytest.mark.parametrize("variable", ["PROTON_DISABLE", "TRITON_PROTON_DISABLE"])
def test_disable_switch_starts_nothing_and_writes_nothing(tmp_path, monkeypatch, fake, variable):
    monkeypatch.setenv(variable, "1")
    assert proton.start(str(tmp_path / "p"), backend="fake") is None
    with proton.scope("s", {"a": 1}):
        fake.launch("k", 1)
    proton.profile(lambda: None, name=str(tmp_path / "q"))()
    assert proton.finalize() == []
    assert list(tmp_path.iterdir()) == [] and not MANAGER.sessions
    monkeypatch.setenv(variable, "0")  # read at each start, as Triton's knob
    assert isinstance(proton.start(str(tmp_path / "p"), backend="fake"), int)
    proton.finalize()
    assert (tmp_path / "p.hatchet").exists()


def test_disable_switch_honours_tritons_knob(tmp_path, monkeypatch):
    knobs = types.SimpleNamespace(proton=types.SimpleNamespace(disable=True))
    monkeypatch.setitem(sys.modules, "triton", types.SimpleNamespace(knobs=knobs))
    assert proton.start(str(tmp_path / "p"), backend="fake") is None
    knobs.proton.disable = False
    assert isinstance(proton.start(str(tmp_path / "p"), backend="fake"), int)
    proton.finalize()


@pytest.mark.parametrize("call", [proton.activate, proton.deactivate, proton.finalize])
def test_an_unknown_session_id_is_upstreams_error(tmp_path, call):
    sid = proton.start(str(tmp_path / "p"), backend="fake")
    with pytest.raises(ProtonError) as err:
        call(sid + 1)
    message = str(err.value)
    assert f"Session has not been initialized: {sid + 1}" in message and f"open sessions: {sid}" in message
    assert "\n" not in message
    proton.finalize()


def test_deactivate_with_flushing_routes_what_was_delivered(tmp_path, monkeypatch, fake):
    sid = proton.start(str(tmp_path / "p"), backend="fake")
    with proton.scope("s"):
        fake.launch("k", 2)
    flushed = []
    real = MANAGER.flush
    monkeypatch.setattr(MANAGER, "flush", lambda state, *a, **k: flushed.append(state) or real(state, *a, **k))
    proton.deactivate(sid)
    assert flushed == []  # plain deactivate stays cheap
    proton.deactivate(sid, flushing=True)
    assert flushed == [MANAGER.sessions[sid].backend_state]
    monkeypatch.undo()
    assert node(proton.data.get(sid)[0], "s", "k")["metrics"]["time (ns)"] == 2
    proton.finalize()


def test_metadata_state_files_kernels_under_upstreams_hidden_name(tmp_path, fake):
    proton.start(str(tmp_path / "p"), backend="fake")
    with proton.scope("s"):
        with proton.metadata_state():
            fake.launch("reduce", 1)
        fake.launch("work", 2)
    proton.finalize()
    root, _ = load(tmp_path / "p.hatchet")
    assert node(root, "s", "__proton_launch_metadata", "reduce")["metrics"]["time (ns)"] == 1
    assert node(root, "s", "work")["metrics"]["time (ns)"] == 2
    from proton_core.state import COMPUTE_METADATA_SCOPE_NAME
    from proton_core.viewer.shape import METADATA_SCOPE
    assert COMPUTE_METADATA_SCOPE_NAME == METADATA_SCOPE  # the name our viewer hides, as upstream's does


@pytest.mark.parametrize("knob, asked, expected", [(None, None, True), (False, None, False), (True, None, True),
                                                   (False, True, True), (True, False, False)])
def test_tritons_enable_nvtx_knob_decides_where_start_leaves_nvtx_out(tmp_path, monkeypatch, knob, asked, expected):
    """upstream's test_nvtx_range_push_pop[False]: ``triton.knobs.proton.enable_nvtx = False`` keeps NVTX ranges
    out; an explicit ``start(nvtx=...)`` wins over the knob."""
    from proton_core.manager import MANAGER

    proton_knobs = types.SimpleNamespace(disable=False)
    if knob is not None:
        proton_knobs.enable_nvtx = knob
    monkeypatch.setitem(sys.modules, "triton", types.SimpleNamespace(knobs=types.SimpleNamespace(proton=proton_knobs)))
    kwargs = {} if asked is None else {"nvtx": asked}
    sid = proton.start(str(tmp_path / "n"), backend="host", **kwargs)
    assert MANAGER.sessions[sid].nvtx is expected
    proton.finalize()


def test_a_trace_ends_with_its_kernels_each_with_upstreams_call_stack(tmp_path, fake):
    """upstream's test_trace reads the last event as the last kernel, with ``args.call_stack``."""
    import json

    proton.start(str(tmp_path / "t"), data="trace", backend="fake")
    with proton.scope("init"):
        fake.launch("fill")
    with proton.scope("test"):
        fake.launch("foo")
    proton.finalize()
    events = json.loads((tmp_path / "t.chrome_trace").read_text())["traceEvents"]
    kernels = [e for e in events if e.get("cat") == "kernel"]
    assert events[-len(kernels):] == kernels and events[-1]["name"] == "foo"
    assert [k["args"]["call_stack"] for k in kernels] == [["ROOT", "init", "fill"], ["ROOT", "test", "foo"]]


def test_upstreams_get_raw_metrics_takes_the_tree_data_get_returns(tmp_path, fake):
    """upstream's test_get_data: ``viewer.get_raw_metrics(proton.data.get(session))``."""
    pytest.importorskip("hatchet", reason="llnl-hatchet (the viewer extra) is not installed")
    from proton_core.viewer.upstream_api import get_raw_metrics

    sid = proton.start(str(tmp_path / "g"), backend="fake")
    with proton.scope("test"):
        fake.launch("foo", 500)
    gf, inclusive, _, _ = get_raw_metrics(proton.data.get(sid))
    assert "time (ns)" in inclusive
    assert sorted(gf.dataframe["name"]) == ["ROOT", "foo", "test"]
    proton.finalize()
