"""``proton-view run.rank*.hatchet``: a distributed run's ranks as one tree, with how unevenly they share it.

Per node: the first metric summed over ranks, then its ``rank min`` /
``rank median`` / ``rank max`` (each rank's own value, the metric computed per
rank as the view computes it), ``imbalance`` ((max - mean) / max) and the
``slowest`` rank.  ``--sort imbalance`` lists the frames by imbalance instead
of the tree; ``--rank K`` is rank K's files alone, viewed as any profile.
Everything else (-m, -i, -e, -t, -d, --html) works as for one profile.
"""

from __future__ import annotations

from ..model.table import Table
from . import View, derive, rankfiles, read_merged, render
from .errors import ViewerError
from .imbalance import Spans, over_ranks
from .rankmerge import Merged

STAT_HEADERS = ("rank min", "rank median", "rank max", "imbalance")
SLOWEST = "slowest"


class RankView(View):
    """A :class:`View` of rank files: merged over ranks (or one rank with ``--rank``)."""

    def __init__(self, args, paths: list[str], warnings: list[str] | None = None) -> None:
        self.rank_paths = paths
        self.merged: Merged | None = None
        self.stats = None
        self.rank_columns: list = []  # per rank, its values of the first column (times scale) along spans.order
        self.spans = None
        self.scale = 1.0
        super().__init__(args, warnings)
        if self.merged is None or self.listing is not None:
            return
        self.root_words += f", {self._ranks_words()}"
        self._compare()

    def _read(self, args):
        if args.diff_profile:
            raise ViewerError("-diff compares two profiles; for ranks, see --sort imbalance or --rank K")
        if args.rank is not None and args.sort:
            raise ViewerError("--sort imbalance compares ranks; leave out --rank")
        paths = self.rank_paths
        early = []  # of one phase, ranks that stopped early are told from all their parts
        if args.phase is not None:
            early = [rankfiles.stopped_early_line(r) for r in rankfiles.gather(paths, force=True).ranks.values()
                     if r.stopped_early()]
            paths = [p for p in paths if rankfiles.rank_of_name(p)[1] == args.phase]
            if not paths:
                raise ViewerError(f"--phase {args.phase}: none of the files is a part_{args.phase} file "
                                  f"(name.rank<k>.part_{args.phase}.hatchet)")
        run = rankfiles.gather(paths, force=args.force)
        if args.phase is not None:
            for rank in run.ranks.values():
                rank.phase_only = True
            self.warnings.extend(early)
        if args.rank is not None:
            rank = run.ranks.get(args.rank)
            if rank is None:
                raise ViewerError(f"--rank {args.rank}: no file of rank {args.rank} among these "
                                  f"(ranks {', '.join(map(str, run.ranks))})")
            if rank.stopped_early() and args.phase is None:
                self.warnings.append(rankfiles.stopped_early_line(rank))
            return rank.paths, read_merged(rank.paths, self.warnings)
        self.merged = Merged(run, args.metrics, read_merged, self.warnings)
        self.warnings.extend(self.merged.notes)
        return paths, self.merged.table

    def _ranks_words(self) -> str:
        run = self.merged.run
        words = f"{len(run.ranks)} rank{'s' if len(run.ranks) != 1 else ''}"
        if run.world_size is not None:
            words += f" of {run.world_size}"
        if len(run.run_ids) == 1:
            words += f", run {run.run_ids[0]}"
        elif len(run.run_ids) > 1:
            words += f", {len(run.run_ids)} runs added up (--force)"
        return words

    def _compare(self) -> None:
        """Each rank's values of the first column, and the figures over ranks appended as columns."""
        merged = self.merged
        if not merged.keys or merged.metric != self.headers[0]:
            self.warnings.append(f"no per-rank figures: the ranks are compared by {merged.metric or 'a metric'}, "
                                 f"which {'is not the first column' if merged.keys else 'the first rank lacks'}")
            return
        table, order, parent = self.table, self.calc.order, self.calc.parent
        spans = Spans(order, parent, table.size)
        linear = self._linear(merged)
        if linear is not None:  # the common case: one raw key, in some unit: C-level passes per rank
            key, self.scale = linear
            sums = spans.subtree_sums if table.is_inclusive(key) else spans.own
            columns = [sums(merged.per_rank.pop(rank)[key]) for rank in merged.ranks]
        else:
            columns = []
            for rank in merged.ranks:
                own = Table(table.path)
                own.names, own.kids, own.root, own.kinds = table.names, table.kids, table.root, table.kinds
                own.labels, own.inner = table.labels, table.inner
                own.cols = merged.per_rank.pop(rank)
                try:
                    values = derive.Columns(own, order, parent).compute(merged.metric)
                except ViewerError:  # this rank has none of it: nothing spent there
                    values = [0.0] * table.size
                columns.append([v if v == v else 0.0 for v in spans.own(values)])
        self.spans, self.rank_columns = spans, columns
        self.stats = over_ranks(columns, merged.ranks, spans, table.size, self.scale, shown=self.columns[0])
        self.headers = self.headers + list(STAT_HEADERS)
        self.columns = self.columns + [self.stats.low, self.stats.median, self.stats.high, self.stats.imbalance]

    def _linear(self, merged):
        """(raw key, factor) where the first column is one raw key's values (summed as the view sums them)
        times a constant (``time/ms`` of ``time (ns)``), else None (percentages: of each rank's own total)."""
        if len(merged.keys) != 1 or "%" in merged.metric:
            return None
        key = merged.keys[0]
        raw, shown = self.calc.value(key), self.columns[0]
        factor = None
        order = self.calc.order
        step = max(1, len(order) // 4096)  # one raw key in a unit: checked on the root and 4096 nodes
        for i in [self.table.root, *order[::step]]:
            v, d = raw[i], shown[i]
            if v != v or d != d:
                if (v != v) != (d != d):
                    return None
                continue
            if factor is None and v:
                factor = d / v
            if abs(d - (factor or 0.0) * v) > 1e-9 * max(abs(d), 1e-300):
                return None
        return key, (factor or 1.0)

    def rank_values(self, nodes) -> list[list]:
        """Per rank, its values of the first column at ``nodes`` (for the page's per-rank bars)."""
        where = {i: k for k, i in enumerate(self.spans.order)}
        scale = self.scale
        return [[col[where[i]] * scale if i in where else None for i in nodes] for col in self.rank_columns]

    def lines(self):
        if self.listing is not None or self.stats is None:
            yield from super().lines()
            return
        name_of = self.name_of()
        if self.args.sort == "imbalance":
            yield from sorted_lines(self.table, self.columns, self.headers, self.stats, name_of)
            return
        yield from tree_lines(self.table, self.columns, self.headers, self.stats.slowest, self.root_words, name_of)
        if self.kernels is not None:
            yield from render.kernel_lines(self.table, self.kernels, self.columns, self.headers, name_of)


def _slowest_cells(slowest, nodes, width: int) -> list[str]:
    return [f"{render.BLANK if slowest[i] is None else slowest[i]:>{width}}" for i in nodes]


def _slowest_width(slowest, nodes) -> int:
    top = max((slowest[i] for i in nodes if slowest[i] is not None), default=0)
    return max(len(SLOWEST), len(str(top)))


def tree_lines(table, columns, headers, slowest, root_words: str, name_of, chunk: int = 50000):
    """:func:`render.tree_lines` with the slowest rank as a column before the names."""
    order, glyphs = render.layout(table)
    widths = [render.column_width(h, c, order) for h, c in zip(headers, columns)]
    sw = _slowest_width(slowest, order)
    names = table.names
    shown = {n: name_of(n) for n in {names[i] for i in order}}
    yield render.header_line(headers + [SLOWEST], widths + [sw])
    for start in range(0, len(order), chunk):
        nodes = order[start:start + chunk]
        lines = [r + "  " + s + "  " + g + shown[names[i]]
                 for r, s, g, i in zip(render.rows(columns, widths, nodes), _slowest_cells(slowest, nodes, sw),
                                       glyphs[start:start + chunk], nodes)]
        if start == 0 and root_words:
            lines[0] += " — " + root_words
        yield "\n".join(lines)


def sorted_lines(table, columns, headers, stats, name_of):
    """``--sort imbalance``: every shown frame but the root, most imbalanced first (ties: larger sum
    first), each with its path from the root; frames without figures last."""
    order, _ = render.layout(table)
    parent = {}
    for i in order:
        for k in table.kids[i] or ():
            parent[k] = i
    imb, first = stats.imbalance, columns[0]
    frames = [i for i in order if i != table.root]
    valued = [i for i in frames if imb[i] == imb[i]]
    valued.sort(key=lambda i: (-imb[i], -(first[i] if first[i] == first[i] else 0.0)))
    nodes = valued + [i for i in frames if imb[i] != imb[i]]
    widths = [render.column_width(h, c, nodes) for h, c in zip(headers, columns)]
    sw = _slowest_width(stats.slowest, nodes)
    names = table.names
    cache: dict[int, str] = {table.root: ""}

    def path(i: int) -> str:
        chain = []
        while i not in cache:
            chain.append(i)
            i = parent[i]
        text = cache[i]
        for j in reversed(chain):
            text = cache[j] = (text + " > " if text else "") + name_of(names[j])
        return text

    yield f"frames sorted by imbalance of {headers[0]} over ranks ((max - mean) / max):"
    yield render.header_line(headers + [SLOWEST], widths + [sw], "path")
    for start in range(0, len(nodes), 50000):
        block = nodes[start:start + 50000]
        yield "\n".join(r + "  " + s + "  " + path(i) for r, s, i in
                        zip(render.rows(columns, widths, block), _slowest_cells(stats.slowest, block, sw), block))
