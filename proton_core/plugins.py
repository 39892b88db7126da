"""The plugin manager: in-tree defaults and entry-point plugins, one path.

Built-in sinks, contexts and the host backend are listed in DEFAULT_PLUGINS
and registered exactly like third-party plugins from the entry-point group
``proton``.  Loading happens on first use, not at import.  A plugin that
fails to import or to register is recorded with its reason (``proton
plugins`` shows it) and never breaks ``import proton_core``.

Environment: ``PROTON_DISABLE_PLUGINS=a,b`` blocks plugins by name;
``PROTON_PLUGINS_AUTOLOAD=0`` skips entry-point plugins.
"""

from __future__ import annotations

import importlib
import os
import threading
from dataclasses import dataclass, field
from importlib import metadata

import pluggy

from . import hookspecs
from .errors import PluginError

hookimpl = pluggy.HookimplMarker("proton")

ENTRY_POINT_GROUP = "proton"

DEFAULT_PLUGINS = (
    "proton_core.sinks.hatchet",
    "proton_core.sinks.chrome_trace",
    "proton_core.backends.host",
    "proton_core.contexts.shadow",
    "proton_core.contexts.python",
)


@dataclass
class PluginRecord:
    """What ``proton plugins`` shows for one plugin."""

    name: str
    distribution: str = "proton"
    version: str = ""
    kinds: list = field(default_factory=list)
    status: str = "loaded"  # loaded | disabled | failed: <reason>


@dataclass
class Registration:
    name: str
    obj: object
    plugin: str
    options: dict


class Registry:
    """Named things of one kind (backends, contexts or sinks)."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self.items: dict[str, Registration] = {}

    def register_for(self, plugin: str, record: PluginRecord | None):
        def register(name, obj, **options):
            if not isinstance(name, str) or not name.isidentifier():
                raise PluginError(f"plugin {plugin!r} registered a {self.kind} with the invalid name {name!r}")
            if name in self.items:
                other = self.items[name].plugin
                raise PluginError(f"plugin {plugin!r} registered {self.kind} {name!r}, already registered by {other!r}")
            self.items[name] = Registration(name, obj, plugin, options)
            if record is not None and self.kind not in record.kinds:
                record.kinds.append(self.kind)

        return register

    def get(self, name: str) -> Registration | None:
        return self.items.get(name)

    def names(self) -> list[str]:
        return sorted(self.items)


class Plugins:
    """All registries, filled once, lazily and thread-safely."""

    def __init__(self) -> None:
        self.pm = pluggy.PluginManager("proton")
        self.pm.add_hookspecs(hookspecs)
        self.records: dict[str, PluginRecord] = {}
        self.backends = Registry("backend")
        self.contexts = Registry("context")
        self.sinks = Registry("sink")
        self._loaded = False
        self._lock = threading.RLock()

    # ------------------------------------------------------------ loading ----
    def load(self) -> "Plugins":
        if self._loaded:
            return self
        with self._lock:
            if self._loaded:
                return self
            disabled = {n.strip() for n in os.environ.get("PROTON_DISABLE_PLUGINS", "").split(",") if n.strip()}
            for module_name in DEFAULT_PLUGINS:
                short = module_name.rsplit(".", 1)[-1]
                self._add(short, lambda m=module_name: importlib.import_module(m), "proton", _version("proton"),
                          disabled)
            if os.environ.get("PROTON_PLUGINS_AUTOLOAD", "1").strip().lower() not in ("0", "false", "no", "off"):
                for ep in _entry_points():
                    dist = ep.dist.name if ep.dist else "?"
                    version = ep.dist.version if ep.dist else ""
                    self._add(ep.name, ep.load, dist, version, disabled)
            self._loaded = True
        return self

    def _add(self, name, loader, dist, version, disabled) -> None:
        if name in self.records:
            self.records[name].status = f"failed: name {name!r} is used by two plugins"
            return
        record = self.records[name] = PluginRecord(name, dist, version)
        if name in disabled:
            record.status = "disabled (PROTON_DISABLE_PLUGINS)"
            self.pm.set_blocked(name)
            return
        try:
            module = loader()
            self.pm.register(module, name=name)
        except Exception as exc:  # a broken plugin must never break the core
            record.status = f"failed: {type(exc).__name__}: {exc}".splitlines()[0]
            return
        self._collect(name, record)

    def _collect(self, name: str, record: PluginRecord) -> None:
        plugin = self.pm.get_plugin(name)
        calls = (
            ("proton_register_backends", self.backends),
            ("proton_register_contexts", self.contexts),
            ("proton_register_sinks", self.sinks),
        )
        for hook_name, registry in calls:
            impl = getattr(plugin, hook_name, None)
            if impl is None:
                continue
            before = dict(registry.items)
            try:
                impl(register=registry.register_for(name, record))
            except Exception as exc:
                registry.items = before
                record.status = f"failed: {type(exc).__name__}: {exc}".splitlines()[0]
                self.pm.unregister(name=name)
                return
        if not record.kinds:
            record.kinds.append("lifecycle")

    def register(self, module, name: str | None = None, distribution: str = "(runtime)") -> None:
        """Register a plugin object at run time (tests, notebooks)."""
        self.load()
        name = name or getattr(module, "__name__", repr(module))
        with self._lock:
            self._add(name, lambda: module, distribution, "", set())
            record = self.records[name]
        if record.status.startswith("failed"):
            raise PluginError(f"plugin {name!r} {record.status}")

    def unregister(self, name: str) -> None:
        with self._lock:
            for registry in (self.backends, self.contexts, self.sinks):
                registry.items = {k: v for k, v in registry.items.items() if v.plugin != name}
            if self.pm.get_plugin(name) is not None:
                self.pm.unregister(name=name)
            self.records.pop(name, None)

    @property
    def hook(self):
        return self.load().pm.hook


def _entry_points():
    eps = metadata.entry_points()
    return eps.select(group=ENTRY_POINT_GROUP) if hasattr(eps, "select") else eps.get(ENTRY_POINT_GROUP, [])


def _version(dist: str) -> str:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return ""


PLUGINS = Plugins()


def get_plugins() -> Plugins:
    """The loaded plugin registries."""
    return PLUGINS.load()
