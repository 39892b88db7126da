"""Proton's start-up hook: a process started under ``proton-profile`` profiles itself (proton_core.follow).

Python imports ``sitecustomize`` at start-up from the first directory on ``sys.path`` holding one; this
directory is put first on ``PYTHONPATH`` by ``proton-profile``.  It first runs the ``sitecustomize``
it hides (a site's or a virtual environment's), then, where ``PROTON_FOLLOW`` is set and the interpreter
runs a user program, starts the session.  Nothing here may stop the program: a failure is one line.
"""

import importlib.machinery
import importlib.util
import os
import sys

_HERE = os.path.dirname(os.path.abspath(__file__))


def _chain() -> None:
    """Run the ``sitecustomize`` this one hides, as Python would have without us."""
    others = [p for p in sys.path if os.path.abspath(p or os.curdir) != _HERE]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", others)
    if spec is None or spec.loader is None:
        return
    module = importlib.util.module_from_spec(spec)
    sys.modules["sitecustomize"] = module
    spec.loader.exec_module(module)


def _launcher() -> bool:
    """Whether this interpreter runs a launcher or a helper; a helper's children are not followed either."""
    path = os.path.join(os.path.dirname(_HERE), "launchers.py")
    spec = importlib.util.spec_from_file_location("_proton_follow_launchers", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    argv = list(getattr(sys, "orig_argv", sys.argv))
    if module.is_helper(argv):
        os.environ.pop("PROTON_FOLLOW", None)
        return True
    return module.is_launcher(argv)


def _follow() -> None:
    if os.environ.get("PROTON_INJECT_BOOTING"):  # the injection library starts Python in a program: it starts the session
        return
    if not os.environ.get("PROTON_FOLLOW") or _launcher():
        return
    from proton_core.follow import child

    child.start_from_environment()


def _start_up() -> None:
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != _HERE]  # the program's path, unchanged
    try:
        _chain()
    finally:
        try:
            _follow()
        except Exception as exc:  # never the program's problem
            print(f"proton: could not profile this process ({type(exc).__name__}: {exc}); it runs unprofiled",
                  file=sys.stderr)


if __name__ == "sitecustomize":  # at interpreter start-up only, not when imported as proton_core.follow...
    _start_up()
