"""``proton-view``: show a Proton (or upstream Proton) hatchet profile in the terminal.

    proton-view -m time/ms,time/% profile.hatchet
    proton-view -l profile.hatchet

The flags are upstream ``proton-viewer``'s, with their meanings.  Every bad
input ends in one line on stderr and exit status 2, never a traceback.
"""

from __future__ import annotations

import argparse
import sys

from .._version import __version__
from ..formats.hatchet import HatchetError, read
from ..progress import progress
from . import derive, profile, render
from .profile import ViewerError

PROG = "proton-view"
FORMATS = ("full", "file_function_line", "function_line", "file_function")


class Parser(argparse.ArgumentParser):
    """Command-line mistakes are one line ``proton-view: ...`` and exit status 2, as every other error."""

    def error(self, message):
        self.exit(2, f"{PROG}: {message} (see {PROG} -h)\n")


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(
        prog=PROG,
        description="Show a Proton hatchet profile as a call tree with raw or derived metrics.",
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
                        help="comma-separated metrics, e.g. time/ms,time/%%,tflop16/s (default: time/ns)")
    parser.add_argument("-i", "--include", default=None,
                        help="regex: keep only paths through a frame whose name matches")
    parser.add_argument("-e", "--exclude", default=None, help="regex: drop matching frames and their subtrees")
    parser.add_argument("-t", "--threshold", type=float, default=None,
                        help="hide frames whose first metric is below this (kept if a descendant passes)")
    parser.add_argument("-d", "--depth", type=int, default=None,
                        help="levels of the tree to show, ROOT being level 1 as upstream counts (default: all)")
    parser.add_argument("-f", "--format", choices=FORMATS, default="full",
                        help="Python frames (file:line@function) as: full (path:line@function), file_function_line "
                             "(file:line@function), function_line (line@function), file_function (file@function)")
    parser.add_argument("--print-sorted", "--print_sorted", dest="print_sorted", action="store_true",
                        help="also list kernels (leaf frames) sorted by the first metric")
    parser.add_argument("-diff", "--diff-profile", dest="diff_profile", default=None, metavar="OTHER",
                        help="show this profile minus OTHER, node by node")
    parser.add_argument("--version", action="version", version=f"{PROG} {__version__}")
    return parser


def label(args) -> str:
    """How messages name what was asked for: the file, or the files."""
    return args.profile[0] if len(args.profile) == 1 else f"{args.profile[0]} (+{len(args.profile) - 1} more)"


def run(args) -> str:
    """Everything but argument parsing; returns the text to print."""
    if args.depth is not None and args.depth < 1:
        raise ViewerError(f"-d/--depth counts ROOT as level 1 (as upstream does): give 1 or more, not {args.depth}")
    files = profile.expand(args.profile, args.phase)
    data = read(files[0])
    for name in files[1:]:  # phases of one run, or runs to add up
        other = read(name)
        for tree in (data.root, other.root):
            profile.format_frames(tree, "full")
        data.root = profile.merge(data.root, other.root)
        data.devices = {**other.devices, **data.devices}
    if args.list:
        return "\n".join(derive.describe(data))
    hatchet = render.import_hatchet()
    if hatchet is None:
        raise ViewerError(render.INSTALL_HINT)
    root = data.root
    if args.diff_profile:
        other = read(args.diff_profile)
        for tree in (data.root, other.root):  # old- and new-spelled frames of the same line must match
            profile.format_frames(tree, "full")
        root = profile.diff(data.root, other.root)
        data.root = root
        if not data.devices:
            data.devices = other.devices
    profile.drop_metadata(root)
    profile.format_frames(root, args.format)
    if args.include:
        profile.include(root, profile.compile_regex(args.include, "-i/--include"))
    if args.exclude:
        profile.exclude(root, profile.compile_regex(args.exclude, "-e/--exclude"))
    metrics = [m.strip() for m in args.metrics.split(",") if m.strip()] if args.metrics else []
    if not metrics:
        keys = data.metric_keys()
        if not keys:
            raise ViewerError(f"{label(args)} has no metrics to show")
        metrics = ["time/ns"] if derive.find_raw("time", keys) else [keys[0]]
    columns = derive.Columns(data, root)
    for metric in metrics:
        columns.compute(metric)
    if args.threshold is not None:
        profile.prune_threshold(root, metrics[0], args.threshold)
    kernels = render.sorted_kernels(root, metrics) if args.print_sorted else []  # -d limits the tree only
    if args.depth is not None:
        profile.prune_depth(root, args.depth - 1)
    text = render.tree_text(hatchet, root, metrics).rstrip("\n")
    return "\n".join([text, *kernels])


def main(argv=None) -> int:
    """Entry point of ``proton-view``; returns the exit status."""
    try:
        args = build_parser().parse_args(argv)
    except SystemExit as exc:  # -h, --version, or a one-line usage error
        return exc.code if isinstance(exc.code, int) else 2
    try:
        with progress(f"reading {label(args)}", prefix=PROG):
            text = run(args)
    except (ViewerError, HatchetError) as exc:
        print(f"{PROG}: {exc}", file=sys.stderr)
        return 2
    except RecursionError:
        print(f"{PROG}: {label(args)} is nested too deeply to show", file=sys.stderr)
        return 2
    try:
        print(text)
    except BrokenPipeError:  # `proton-view ... | head`
        sys.stderr.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
