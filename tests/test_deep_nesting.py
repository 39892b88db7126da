"""Deep nesting costs one step per scope: metrics at a new context are filed one step below its parent's node.

Before, each metric at a context spelled its whole path and walked the tree from the root (and the context
tree cached every path whole), so n nested scopes with metrics took n**2 / 2 steps and as much memory:
10 000 took 18.8 s and 3.6 GB, 100 000 were killed by the OOM killer.  The figures are the benchmark's
(``python3 -m benchmarks.deep_nesting``); these tests count steps, which do not depend on the machine.
"""

import proton_core as proton
from proton_core.context import TREE
from proton_core.model import tree as tree_module


def nest(n, metrics=True):
    for i in range(n):
        proton.enter_scope(f"s{i % 3}", metrics={"bytes": 1} if metrics else None)
    for _ in range(n):
        proton.exit_scope()


def test_metrics_at_a_deep_nest_take_one_step_per_scope(tmp_path, monkeypatch):
    steps = [0]
    child = tree_module.Node.child

    def counted(self, name):
        steps[0] += 1
        return child(self, name)

    monkeypatch.setattr(tree_module.Node, "child", counted)
    n = 3000
    proton.start(str(tmp_path / "deep"), backend="fake")
    nest(n)
    proton.finalize()
    assert steps[0] < 3 * n  # the whole path from the root each time: n * n / 2 = 4.5 M


def test_deep_paths_are_not_kept_whole(tmp_path):
    proton.start(str(tmp_path / "deep"), backend="fake")
    nest(2000)
    proton.finalize()
    kept = sum(len(p) for p in TREE._paths.values())
    assert kept < 2000 * TREE.CACHED_DEPTH  # every path whole: 2 M elements


def test_a_deep_nest_is_written_and_read_back(tmp_path):
    n = 5000
    proton.start(str(tmp_path / "deep"), backend="fake")
    nest(n)
    proton.finalize()
    from proton_core.formats import hatchet

    node, depth = hatchet.read(str(tmp_path / "deep.hatchet")).root, 0
    while node.children:
        node = node.children[0] if isinstance(node.children, list) else next(iter(node.children.values()))
        depth += 1
    assert depth == n
