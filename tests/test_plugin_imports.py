"""In-tree plugins use only the public plugin API: walks every import of their code and tests."""

import ast
import os

import proton_core
import proton_core.native_api
import proton_core.plugin_api
import proton_core.testing

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PLUGINS = os.path.join(ROOT, "plugins")

#: module -> the names a plugin's package may import from it
SOURCE_ALLOWED = {"proton_core": {"hookimpl"}, "proton_core.plugin_api": set(proton_core.plugin_api.__all__),
                  "proton_core.native_api": set(proton_core.native_api.__all__)}  # native plugins' extras
#: plugin tests may also use the user API and the testing module
TEST_ALLOWED = {**SOURCE_ALLOWED, "proton_core": set(proton_core.__all__) | {"__version__"},
                "proton_core.testing": set(proton_core.testing.__all__)}


def core_imports(path):
    """(line, module, name or None) for every import of proton_core in a file."""
    tree = ast.parse(open(path, encoding="utf-8").read(), path)
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == "proton_core":
                    yield node.lineno, alias.name, None
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            if node.module.split(".")[0] == "proton_core":
                for alias in node.names:
                    yield node.lineno, node.module, alias.name


def python_files(kind):
    for plugin in sorted(os.listdir(PLUGINS)):
        top = os.path.join(PLUGINS, plugin, kind)
        for dirpath, dirnames, files in os.walk(top):
            dirnames[:] = [d for d in dirnames if not d.endswith(".egg-info") and d != "__pycache__"]
            yield from (os.path.join(dirpath, f) for f in files if f.endswith(".py"))


def violations(kind, allowed):
    found = []
    for path in python_files(kind):
        for line, module, name in core_imports(path):
            ok = module in allowed and (name is None and module == "proton_core" or name in allowed[module])
            if not ok:
                found.append(f"{os.path.relpath(path, ROOT)}:{line}: {module}{'.' + name if name else ''}")
    return found


def test_plugin_packages_import_only_the_plugin_api():
    assert list(python_files("src")), "no plugin sources found"
    assert violations("src", SOURCE_ALLOWED) == []


def test_plugin_tests_import_only_public_modules():
    assert violations("tests", TEST_ALLOWED) == []


def test_the_walker_catches_a_core_internal(tmp_path, monkeypatch):
    plugin = tmp_path / "plugins" / "leaky" / "src" / "proton_leaky"
    plugin.mkdir(parents=True)
    (plugin / "plugin.py").write_text("from proton_core.session import MANAGER\nfrom proton_core import hookimpl\n")
    monkeypatch.setattr(__import__(__name__), "PLUGINS", str(tmp_path / "plugins"))
    assert [v.split(": ")[1] for v in violations("src", SOURCE_ALLOWED)] == ["proton_core.session.MANAGER"]
