"""Writing a session's profile: the output format's checks, the path, and an atomic write through its sink.

Sinks (``proton_register_sinks``) own the bytes; this module picks the sink,
names the file and makes a failed write leave no partial file and keep the data.
In a multi-process job the name gets the rank known at write time, and every write
says which part it is (:mod:`proton_core.distributed.stamp`).
"""

from __future__ import annotations

import os

from . import destinations, log, periodic
from .distributed import naming, stamp
from .errors import ProtonError
from .plugins import get_plugins

DEFAULT_FORMAT = {"tree": "hatchet", "trace": "chrome_trace"}


def check_format(output_format, data) -> None:
    sinks = get_plugins().sinks
    reg = sinks.get(output_format) if isinstance(output_format, str) else None
    if reg is None:
        raise ProtonError(f"unknown output_format {output_format!r}: choose one of {', '.join(sinks.names())}")
    if data not in reg.data:
        fit = [e.name for e in sinks.values() if data in e.data]
        raise ProtonError(f"output_format {output_format!r} cannot write data={data!r}: use one of {', '.join(fit)}")


def output_path(name: str, extension: str) -> str:
    return name if name.endswith("." + extension) else f"{name}.{extension}"


def write(session, fmt: str, name: str, plugins, fallback: bool = False) -> str:
    name = naming.at_write(name, plugins.sinks.get(fmt).extension)
    return write_profile(session.profile, fmt, name, plugins, session.id, fallback)


def sink_writer(reg):
    """The sink's ``writer(profile, path)``; hatchet's two put the ``distributed``/``part``/``final`` keys of
    :mod:`proton_core.distributed.stamp` into the root's metadata beside their own."""
    from .sinks import hatchet as hatchet_sinks

    if reg.writer not in (hatchet_sinks.write, hatchet_sinks.write_msgpack) or not stamp.metadata_wanted():
        return reg.writer
    from .formats import hatchet

    def write_with_metadata(profile, path):
        meta = {**hatchet.metadata(profile), **stamp.metadata(profile)}
        if reg.writer is hatchet_sinks.write:
            hatchet.write(profile, path, metadata=meta)
        else:
            from .formats import hatchet_msgpack

            hatchet_msgpack.write(profile, path, metadata=meta)

    return write_with_metadata


def temp_name(path: str) -> str:
    """The temporary file a write goes through: beside ``path`` (same file system), short enough to create."""
    directory, base = os.path.split(os.path.abspath(path))
    tmp = f".{base}.{os.getpid()}.tmp"
    if len(os.fsencode(tmp)) > destinations.name_max(directory):
        tmp = f".proton.{os.getpid()}.tmp"
    return os.path.join(directory, tmp)


def write_profile(profile, fmt: str, name: str, plugins, session_id: int, fallback: bool = False) -> str:
    """Write through a temporary file and rename, so a failed write leaves no partial file and keeps the data.

    With ``fallback`` (at exit, under the CLI: no later ``finalize()`` can retry) a write that fails
    goes to a new file in the temporary directory instead, and one line says where.
    Which file of the session this is (a part, the final one) comes from :func:`stamp.writing`.
    """
    reg = plugins.sinks.get(fmt)
    writer = sink_writer(reg)
    path = output_path(name, reg.extension)
    try:
        atomic_write(writer, profile, path)
    except OSError as exc:
        reason = exc.strerror or str(exc)
        if not fallback:
            raise ProtonError(
                f"cannot write session {session_id}'s profile to {path!r} ({reason}); its data is kept: "
                f"call proton.finalize({session_id}, name='<writable path>')"
            ) from None
        try:
            other = destinations.fallback_path(path)
            atomic_write(writer, profile, other)
        except OSError as second:
            raise ProtonError(f"cannot write the profile to {os.path.abspath(path)} ({reason}), nor to the "
                              f"temporary directory ({second.strerror or second})") from None
        log.warn(f"cannot write the profile to {os.path.abspath(path)} ({reason}): wrote it to {other} instead")
        path = other
    destinations.written(path)
    return path


def atomic_write(writer, profile, path: str) -> None:
    """``writer(profile, tmp)`` then rename onto ``path``; the temporary file never outlives a failure (Ctrl-C too)."""
    from .progress import progress

    tmp = temp_name(path)
    try:
        with progress(f"writing {path}"):
            writer(profile, tmp)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def is_empty(profile) -> bool:
    """No node or root metric in the tree and no event in the trace (a ``data="trace"`` phase of host
    scopes only has events and an empty tree: it is not empty)."""
    trace = profile.trace
    events = trace is not None and (trace.kernels or trace.scopes or getattr(trace, "kernel_slices", None))
    return not profile.tree.root.children and not profile.tree.root.metrics and not events


def write_parts(session, fmt: str, name: str, plugins, everything: bool = False) -> list[str]:
    """Write complete phases (all kept ones with ``everything``) to ``<name>.part_<N>`` and free them.

    A part that cannot be written stays kept, with every later one (so parts are written in order),
    for the next poll (:class:`proton_core.periodic.Backlog`); with ``everything`` (finalize) it goes
    to the temporary directory instead, and one line says where."""
    from . import log

    phases = session.phases
    name = naming.at_write(name, plugins.sinks.get(fmt).extension)
    ranked = stamp.metadata_wanted()  # a rank always ends with a final file, so a reader tells it finished
    numbers = sorted(phases.profiles) if everything else phases.complete_phases()
    backlog = session.writer.backlog if session.writer is not None else periodic.Backlog()
    for number in numbers:
        if number not in phases.profiles:  # dropped by the backlog's cap
            continue
        profile = phases.profiles[number]
        empty = is_empty(profile)
        last = everything and number == numbers[-1]
        if not empty or (last and (not session.parts or ranked)):  # a run leaves a file
            backlog.stamp(profile)
            part = periodic.part_name(name, number)
            try:
                with stamp.writing(number, last):
                    path = write_profile(profile, fmt, part, plugins, session.id)
            except (ProtonError, OSError) as exc:
                if not everything:
                    backlog.failed(session, number, part, exc)
                    break
                with stamp.writing(number, last):
                    path = write_profile(profile, fmt, backlog.fallback_name(name, number), plugins, session.id)
                log.warn(f"cannot write part {part} of session {session.id} ({periodic.reason(exc)}); "
                         f"wrote it to {path} instead")
            backlog.written(session, number, path)
            session.parts.append(path)
        phases.clear(number)
    return list(session.parts) if everything else []
