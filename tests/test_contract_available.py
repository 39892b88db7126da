"""A backend's ``available()`` probe that raises never breaks an import, ``start()``, ``proton-profile plugins``
or the ``gpu`` marker: the backend is unavailable, with the exception as its one-line reason."""

import os
import subprocess
import sys
import textwrap

import pytest

import proton_core
from proton_core.plugin_api import Backend
from proton_core.plugins import get_plugins
from proton_core.registry import BackendEntry
from proton_core.session import MANAGER

REASON = "availability check failed: RuntimeError: driver probe exploded; see dmesg"


def exploding_probe():
    raise RuntimeError("driver probe exploded\n  see dmesg\n")


class ProbedBackend(Backend):
    device_type = "CUDA"


def probed_plugin():
    """A plugin registering ``probed``, a GPU-like backend (auto-chosen over host) whose probe raises."""

    @proton_core.hookimpl
    def proton_register_backends(register):
        register("probed", ProbedBackend, priority=50, available=exploding_probe, description="probe raises")

    return type("Probed", (), {"proton_register_backends": staticmethod(proton_register_backends)})


@pytest.fixture
def probed(monkeypatch, tmp_path):
    monkeypatch.delenv("PROTON_BACKEND", raising=False)
    monkeypatch.chdir(tmp_path)  # no pyproject.toml naming a backend
    get_plugins().register(probed_plugin(), name="probed_plugin")
    yield get_plugins().backends.get("probed")
    get_plugins().unregister("probed_plugin")


def test_the_entry_turns_a_raising_probe_into_a_one_line_reason():
    entry = BackendEntry(name="b", plugin="p", factory=ProbedBackend, available=exploding_probe)
    assert entry.unavailable_reason() == REASON
    bare = BackendEntry(name="b", plugin="p", factory=ProbedBackend, available=lambda: 1 / 0)
    assert bare.unavailable_reason() == "availability check failed: ZeroDivisionError: division by zero"
    silent = BackendEntry(name="b", plugin="p", factory=ProbedBackend, available=lambda: (_ for _ in ()).throw(
        ValueError()))
    assert silent.unavailable_reason() == "availability check failed: ValueError"
    assert BackendEntry(name="b", plugin="p", factory=ProbedBackend).unavailable_reason() is None
    assert BackendEntry(name="b", plugin="p", factory=ProbedBackend, available=lambda: "no GPU").unavailable_reason() \
        == "no GPU"


def test_a_probe_that_is_interrupted_is_not_swallowed():
    def interrupted():
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        BackendEntry(name="b", plugin="p", factory=ProbedBackend, available=interrupted).unavailable_reason()


def test_start_chooses_past_it_and_says_why(probed, tmp_path, caplog, monkeypatch):
    monkeypatch.setattr(MANAGER, "_warned_host", False)
    with caplog.at_level("WARNING", logger="proton"):
        session = proton_core.start(str(tmp_path / "auto"))
    assert MANAGER.sessions[session].backend == "host"
    assert f"probed: {REASON}" in caplog.text
    assert proton_core.finalize() == [str(tmp_path / "auto.hatchet")]


def test_an_unknown_backend_error_lists_it_as_unavailable(probed, tmp_path):
    with pytest.raises(proton_core.ProtonError, match=f"probed \\(unavailable: {REASON}\\)"):
        proton_core.start(str(tmp_path / "x"), backend="no_such_backend")


def test_an_explicit_choice_still_runs_it(probed, tmp_path):
    """The probe guides automatic choice; naming the backend runs its factory, as before."""
    session = proton_core.start(str(tmp_path / "named"), backend="probed")
    assert MANAGER.sessions[session].backend == "probed"
    proton_core.finalize()


def test_plugins_table_shows_it_unavailable(probed):
    from proton_core.cli import plugin_rows

    rows = {row[0]: row for row in plugin_rows()}
    # the CLI keeps the first line of the message (its own guard); the registry joins the lines
    assert rows["probed_plugin"][5].startswith("unavailable: availability check failed: RuntimeError: driver probe "
                                               "exploded")
    assert rows["host"][5] == "loaded"


def test_the_gpu_marker_reason_goes_through_the_guard(probed, monkeypatch):
    """proton_core.testing asks the cupti entry the same way at collection; any backend's entry answers."""
    assert get_plugins().backends.get("probed").unavailable_reason() == REASON


def write_distribution(site, name, module_name, source):
    """An installed distribution ``name`` 0.1 on ``site`` (a sys.path entry): its module and the entry point
    ``[proton] <module_name> = <module_name>``, as pip would leave them."""
    info = site / f"{name.replace('-', '_')}-0.1.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(f"[proton]\n{module_name} = {module_name}\n")
    (site / f"{module_name}.py").write_text(textwrap.dedent(source))


def test_through_the_entry_point_import_start_and_the_plugins_command(tmp_path):
    site = tmp_path / "site"
    write_distribution(site, "proton-probed", "proton_probed", """
        from proton_core import hookimpl
        from proton_core.plugin_api import Backend

        def available():
            raise OSError("libprobe.so: cannot open shared object file")

        @hookimpl
        def proton_register_backends(register):
            register("probed", Backend, priority=90, available=available)
    """)
    env = {k: v for k, v in os.environ.items() if k != "PROTON_BACKEND"}
    env["PYTHONPATH"] = os.pathsep.join([str(site), env.get("PYTHONPATH", "")])
    code = textwrap.dedent("""
        import proton_core as proton
        proton.start("run")
        with proton.scope("step"):
            pass
        print(proton.finalize())
    """)
    out = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True,
                         timeout=120)
    reason = "availability check failed: OSError: libprobe.so: cannot open shared object file"
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "['run.hatchet']"
    assert f"probed: {reason}" in out.stderr and "using the host-only backend" in out.stderr
    table = subprocess.run([sys.executable, "-m", "proton_core", "plugins"], cwd=tmp_path, env=env,
                           capture_output=True, text=True, timeout=120)
    assert table.returncode == 0, table.stderr
    row = next(line for line in table.stdout.splitlines() if line.startswith("proton_probed "))
    assert row.split()[1:3] == ["proton-probed", "0.1"] and row.endswith(f"unavailable: {reason}")
