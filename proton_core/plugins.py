"""The plugin manager: in-tree defaults and entry-point plugins, one path.

Built-in sinks, contexts and the host backend are listed in DEFAULT_PLUGINS
and registered exactly like third-party plugins from the entry-point group
``proton``.  Loading happens on first use, not at import.  Each plugin's
registration hooks are called through pluggy, for that plugin alone, into a
:class:`~proton_core.registry.Staging`: a plugin whose hook raises or breaks
the contract is recorded as failed with its reason (``proton-profile plugins`` shows
it), keeps nothing it registered, and never breaks ``import proton_core``.

Environment: ``PROTON_DISABLE_PLUGINS=a,b`` blocks plugins by name (except
the ESSENTIAL built-ins); ``PROTON_PLUGINS_AUTOLOAD=0`` skips entry-point plugins.
"""

from __future__ import annotations

import functools
import importlib
import os
import threading
from dataclasses import dataclass, field
from typing import Any, Callable
from importlib import metadata

import pluggy

from . import hookspecs, log
from .errors import PluginError
from .registry import BackendEntry, ContextEntry, Registry, SinkEntry, Staging

hookimpl = pluggy.HookimplMarker("proton")

ENTRY_POINT_GROUP = "proton"
CORE_DISTRIBUTION = "proton-profiler"

DEFAULT_PLUGINS = (
    "proton_core.sinks.hatchet",
    "proton_core.sinks.chrome_trace",
    "proton_core.sinks.pprof",
    "proton_core.backends.host",
    "proton_core.contexts.shadow",
    "proton_core.contexts.python",
    "proton_core.contexts.native",
)
#: Built-ins every session needs (the fallback backend, the base contexts, the default format).
ESSENTIAL = frozenset({"host", "shadow", "python", "hatchet"})

#: (hook name, registry kind), in the order a plugin's hooks are called.
REGISTRATION_HOOKS = (
    ("proton_register_backends", "backend"),
    ("proton_register_contexts", "context"),
    ("proton_register_sinks", "sink"),
)


@dataclass
class PluginRecord:
    """What ``proton-profile plugins`` shows for one plugin (a failed one too)."""

    name: str
    distribution: str = CORE_DISTRIBUTION
    version: str = ""
    kinds: list[str] = field(default_factory=list)
    status: str = "loaded"  # loaded | disabled (...) | failed: <reason>

    @property
    def loaded(self) -> bool:
        return self.status == "loaded"


class Plugins:
    """All registries, filled once, lazily and thread-safely."""

    def __init__(self) -> None:
        self.pm = pluggy.PluginManager("proton")
        self.pm.add_hookspecs(hookspecs)
        #: Every plugin seen, in load order; a name appears twice only when a second plugin failed on it.
        self.records: list[PluginRecord] = []
        self.backends: Registry[BackendEntry] = Registry("backend")
        self.contexts: Registry[ContextEntry] = Registry("context")
        self.sinks: Registry[SinkEntry] = Registry("sink")
        self._loaded = False
        self._lock = threading.RLock()

    @property
    def registries(self) -> dict[str, Registry[Any]]:
        return {"backend": self.backends, "context": self.contexts, "sink": self.sinks}

    def record(self, name: str) -> PluginRecord | None:
        """The record of the plugin that owns ``name``: the first one seen that did not fail, else the last."""
        named = [r for r in self.records if r.name == name]
        return next((r for r in named if not r.status.startswith("failed")), named[-1] if named else None)

    # ------------------------------------------------------------ loading ----
    def load(self) -> "Plugins":
        if self._loaded:
            return self
        with self._lock:
            if self._loaded:
                return self
            disabled = self._disabled()
            version = _version(CORE_DISTRIBUTION)
            for module_name in DEFAULT_PLUGINS:
                short = module_name.rsplit(".", 1)[-1]
                self._add(short, functools.partial(importlib.import_module, module_name), CORE_DISTRIBUTION, version,
                          disabled)
            if os.environ.get("PROTON_PLUGINS_AUTOLOAD", "1").strip().lower() not in ("0", "false", "no", "off"):
                for ep in _entry_points():
                    dist = ep.dist.name if ep.dist else "?"
                    self._add(ep.name, ep.load, dist, ep.dist.version if ep.dist else "", disabled)
            self._loaded = True
        return self

    @staticmethod
    def _disabled() -> set[str]:
        names = {n.strip() for n in os.environ.get("PROTON_DISABLE_PLUGINS", "").split(",") if n.strip()}
        kept = sorted(names & ESSENTIAL)
        if kept:
            log.warn(f"PROTON_DISABLE_PLUGINS cannot disable {', '.join(kept)}: built-ins every session needs; "
                     "they stay enabled")
        return names - ESSENTIAL

    def _add(self, name: str, loader: Callable[[], object], dist: str, version: str,
             disabled: set[str]) -> PluginRecord:
        record = PluginRecord(name, dist, version)
        owner = self.record(name)
        self.records.append(record)
        if owner is not None and not owner.status.startswith("failed"):
            record.status = (f"failed: the plugin name {name!r} is taken by {owner.distribution} "
                             f"{owner.version}".rstrip() + "; rename this plugin's entry point")
            return record
        if name in disabled:
            record.status = "disabled (PROTON_DISABLE_PLUGINS)"
            self.pm.set_blocked(name)
            return record
        try:
            self.pm.register(loader(), name=name)
            record.kinds = self._collect(name)
        except Exception as exc:  # a broken plugin must never break the core
            lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
            record.status = f"failed: {type(exc).__name__}: {'; '.join(lines)}"
            if self.pm.get_plugin(name) is not None:
                self.pm.unregister(name=name)
        return record

    def _collect(self, name: str) -> list[str]:
        """Call ``name``'s registration hooks through pluggy and publish them all, or raise and keep none."""
        plugin = self.pm.get_plugin(name)
        unknown = sorted(c.name for c in self.pm.get_hookcallers(plugin) or () if c.spec is None)
        if unknown:
            raise PluginError(f"plugin {name!r} implements {', '.join(unknown)}, which is not a Proton hook "
                              "(see proton_core.hookspecs)")
        others = [p for p in self.pm.get_plugins() if p is not plugin]
        staging = Staging(name, self.registries)
        for hook_name, kind in REGISTRATION_HOOKS:
            caller = self.pm.subset_hook_caller(hook_name, remove_plugins=others)
            caller(register=staging.register_function(kind))
        return staging.commit() or ["lifecycle"]

    def register(self, module: object, name: str | None = None, distribution: str = "(runtime)") -> None:
        """Register a plugin object at run time (tests, notebooks); raise PluginError if it fails."""
        self.load()
        name = name or str(getattr(module, "__name__", repr(module)))
        with self._lock:
            record = self._add(name, lambda: module, distribution, "", set())
        if not record.loaded:
            raise PluginError(f"plugin {name!r} {record.status}")

    def unregister(self, name: str) -> None:
        """Remove a plugin registered at run time, with everything it registered."""
        with self._lock:
            for registry in self.registries.values():
                registry.items = {k: v for k, v in registry.items.items() if v.plugin != name}
            if self.pm.get_plugin(name) is not None:
                self.pm.unregister(name=name)
            self.records = [r for r in self.records if r.name != name]

    @property
    def hook(self) -> pluggy.HookRelay:
        return self.load().pm.hook


def _entry_points() -> list:
    """The plugins' entry points, from the one read of the installed distributions (entry_points.py)."""
    from . import entry_points

    return entry_points.select(ENTRY_POINT_GROUP)


def _version(dist: str) -> str:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return ""


PLUGINS = Plugins()


def get_plugins() -> Plugins:
    """The loaded plugin registries."""
    return PLUGINS.load()
