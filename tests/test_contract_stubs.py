"""The ``.pyi`` stubs of the five native extensions say what the built modules hold, are fully annotated,
and ship with their distributions (beside ``py.typed``).

A name added to or removed from an extension's method table without its stub fails here: update the stub
next to the extension's package (``proton_core/_scope_fast.pyi``, ``plugins/<name>/src/.../*.pyi``).
"""

import ast
import fnmatch
import importlib
import os
import re
import sys

import pytest

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

#: module -> (its stub, relative to the repository; the distribution folder; what must be imported first)
STUBS = {
    "proton_core._scope_fast": ("proton_core/_scope_fast.pyi", ".", None),
    "proton_core._rank_numbers": ("proton_core/_rank_numbers.pyi", ".", None),
    "proton_cupti._cupti": ("plugins/cupti/src/proton_cupti/_cupti.pyi", "plugins/cupti", None),
    "proton_nvtx._inject": ("plugins/nvtx/src/proton_nvtx/_inject.pyi", "plugins/nvtx", None),
    "proton_frameworks._triton_fast": ("plugins/frameworks/src/proton_frameworks/_triton_fast.pyi",
                                       "plugins/frameworks", None),
    "proton_torch._C": ("plugins/torch/src/proton_torch/_C.pyi", "plugins/torch", "torch"),
}
#: A stub line ending in this comment declares a name only some builds have (cupti's PROTON_CUPTI_TESTING).
OPTIONAL = "# testing builds only"


def stub_names(path):
    """(public names the stub declares, those of them marked OPTIONAL)."""
    text = open(path, encoding="utf-8").read()
    lines = text.splitlines()
    names, optional = set(), set()
    for node in ast.parse(text, path).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            found = [node.name]
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            found = [node.target.id]
        elif isinstance(node, ast.Assign):
            found = [t.id for t in node.targets if isinstance(t, ast.Name)]
        else:
            continue
        for name in found:
            if not name.startswith("_"):
                names.add(name)
                if lines[node.end_lineno - 1].rstrip().endswith(OPTIONAL):
                    optional.add(name)
    return names, optional


def module_names(module):
    return {name for name in dir(module) if not name.startswith("_")}


def load(module_name):
    """The built extension, or a skip saying why it cannot be imported here."""
    prerequisite = STUBS[module_name][2]
    if prerequisite:
        pytest.importorskip(prerequisite, reason=f"{module_name} needs {prerequisite}, which is not installed")
    try:
        return importlib.import_module(module_name)
    except ImportError as exc:
        pytest.skip(f"{module_name} is not built here ({exc})")


def compare(stub, optional, loaded):
    """What is wrong between a stub's names and a module's, as lines (empty: they agree)."""
    problems = []
    if stub - loaded - optional:
        problems.append(f"in the stub, not in the module: {sorted(stub - loaded - optional)}")
    if loaded - stub:
        problems.append(f"in the module, not in the stub: {sorted(loaded - stub)}")
    return problems


@pytest.mark.parametrize("module_name", sorted(STUBS))
def test_the_stub_names_what_the_module_holds(module_name):
    module = load(module_name)
    stub, optional = stub_names(os.path.join(ROOT, STUBS[module_name][0]))
    assert stub, "the stub declares nothing"
    assert compare(stub, optional, module_names(module)) == []


def test_the_comparison_catches_a_name_gained_or_lost():
    stub = {"configure", "stats", "SLOTS"}
    assert compare(stub, {"SLOTS"}, {"configure", "stats"}) == []
    assert compare(stub, {"SLOTS"}, {"configure", "stats", "SLOTS"}) == []
    assert compare(stub, set(), {"configure", "stats"}) == ["in the stub, not in the module: ['SLOTS']"]
    assert compare(stub, {"SLOTS"}, {"configure", "stats", "take"}) == ["in the module, not in the stub: ['take']"]


def test_optional_names_are_read_from_the_marker(tmp_path):
    path = tmp_path / "m.pyi"
    path.write_text(f"A: int  {OPTIONAL}\nB: int\n_C = int\ndef f() -> None: ...\nclass K: ...\n")
    assert stub_names(path) == ({"A", "B", "f", "K"}, {"A"})


def unannotated(path):
    """``function(parameter)`` / ``function -> `` for every parameter or return without an annotation."""
    missing = []
    for node in ast.walk(ast.parse(open(path, encoding="utf-8").read(), path)):
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        args = node.args
        params = args.posonlyargs + args.args + args.kwonlyargs + [a for a in (args.vararg, args.kwarg) if a]
        missing += [f"{node.name}({a.arg})" for a in params if a.annotation is None and a.arg not in ("self", "cls")]
        if node.returns is None:
            missing.append(f"{node.name} -> ")
    return missing


@pytest.mark.parametrize("module_name", sorted(STUBS))
def test_the_stub_is_fully_annotated_and_documented(module_name):
    path = os.path.join(ROOT, STUBS[module_name][0])
    assert unannotated(path) == []
    tree = ast.parse(open(path, encoding="utf-8").read())
    assert ast.get_docstring(tree), "the stub says which source it mirrors"
    functions = [n for n in tree.body if isinstance(n, ast.FunctionDef)]
    assert all(ast.get_docstring(f) for f in functions), [f.name for f in functions if not ast.get_docstring(f)]


def test_unannotated_finds_a_lost_annotation(tmp_path):
    path = tmp_path / "m.pyi"
    path.write_text("def f(a: int, b) -> None: ...\ndef g(*, c: str): ...\nclass K:\n    def m(self) -> int: ...\n")
    assert unannotated(path) == ["f(b)", "g -> "]


def shipped_by(dist, package_dir, filename):
    """Whether the distribution in ``dist`` (its pyproject.toml) puts ``filename`` of ``package_dir`` in its wheel."""
    config = tomllib.load(open(os.path.join(ROOT, dist, "pyproject.toml"), "rb"))
    tool = config.get("tool", {})
    if "scikit-build" in tool:  # scikit-build-core copies every file of wheel.packages
        return os.path.relpath(package_dir, os.path.join(ROOT, dist)) in tool["scikit-build"]["wheel"]["packages"]
    package = os.path.basename(package_dir)
    patterns = tool["setuptools"].get("package-data", {}).get(package, [])
    return any(fnmatch.fnmatch(filename, pattern) for pattern in patterns)


@pytest.mark.parametrize("module_name", sorted(STUBS))
def test_the_stub_and_py_typed_ship_with_the_package(module_name):
    stub, dist, _ = STUBS[module_name]
    package_dir = os.path.dirname(os.path.join(ROOT, stub))
    assert os.path.isfile(os.path.join(package_dir, "py.typed"))
    assert re.fullmatch(r"[A-Za-z_]+\.pyi", os.path.basename(stub))
    assert shipped_by(dist, package_dir, "py.typed")
    assert shipped_by(dist, package_dir, os.path.basename(stub))
