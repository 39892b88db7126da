"""What plugins register: typed entries, and the staging that makes a plugin's registration atomic.

Each kind has one ``register`` signature with explicit keyword options (see
:mod:`proton_core.hookspecs`).  A plugin's registrations are collected in a
:class:`Staging` while its hooks run and reach the registries only when every
hook of that plugin returned and every call was valid: a plugin is either
wholly in or wholly out.
"""

from __future__ import annotations

import difflib
import inspect
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Generic, Protocol, Sequence, TypeVar

from .errors import PluginError

if TYPE_CHECKING:
    from .plugin_api import Backend, ContextSource, Profile

DATA_KINDS = ("tree", "trace")


# ------------------------------------------------------- register callbacks ----
# The ``register`` each registration hook receives, one Protocol per kind: the hookspecs' parameter
# types, and the one place each signature is written (KINDS binds plugins' calls against them).
class RegisterBackend(Protocol):
    """``register`` of ``proton_register_backends``."""

    def __call__(self, name: str, factory: Callable[[], Backend], *, description: str = "", priority: int = 0,
                 available: Callable[[], str | None] | None = None, modes: Sequence[str] = ()) -> None: ...


class RegisterContext(Protocol):
    """``register`` of ``proton_register_contexts``."""

    def __call__(self, name: str, factory: Callable[[], ContextSource], *, description: str = "",
                 base: bool = False) -> None: ...


class RegisterSink(Protocol):
    """``register`` of ``proton_register_sinks``."""

    def __call__(self, name: str, writer: Callable[[Profile, str], None], *, extension: str,
                 data: Sequence[str] = ("tree",), description: str = "") -> None: ...


class SetEnvironment(Protocol):
    """``setenv`` of ``proton_follow_environment``: one variable for every process of a followed job."""

    def __call__(self, name: str, value: str) -> None: ...


@dataclass(frozen=True, kw_only=True)
class Entry:
    """What every registration has: its name, the plugin that registered it, a one-line description."""

    name: str
    plugin: str
    description: str = ""


@dataclass(frozen=True, kw_only=True)
class BackendEntry(Entry):
    """A device-activity backend: ``factory()`` returns a :class:`proton_core.plugin_api.Backend`."""

    factory: Callable[[], Backend]
    #: Automatic choice takes the available backend of highest positive priority.
    priority: int = 0
    #: ``available()`` -> None when the backend can run here, else a one-line reason.
    available: Callable[[], str | None] | None = None
    #: Values (or prefixes) ``start(mode=...)`` accepts.
    modes: tuple[str, ...] = ()

    def unavailable_reason(self) -> str | None:
        """None when the backend can run here, else why not.  Every caller of a plugin's probe goes
        through here (automatic choice at ``start()``, error messages, the ``gpu`` marker's skip): a
        probe that raises makes the backend unavailable with a one-line reason, never an error."""
        if self.available is None:
            return None
        try:
            return self.available()
        except Exception as exc:  # a plugin's bug must not break start() or pytest collection
            return probe_failure(exc)


def probe_failure(exc: BaseException) -> str:
    """The one-line reason recorded for an ``available()`` probe that raised ``exc``."""
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    return f"availability check failed: {type(exc).__name__}" + (f": {'; '.join(lines)}" if lines else "")


@dataclass(frozen=True, kw_only=True)
class ContextEntry(Entry):
    """A context source: ``base`` ones are chosen with ``start(context=)``, others layered with ``hook=``."""

    factory: Callable[[], ContextSource]
    base: bool = False


@dataclass(frozen=True, kw_only=True)
class SinkEntry(Entry):
    """An output format: ``writer(profile, path)`` writes a :class:`proton_core.plugin_api.Profile`."""

    writer: Callable[[Profile, str], None]
    extension: str
    data: tuple[str, ...] = ("tree",)


def _call_signature(protocol: type) -> inspect.Signature:
    """The signature a plugin calls: the Protocol's ``__call__`` without ``self``."""
    signature = inspect.signature(protocol.__call__)
    return signature.replace(parameters=list(signature.parameters.values())[1:])


def plain_signature(signature: inspect.Signature) -> str:
    """``(name, factory, *, description='', ...)``: a signature as error messages show it, without types."""
    empty = inspect.Parameter.empty
    return str(signature.replace(parameters=[p.replace(annotation=empty) for p in signature.parameters.values()],
                                 return_annotation=empty))


#: kind -> (signature the plugin calls, entry class)
KINDS: dict[str, tuple[inspect.Signature, type[Entry]]] = {
    "backend": (_call_signature(RegisterBackend), BackendEntry),
    "context": (_call_signature(RegisterContext), ContextEntry),
    "sink": (_call_signature(RegisterSink), SinkEntry),
}


EntryT = TypeVar("EntryT", bound=Entry)


class Registry(Generic[EntryT]):
    """The committed entries of one kind, by name."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self.items: dict[str, EntryT] = {}

    def get(self, name: str) -> EntryT | None:
        return self.items.get(name)

    def names(self) -> list[str]:
        return sorted(self.items)

    def values(self) -> list[EntryT]:
        return list(self.items.values())


class Staging:
    """One plugin's registrations while its hooks run; nothing is visible until :meth:`commit`."""

    def __init__(self, plugin: str, registries: dict[str, Registry[Any]]) -> None:
        self.plugin = plugin
        self.registries = registries
        self.entries: list[tuple[str, Entry]] = []

    def register_function(self, kind: str) -> RegisterBackend | RegisterContext | RegisterSink:
        signature, _ = KINDS[kind]

        def register(*args: Any, **kwargs: Any) -> None:
            self.add(kind, *args, **kwargs)

        register.__signature__ = signature  # type: ignore[attr-defined]
        register.__doc__ = f"Register a {kind} of plugin {self.plugin!r}: {plain_signature(signature)}"
        return register

    def add(self, kind: str, *args: Any, **kwargs: Any) -> None:
        signature, entry_class = KINDS[kind]
        self._check_options(kind, signature, kwargs)
        try:
            bound = signature.bind(*args, **kwargs)
        except TypeError as exc:
            raise self.error(f"called register() for a {kind} wrongly ({exc}); "
                             f"the signature is {plain_signature(signature)}")
        bound.apply_defaults()
        values = dict(bound.arguments)
        name = values["name"]
        self._check_name(kind, name)
        values = self._check_values(kind, name, values)
        self.entries.append((kind, entry_class(plugin=self.plugin, **values)))

    def commit(self) -> list[str]:
        """Publish every staged entry; returns the kinds this plugin provides."""
        kinds = []
        for kind, entry in self.entries:
            self.registries[kind].items[entry.name] = entry
            if kind not in kinds:
                kinds.append(kind)
        return kinds

    # ------------------------------------------------------------ checks ----
    def error(self, message: str) -> PluginError:
        return PluginError(f"plugin {self.plugin!r} {message}")

    def _check_options(self, kind: str, signature: inspect.Signature, kwargs: dict[str, Any]) -> None:
        allowed = [p.name for p in signature.parameters.values() if p.kind is p.KEYWORD_ONLY]
        for key in kwargs:
            if key in signature.parameters:
                continue
            close = difflib.get_close_matches(key, allowed, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise self.error(f"registered a {kind} with the unknown option {key!r}{hint}; "
                             f"{kind} options are: {', '.join(allowed)}")

    def _check_name(self, kind: str, name: object) -> None:
        if not isinstance(name, str) or not name.isidentifier():
            raise self.error(f"registered a {kind} with the invalid name {name!r} (use a Python identifier)")
        taken = self.registries[kind].get(name)
        if taken is not None:
            raise self.error(f"registered {kind} {name!r}, already registered by {taken.plugin!r}")
        if any(k == kind and e.name == name for k, e in self.entries):
            raise self.error(f"registered {kind} {name!r} twice")

    def _check_values(self, kind: str, name: str, values: dict[str, Any]) -> dict[str, Any]:
        what = f"{kind} {name!r}"
        if not callable(values.get("factory", values.get("writer"))):
            raise self.error(f"registered {what} with something that is not callable")
        if not isinstance(values.get("description"), str):
            raise self.error(f"registered {what} with a description that is not a string")
        if kind == "backend":
            if not isinstance(values["priority"], int) or isinstance(values["priority"], bool):
                raise self.error(f"registered {what} with priority={values['priority']!r}: use an int")
            if values["available"] is not None and not callable(values["available"]):
                raise self.error(f"registered {what} with available={values['available']!r}: use a callable or None")
            values["modes"] = self._names_tuple(what, "modes", values["modes"])
        elif kind == "context":
            if not isinstance(values["base"], bool):
                raise self.error(f"registered {what} with base={values['base']!r}: use True or False")
        else:
            if not isinstance(values["extension"], str) or not values["extension"]:
                raise self.error(f"registered {what} with extension={values['extension']!r}: use e.g. 'csv'")
            data = self._names_tuple(what, "data", values["data"])
            unknown = [d for d in data if d not in DATA_KINDS]
            if unknown or not data:
                raise self.error(f"registered {what} with data={values['data']!r}: use a subset of {DATA_KINDS}")
            values["data"] = data
        return values

    def _names_tuple(self, what: str, option: str, value: Any) -> tuple[str, ...]:
        if isinstance(value, str) or not all(isinstance(v, str) for v in value):
            raise self.error(f"registered {what} with {option}={value!r}: use a tuple of strings")
        return tuple(value)
