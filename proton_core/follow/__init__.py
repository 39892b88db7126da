"""Following a job's processes: every Python process started under ``proton-profile`` profiles itself.

The command line cannot reach into processes a launcher starts (torchrun's workers, ``srun``'s tasks,
``mpirun``'s ranks, a program's ``subprocess`` children), so it leaves them a start-up hook through the
environment, the way coverage.py follows subprocesses:

* :data:`OPTIONS_VAR` (``PROTON_FOLLOW``): the session's options as one JSON object;
* the directory :data:`STARTUP_DIR` first on ``PYTHONPATH``: its ``sitecustomize`` runs in every Python
  interpreter that starts, chains to the ``sitecustomize`` it hides, and, where the interpreter runs a
  user program (not a launcher such as torchrun's agent, nor ``proton-profile`` itself), starts the
  session (:mod:`proton_core.follow.child`) and writes it at exit.

Decision 0251 says why a ``sitecustomize`` and not a ``.pth`` file.
"""

from __future__ import annotations

import json
import os

#: The session options every followed process starts with (JSON object of ``MANAGER.start`` keywords).
OPTIONS_VAR = "PROTON_FOLLOW"
#: The directory holding the start-up hook's ``sitecustomize.py``.
STARTUP_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "startup")
#: The options that travel (``MANAGER.start``'s keywords); the name is made absolute first.
KEYS = ("name", "context", "data", "backend", "mode", "hook", "output_format")


def encode(options: dict) -> str:
    return json.dumps({k: options[k] for k in KEYS if options.get(k) is not None}, sort_keys=True)


def decode(text: str) -> dict | None:
    """The options ``text`` carries, or None where it is not a JSON object of known keys."""
    try:
        value = json.loads(text)
    except ValueError:
        return None
    if not isinstance(value, dict) or any(k not in KEYS for k in value):
        return None
    return value


def child_environment(options: dict, env: dict | None = None) -> dict:
    """``env`` (default: this process's) with the hook armed for ``options``: children profile themselves."""
    env = dict(os.environ if env is None else env)
    env[OPTIONS_VAR] = encode(options)
    paths = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p and p != STARTUP_DIR]
    env["PYTHONPATH"] = os.pathsep.join([STARTUP_DIR, *paths])
    return env


def disarm(env: dict | None = None) -> None:
    """Remove the hook from ``env`` (``--no-follow``; a child that must not follow on)."""
    env = os.environ if env is None else env
    env.pop(OPTIONS_VAR, None)
    paths = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p and p != STARTUP_DIR]
    if paths:
        env["PYTHONPATH"] = os.pathsep.join(paths)
    else:
        env.pop("PYTHONPATH", None)


def plugin_environment(options: dict) -> dict[str, str]:
    """What plugins set for the job's processes that are not Python (the cupti plugin: its injection library,
    so a CUDA program without Python profiles itself too); {} where no plugin can."""
    from ..log import write_stderr
    from ..plugins import get_plugins

    found: dict[str, str] = {}

    def setenv(name: str, value: str) -> None:
        if name in found and found[name] != str(value):
            raise ValueError(f"two plugins set {name} ({found[name]!r} and {value!r})")
        found[name] = str(value)

    try:
        get_plugins().hook.proton_follow_environment(options=dict(options), setenv=setenv)
    except Exception as exc:  # a plugin's failure costs the injection, never the run
        write_stderr(f"proton: programs without Python are not profiled: {type(exc).__name__}: {exc}\n")
        return {}
    return found
