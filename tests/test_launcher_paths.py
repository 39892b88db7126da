"""Under proton-profile, python-context paths begin at the user's script, not at the launcher.

Before, every path began with ``bin/proton-profile:<line>@<module>`` (and
``<frozen runpy>`` frames under ``--module`` or ``python -m proton_core``).
"""

import importlib.util
import os
import shutil
import subprocess
import sys
import textwrap

import pytest

import proton_core as proton
from proton_core.contexts import python as python_context
from proton_core.testing import load_profile as load

SCRIPT = """\
    import proton_core as proton

    def work():
        with proton.cpu_timed_scope("step"):
            pass

    def main():
        work()

    main()
"""


def run(tmp_path, argv):
    env = dict(os.environ, PROTON_BACKEND="host")
    proc = subprocess.run(argv, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return load(tmp_path / "out.hatchet")[0]


def chain(root):
    """Frame names from ROOT down the first child at each level."""
    names, node = [], root
    while node.get("children"):
        node = node["children"][0]
        names.append(node["frame"]["name"])
    return names


def assert_begins_at(names, path, function_lines):
    assert [n.rsplit(":", 1)[0] for n in names] == [str(path)] * len(names), names
    assert [n.rsplit(":", 1)[1] for n in names] == function_lines, names  # no launcher or runpy frame above


@pytest.fixture
def script(tmp_path):
    path = tmp_path / "train.py"
    path.write_text(textwrap.dedent(SCRIPT))
    return path


@pytest.mark.skipif(shutil.which("proton-profile") is None, reason="the proton-profile script is not installed")
def test_the_installed_command(tmp_path, script):
    root = run(tmp_path, [shutil.which("proton-profile"), "-c", "python", "-n", "out", "train.py"])
    assert_begins_at(chain(root), tmp_path / "train.py", ["10@<module>", "8@main", "4@work"])


def test_python_dash_m_proton_core(tmp_path, script):
    root = run(tmp_path, [sys.executable, "-m", "proton_core", "-c", "python", "-n", "out", "train.py"])
    assert_begins_at(chain(root), tmp_path / "train.py", ["10@<module>", "8@main", "4@work"])


def test_a_module_run_with_dash_dash_module(tmp_path):
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("")
    (tmp_path / "pkg" / "train.py").write_text(textwrap.dedent(SCRIPT))
    root = run(tmp_path, [sys.executable, "-m", "proton_core", "-c", "python", "-n", "out", "--module", "pkg.train"])
    assert_begins_at(chain(root), tmp_path / "pkg" / "train.py", ["10@<module>", "8@main", "4@work"])


def test_the_launcher_stays_hidden_only_while_the_cli_runs(tmp_path, fake):
    """Kernel paths the backend captures are cut too; outside the CLI nothing is hidden."""
    launcher = tmp_path / "launcher.py"
    launcher.write_text("def start(user):\n    user.main()\n")
    user = tmp_path / "user_prog.py"
    user.write_text(f"import proton_core.testing as t\n\ndef main():\n    t.SyntheticBackend.instance.launch('k', 5)\n")

    def module(path):
        spec = importlib.util.spec_from_file_location(path.stem, path)
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        return mod

    launch_mod, user_mod = module(launcher), module(user)

    def profile(name):
        proton.start(str(tmp_path / name), backend="fake", context="python")
        launch_mod.start(user_mod)
        proton.finalize()
        return [n.rsplit(":", 1)[0] for n in chain(load(tmp_path / f"{name}.hatchet")[0])]

    with python_context.launched_by({str(launcher)}):
        hidden = profile("cli")
    assert str(launcher) not in hidden and hidden[-2:] == [str(user), "k"]
    shown = profile("plain")
    assert str(launcher) in shown and shown[-2:] == [str(user), "k"]
    assert python_context._launcher_files == frozenset()
