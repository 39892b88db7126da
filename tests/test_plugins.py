"""Plugin discovery: defaults, entry points, blocking, failures, third-party sinks."""

import os
import subprocess
import sys
import textwrap

import pytest

import proton_core
from proton_core.plugin_api import Backend, PluginError
from proton_core.plugins import DEFAULT_PLUGINS, get_plugins

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run_python(code, env=None, cwd=None):
    full_env = {**os.environ, **(env or {})}
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                          env=full_env, cwd=cwd, timeout=120)


def test_defaults_register_like_external_plugins():
    plugins = get_plugins()
    for module in DEFAULT_PLUGINS:
        record = plugins.record(module.rsplit(".", 1)[-1])
        assert record.status == "loaded" and record.distribution == "proton-profiler"
    assert plugins.record("hatchet").kinds == ["sink"]
    assert plugins.record("host").kinds == ["backend"]
    assert {"shadow", "python"} <= set(plugins.contexts.names())


def plugin(**hooks):
    """A plugin object implementing ``hooks`` ({hook name: function taking register})."""
    return type("P", (), {name: staticmethod(proton_core.hookimpl(fn)) for name, fn in hooks.items()})


@pytest.fixture
def runtime_plugins():
    names = []
    yield names
    for name in names:
        get_plugins().unregister(name)


def test_a_registered_name_taken_fails_the_newcomer_not_the_owner(runtime_plugins):
    runtime_plugins.append("broken_sink")
    broken = plugin(proton_register_sinks=lambda register: register("hatchet", print, extension="x"))
    with pytest.raises(PluginError, match="'hatchet', already registered by 'hatchet'"):
        get_plugins().register(broken, name="broken_sink")
    assert get_plugins().record("broken_sink").status.startswith("failed: PluginError")
    assert get_plugins().record("hatchet").status == "loaded"
    assert get_plugins().sinks.get("hatchet").plugin == "hatchet"


def test_a_plugin_name_taken_fails_the_newcomer_not_the_owner(runtime_plugins):
    plugins = get_plugins()
    runtime_plugins.append("host_twin")
    impostor = plugin(proton_register_backends=lambda register: register("other", Backend))
    with pytest.raises(PluginError, match="plugin name 'host' is taken by proton-profiler"):
        plugins.register(impostor, name="host")
    records = [r for r in plugins.records if r.name == "host"]
    assert [r.status.split(":")[0] for r in records] == ["loaded", "failed"]
    assert plugins.record("host").status == "loaded" and plugins.backends.get("host").plugin == "host"
    assert plugins.backends.get("other") is None
    plugins.records.remove(records[1])


def test_a_plugin_whose_later_hook_raises_keeps_nothing(runtime_plugins):
    runtime_plugins.append("half")

    def contexts(register):
        raise RuntimeError("torch missing")

    half = plugin(proton_register_backends=lambda register: register("half_backend", Backend),
                  proton_register_contexts=contexts)
    with pytest.raises(PluginError, match="failed: RuntimeError: torch missing"):
        get_plugins().register(half, name="half")
    assert get_plugins().backends.get("half_backend") is None
    assert get_plugins().record("half").status == "failed: RuntimeError: torch missing"
    with pytest.raises(proton_core.ProtonError, match="unknown backend 'half_backend'"):
        proton_core.start("x", backend="half_backend")


@pytest.mark.parametrize("call, message", [
    (lambda register: register("typo", Backend, priorty=5),
     "plugin 'bad' registered a backend with the unknown option 'priorty' (did you mean 'priority'?)"),
    (lambda register: register("typo", Backend, base=True), "unknown option 'base'"),
    (lambda register: register("typo", Backend, priority="high"), "backend 'typo' with priority='high': use an int"),
    (lambda register: register("typo", Backend, modes="fast"), "modes='fast': use a tuple of strings"),
    (lambda register: register("bad name", Backend), "invalid name 'bad name'"),
    (lambda register: register("typo"), "called register() for a backend wrongly"),
    (lambda register: register("typo", Backend) or register("typo", Backend), "registered backend 'typo' twice"),
])
def test_register_takes_only_the_options_of_its_kind(runtime_plugins, call, message):
    runtime_plugins.append("bad")
    with pytest.raises(PluginError) as info:
        get_plugins().register(plugin(proton_register_backends=call), name="bad")
    assert message in str(info.value) and "\n" not in str(info.value)
    assert get_plugins().backends.get("typo") is None


def test_sink_and_context_options_are_checked(runtime_plugins):
    runtime_plugins += ["s", "c"]
    with pytest.raises(PluginError, match=r"data=\('table',\): use a subset of \('tree', 'trace'\)"):
        sink = plugin(proton_register_sinks=lambda register: register("t", print, extension="t", data=("table",)))
        get_plugins().register(sink, name="s")
    with pytest.raises(PluginError, match="unknown option 'priority'"):
        context = plugin(proton_register_contexts=lambda register: register("c", object, priority=1))
        get_plugins().register(context, name="c")


def test_an_unknown_hook_name_fails_the_plugin(runtime_plugins):
    runtime_plugins.append("typo_hook")
    with pytest.raises(PluginError, match="implements proton_register_backend, which is not a Proton hook"):
        get_plugins().register(plugin(proton_register_backend=lambda register: None), name="typo_hook")


def test_registration_goes_through_pluggy_one_plugin_at_a_time(runtime_plugins):
    runtime_plugins.append("watched")
    pm = get_plugins().pm
    calls = []
    undo = pm.add_hookcall_monitoring(
        lambda hook_name, impls, kwargs: calls.append((hook_name, [i.plugin_name for i in impls])),
        lambda outcome, hook_name, impls, kwargs: None)
    try:
        watched = plugin(proton_register_backends=lambda register: register("watched_backend", Backend))
        get_plugins().register(watched, name="watched")
    finally:
        undo()
    assert calls == [("proton_register_backends", ["watched"]), ("proton_register_contexts", []),
                     ("proton_register_sinks", [])]
    assert get_plugins().backends.get("watched_backend").plugin == "watched"


def test_a_hook_with_wrong_arguments_says_which(runtime_plugins):
    runtime_plugins.append("wrong_args")
    with pytest.raises(PluginError) as info:
        get_plugins().register(plugin(proton_register_backends=lambda reg: None), name="wrong_args")
    assert "PluginValidationError" in str(info.value) and "{'reg'}" in str(info.value)
    assert "\n" not in str(info.value)


def test_essential_builtins_cannot_be_disabled(tmp_path):
    code = """
        import proton_core as proton
        from proton_core.plugins import get_plugins
        p = get_plugins()
        print(p.record('host').status, p.record('hatchet').status, p.record('chrome_trace').status)
        proton.start('x', backend='host')
        print(proton.finalize())
    """
    out = run_python(code, {"PROTON_DISABLE_PLUGINS": "host,hatchet,chrome_trace"}, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == ["loaded loaded disabled (PROTON_DISABLE_PLUGINS)", "['x.hatchet']"]
    assert out.stderr.strip() == ("proton: PROTON_DISABLE_PLUGINS cannot disable hatchet, host: built-ins every "
                                  "session needs; they stay enabled")


def test_disable_and_autoload_environment(tmp_path):
    broken = tmp_path / "site"
    (broken / "broken_proton_plugin-0.1.dist-info").mkdir(parents=True)
    (broken / "broken_proton_plugin-0.1.dist-info" / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: broken-proton-plugin\nVersion: 0.1\n")
    (broken / "broken_proton_plugin-0.1.dist-info" / "entry_points.txt").write_text(
        "[proton]\nbroken = broken_proton_mod\n")
    (broken / "broken_proton_mod.py").write_text("raise ImportError('libfoo.so missing')\n")
    code = """
        import proton_core as proton
        from proton_core.plugins import get_plugins
        r = get_plugins().record
        print(r('broken').status, '|', r('broken').distribution, '|', r('chrome_trace').status)
        try:
            proton.start('x', backend='host', data='trace')
        except proton.ProtonError as e:
            print('ERR', e)
    """
    env = {"PYTHONPATH": str(broken), "PROTON_DISABLE_PLUGINS": "chrome_trace"}
    out = run_python(code, env, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert "failed: ImportError: libfoo.so missing | broken-proton-plugin | disabled" in out.stdout
    assert "ERR unknown output_format 'chrome_trace'" in out.stdout
    out = run_python("from proton_core.plugins import get_plugins; "
                     "print(sorted({r.distribution for r in get_plugins().records}))",
                     {"PYTHONPATH": str(broken), "PROTON_PLUGINS_AUTOLOAD": "0"}, cwd=tmp_path)
    assert out.stdout.strip() == "['proton-profiler']", out.stderr


def test_third_party_sink_installs_and_writes(tmp_path):
    target = tmp_path / "site"
    pip = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps",
                          "--target", str(target), os.path.join(ROOT, "docs", "examples", "proton-csv-sink")],
                         capture_output=True, text=True, timeout=300)
    assert pip.returncode == 0, pip.stderr
    code = f"""
        import proton_core as proton
        proton.start({str(tmp_path / 'prof')!r}, backend='host', output_format='csv')
        with proton.scope('outer', {{'bytes': 12}}):
            with proton.scope('inner', {{'flops16': 3}}):
                pass
        print(proton.finalize())
    """
    out = run_python(code, {"PYTHONPATH": str(target)}, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    rows = (tmp_path / "prof.csv").read_text().splitlines()
    assert rows[0] == "path,bytes,count,flops16,time (ns)"
    assert rows[1:] == ["outer,12,0,,0", "outer/inner,,0,3,0"]


def test_a_context_that_cannot_load_starts_no_backend(runtime_plugins):
    from proton_core.testing import SyntheticBackend

    def factory():
        raise proton_core.ProtonError("hook 'broken_ctx' needs a framework that is missing")

    runtime_plugins.append("ctx_broken")
    get_plugins().register(plugin(proton_register_contexts=lambda register: register("broken_ctx", factory)),
                           name="ctx_broken")
    SyntheticBackend.instance = None
    with pytest.raises(proton_core.ProtonError, match="needs a framework that is missing"):
        proton_core.start("x", backend="fake", hook="broken_ctx")
    assert SyntheticBackend.instance is None  # the backend was never created, so nothing runs without a session
