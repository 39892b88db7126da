"""Context ids: interned call paths of scopes, states and ops, per thread.

The core names every distinct path of user annotations once, with a small
integer, and tells the backends the id current on each thread whenever it
changes.  A backend stores that integer per launch; the names are looked up
only when a profile is built.  A *context source* is a plugin that shapes
paths: the base sources (``shadow``, ``python``) decide how a kernel's path is
spelled; layered sources (``triton``, ``torch``, ``jax``) add to it.
"""

from __future__ import annotations

import os
import sys
import threading

ROOT_ID = 0
SCOPE, STATE, OP = "scope", "state", "op"
#: The scope a Triton hook opens around launch_metadata, upstream's name for it (its viewer and ours hide it).
METADATA_SCOPE = "__proton_launch_metadata"


class ContextTree:
    """Interns (parent id, kind, name) -> id; ids are never reused."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._index: dict[tuple[int, str, str], int] = {}
        self._entries: list[tuple[int, str, str]] = [(ROOT_ID, "", "")]
        self._paths: dict[int, tuple] = {}
        #: (first id, resolve) for ids a plugin interns natively, without the GIL:
        #: resolve(id) -> (parent id, name) of a scope, or None.
        self._foreign: list[tuple[int, object]] = []
        self._owners: dict[str, int] = {}  # reserve(): owner -> first id of its range

    def register_foreign(self, first_id: int, resolve) -> None:
        """Ids from ``first_id`` up are a plugin's own scopes, named by ``resolve``."""
        if first_id <= len(self._entries) + (1 << 32):
            raise ValueError(f"foreign context ids must start far above the core's, not at {first_id}")
        self._foreign = sorted([e for e in self._foreign if e[0] != first_id] + [(first_id, resolve)],
                               key=lambda e: -e[0])

    #: Each plugin's reserved range of context ids is this wide (scope_api.h's reserve_ids).
    RANGE = 1 << 40

    def reserve(self, owner: str, resolve) -> int:
        """The first id of the range of :attr:`RANGE` ids that ``owner`` interns itself; the same owner
        gets the same range again (its ``resolve`` replaced).  Ranges start at 2**40, far above the core's."""
        with self._lock:
            first = self._owners.get(owner)
            if first is None:
                taken = {f for f, _ in self._foreign}
                first = self.RANGE
                while first in taken:
                    first += self.RANGE
                self._owners[owner] = first
        self.register_foreign(first, resolve)
        return first

    def entry(self, context_id: int) -> tuple[int, str, str]:
        """(parent id, kind, name) of an id: the core's own, else the plugin's that interned it."""
        return self._entry(context_id)

    def _entry(self, context_id: int) -> tuple[int, str, str]:
        """(parent, kind, name) of an id: the core's own, else the plugin's that interned it."""
        if context_id < len(self._entries):
            return self._entries[context_id]
        for first, resolve in self._foreign:
            if context_id >= first:
                found = resolve(context_id)
                if found is not None:
                    return (found[0], SCOPE, found[1])
                break
        return (ROOT_ID, SCOPE, f"<unknown context {context_id}>")

    def child(self, parent: int, kind: str, name: str) -> int:
        key = (parent, kind, name)
        found = self._index.get(key)
        if found is not None:
            return found
        with self._lock:
            found = self._index.get(key)
            if found is None:
                found = len(self._entries)
                self._entries.append(key)
                self._index[key] = found
        return found

    #: Paths up to this long are kept once computed; deeper ones are walked again when asked (a cache of every
    #: path of a deep nest would hold depth**2 / 2 elements: 100 000 nested scopes, 5e9).
    CACHED_DEPTH = 64

    def path(self, context_id: int) -> list[tuple[str, str]]:
        """The (kind, name) elements from the outermost to ``context_id`` (short ones cached: ids never change)."""
        start = context_id
        cached = self._paths.get(context_id)
        if cached is not None:
            return list(cached)
        out = []
        while context_id != ROOT_ID:
            parent, kind, name = self._entry(context_id)
            out.append((kind, name))
            context_id = parent
        out.reverse()
        if len(out) <= self.CACHED_DEPTH:
            self._paths[start] = tuple(out)
        return out


TREE = ContextTree()


#: Callables, run with the GIL before the calling thread's innermost context is read to open a scope,
#: state or op of the core's under it (plugin_api.register_settler). A plugin that keeps frames of its own
#: on top of the core's stack (the torch plugin's nn.Module calls, kept natively while nothing else opens)
#: turns them into the core's scopes there, so what opens nests under them. Empty: nothing to do.
SETTLERS: list = []


def settle() -> None:
    """Run the settlers (the calling thread's frames kept by plugins become the core's scopes)."""
    for settler in SETTLERS:
        settler()


#: thread ident -> that thread's ThreadContext attributes (its dict), for repairs made from another thread
#: (a scope exited on a thread it was not entered on: unbalanced.exited_elsewhere).
_STATES: dict[int, dict] = {}


def thread_states() -> list[dict]:
    """The attribute dicts of the threads that used scopes and still run."""
    return list(_STATES.values())


class ThreadContext(threading.local):
    """One thread's annotations: the scope stack, its state and its op."""

    def __init__(self) -> None:
        if len(_STATES) >= 64:  # forget threads that ended
            alive = {t.ident for t in threading.enumerate()}
            for ident in [i for i in _STATES if i not in alive]:
                _STATES.pop(ident, None)
        _STATES[threading.get_ident()] = self.__dict__
        self.stack: list[tuple[int, str, int]] = []  # (context id, scope name, monotonic start ns)
        self.state: str | None = None
        self.op: str | None = None
        self.current = ROOT_ID
        #: What each open ``scope``/``state`` object must undo on exit, innermost
        #: last: (object, pushed a scope / the state it replaced, cpu start ns).
        #: One list per thread rather than a ``threading.local`` per object: that
        #: cost more than the whole scope.
        self.opened: list[tuple[object, object, int]] = []

    def recompute(self) -> int:
        if SETTLERS:
            settle()
        stack = self.stack
        ctx = stack[-1][0] if stack else ROOT_ID
        state = self.state
        if state is not None:
            ctx = TREE.child(ctx, STATE, state)
        op = self.op
        if op is not None:
            ctx = TREE.child(ctx, OP, op)
        self.current = ctx
        return ctx


THREAD = ThreadContext()


def reset_thread() -> None:
    """Forget the calling thread's open scopes, state and op (tests)."""
    THREAD.stack.clear()
    THREAD.opened.clear()
    THREAD.state = None
    THREAD.op = None
    THREAD.recompute()


# ------------------------------------------------------------ python frames ----
_internal_dirs: list[str] = [os.path.dirname(os.path.abspath(__file__)) + os.sep]
_internal_files: set[str] = set()


def register_internal_path(path: str) -> None:
    """Hide frames of ``path`` (a file, or a directory ending in os.sep) from call paths.

    Plugins call this for their own Python so that the python context shows
    the user's frames, never the profiler's.
    """
    path = os.path.abspath(path)
    _verdicts.clear()
    if os.path.isdir(path):
        _internal_dirs.append(path.rstrip(os.sep) + os.sep)
    else:
        _internal_files.add(path)


_verdicts: dict[str, bool] = {}


def internal_paths() -> tuple[list[str], list[str]]:
    """(directories ending in os.sep, files) whose frames are hidden, for backends that filter natively."""
    return list(_internal_dirs), sorted(_internal_files)


def is_internal(filename: str) -> bool:
    """Whether frames of ``filename`` belong to the profiler (cached per file name)."""
    verdict = _verdicts.get(filename)
    if verdict is None:
        path = os.path.abspath(filename)  # normalises "a/../b" and relative names
        verdict = path in _internal_files or any(path.startswith(d) for d in _internal_dirs)
        _verdicts[filename] = verdict
    return verdict


def frame_name(filename: str, function: str, line: int) -> str:
    """Upstream's frame spelling (Triton 3.6 on), ``file:line@function``."""
    return f"{filename}:{line}@{function}"


def capture_frames(start=None) -> list[str]:
    """The calling thread's Python frames, outermost first, without internal ones."""
    frame = start if start is not None else sys._getframe(1)
    names = []
    while frame is not None:
        code = frame.f_code
        filename = code.co_filename
        if not is_internal(filename):
            names.append(frame_name(filename, code.co_name, frame.f_lineno))
        frame = frame.f_back
    names.reverse()
    return names


# ---------------------------------------------------------- context sources ----
class ContextSource:
    """A plugin that shapes call paths.

    Base sources implement ``spell`` (how a backend node becomes names);
    layered sources usually only implement ``install``/``uninstall`` (e.g. a
    launch hook that enters ops) and, optionally, ``rewrite`` (rename or
    re-parent kernels when the profile is built, as the jax source does).
    """

    name = ""
    #: Whether the source needs Python frames captured at each launch.
    python_frames = False

    def install(self, session) -> None:
        """Called when a session using this source starts."""

    def uninstall(self, session) -> None:
        """Called when that session is finalized."""

    def rewrite(self, path: tuple[str, ...], kernel: str) -> tuple:
        """Return the (path, kernel name) a kernel record is filed under; a third item, if given,
        is ``[(metric name, number)]`` set on the kernel's node (properties: ``name (pty)``)."""
        return path, kernel


# --------------------------------------------------------- upstream's depth ----
#: The open sessions' base contexts, {session id: "shadow" | "python" | ...}: set by the package
#: (proton_core/__init__), since the manager that holds the sessions sits above this module.
open_contexts = dict


def depth(session: int | None = 0) -> int | None:
    """How deep the calling thread's context is in ``session``: upstream's ``proton.context.depth``.

    The number of scopes open on this thread for a ``shadow`` session, of Python frames (the profiler's
    own left out) for a ``python`` one; None while no session is open (profiling off, as upstream).
    An id no open session has is an error.
    """
    contexts = open_contexts()
    if not contexts:
        return None
    if session not in contexts:
        from .errors import ProtonError

        known = ", ".join(str(k) for k in contexts)
        raise ProtonError(f"Session has not been initialized: {session} "
                          f"(no session {session} is open; open sessions: {known})")
    if SETTLERS:
        settle()
    if contexts[session] == "python":
        return len(capture_frames(sys._getframe(1)))
    return len(THREAD.stack)
