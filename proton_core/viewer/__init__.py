"""``proton-view``: show a Proton (or upstream Proton) hatchet profile in the terminal, or as a picture.

    proton-view -m time/ms,time/% profile.hatchet
    proton-view -l profile.hatchet
    proton-view --html profile.html profile.hatchet
    proton-view --lines 'matmul' profile.hatchet      # per source line of a kernel (instruction sampling)

The flags are upstream ``proton-viewer``'s, with their meanings.  Every bad
input ends in one line on stderr and exit status 2, never a traceback.
Reading, shaping and printing are each one pass over the profile
(:mod:`.table` holds it column-wise), so a million nodes take seconds.
"""

from __future__ import annotations

import argparse
import os
import sys

from .._version import __version__
from ..formats.hatchet import HatchetError
from ..progress import progress
from . import combine, derive, files, frames, lines, names, rankfiles, render, shape, table
from .describe import profile_words
from .errors import MissingMetric, ViewerError
from .graphframe import load_graphframe
from .table import read

__all__ = ["main", "load_graphframe"]

PROG = "proton-view"


class Parser(argparse.ArgumentParser):
    """Command-line mistakes are one line ``proton-view: ...`` and exit status 2, as every other error."""

    def error(self, message):
        self.exit(2, f"{PROG}: {message} (see {PROG} -h)\n")


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(
        prog=PROG,
        description="Show a Proton hatchet profile as a call tree with raw or derived metrics, or as a flame graph.",
        epilog=derive.DERIVED_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("profile", nargs="+",
                        help="a .hatchet file written by proton-profile (or Triton's proton); several files, or a "
                             "quoted glob such as 'run.part_*.hatchet' (periodic flushing), are shown merged")
    parser.add_argument("--phase", type=int, default=None, metavar="N",
                        help="of part files (name.part_N.hatchet), show phase N alone")
    parser.add_argument("-l", "--list", action="store_true", help="list the profile's metrics and derived forms")
    parser.add_argument("-m", "--metrics", default=None,
                        help="comma-separated metrics, e.g. time/ms,time/%%,tflop16/s (default: time/ns); "
                             "metrics the profile lacks are left out with a warning")
    parser.add_argument("-i", "--include", default=None,
                        help="regex: keep only paths through a frame whose name matches")
    parser.add_argument("-e", "--exclude", default=None, help="regex: drop matching frames and their subtrees")
    parser.add_argument("-t", "--threshold", type=float, default=None,
                        help="hide frames whose first metric is below this (kept if a descendant passes)")
    parser.add_argument("-d", "--depth", type=int, default=None,
                        help="levels of the tree to show, ROOT being level 1 as upstream counts (default: all)")
    parser.add_argument("-f", "--format", choices=tuple(frames.STYLES), default="full",
                        help="Python frames (file:line@function) as: full (path:line@function), file_function_line "
                             "(file:line@function), function_line (line@function), file_function (file@function)")
    parser.add_argument("--print-sorted", "--print_sorted", dest="print_sorted", action="store_true",
                        help="also list every frame but the root (scopes, Python frames, kernels) sorted by the "
                             "first metric, as upstream does")
    parser.add_argument("-diff", "--diff-profile", dest="diff_profile", default=None, metavar="OTHER",
                        help="show this profile minus OTHER, node by node")
    parser.add_argument("--full-names", action="store_true",
                        help=f"print names whole (default: longer than {names.SHORT} characters are cut, as upstream "
                             "does); C++ mangled names are demangled either way")
    parser.add_argument("--lines", default=None, metavar="REGEX",
                        help="instead of the tree, list each kernel matching REGEX line by line (instruction "
                             "samples summed over its calling contexts, top stall reasons, source text); "
                             "-m names the metric to count if not samples")
    parser.add_argument("--lines-top", type=int, default=lines.DEFAULT_TOP, metavar="N",
                        help=f"--lines: show the N lines with most samples per kernel (default {lines.DEFAULT_TOP})")
    parser.add_argument("--html", default=None, metavar="OUT.html",
                        help="write an interactive flame graph (one offline file) instead of printing the tree")
    parser.add_argument("--speedscope", default=None, metavar="OUT.json",
                        help="write the tree in speedscope's file format instead of printing it")
    parser.add_argument("--pprof", default=None, metavar="OUT.pb.gz",
                        help="convert the profile to gzipped pprof (go tool pprof, Parca, Pyroscope) instead of printing it")
    parser.add_argument("--rank", type=int, default=None, metavar="K",
                        help="of a distributed run's rank files (name.rank<k>.hatchet), show rank K alone")
    parser.add_argument("--sort", choices=("imbalance",), default=None,
                        help="of rank files: list the frames by imbalance over ranks ((max - mean) / max) "
                             "instead of the tree")
    parser.add_argument("--force", action="store_true",
                        help="merge rank files of different runs (run ids) anyway, adding them up")
    parser.add_argument("--version", action="version", version=f"{PROG} {__version__}")
    return parser


def label(args) -> str:
    """How messages name what was asked for: the file, or the files."""
    return args.profile[0] if len(args.profile) == 1 else f"{args.profile[0]} (+{len(args.profile) - 1} more)"


def read_merged(paths: list[str], warnings: list[str] | None = None) -> table.Table:
    """One file, or several (phases of one run, or runs to add up) merged; ``warnings`` gets a line per
    file carrying numbers no double holds (NaN, Infinity: another writer's, never Proton's)."""
    merged = read_checked(paths[0], warnings)
    for path in paths[1:]:
        other = read_checked(path, warnings)
        for t in (merged, other):  # old- and new-spelled frames of the same line must match
            frames.format_frames(t, "full")
        merged = combine.merge(merged, other)
    return merged


def read_checked(path: str, warnings: list[str] | None) -> table.Table:
    """:func:`read`, adding to ``warnings`` one line if the file carries values left out as unreadable."""
    data = read(path)
    count = getattr(data, "unreadable", 0)
    if count and warnings is not None:
        warnings.append(f"{path} carries {count} metric value{'s' if count > 1 else ''} that {'are' if count > 1 else 'is'} "
                        "not a finite number (NaN, Infinity or past a double; strict JSON has none): shown as no value")
    return data


class View:
    """What a command asked for, computed: the shaped table, its columns, and what to say about it."""

    def __init__(self, args, warnings: list[str] | None = None) -> None:
        if args.depth is not None and args.depth < 1:
            raise ViewerError(f"-d/--depth counts ROOT as level 1 (as upstream does): give 1 or more, not {args.depth}")
        self.args = args
        self.warnings: list[str] = [] if warnings is None else warnings
        if args.lines is not None:
            _check_lines_args(args)
        paths, data = self._read(args)
        described = derive.describe(data.metric_keys(), _kernels_with_lines(data), kinds=data.kinds) if args.list else ()
        self.listing = [names.printable(line) for line in described] if args.list else None
        if args.list:
            return
        if args.diff_profile:
            other = read_checked(args.diff_profile, self.warnings)
            for t in (data, other):
                frames.format_frames(t, "full")
            data = combine.diff(data, other)
        self.root_words = names.printable(profile_words(data, len(paths), args.diff_profile))
        shape.drop_metadata(data)
        frames.format_frames(data, args.format)
        names.demangle_table(data)
        if args.include:
            shape.include(data, shape.compile_regex(args.include, "-i/--include"))
        if args.exclude:
            shape.exclude(data, shape.compile_regex(args.exclude, "-e/--exclude"))
        if args.lines is not None:
            wanted = [m.strip() for m in (args.metrics or "").split(",") if m.strip()]
            self.listing = lines.listing(data, shape.compile_regex(args.lines, "--lines"),
                                         metric=wanted[0] if wanted else None, top=args.lines_top,
                                         name_of=self.name_of(), base_dir=os.path.dirname(os.path.abspath(paths[0])),
                                         what=label(args))
            return
        self.table = data
        self.headers, self.columns = self._columns(data, args.metrics)
        if args.threshold is not None:
            shape.prune_threshold(data, self.columns[0], args.threshold)
        self.kernels = render.sorted_kernels(data, self.columns[0]) if args.print_sorted else None  # before -d
        if args.depth is not None:
            shape.prune_depth(data, args.depth - 1)

    def _read(self, args):
        """(the files named, their table): several files are summed (:func:`read_merged`)."""
        paths = files.expand(args.profile, args.phase)
        return paths, read_merged(paths, self.warnings)

    def _columns(self, data, wanted: str | None):
        metrics = [m.strip() for m in wanted.split(",") if m.strip()] if wanted else []
        keys = data.metric_keys()
        if not metrics:
            if not keys:
                raise ViewerError(f"{label(self.args)} has no metrics to show")
            metrics = derive.default_metrics(data, keys)
        order, parent = data.walk()
        columns = self.calc = derive.Columns(data, order, parent)
        headers, values, missing = [], [], []
        for metric in metrics:
            try:
                values.append(columns.compute(metric))
                headers.append(metric)
            except MissingMetric as exc:
                missing.append((metric, exc))
        if not values:
            if len(missing) == 1:
                raise missing[0][1]
            raise MissingMetric(f"none of the metrics {', '.join(m for m, _ in missing)} is in this profile "
                                f"(it has: {', '.join(keys) or 'none'}); use -l to list them")
        if missing:
            self.warnings.append(f"showing {', '.join(headers)}; not in this profile: "
                                 + "; ".join(_why(m, exc) for m, exc in missing))
        return headers, values

    def name_of(self):
        """How a name is printed: whole with --full-names, else shortened as upstream does; escaped either way."""
        return names.printable if self.args.full_names else names.shown

    def lines(self):
        """The terminal output: lines, or blocks of lines joined by newlines."""
        if self.listing is not None:
            yield from self.listing
            return
        name_of = self.name_of()
        yield from render.tree_lines(self.table, self.columns, self.headers, self.root_words, name_of)
        if self.kernels is not None:
            yield from render.kernel_lines(self.table, self.kernels, self.columns, self.headers, name_of)


def make_view(args, warnings: list[str]) -> View:
    """A :class:`View`; of a distributed run's rank files (a directory, a ``run`` prefix, ``run.rank*``), the
    merged view over ranks (:mod:`.rankview`).  Other files are summed as always."""
    paths = rankfiles.expand(args.profile)
    if paths is None:
        if args.rank is not None or args.sort:
            flag = "--rank" if args.rank is not None else "--sort imbalance"
            raise ViewerError(f"{flag} is for a distributed run's rank files (name.rank<k>.hatchet); "
                              f"{label(args)} is none")
        return View(args, warnings)
    from .rankview import RankView

    return RankView(args, paths, warnings)


def _check_lines_args(args) -> None:
    """--lines prints a listing of one profile (or files merged): what cannot go with it says so."""
    if args.lines_top < 1:
        raise ViewerError(f"--lines-top must be 1 or more, not {args.lines_top}")
    clash = [flag for flag, on in (("-diff", args.diff_profile), ("--html", args.html),
                                   ("--speedscope", args.speedscope)) if on]
    if clash:
        raise ViewerError(f"--lines prints a per-line listing; leave out {', '.join(clash)}")


def _kernels_with_lines(data) -> list[str]:
    """Names of kernels with places inside them (parents of inner nodes), for ``-l``; [] when none."""
    if not any(data.inner):
        return []
    inner, found = data.inner, {}
    for i, ks in enumerate(data.kids):
        if ks and not inner[i] and any(inner[k] for k in ks):
            found.setdefault(data.names[i], None)
    return list(found)


def _why(metric: str, exc: MissingMetric) -> str:
    return f"{metric} (needs '{exc.needs}')" if exc.needs else metric


def write_outputs(view: View) -> list[str]:
    """--html / --speedscope: write the files; lines saying what was written."""
    from . import html, speedscope

    done = []
    if view.args.html:
        count = html.write(view, view.args.html)
        done.append(f"{PROG}: wrote {view.args.html} ({count} frames)")
    if view.args.speedscope:
        count = speedscope.write(view, view.args.speedscope)
        done.append(f"{PROG}: wrote {view.args.speedscope} ({count} frames)")
    return done


def main(argv=None) -> int:
    """Entry point of ``proton-view``; returns the exit status."""
    try:
        args = build_parser().parse_args(argv)
    except SystemExit as exc:  # -h, --version, or a one-line usage error
        return exc.code if isinstance(exc.code, int) else 2
    if args.pprof:
        from . import pprof_export

        return pprof_export.main(args)
    warnings: list[str] = []  # said before an error too: a file's unreadable values explain a missing metric
    try:
        with progress(f"reading {label(args)}", prefix=PROG):
            view = make_view(args, warnings)
            written = write_outputs(view) if (args.html or args.speedscope) and view.listing is None else None
    except (ViewerError, HatchetError) as exc:
        for warning in warnings:
            print(f"{PROG}: warning: {warning}", file=sys.stderr)
        print(f"{PROG}: {exc}", file=sys.stderr)
        return 2
    except RecursionError:
        print(f"{PROG}: {label(args)} is nested too deeply to show", file=sys.stderr)
        return 2
    except OSError as exc:  # an output file that cannot be written
        print(f"{PROG}: cannot write {exc.filename or 'the output'}: {exc.strerror or exc}", file=sys.stderr)
        return 2
    for warning in view.warnings:
        print(f"{PROG}: warning: {warning}", file=sys.stderr)
    try:
        if written is not None:
            print("\n".join(written))
        else:
            _print_lines(view.lines())
    except BrokenPipeError:  # `proton-view ... | head`
        sys.stderr.close()
    return 0


def _print_lines(lines) -> None:
    """Write each line (or block of lines) as it comes: the output is never held whole."""
    write = sys.stdout.write
    for text in lines:
        write(text)
        write("\n")
    sys.stdout.flush()


if __name__ == "__main__":
    sys.exit(main())
