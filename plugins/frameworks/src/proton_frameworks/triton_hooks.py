"""One manager for Proton's entries in Triton's hooks (launch enter/exit, kernel load end).

Several plugins hook Triton at once: the ``hook="triton"`` context source (the launch's op, from
``launch_metadata``) and the instrumentation backend (its profile buffer, per launch and per loaded
kernel). Each installs through :data:`MANAGER` with a priority, as upstream Proton's hook manager
orders its hooks: at a launch the entry of higher priority enters first and exits last, so the
launch-metadata op (:data:`LAUNCH_METADATA_PRIORITY`, upstream's launch hook) is open around what
the instrumentation backend (:data:`INSTRUMENTATION_PRIORITY`) does. Entries of equal priority keep
the order they were installed in.

Where Triton keeps its hooks, by version:

* 3.6+: ``knobs.runtime.*_hook`` are ``HookChain`` objects (``add``/``remove``/``calls``; the exit
  chain calls in reverse). Our callables go into the chain itself, among themselves in priority
  order, so Triton calls a native hook with no Python frame of ours in between; hooks others added
  keep their places.
* 3.3-3.5: ``knobs.runtime.launch_*_hook`` hold one callable or None; 3.0-3.2: the same as class
  attributes of ``CompiledKernel``. A slot that was empty gets our one callable as it is; otherwise
  one composite callable runs what the slot held before outermost (first at enter, last at exit)
  and ours inside it in priority order.

Entries are counted per user: installing again with the same hooks adds a count, and the last
:meth:`Installed.release` of a user removes its entries. When the last of ours goes, each hook holds
exactly what it held before we came; a single-callable slot someone replaced since keeps theirs.
"""

from __future__ import annotations

import itertools
import threading

#: upstream Proton's launch hook: the op named by ``launch_metadata`` (hook="triton")
LAUNCH_METADATA_PRIORITY = 100
#: upstream Proton's instrumentation hook: the profile buffer of each launch (backend="instrumentation")
INSTRUMENTATION_PRIORITY = 0

#: hooks that run after the launch: in reverse priority order, outermost last
_EXIT_HOOKS = frozenset({"launch_exit_hook"})


def is_chain(value) -> bool:
    """Whether a hook attribute is a Triton 3.6+ ``HookChain`` (many callables) rather than one callable."""
    return hasattr(value, "add") and hasattr(value, "remove") and hasattr(value, "calls")


class _Calls:
    """A single-callable slot's composite: each callable in turn (Triton 3.0-3.5)."""

    __slots__ = ("calls",)

    def __init__(self, calls) -> None:
        self.calls = tuple(calls)

    def __call__(self, *args) -> None:
        for call in self.calls:
            call(*args)


class _ChainSlot:
    """Our callables placed in a ``HookChain``, among themselves by priority, others' hooks untouched."""

    def __init__(self, chain) -> None:
        self.chain = chain
        self.placed: list = []  # ours in the chain, in priority order

    def sync(self, wanted: list) -> None:
        chain = self.chain
        for fn in [fn for fn in self.placed if fn not in wanted]:
            chain.remove(fn)
        self.placed = [fn for fn in self.placed if fn in wanted]
        for i, fn in enumerate(wanted):
            if fn in self.placed:
                continue
            after = next((f for f in wanted[i + 1:] if f in self.placed), None)
            calls = chain.calls
            if after is not None and isinstance(calls, list) and after in calls:
                calls.insert(calls.index(after), fn)
            else:
                chain.add(fn)
            self.placed.insert(self.placed.index(after) if after is not None else len(self.placed), fn)
        if self.placed != [fn for fn in chain.calls if fn in self.placed]:  # a chain without an editable list
            for fn in self.placed:
                chain.remove(fn)
            for fn in self.placed:
                chain.add(fn)

    def empty(self) -> bool:
        return not self.placed


class _AttrSlot:
    """A hook attribute holding one callable or None: ours, or a composite around what it held before."""

    def __init__(self, owner, name: str) -> None:
        self.owner, self.name = owner, name
        self.exit = name in _EXIT_HOOKS
        self.previous = None  # what the slot held when ours came
        self.installed = None  # what we set, while the slot still holds it

    def sync(self, wanted: list) -> None:
        current = getattr(self.owner, self.name)
        if self.installed is not None and current is not self.installed:
            self.installed = self.previous = None  # replaced since: theirs stays, ours went with it
        if not wanted:
            if self.installed is not None:
                setattr(self.owner, self.name, self.previous)
            self.installed = self.previous = None
            return
        if self.installed is None:
            self.previous = current
        if self.previous is None and len(wanted) == 1:
            new = wanted[0]  # alone in an empty slot: Triton calls it directly
        elif self.exit:  # ours innermost first, what was there last
            new = _Calls(list(reversed(wanted)) + ([self.previous] if self.previous is not None else []))
        else:
            new = _Calls(([self.previous] if self.previous is not None else []) + list(wanted))
        setattr(self.owner, self.name, new)
        self.installed = new

    def empty(self) -> bool:
        return self.installed is None


class _Entry:
    __slots__ = ("user", "priority", "hooks", "count", "order")

    def __init__(self, user: str, priority: int, hooks: dict, order: int) -> None:
        self.user, self.priority, self.hooks, self.count, self.order = user, priority, hooks, 0, order


class _Owner:
    """The entries of ours in one hook owner (``knobs.runtime``, ``CompiledKernel``, a test's stand-in)."""

    def __init__(self, owner) -> None:
        self.owner = owner
        self.entries: dict = {}  # user -> _Entry
        self.slots: dict = {}  # hook name -> _ChainSlot | _AttrSlot, while ours are in it

    def wanted(self, name: str) -> list:
        """Our callables for hook ``name``, highest priority first (earlier install first among equals)."""
        entries = sorted(self.entries.values(), key=lambda e: (-e.priority, e.order))
        return [e.hooks[name] for e in entries if name in e.hooks]

    def sync(self, names) -> None:
        for name in names:
            slot = self.slots.get(name)
            wanted = self.wanted(name)
            if slot is None:
                if not wanted:
                    continue
                current = getattr(self.owner, name)
                slot = self.slots[name] = _ChainSlot(current) if is_chain(current) else _AttrSlot(self.owner, name)
            slot.sync(wanted)
            if slot.empty():
                del self.slots[name]


class Installed:
    """One user's install; :meth:`release` undoes it once (the user's last release removes its entries)."""

    def __init__(self, manager: "TritonHooks", owner, user: str) -> None:
        self.manager, self.owner, self.user = manager, owner, user
        self.released = False

    def release(self) -> None:
        if not self.released:
            self.released = True
            self.manager.release(self.owner, self.user)


class TritonHooks:
    """Installs and removes Proton's entries in Triton's hooks, ordered by priority, counted per user."""

    def __init__(self) -> None:
        self._lock = threading.RLock()
        self._owners: dict = {}  # id(owner) -> _Owner
        self._order = itertools.count()

    def install(self, owner, user: str, priority: int, hooks: dict) -> Installed:
        """Put ``hooks`` ({hook attribute name: callable}) of ``user`` into ``owner``'s hooks.

        A user already installed there must ask for the same hooks and priority (its count grows).
        Atomic: where one hook cannot take ours (``owner`` lacks it), nothing changes and the error
        passes through."""
        hooks = dict(hooks)
        with self._lock:
            state = self._owners.get(id(owner))
            if state is None:
                state = self._owners[id(owner)] = _Owner(owner)
            entry = state.entries.get(user)
            if entry is not None:
                if entry.priority != priority or entry.hooks != hooks:
                    raise ValueError(f"Triton hooks of {user!r} are installed already with other callables or "
                                     f"priority ({entry.priority}); release them first")
                entry.count += 1
                return Installed(self, owner, user)
            missing = [name for name in hooks if not hasattr(owner, name)]
            if missing:
                if not state.entries:
                    del self._owners[id(owner)]
                raise AttributeError(f"{owner!r} has no Triton hook {', '.join(missing)}")
            entry = state.entries[user] = _Entry(user, priority, hooks, next(self._order))
            entry.count = 1
            try:
                state.sync(hooks)
            except BaseException:
                del state.entries[user]
                state.sync(hooks)
                if not state.entries:
                    del self._owners[id(owner)]
                raise
            return Installed(self, owner, user)

    def release(self, owner, user: str) -> None:
        """One count of ``user`` in ``owner`` fewer; at none its entries leave the hooks."""
        with self._lock:
            state = self._owners.get(id(owner))
            entry = state.entries.get(user) if state is not None else None
            if entry is None:
                return
            entry.count -= 1
            if entry.count > 0:
                return
            del state.entries[user]
            state.sync(entry.hooks)
            if not state.entries:
                del self._owners[id(owner)]

    def users(self, owner) -> dict:
        """{user: count} installed in ``owner`` now."""
        with self._lock:
            state = self._owners.get(id(owner))
            return {e.user: e.count for e in state.entries.values()} if state is not None else {}


#: the process's one manager: every plugin installs Triton hooks through it
MANAGER = TritonHooks()
