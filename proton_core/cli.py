"""``proton``: profile a whole program without editing it.

    proton [options] script.py [args...]
    proton [options] -m module [args...]
    proton [options] pytest [pytest args...]
    proton plugins

The CLI owns the one session (id 0): the program's own ``proton.start`` and
``proton.finalize`` calls are ignored, the profile is written however the
program ends, and the program's exit status is passed through.  Usage errors
and Proton errors print one line ``proton: ...`` and exit with status 2.
"""

from __future__ import annotations

import importlib.util
import os
import runpy
import sys
import traceback

from .errors import ProtonError

USAGE = """\
usage: proton [options] script.py [args...]
       proton [options] -m module [args...]
       proton [options] pytest [pytest args...]
       proton plugins

Profile a Python program, module or pytest run; write the profile when it ends.

options (before the program; everything after it is passed to the program):
  -n, --name NAME           output path without extension (default: proton)
  -b, --backend NAME        cupti, roctracer, instrumentation, host, ... (default:
                            PROTON_BACKEND, [tool.proton] in pyproject.toml, then auto)
  -c, --context NAME        shadow (scopes, default) or python (call stacks)
  -d, --data KIND           tree (aggregated, default) or trace (every event)
  -k, --hook NAMES          layered context sources, comma-separated (triton,torch,...)
      --mode MODE           backend mode (e.g. a cupti PC-sampling mode)
  -o, --output-format FMT   sink to write: hatchet (tree default), chrome_trace (trace default)
  -h, --help                show this help

commands:
  plugins                   list installed plugins with kinds, versions and status
                            (a file named 'plugins' is run as a script instead)

examples:
  proton -n matmul -c python bench.py --size 4096
  proton -b cupti pytest -x tests/test_kernels.py
  proton -m my_package.train --epochs 1
  proton-viewer -m time/ms matmul.hatchet
"""

#: option spelling -> keyword of MANAGER.start
OPTIONS = {
    "-n": "name", "--name": "name",
    "-b": "backend", "--backend": "backend",
    "-c": "context", "--context": "context",
    "-d": "data", "--data": "data",
    "-k": "hook", "--hook": "hook",
    "--mode": "mode",
    "-o": "output_format", "--output-format": "output_format", "--output_format": "output_format",
}


class UsageError(Exception):
    """A command line we cannot act on; the message is one line."""


def parse(argv: list[str]):
    """Split ``argv`` into (start options, kind, target, program args).

    Parsing stops at the first word that is not a Proton option, at ``-m``
    or at ``--``, so the program's own options are never taken for ours.
    """
    options: dict[str, str] = {}
    i = 0
    while i < len(argv):
        arg = argv[i]
        if arg in ("-h", "--help"):
            return options, "help", None, []
        if arg == "--":
            i += 1
            break
        if arg == "-m" or (arg.startswith("-m") and not arg.startswith("--")):
            module = arg[2:] or (argv[i + 1] if i + 1 < len(argv) else "")
            if not module:
                raise UsageError("-m needs a module name, e.g. proton -m my_package.main")
            rest = argv[i + 1:] if arg[2:] else argv[i + 2:]
            return options, "module", module, rest
        if not arg.startswith("-") or arg == "-":
            break
        name, eq, value = arg.partition("=")
        if eq and name in OPTIONS and name.startswith("--"):
            options[OPTIONS[name]] = value
            i += 1
            continue
        if arg in OPTIONS:
            if i + 1 >= len(argv):
                raise UsageError(f"option {arg} needs a value (see proton -h)")
            options[OPTIONS[arg]] = argv[i + 1]
            i += 2
            continue
        if arg[:2] in OPTIONS and len(arg) > 2 and not arg.startswith("--"):  # -nNAME
            options[OPTIONS[arg[:2]]] = arg[2:]
            i += 1
            continue
        raise UsageError(f"unknown option {arg} (see proton -h; program options go after the script)")
    rest = argv[i:]
    if not rest:
        raise UsageError("nothing to run: give a script, -m module or pytest (see proton -h)")
    target, args = rest[0], rest[1:]
    if target == "pytest":
        return options, "pytest", target, args
    if target == "plugins" and not os.path.isfile(target):
        return options, "plugins", target, args
    return options, "script", target, args


# ------------------------------------------------------------------ plugins ----
def plugin_rows() -> list[tuple[str, ...]]:
    """One row per plugin: name, distribution, version, kinds, provides, status."""
    from .plugins import get_plugins

    plugins = get_plugins()
    rows = []
    for record in plugins.records:
        provides = []
        if record.loaded:
            provides = [e.name for r in plugins.registries.values() for e in r.values() if e.plugin == record.name]
        status = record.status
        if status == "loaded":
            reasons = []
            for reg in plugins.backends.values():
                if reg.plugin != record.name or reg.available is None:
                    continue
                try:
                    reason = reg.available()
                except Exception as exc:  # a probe that breaks is itself a reason
                    reason = f"availability check failed: {type(exc).__name__}: {exc}"
                if reason:
                    reasons.append(str(reason).splitlines()[0] if str(reason) else "unavailable")
            if reasons:
                status = "unavailable: " + "; ".join(reasons)
        rows.append((record.name, record.distribution, record.version or "-", ",".join(record.kinds) or "-",
                     ",".join(sorted(provides)) or "-", status))
    return rows


def format_table(header: tuple[str, ...], rows: list[tuple[str, ...]]) -> str:
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
    lines = []
    for row in [header, *rows]:
        cells = [str(c).ljust(w) for c, w in zip(row, widths)]
        lines.append("  ".join(cells).rstrip())
    return "\n".join(lines)


def show_plugins() -> int:
    header = ("NAME", "DISTRIBUTION", "VERSION", "KINDS", "PROVIDES", "STATUS")
    print(format_table(header, plugin_rows()))
    return 0


# ------------------------------------------------------------------ running ----
def check_target(kind: str, target: str) -> None:
    """Fail before profiling starts, so a typo writes no empty profile."""
    if kind == "script":
        if not os.path.exists(target):
            raise UsageError(f"no such script: {target}")
        if os.path.isdir(target) and not os.path.exists(os.path.join(target, "__main__.py")):
            raise UsageError(f"{target} is a directory without __main__.py: give a script file")
    elif kind == "module":
        try:
            spec = importlib.util.find_spec(target)
        except (ImportError, ValueError) as exc:
            raise UsageError(f"cannot find module {target!r}: {exc}") from None
        if spec is None:
            raise UsageError(f"no module named {target!r} (is it installed, or run from its parent directory?)")
    elif kind == "pytest" and importlib.util.find_spec("pytest") is None:
        raise UsageError("pytest is not installed: pip install pytest")


def run_program(kind: str, target: str, args: list[str]) -> int:
    """Run the program the way ``python`` would; return its exit status."""
    if kind == "script":
        sys.argv = [target, *args]
        sys.path.insert(0, os.path.dirname(os.path.abspath(target)))
        runpy.run_path(target, run_name="__main__")
        return 0
    if kind == "module":
        sys.argv = [target, *args]  # runpy replaces argv[0] with the module's file
        runpy.run_module(target, run_name="__main__", alter_sys=True)
        return 0
    import pytest

    sys.argv = ["pytest", *args]
    return int(pytest.main(list(args)))


def exit_status(exc: SystemExit) -> int:
    """What the interpreter would exit with for ``exc``."""
    code = exc.code
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    print(code, file=sys.stderr)
    return 1


_OWN_FILES = {os.path.abspath(__file__), os.path.abspath(runpy.__file__), "<frozen runpy>"}


def print_program_error(exc: BaseException) -> None:
    """The program's traceback without the CLI's and runpy's frames on top."""
    tb = exc.__traceback__
    while tb is not None and (tb.tb_frame.f_code.co_filename in _OWN_FILES
                              or os.path.abspath(tb.tb_frame.f_code.co_filename) in _OWN_FILES):
        tb = tb.tb_next
    traceback.print_exception(type(exc), exc, tb)


def profile_program(options: dict, kind: str, target: str, args: list[str]) -> int:
    from .session import MANAGER

    check_target(kind, target)
    if kind == "module":
        sys.path.insert(0, os.getcwd())
    MANAGER.start(options.get("name"), context=options.get("context", "shadow"), data=options.get("data", "tree"),
                  backend=options.get("backend"), mode=options.get("mode"), hook=options.get("hook"),
                  output_format=options.get("output_format"))
    MANAGER.cli_owned = True
    status = 0
    try:
        status = run_program(kind, target, args)
    except SystemExit as exc:
        status = exit_status(exc)
    except KeyboardInterrupt as exc:
        print_program_error(exc)
        status = 130
    except BaseException as exc:  # the program's own error: report it as python would, then still write
        print_program_error(exc)
        status = 1
    finally:
        MANAGER.cli_owned = False
        try:
            paths = MANAGER.finalize()
        except ProtonError as exc:
            print(f"proton: {exc}", file=sys.stderr)
            status = status or 2
        else:
            for path in paths:
                print(f"proton: profile written to {path}", file=sys.stderr)
    return status


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``proton``; returns the exit status (the program's, or 2 for our errors)."""
    argv = sys.argv[1:] if argv is None else list(argv)
    try:
        options, kind, target, args = parse(argv)
        if kind == "help":
            print(USAGE, end="")
            return 0
        if kind == "plugins":
            return show_plugins()
        return profile_program(options, kind, target, args)
    except (UsageError, ProtonError) as exc:
        print(f"proton: {str(exc).splitlines()[0] if str(exc) else type(exc).__name__}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
