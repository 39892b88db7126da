"""Plugins' import-time steps come from the entry-point group proton.on_import; the core names no plugin."""

import ast
import os
import re
import subprocess
import sys

import proton_core
from proton_core import entry_points, on_import

CORE = os.path.dirname(os.path.abspath(proton_core.__file__))
PLUGIN_MODULE = re.compile(r"^proton_(?!core\b)\w+")
#: A module path as importlib or an entry point spells it.
TARGET = re.compile(r"proton_\w+(\.\w+)+(:\w+)?")


def fake_distribution(root, entry_points_txt: str, module: str) -> None:
    info = root / "proton_fake_steps-0.1.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: proton-fake-steps\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(entry_points_txt)
    (root / "fake_steps.py").write_text(module)


def run_import(tmp_path, code="import proton_core; print('imported')"):
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    return subprocess.run([sys.executable, "-c", code], env=env, cwd=tmp_path, capture_output=True, text=True,
                          timeout=120)


def test_steps_run_at_import_and_a_failing_one_is_one_line(tmp_path):
    fake_distribution(tmp_path, "[proton.on_import]\nboom = fake_steps:boom\nmissing = no_such_module:step\n"
                                "ok = fake_steps:ok\n\n[other.group]\nignored = fake_steps:boom\n",
                      "import os\n\ndef boom():\n    raise ValueError('no device here\\nsecond line')\n\n"
                      "def ok():\n    os.environ['FAKE_STEP_RAN'] = '1'\n")
    r = run_import(tmp_path, "import os, proton_core; print('imported', os.environ.get('FAKE_STEP_RAN'))")
    assert r.returncode == 0 and r.stdout == "imported 1\n", r.stderr
    lines = [line for line in r.stderr.splitlines() if "import-time step" in line]
    assert lines == [
        "proton: the import-time step 'boom' (fake_steps:boom) failed (ValueError: no device here); going on "
        "without it",
        "proton: the import-time step 'missing' (no_such_module:step) failed (ModuleNotFoundError: No module named "
        "'no_such_module'); going on without it",
    ]


def test_the_groups_come_from_one_scan_matching_importlib_metadata():
    from importlib import metadata

    for group in ("proton", on_import.GROUP):
        ours = sorted((ep.name, ep.value) for ep in entry_points.select(group))
        assert ours == sorted((ep.name, ep.value) for ep in metadata.entry_points(group=group))


def plugin_modules(root: str) -> list[str]:
    """``file:line: module`` for every plugin module (``proton_<name>``) the code under ``root`` imports or spells
    as an import target (``importlib.import_module("proton_x.y")``, ``"proton_x.y:func"``)."""
    named = []
    for dirpath, dirnames, files in os.walk(root):
        dirnames[:] = [d for d in dirnames if d != "__pycache__"]
        for name in (f for f in files if f.endswith(".py")):
            path = os.path.join(dirpath, name)
            for node in ast.walk(ast.parse(open(path, encoding="utf-8").read(), path)):
                if isinstance(node, ast.Import):
                    modules = [alias.name for alias in node.names]
                elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                    modules = [node.module]
                elif isinstance(node, ast.Constant) and isinstance(node.value, str):
                    modules = [node.value] if TARGET.fullmatch(node.value) else []
                else:
                    continue
                named += [f"{os.path.relpath(path, root)}:{node.lineno}: {m}" for m in modules if PLUGIN_MODULE.match(m)]
    return named


def test_the_core_imports_no_plugin(tmp_path):
    assert plugin_modules(CORE) == []
    (tmp_path / "core.py").write_text("def prepare():\n    from proton_nvtx.injection import prepare_environment\n"
                                      "LOADER = 'proton_cupti.plugin'\nHOOK = 'proton_session_started'\n")
    assert plugin_modules(str(tmp_path)) == ["core.py:2: proton_nvtx.injection", "core.py:3: proton_cupti.plugin"]
