"""The hookspecs are the typed contract: every parameter and return annotated, every annotation resolvable,
the types imported for type checkers only, and the ``register`` callbacks as the registry binds them."""

import ast
import dataclasses
import inspect
import re
import typing

import pytest

from proton_core import hookspecs, registry

HOOKSPECS = sorted(name for name, fn in vars(hookspecs).items()
                   if name.startswith("proton_") and hasattr(fn, "proton_spec"))
REGISTER = {"backend": registry.RegisterBackend, "context": registry.RegisterContext, "sink": registry.RegisterSink}


def unannotated(fn) -> list[str]:
    """The parameters of ``fn`` without an annotation, and ``return`` if the return has none."""
    signature = inspect.signature(fn)
    missing = [p.name for p in signature.parameters.values() if p.annotation is inspect.Parameter.empty]
    return missing + (["return"] if signature.return_annotation is inspect.Signature.empty else [])


def type_checking_names(module) -> dict:
    """What ``module``'s ``if TYPE_CHECKING:`` blocks import, imported now (as a type checker sees them)."""
    tree = ast.parse(inspect.getsource(module))
    blocks = [node for node in tree.body if isinstance(node, ast.If) and isinstance(node.test, ast.Name)
              and node.test.id == "TYPE_CHECKING"]
    namespace = {"__name__": module.__name__, "__package__": module.__package__}
    for block in blocks:
        exec(compile(ast.Module(body=block.body, type_ignores=[]), module.__file__, "exec"), namespace)
    return {k: v for k, v in namespace.items() if not k.startswith("__")}


def resolved_hints(fn, module) -> dict:
    return typing.get_type_hints(fn, globalns={**vars(module), **type_checking_names(module)})


def test_there_are_hookspecs():
    assert HOOKSPECS == ["proton_follow_environment", "proton_register_backends", "proton_register_contexts", "proton_register_sinks",
                         "proton_session_finalized", "proton_session_finalizing", "proton_session_started"]


@pytest.mark.parametrize("name", HOOKSPECS)
def test_every_hookspec_is_fully_annotated(name):
    assert unannotated(getattr(hookspecs, name)) == []


@pytest.mark.parametrize("name", HOOKSPECS)
def test_every_hookspec_annotation_resolves(name):
    fn = getattr(hookspecs, name)
    hints = resolved_hints(fn, hookspecs)
    assert set(hints) == set(inspect.signature(fn).parameters) | {"return"}
    assert hints["return"] is type(None)


def test_the_register_callbacks_and_session_types_are_the_public_ones():
    from proton_core import plugin_api

    assert resolved_hints(hookspecs.proton_register_backends, hookspecs)["register"] is registry.RegisterBackend
    assert resolved_hints(hookspecs.proton_register_sinks, hookspecs)["register"] is registry.RegisterSink
    assert resolved_hints(hookspecs.proton_session_started, hookspecs)["session"] is plugin_api.Session
    assert resolved_hints(hookspecs.proton_session_finalized, hookspecs)["paths"] == list[str]
    assert resolved_hints(hookspecs.proton_follow_environment, hookspecs)["setenv"] is registry.SetEnvironment


@pytest.mark.parametrize("kind", sorted(REGISTER))
def test_each_register_protocol_is_annotated_and_resolves(kind):
    call = REGISTER[kind].__call__
    assert unannotated(call) == ["self"]
    hints = resolved_hints(call, registry)
    assert hints["name"] is str and hints["return"] is type(None)


@pytest.mark.parametrize("kind", sorted(REGISTER))
def test_register_binds_the_protocol_signature_and_keeps_every_option(kind):
    """What a plugin calls is what the Protocol says, and every option reaches the registry's entry."""
    signature, entry_class = registry.KINDS[kind]
    protocol = inspect.signature(REGISTER[kind].__call__)
    assert list(signature.parameters) == list(protocol.parameters)[1:]
    assert registry.Staging("p", {}).register_function(kind).__signature__ == signature
    assert set(signature.parameters) == {f.name for f in dataclasses.fields(entry_class)} - {"plugin"}


@pytest.mark.parametrize("hook, kind", [("proton_register_backends", "backend"),
                                        ("proton_register_contexts", "context"), ("proton_register_sinks", "sink")])
def test_hookspec_docstrings_show_the_register_signature(hook, kind):
    doc = " ".join(getattr(hookspecs, hook).__doc__.split())
    shown = re.search(r"``register(\(.*?\))``", doc).group(1)
    assert shown.replace('"', "'") == registry.plain_signature(registry.KINDS[kind][0])


def test_hookspecs_import_nothing_more_at_run_time():
    """Outside ``if TYPE_CHECKING:`` the module imports only what it did before it was typed."""
    tree = ast.parse(inspect.getsource(hookspecs))
    imported = set()
    for node in tree.body:
        if isinstance(node, ast.Import):
            imported |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            imported.add("." * node.level + (node.module or ""))
    assert imported == {"__future__", "typing", "pluggy"}
    assert type_checking_names(hookspecs).keys() >= {"Session", "RegisterBackend"}


def test_the_checks_catch_a_lost_annotation_and_an_unknown_name():
    def lost(register: "RegisterBackend", other) -> None: ...

    def no_return(session: "Session"): ...

    def unknown(session: "NoSuchType") -> None: ...  # noqa: F821

    assert unannotated(lost) == ["other"] and unannotated(no_return) == ["return"]
    with pytest.raises(NameError):
        resolved_hints(unknown, hookspecs)
