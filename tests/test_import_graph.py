"""proton_core's modules import one another without circles: the import graph, read from the source, is acyclic.

Every import counts, at the top of a module or inside a function (an import
deferred to call time to dodge a circle is still a circle), except those under
``if TYPE_CHECKING:``, which never run.  Importing ``a.b.c`` also imports the
packages ``a.b`` and ``a`` above it (their ``__init__`` runs first), so a module
outside such a package gets an edge to it too; the root package, above every
module, gets an edge only where a module imports a name from it.
"""

from __future__ import annotations

import ast
import functools
import os

import proton_core

CORE = os.path.dirname(os.path.abspath(proton_core.__file__))


def module_files(root: str) -> dict[str, str]:
    """{dotted module name: path} of the package at ``root``; native extensions are leaves (path "")."""
    top = os.path.basename(root)
    found = {}
    for dirpath, dirnames, files in os.walk(root):
        dirnames[:] = [d for d in dirnames if d != "__pycache__"]
        relative = os.path.relpath(dirpath, root)
        package = top if relative == "." else ".".join([top] + relative.split(os.sep))
        for name in files:
            stem = name.split(".", 1)[0]
            if name.endswith(".py"):
                found[package if stem == "__init__" else f"{package}.{stem}"] = os.path.join(dirpath, name)
            elif name.endswith((".so", ".pyd")):
                found.setdefault(f"{package}.{stem}", "")
    return found


def _type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _imports(tree: ast.AST):
    """Import statements anywhere in ``tree``, leaving out ``if TYPE_CHECKING:`` bodies."""
    stack = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, ast.If) and _type_checking(node):
            stack.extend(node.orelse)
            continue
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node
        stack.extend(ast.iter_child_nodes(node))


@functools.lru_cache(maxsize=None)
def bound_names(path: str | None) -> frozenset[str]:
    """Names a module binds at its top level (assignments, definitions, imports), to tell a name from a module."""
    if not path:
        return frozenset()
    names: set[str] = set()
    stack = list(ast.parse(open(path, encoding="utf-8").read(), path).body)
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((alias.asname or alias.name).split(".")[0] for alias in node.names)
        elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            for target in node.targets if isinstance(node, ast.Assign) else [node.target]:
                names.update(n.id for n in ast.walk(target) if isinstance(n, ast.Name))
        elif isinstance(node, (ast.If, ast.Try, ast.With)):
            stack.extend(child for child in ast.iter_child_nodes(node) if isinstance(child, ast.stmt))
            stack.extend(s for h in getattr(node, "handlers", ()) for s in h.body)
    return frozenset(names)


def import_graph(root: str) -> dict[str, set[str]]:
    """{module: modules of the package it imports}, with the packages each import runs on the way."""
    modules = module_files(root)
    top = os.path.basename(root)
    graph: dict[str, set[str]] = {}
    for module, path in modules.items():
        targets: set[str] = set()
        if path:
            is_package = path.endswith("__init__.py")
            for node in _imports(ast.parse(open(path, encoding="utf-8").read(), path)):
                if isinstance(node, ast.Import):
                    targets.update(alias.name for alias in node.names)
                    continue
                if node.level:
                    base = module.split(".") if is_package else module.split(".")[:-1]
                    base = base[:len(base) - node.level + 1]
                    source = ".".join(base + ([node.module] if node.module else []))
                else:
                    source = node.module or ""
                for alias in node.names:
                    submodule = f"{source}.{alias.name}"
                    if submodule in modules or alias.name not in bound_names(modules.get(source)):
                        targets.add(submodule)  # a module (one not built yet, too: a native extension)
                    else:
                        targets.add(source)
        edges = set()
        for target in targets:
            if target.split(".")[0] != top:
                continue
            parts = target.split(".")
            for i in range(2, len(parts) + 1):  # the packages on the way (the root only when named itself)
                name = ".".join(parts[:i])
                if name in modules and not (module == name or module.startswith(name + ".")):
                    edges.add(name)
            if target == top and module != top:
                edges.add(top)
        graph[module] = edges
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One cycle (as a path that returns to its start) per strongly connected group of modules."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[list[str]] = []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            for child in children:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                    break
                if child in on_stack:
                    low[node] = min(low[node], index[child])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    group = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        group.append(member)
                        if member == node:
                            break
                    if len(group) > 1:
                        groups.append(sorted(group))
    return [_path_within(graph, set(group)) for group in groups]


def _path_within(graph, group: set[str]) -> list[str]:
    """A cycle through the group's first module, for the message."""
    first = min(group)
    paths = {first: [first]}
    queue = [first]
    while queue:
        node = queue.pop(0)
        for child in sorted(graph[node] & group):
            if child == first:
                return paths[node] + [first]
            if child not in paths:
                paths[child] = paths[node] + [child]
                queue.append(child)
    return sorted(group)


def test_proton_core_has_no_import_circles():
    graph = import_graph(CORE)
    assert len(graph) > 50 and "proton_core.manager" in graph["proton_core.data"]
    assert cycles(graph) == [], "import circles: " + "; ".join(" -> ".join(c) for c in cycles(graph))


def write_package(tmp_path, files: dict[str, str]) -> str:
    root = tmp_path / "pkg"
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return str(root)


def test_the_graph_sees_deferred_imports_and_the_packages_an_import_runs(tmp_path):
    # data/__init__ reaches the manager only at call time, and the manager imports data.tree, whose
    # package's __init__ runs first: the circle this project had, which the graph must catch.
    root = write_package(tmp_path, {
        "__init__.py": "",
        "data/__init__.py": "def get():\n    from ..manager import MANAGER\n    return MANAGER\n",
        "data/tree.py": "class Tree: pass\n",
        "manager.py": "from .data.tree import Tree\nMANAGER = object()\n",
    })
    assert cycles(import_graph(root)) == [["pkg.data", "pkg.manager", "pkg.data"]]


def test_the_graph_takes_a_name_from_the_root_package_and_skips_type_checking(tmp_path):
    root = write_package(tmp_path, {
        "__init__.py": "from .api import start\nhook = 1\n",
        "api.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .plugin import Plugin\n"
                  "def start(): pass\n",
        "plugin.py": "from . import hook, native, unbuilt\nfrom .api import start\n",
        "native.so": "",
    })
    graph = import_graph(root)
    assert graph["pkg.api"] == set() and graph["pkg.plugin"] == {"pkg", "pkg.api", "pkg.native"}
    assert cycles(graph) == []
    (tmp_path / "pkg" / "api.py").write_text("from . import plugin\ndef start(): pass\n")
    assert cycles(import_graph(root)) == [["pkg", "pkg.api", "pkg.plugin", "pkg"]]
