"""Which Python processes are launchers, not user programs: they run the job but must not be profiled.

Read from ``sys.orig_argv`` (the interpreter's own command line) before anything else runs, so this
module uses the standard library only: the start-up hook loads it by path, without importing
``proton_core``, and a launcher pays nothing more.  torchrun's agent, ``proton-profile`` itself (which
starts its own session) and pip are launchers: the processes they start are followed.  The bookkeeping
processes of multiprocessing and torch's compile workers are helpers: neither they nor anything they
start is profiled.  Everything else that runs a script, a module or ``-c`` code is a user program.
"""

from __future__ import annotations

import os

#: Console scripts (file names) that start other processes and do no work worth profiling.
SCRIPTS = frozenset({"torchrun", "proton-profile", "proton", "proton-view", "pip", "pip3", "accelerate",
                     "deepspeed", "mpirun", "mpiexec", "srun"})
#: Modules run with ``-m`` that are launchers.
MODULES = frozenset({"torch.distributed.run", "torch.distributed.launch", "proton_core", "proton_core.cli",
                     "pip", "accelerate.commands.launch", "deepspeed.launcher.runner"})
#: Helpers, whose whole process tree is left alone: modules, script paths (their ending), ``-c`` code
#: (multiprocessing's bookkeeping; its ``spawn_main`` workers are user code).
HELPER_MODULES = frozenset({"torch._inductor.compile_worker", "torch._inductor.compile_worker.__main__"})
HELPER_SCRIPTS = ("torch/_inductor/compile_worker/__main__.py",)
CODE = ("multiprocessing.resource_tracker", "multiprocessing.forkserver", "multiprocessing.semaphore_tracker")
#: Interpreter options that take a value as the next word.
_WITH_VALUE = frozenset({"-W", "-X", "--check-hash-based-pycs"})


def program(argv: list[str]) -> tuple[str, str]:
    """(kind, target) an interpreter command line runs: ("module", name), ("code", text), ("script", path)
    or ("interactive", "")."""
    i = 1
    while i < len(argv):
        arg = argv[i]
        if arg == "-m" or arg == "-c":
            return ("module" if arg == "-m" else "code"), (argv[i + 1] if i + 1 < len(argv) else "")
        if arg.startswith("-m") and len(arg) > 2:
            return "module", arg[2:]
        if arg.startswith("-c") and len(arg) > 2:
            return "code", arg[2:]
        if arg == "-" or not arg.startswith("-"):
            return ("script", arg) if arg != "-" else ("interactive", "")
        if arg in _WITH_VALUE:
            i += 1
        i += 1
    return "interactive", ""


def is_helper(argv: list[str]) -> bool:
    """Whether ``argv`` runs a helper process: not profiled, and its children not followed."""
    kind, target = program(argv)
    if kind == "module":
        return target in HELPER_MODULES
    if kind == "code":
        return any(name in target for name in CODE)
    if kind == "script":
        return target.replace(os.sep, "/").endswith(HELPER_SCRIPTS)
    return False


def is_launcher(argv: list[str]) -> bool:
    """Whether the interpreter started as ``argv`` runs a launcher or a helper (never profiled) rather than
    user code."""
    kind, target = program(argv)
    if kind == "module" and target in MODULES:
        return True
    if kind == "script" and os.path.basename(target) in SCRIPTS:
        return True
    return is_helper(argv)
