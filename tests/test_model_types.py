"""The model types live in proton_core.model alone; the formats and the viewer build and read those."""

import ast
import os

import proton_core
from proton_core.formats import hatchet
from proton_core.model import Profile, Tree
from proton_core.model.read import ReadNode, ReadProfile
from proton_core.model.table import Table
from proton_core.viewer import table

CORE = os.path.dirname(os.path.abspath(proton_core.__file__))
MODEL = os.path.join(CORE, "model")


def classes(path):
    return {n.name for n in ast.walk(ast.parse(open(path, encoding="utf-8").read())) if isinstance(n, ast.ClassDef)}


def test_no_module_outside_the_model_defines_a_model_class():
    names = set().union(*(classes(os.path.join(MODEL, f)) for f in os.listdir(MODEL) if f.endswith(".py")))
    assert {"Node", "Tree", "Profile", "Trace", "ReadNode", "ReadProfile", "Table"} <= names
    twins = []
    for dirpath, dirnames, files in os.walk(CORE):
        dirnames[:] = [d for d in dirnames if d != "__pycache__"]
        if os.path.samefile(dirpath, MODEL):
            continue
        for name in files:
            if name.endswith(".py"):
                path = os.path.join(dirpath, name)
                twins += [f"{os.path.relpath(path, CORE)}: {c}" for c in sorted(classes(path) & names)]
    assert twins == []


def test_the_format_and_the_viewer_read_into_the_model(tmp_path):
    tree = Tree()
    tree.add_kernel(("step",), "gemm", "CUDA", 0, 10, 1)
    path = str(tmp_path / "p.hatchet")
    hatchet.write(Profile("p", "shadow", "tree", tree), path)
    read = hatchet.read(path)
    assert isinstance(read, ReadProfile) and isinstance(read.root, ReadNode)
    assert [n.name for n in read.root.walk()] == ["ROOT", "step", "gemm"]
    columns = table.read(path)
    assert isinstance(columns, Table) and columns.names[columns.root] == "ROOT"
