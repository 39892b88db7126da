"""The merged view's per-file hot path in C (csrc/rank_numbers.c, decision 0275).

Optional: ``proton_core.viewer.sameshape`` and ``imbalance`` run their Python code where this extension was
not built (or PROTON_PURE_PYTHON is set). Keep in step with the method tables of csrc/rank_numbers.c.
"""

from typing import Any

from typing_extensions import Buffer, disjoint_base

@disjoint_base  # a C type with its own layout
class Reader:
    """A learnt rank file's template: reads files of its shape by their numbers (ValueError if it cannot vouch)."""

    @property
    def size(self) -> int:
        """How many values a file of this shape has (each node's pairs and a separator)."""
    def __init__(self, learnt: Buffer, /) -> None: ...
    def values(self, data: Buffer, /) -> list[int | float] | None:
        """The file's values as sameshape._flat numbers them, or None where this reader does not take it."""
    def parse(self, data: Buffer, /) -> int:
        """Match a file: the offset of its tail, or -1 (the Python reader decides)."""
    def moved(self) -> list[int]:
        """Indexes of the device_id pairs whose device differs from the learnt file's (the parsed file)."""
    def commit(self) -> None:
        """Add the parsed file's values into the sums; keep them as the last file's."""
    def sums(self) -> list[int | float]:
        """The sums, as map(add) would have kept them."""
    def last(self) -> bytes:
        """The last committed file's values as doubles, a 0.0 after them."""

def take(values: Buffer, where: Buffer, /) -> bytes:
    """Doubles values[where[k]] for each k."""
def subtree_sums(values: Buffer, order: Buffer, ends: Buffer, /) -> bytes:
    """Per position of order, values summed over its subtree (imbalance.Spans.subtree_sums)."""
def over_ranks(
    columns: list[Any], ranks: list[int], order: Buffer, size: int, scale: float, shown: Any, nan: float, /
) -> tuple[list[float], list[float], list[float], list[int | None], list[float]] | None:
    """imbalance.over_ranks' figures, or None where a value is NaN."""
