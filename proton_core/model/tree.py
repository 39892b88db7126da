"""The aggregated call tree: one node per distinct path, metrics on nodes.

Values are stored *exclusively* (as measured at each node), the way upstream
Proton writes them; :meth:`Tree.inclusive` sums inclusive metrics up the tree
for readers that want totals.  Children are keyed by name, so a Triton op's
metrics and its renamed kernel share one node; a kernel's time and count are
kept per device.  Nodes *inside* a kernel (source lines, SASS offsets, intra-kernel
scopes: ``Batch.kernel_metrics``) hang below the kernel's node, marked ``inner``.
How a tree is written to a file is the formats' business
(:mod:`proton_core.formats`), not the model's.
"""

from __future__ import annotations

import math

from ..inclusive import is_inclusive, subtree_sums
from ..metrics import COUNT_KEY, PROPERTY, TIME_KEY


class Node:
    __slots__ = ("name", "children", "metrics", "kernels", "inner")

    def __init__(self, name: str) -> None:
        self.name = name
        self.children: dict[str, Node] = {}
        self.metrics: dict[str, object] = {}
        #: (device_type, device_id) -> [time_ns, count]
        self.kernels: dict[tuple[str, int], list[int]] = {}
        #: A place inside a kernel (below the kernel's node), not a host-side frame: readers
        #: find kernels with per-line data as the parents of such nodes.
        self.inner = False

    def child(self, name: str) -> "Node":
        node = self.children.get(name)
        if node is None:
            node = self.children[name] = Node(name)
        return node

    def value(self, key: str):
        """A metric of this node alone; ``time (ns)``/``count`` summed over devices."""
        if key == TIME_KEY and self.kernels:
            return sum(v[0] for v in self.kernels.values())
        if key == COUNT_KEY and self.kernels:
            return sum(v[1] for v in self.kernels.values())
        return self.metrics.get(key, 0)

    def walk(self, path=()):
        """Yield (path, node) pairs, pre-order; the root's path is ().  Iterative: trees can be deep."""
        stack = [(path, self)]
        while stack:
            path, node = stack.pop()
            yield path, node
            stack.extend((path + (c.name,), c) for c in reversed(node.children.values()))


def add_values(old, new):
    """``old + new`` for metric values: numbers add, lists add element by element (the shorter padded with
    zeros), a number and a list add the number to the first element; text is replaced by what comes after."""
    if type(old) is str or type(new) is str:
        return new
    old_list, new_list = type(old) is list, type(new) is list
    if not old_list and not new_list:
        try:
            return old + new
        except OverflowError:  # an int sum past a double, plus a float: past any double, clamped when written
            return math.inf
    a = old if old_list else [old]
    b = new if new_list else [new]
    if len(a) < len(b):
        a, b = b, a
    return [x + (b[i] if i < len(b) else 0) for i, x in enumerate(a)]


def merge_metrics(node: Node, metrics) -> None:
    """Add parsed ``[(MetricName, number)]`` to ``node``: summed, properties replaced."""
    store = node.metrics
    for name, value in metrics:
        key = name.key
        if name.kind == PROPERTY or type(value) is str:
            store[key] = value  # a property, or text (which does not add up): the last one set wins
        else:
            store[key] = add_values(store.get(key, 0), value)


class Tree:
    def __init__(self) -> None:
        self.root = Node("ROOT")
        self.device_ids: dict[str, set[int]] = {}
        #: context id -> its node, for per-launch metrics (a context's path never changes)
        self.context_nodes: dict[int, Node] = {}
        #: (backend node id, kernel, device id, sub_path) -> node, for ``Batch.kernel_metrics``
        self.kernel_nodes: dict[tuple, Node] = {}

    def node(self, path) -> Node:
        node = self.root
        for name in path:
            node = node.child(name)
        return node

    def add_kernel(self, path, kernel: str, device_type: str, device_id: int, time_ns: int, count: int) -> None:
        node = self.node(path).child(kernel)
        stats = node.kernels.get((device_type, device_id))
        if stats is None:
            node.kernels[(device_type, device_id)] = [time_ns, count]
            self.device_ids.setdefault(device_type, set()).add(device_id)
        else:
            stats[0] += time_ns
            stats[1] += count

    def add_metrics(self, path, metrics) -> None:
        """Merge parsed ``[(MetricName, number)]`` into the node at ``path``."""
        merge_metrics(self.node(path), metrics)

    def merge(self, other: "Tree") -> None:
        """Add ``other`` into this tree: kernels and metrics summed, properties taken from ``other``."""
        stack = [(self.root, other.root)]
        while stack:
            mine, theirs = stack.pop()
            for key, value in theirs.metrics.items():
                mine.metrics[key] = value if key.endswith("(pty)") else add_values(mine.metrics.get(key, 0), value)
            for device, (time_ns, count) in theirs.kernels.items():
                stats = mine.kernels.setdefault(device, [0, 0])
                stats[0] += time_ns
                stats[1] += count
            for name, child in theirs.children.items():
                node = mine.child(name)
                if child.inner:
                    node.inner = True
                stack.append((node, child))
        for device_type, ids in other.device_ids.items():
            self.device_ids.setdefault(device_type, set()).update(ids)

    def find(self, *path: str) -> Node | None:
        """The node at ``path`` (names below ROOT), or None."""
        node = self.root
        for name in path:
            node = node.children.get(name)
            if node is None:
                return None
        return node

    def inclusive(self, key: str, node: Node | None = None):
        """``key`` summed over ``node`` and its subtree (exc/pty/cpu_time: the node only)."""
        node = node or self.root
        if not is_inclusive(key):
            return node.metrics.get(key, 0)
        sums = subtree_sums(node, (key,), Node.value, lambda n: n.children.values())
        return sums[id(node)][key]
