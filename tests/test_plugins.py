"""Plugin discovery: defaults, entry points, blocking, failures, third-party sinks."""

import os
import subprocess
import sys
import textwrap

import pytest

import proton_core
from proton_core.errors import PluginError
from proton_core.plugins import DEFAULT_PLUGINS, get_plugins

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run_python(code, env=None, cwd=None):
    full_env = {**os.environ, **(env or {})}
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                          env=full_env, cwd=cwd, timeout=120)


def test_defaults_register_like_external_plugins():
    plugins = get_plugins()
    for module in DEFAULT_PLUGINS:
        record = plugins.records[module.rsplit(".", 1)[-1]]
        assert record.status == "loaded" and record.distribution == "proton"
    assert plugins.records["hatchet"].kinds == ["sink"]
    assert plugins.records["host"].kinds == ["backend"]
    assert {"shadow", "python"} <= set(plugins.contexts.names())


def test_registration_errors_are_recorded_not_raised_at_import():
    class Broken:
        @staticmethod
        @proton_core.hookimpl
        def proton_register_sinks(register):
            register("hatchet", print, extension="x")

    with pytest.raises(PluginError, match="'hatchet', already registered by 'hatchet'"):
        get_plugins().register(Broken, name="broken_sink")
    assert get_plugins().records["broken_sink"].status.startswith("failed: PluginError")
    assert get_plugins().sinks.get("hatchet").plugin == "hatchet"
    get_plugins().unregister("broken_sink")


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
        r = get_plugins().records
        print(r['broken'].status, '|', r['broken'].distribution, '|', r['chrome_trace'].status)
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
                     "print(sorted({r.distribution for r in get_plugins().records.values()}))",
                     {"PYTHONPATH": str(broken), "PROTON_PLUGINS_AUTOLOAD": "0"}, cwd=tmp_path)
    assert out.stdout.strip() == "['proton']", out.stderr


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
