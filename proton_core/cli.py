"""``proton-profile``: profile a whole program without editing it.

    proton-profile [options] script.py [args...]
    proton-profile [options] --module pkg.mod [args...]
    proton-profile [options] pytest [pytest args...]
    proton-profile [options] torchrun|srun|mpirun|any command [args...]
    proton-profile plugins
    proton-profile ctl start|stop|status ...

The options are upstream ``proton``'s, with their meanings (``-m`` is the
backend mode), plus ours.  The program is found and run as ``python`` would:
the script's directory, or the current directory for a module, comes first
on ``sys.path`` before the lookup.  The CLI owns the one session (id 0): the
program's own ``proton.start`` and ``proton.finalize`` calls are ignored, the
profile is written however the program ends (to ``-n`` made absolute before
the program runs, or to the temporary directory where that write fails), and
the program's exit status is passed through.  Usage errors and Proton errors print one line
``proton: ...`` and exit with status 2.

Every Python process the program starts (and, for a command that is not a Python program, such as
``torchrun``, ``srun`` or ``mpirun``, every Python process under it) profiles itself with the same
options through a start-up hook in the environment (:mod:`proton_core.follow`), each writing its own
file: ``<name>.rank<k>`` where it has a rank, else ``<name>.pid<P>``; ``--no-follow`` turns that off.
The command itself runs as a subprocess and its exit status is passed through.
"""

from __future__ import annotations

import builtins
import importlib.machinery
import importlib.util
import io
import os
import pathlib
import pkgutil
import runpy
import shutil
import signal
import subprocess
import sys
import traceback
import types

from ._version import __version__
from .errors import ProtonError

PROG = "proton-profile"

USAGE = """\
usage: proton-profile [options] script.py [args...]
       proton-profile [options] --module pkg.mod [args...]
       proton-profile [options] pytest [pytest args...]
       proton-profile [options] torchrun|srun|mpirun|COMMAND [args...]
       proton-profile plugins
       proton-profile ctl start|stop|status [--pid P | --run RUN_ID]
       python -m proton_core ...            (the same command)

Profile a Python program, module or pytest run; write the profile when it ends.
The options are Triton proton's (-m is the backend mode); a program runs as
`python script.py` or `python -m pkg.mod` would run it.  Python processes it
starts, and those under a COMMAND (a launcher such as torchrun), profile
themselves with the same options: one file per rank (NAME.rank<k>) or process
(NAME.pid<P>).

options (before the program; everything after it is passed to the program):
  -n, --name NAME           output path without extension (default: proton)
  -b, --backend NAME        cupti, roctracer, instrumentation, host, ... (default:
                            PROTON_BACKEND, [tool.proton] in pyproject.toml, then auto)
  -c, --context NAME        shadow (scopes, default), python (call stacks) or native (native call stacks, cupti)
  -m, --mode MODE           backend mode, or periodic_flushing[:interval=S][:launches=N] to
                            write each phase to NAME.part_<N> as the run goes
  -d, --data KIND           tree (aggregated, default) or trace (every event)
  -k, --hook NAMES          layered context sources, comma-separated (triton,torch,...)
  -i, --instrument NAME     print-mem-spaces: run without profiling, every Triton
                            kernel compiled through Triton's memory-space pass
  -o, --output-format FMT   sink to write: hatchet (tree default), chrome_trace (trace default),
                            hatchet_msgpack, pprof
      --ranks LIST          profile only these ranks, e.g. 0,3 or 0-3 (PROTON_RANKS); others run unprofiled
      --schedule SPEC       record only some steps (proton.step() ends one): skip_first=S,wait=W,
                            warmup=U,active=A,repeat=R; each active window is a phase (PROTON_SCHEDULE)
      --no-follow           profile only the program itself, not the Python processes it starts
      --on-demand           start idle; `proton-profile ctl start|stop` records windows (PROTON_ON_DEMAND)
      --module NAME         run module NAME as `python -m NAME` (ends the options)
  -h, --help                show this help
      --version             show the version

commands:
  plugins                   list installed plugins with kinds, versions and status
                            (a file named 'plugins' is run as a script instead)
  ctl                       start/stop/status of an --on-demand job (proton-profile ctl -h)

examples:
  proton-profile -n matmul -c python bench.py --size 4096
  proton-profile -b cupti pytest -x tests/test_kernels.py
  proton-profile -n train --module my_package.train --epochs 1
  proton-profile -n run torchrun --nproc-per-node 4 train.py     (run.rank0.hatchet ...)
  proton-view -m time/ms matmul.hatchet
"""

#: option spelling -> keyword of MANAGER.start (or ``instrument``)
OPTIONS = {
    "-n": "name", "--name": "name",
    "-b": "backend", "--backend": "backend",
    "-c": "context", "--context": "context",
    "-m": "mode", "--mode": "mode",
    "-d": "data", "--data": "data",
    "-k": "hook", "--hook": "hook",
    "-i": "instrument", "--instrument": "instrument",
    "-o": "output_format", "--output-format": "output_format", "--output_format": "output_format",
    "--ranks": "ranks", "--schedule": "schedule",
}
#: Long options without a value that switch something on.
FLAGS = {"--no-follow": "no_follow", "--on-demand": "on_demand"}
#: Long options without a value (or ending ours), which may be abbreviated like the others.
COMMANDS = {"--help": "help", "--version": "version", "--module": "module"}
#: ``-i`` analyses, as upstream names them -> the LLVM pass plugin Triton ships for it.
INSTRUMENTS = {"print-mem-spaces": "libPrintLoadStoreMemSpaces.so"}


class UsageError(Exception):
    """A command line we cannot act on; the message is one line."""


def long_option(name: str) -> str:
    """The long option ``name`` spells, allowing an unambiguous prefix as argparse (and upstream) does."""
    if name in OPTIONS or name in COMMANDS or name in FLAGS:
        return name
    found = {}
    for option in [*OPTIONS, *COMMANDS, *FLAGS]:
        if option.startswith("--") and option.startswith(name):
            found.setdefault(OPTIONS.get(option) or COMMANDS.get(option) or FLAGS[option], option)
    if len(found) == 1:
        return next(iter(found.values()))
    if found:
        raise UsageError(f"ambiguous option {name}: could be {', '.join(sorted(found.values()))}")
    return name


def mode_hint(options: dict) -> str:
    return (" (-m is the backend mode, as in Triton's proton: run a module with --module NAME)"
            if "mode" in options else "")


def parse(argv: list[str]):
    """Split ``argv`` into (options, kind, target, program args).

    Parsing stops at the first word that is not a Proton option, at
    ``--module NAME`` or at ``--``, so the program's own options are never
    taken for ours.
    """
    options: dict[str, str] = {}
    i = 0
    while i < len(argv):
        arg = argv[i]
        if arg == "--":
            i += 1
            break
        if not arg.startswith("-") or arg == "-":
            break
        if arg.startswith("--"):
            name, eq, value = arg.partition("=")
            name = long_option(name)
            command = COMMANDS.get(name)
            if command in ("help", "version"):
                return options, command, None, []
            if name in FLAGS:
                if eq:
                    raise UsageError(f"option {name} takes no value (see {PROG} -h)")
                options[FLAGS[name]] = "1"
                i += 1
                continue
            if name not in OPTIONS and command is None:
                raise UsageError(f"unknown option {arg} (see {PROG} -h; program options go after the script)"
                                 + mode_hint(options))
            if not eq:
                if i + 1 >= len(argv):
                    raise UsageError(f"option {name} needs a value (see {PROG} -h)")
                value = argv[i + 1]
                i += 1
            i += 1
            if command == "module":
                if not value:
                    raise UsageError(f"--module needs a module name, e.g. {PROG} --module my_package.main")
                return options, "module", value, argv[i:]
            options[OPTIONS[name]] = value
            continue
        if arg[:2] == "-h":
            return options, "help", None, []
        if arg[:2] not in OPTIONS:
            raise UsageError(f"unknown option {arg} (see {PROG} -h; program options go after the script)"
                             + mode_hint(options))
        value = arg[2:]  # -nNAME, -n=NAME or -n NAME, as argparse reads them
        if value.startswith("="):
            value = value[1:]
        elif not value:
            if i + 1 >= len(argv):
                raise UsageError(f"option {arg} needs a value (see {PROG} -h)")
            value = argv[i + 1]
            i += 1
        options[OPTIONS[arg[:2]]] = value
        i += 1
    instrument = options.get("instrument")
    if instrument is not None and instrument not in INSTRUMENTS:
        raise UsageError(f"unknown instrument {instrument!r}: choose {', '.join(INSTRUMENTS)}")
    rest = argv[i:]
    if not rest:
        raise UsageError(f"nothing to run: give a script, --module NAME or pytest (see {PROG} -h)"
                         + mode_hint(options))
    target, args = rest[0], rest[1:]
    if os.path.basename(target) == "pytest":  # as upstream: `pytest`, or a path to the pytest command
        return options, "pytest", target, args
    if target in ("plugins", "ctl") and not os.path.isfile(target):
        return options, target, target, args
    if is_command(target):
        return options, "command", target, args
    return options, "script", target, args


def python_shebang(path: str) -> bool:
    try:
        with open(path, "rb") as f:
            first = f.readline(256)
    except OSError:
        return False
    return first.startswith(b"#!") and b"python" in first


def is_command(target: str) -> bool:
    """Whether ``target`` is run as a command (a subprocess whose Python processes are followed) rather than
    as a Python script in this process: a launcher, an executable that is not Python, a name on PATH."""
    from .follow import launchers

    if os.path.exists(target):
        if os.path.isdir(target) or target.endswith((".py", ".pyw", ".pyc", ".pyz")):
            return False
        if os.path.basename(target) in launchers.SCRIPTS:  # torchrun by its path: its agent is no program
            return True
        return os.access(target, os.X_OK) and not python_shebang(target)
    return os.sep not in target and shutil.which(target) is not None


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
                if reg.plugin != record.name:
                    continue
                reason = reg.unavailable_reason()  # a probe that breaks is itself a reason, in one line
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
def safe_path() -> bool:
    """``python -P`` / PYTHONSAFEPATH: python puts no script or working directory on sys.path."""
    return bool(getattr(sys.flags, "safe_path", False))


def launcher_path0() -> str | None:
    """The sys.path entry python added for Proton itself (its script's directory, the cwd under -m), if any."""
    if safe_path() or not sys.path:
        return None
    launcher = os.path.dirname(os.path.realpath(sys.argv[0])) if sys.argv and sys.argv[0] else ""
    return sys.path[0] if sys.path[0] in ("", os.getcwd(), launcher) else None


def set_path0(own: str | None, entry: str | None) -> None:
    """Make ``entry`` the first sys.path entry in place of the one python added for Proton."""
    if own is not None and sys.path and sys.path[0] == own:
        del sys.path[0]
    if entry is not None:
        sys.path.insert(0, entry)


def check_target(kind: str, target: str) -> None:
    """Fail before profiling starts, so a typo writes no empty profile (modules are looked up later)."""
    if kind == "script":
        if not os.path.exists(target):
            raise UsageError(f"no such script: {target}")
        importer = pkgutil.get_importer(os.path.abspath(target))
        if importer is not None and importer.find_spec("__main__") is None:  # a directory or zip file
            raise UsageError(f"{target} has no __main__.py to run: give a script file")
    elif kind == "pytest" and importlib.util.find_spec("pytest") is None:
        raise UsageError("pytest is not installed: pip install pytest")


def find_module(name: str) -> None:
    """Look ``name`` up as ``python -m`` does (its parent packages are imported: they are the program's)."""
    try:
        spec = importlib.util.find_spec(name)
        if spec is not None and spec.submodule_search_locations is not None:  # a package runs its __main__
            if importlib.util.find_spec(f"{name}.__main__") is None:
                raise UsageError(f"{name} is a package without __main__.py: give the module to run")
    except (ImportError, ValueError) as exc:
        raise UsageError(f"cannot find module {name!r}: {exc}") from None
    if spec is None:
        raise UsageError(f"no module named {name!r} (run from the directory holding it, or install it)")


def fresh_main() -> dict:
    """A new ``__main__`` module for the program, as python gives a script (Proton's own is left behind)."""
    module = types.ModuleType("__main__")
    module.__builtins__ = builtins
    sys.modules["__main__"] = module
    return module.__dict__


def run_file(path: str) -> None:
    """Run a script (source or compiled) as ``__main__``."""
    with io.open_code(path) as f:
        code = pkgutil.read_code(f)  # None unless a .pyc
    loader = importlib.machinery.SourcelessFileLoader if code is not None else importlib.machinery.SourceFileLoader
    if code is None:
        with io.open_code(path) as f:
            code = compile(f.read(), path, "exec")
    namespace = fresh_main()
    namespace.update(__file__=path, __cached__=None, __loader__=loader("__main__", path))
    exec(code, namespace)


def run_program(kind: str, target: str, args: list[str], own_path0: str | None) -> int:
    """Run the program the way ``python`` would; return its exit status."""
    if kind == "pytest":
        import pytest

        sys.argv = ["pytest", *args]
        return int(pytest.main(list(args)))
    sys.argv = [target, *args]
    if kind == "module":
        set_path0(own_path0, None if safe_path() else os.getcwd())
        find_module(target)
        fresh_main()
        runpy._run_module_as_main(target)  # what `python -m` itself calls: argv[0] becomes the module's file
        return 0
    path = os.path.join(os.getcwd(), target)  # python's __file__: absolute, not normalised
    if pkgutil.get_importer(path) is None:
        set_path0(own_path0, None if safe_path() else os.path.dirname(os.path.realpath(target)))
        run_file(path)
    else:  # a directory or zip file with __main__.py
        set_path0(own_path0, path)
        fresh_main()
        runpy._run_module_as_main("__main__", alter_argv=False)
    return 0


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


def execute(kind: str, target: str, args: list[str], own_path0: str | None) -> int:
    """Run the program; its errors are reported as python would, and become its exit status."""
    try:
        return run_program(kind, target, args, own_path0)
    except UsageError:
        raise
    except SystemExit as exc:
        return exit_status(exc)
    except KeyboardInterrupt as exc:
        print_program_error(exc)
        return 130
    except BaseException as exc:  # the program's own error
        print_program_error(exc)
        return 1


def instrument_env(name: str) -> dict[str, str]:
    """Upstream's ``-i NAME``: Triton recompiles every kernel through its LLVM pass plugin for NAME."""
    library = INSTRUMENTS[name]
    spec = importlib.util.find_spec("triton")
    if spec is None or not spec.submodule_search_locations:
        raise UsageError(f"-i {name} runs Triton's {library} pass, and Triton is not installed (pip install triton)")
    found = next((p for d in spec.submodule_search_locations for p in pathlib.Path(d).rglob(library)), None)
    if found is None:
        raise UsageError(f"-i {name}: the installed Triton has no {library} (a Triton wheel ships it)")
    return {"TRITON_ALWAYS_COMPILE": "1", "TRITON_DISABLE_LINE_INFO": "0", "LLVM_PASS_PLUGIN_PATH": str(found)}


def instrument_program(name: str, kind: str, target: str, args: list[str]) -> int:
    """Run the program under upstream's instrumentation analysis, without a profiling session (as upstream)."""
    check_target(kind, target)
    os.environ.update(instrument_env(name))
    return execute(kind, target, args, launcher_path0())


def output_name(options: dict) -> str:
    """The profile's name, absolute: the file goes where the command was run even if the program changes directory."""
    from . import config

    name = options.get("name") or config.project_defaults().get("name") or "proton"
    return os.path.abspath(name) if isinstance(name, str) else name


def write_at_end(status: int) -> int:
    """Write the CLI's session after the program; the program's status is kept, a second Ctrl-C is one line."""
    from .exit_flush import finalize_and_say
    from .manager import MANAGER

    outcome = finalize_and_say(MANAGER)
    if outcome is None:
        return status
    return status or (130 if outcome == "interrupted" else 2)


def launcher_files() -> set[str]:
    """Files whose frames sit above the program's: what started this command (``bin/proton-profile``, or
    runpy and ``proton_core/__main__.py`` under ``python -m``) and runpy, through which a module runs."""
    run_code = getattr(runpy, "_run_code", None)
    files = {runpy.__file__, run_code.__code__.co_filename if run_code is not None else runpy.__file__}
    frame = sys._getframe(1)
    while frame is not None:
        files.add(frame.f_code.co_filename)
        frame = frame.f_back
    return files


def python_interpreter(target: str | None) -> bool:
    """Whether the command ``target`` is a Python interpreter (python, python3.12, a virtual environment's)."""
    import re

    path = shutil.which(target) if target and os.sep not in target else target
    return bool(path) and re.fullmatch(r"python[0-9.]*", os.path.basename(path)) is not None


def job_environment(options: dict, kind: str = "script", target: str | None = None) -> None:
    """Set what every process of the job reads: the run id, ranks, schedule, on-demand, and (unless
    ``--no-follow``) the start-up hook with the session's options."""
    from . import follow
    from .distributed import run_id, schedule, selection

    if "ranks" in options:
        selection.parse(options["ranks"])  # a wrong list fails here, in one line, before anything runs
        os.environ[selection.ENV_VAR] = options["ranks"]
    if "schedule" in options and options.get("on_demand"):
        raise UsageError("--schedule and --on-demand both decide when to record: use one of them "
                         "(docs/distributed.md, docs/on-demand.md)")
    if "schedule" in options:
        schedule.parse(options["schedule"])
        os.environ[schedule.ENV_VAR] = options["schedule"]
    if options.get("on_demand"):
        os.environ["PROTON_ON_DEMAND"] = "1"
    if not os.environ.get(run_id.ENV_VAR, "").strip():
        import uuid

        os.environ[run_id.ENV_VAR] = run_id.from_launcher() or f"proton-{uuid.uuid4().hex[:12]}"
    travelling = {**options, "name": output_name(options)}
    if options.get("no_follow"):
        follow.disarm()
        # A Python interpreter is not profiled under --no-follow and would hand the variables to all it starts.
        injection = (follow.plugin_environment(travelling) if kind == "command" and not python_interpreter(target)
                     else {})
        if injection:  # a command without Python is still profiled itself, by injection; what it starts is not
            os.environ.update(injection)
            os.environ[follow.OPTIONS_VAR] = follow.encode(travelling)
    else:
        os.environ.update(follow.child_environment(travelling))
        os.environ.update(follow.plugin_environment(travelling))  # CUDA programs without Python too


def run_command(options: dict, target: str, args: list[str]) -> int:
    """Run a command that is not a Python program (torchrun, srun, mpirun, ...) as a subprocess; its Python
    processes profile themselves.  Its exit status is passed through (128+N for a signal N, as shells say)."""
    if options.get("no_follow"):
        injected = bool(os.environ.get("CUDA_INJECTION64_PATH")) and bool(os.environ.get("PROTON_FOLLOW"))
        what = ("only its own CUDA work is profiled, if it is not Python" if injected
                else "nothing under it is profiled")
        print(f"proton: --no-follow: {target} runs as a command: {what}", file=sys.stderr)
    try:
        child = subprocess.Popen([target, *args])
    except OSError as exc:
        raise UsageError(f"cannot run {target}: {exc.strerror or exc}") from None
    forwarded = {}

    def forward(signum, frame):
        child.send_signal(signum)

    for name in ("SIGTERM", "SIGHUP", "SIGINT"):  # Ctrl-C reaches the child from the terminal too; once is enough
        signum = getattr(signal, name, None)
        if signum is not None:
            forwarded[signum] = signal.signal(signum, forward if name != "SIGINT" else signal.SIG_IGN)
    try:
        status = child.wait()
    finally:
        for signum, previous in forwarded.items():
            signal.signal(signum, previous)
    return 128 - status if status < 0 else status


def profile_program(options: dict, kind: str, target: str, args: list[str]) -> int:
    from .contexts.python import launched_by
    from .distributed import selection
    from .follow import after_start
    from .manager import MANAGER

    try:
        check_target(kind, target)
    except UsageError as exc:
        raise UsageError(f"{exc}{mode_hint(options)}") from None
    job_environment(options, kind, target)
    if kind == "command":
        return run_command(options, target, args)
    own_path0 = launcher_path0()
    if not selection.selected():  # a rank left out by --ranks: the program runs unprofiled
        return execute(kind, target, args, own_path0)
    with launched_by(launcher_files()):  # python-context paths begin at the program, not at us
        sid = MANAGER.start(output_name(options), context=options.get("context", "shadow"),
                            data=options.get("data", "tree"), backend=options.get("backend"), mode=options.get("mode"),
                            hook=options.get("hook"), output_format=options.get("output_format"))
        MANAGER.cli_owned = True
        after_start.run(sid)
        status = 0
        try:
            status = execute(kind, target, args, own_path0)
        except UsageError:  # the module was not found: write nothing
            MANAGER.reset()
            raise
        except KeyboardInterrupt:  # Ctrl-C between the program's end and the write
            status = 130
        finally:
            MANAGER.cli_owned = False
        return write_at_end(status)


def control_command(args: list[str]) -> int:
    """``proton-profile ctl ...``: on-demand control of a running job (:mod:`proton_core.control`)."""
    if importlib.util.find_spec("proton_core.control.cli") is None:
        raise UsageError("ctl needs proton_core.control, which this installation lacks")
    from .control import cli as control_cli

    return int(control_cli.main(list(args)) or 0)


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``proton-profile``; returns the exit status (the program's, or 2 for our errors)."""
    argv = sys.argv[1:] if argv is None else list(argv)
    try:
        options, kind, target, args = parse(argv)
        if kind == "help":
            print(USAGE, end="")
            return 0
        if kind == "version":
            print(f"{PROG} {__version__}")
            return 0
        if kind == "plugins":
            return show_plugins()
        if kind == "ctl":
            return control_command(args)
        if "instrument" in options:
            return instrument_program(options["instrument"], kind, target, args)
        return profile_program(options, kind, target, args)
    except (UsageError, ProtonError) as exc:
        print(f"proton: {str(exc).splitlines()[0] if str(exc) else type(exc).__name__}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
