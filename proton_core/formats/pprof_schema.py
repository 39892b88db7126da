"""pprof's message classes, built at import from a descriptor written here (decision 0280).

The same schema as ``pprof_profile.proto`` beside this module (which the tests
check field by field against this table), built with the ``protobuf`` runtime
alone: no ``protoc`` at build time, no generated ``_pb2`` file to keep in step
with the runtime's version, and a pure-Python wheel.  The messages live in a
pool of their own, so another library that registers ``perftools.profiles``
in protobuf's default pool (a pprof client, a Go-profile reader) never clashes
with ours.

Imported only where a pprof file is written or read, so ``import proton_core``
never loads protobuf.
"""

from __future__ import annotations

from google.protobuf import descriptor_pb2, descriptor_pool
from google.protobuf.message_factory import GetMessageClass  # protobuf >= 4.22 (the pin in pyproject.toml)

PACKAGE = "perftools.profiles"
FILE_NAME = "proton_core/formats/pprof_profile.proto"

#: message -> [(field, number, type, repeated)]; a type that is not a scalar names a message.
MESSAGES: dict[str, list[tuple[str, int, str, bool]]] = {
    "Profile": [
        ("sample_type", 1, "ValueType", True), ("sample", 2, "Sample", True), ("mapping", 3, "Mapping", True),
        ("location", 4, "Location", True), ("function", 5, "Function", True), ("string_table", 6, "string", True),
        ("drop_frames", 7, "int64", False), ("keep_frames", 8, "int64", False), ("time_nanos", 9, "int64", False),
        ("duration_nanos", 10, "int64", False), ("period_type", 11, "ValueType", False),
        ("period", 12, "int64", False), ("comment", 13, "int64", True), ("default_sample_type", 14, "int64", False),
    ],
    "ValueType": [("type", 1, "int64", False), ("unit", 2, "int64", False)],
    "Sample": [("location_id", 1, "uint64", True), ("value", 2, "int64", True), ("label", 3, "Label", True)],
    "Label": [("key", 1, "int64", False), ("str", 2, "int64", False), ("num", 3, "int64", False),
              ("num_unit", 4, "int64", False)],
    "Mapping": [
        ("id", 1, "uint64", False), ("memory_start", 2, "uint64", False), ("memory_limit", 3, "uint64", False),
        ("file_offset", 4, "uint64", False), ("filename", 5, "int64", False), ("build_id", 6, "int64", False),
        ("has_functions", 7, "bool", False), ("has_filenames", 8, "bool", False),
        ("has_line_numbers", 9, "bool", False), ("has_inline_frames", 10, "bool", False),
    ],
    "Location": [("id", 1, "uint64", False), ("mapping_id", 2, "uint64", False), ("address", 3, "uint64", False),
                 ("line", 4, "Line", True), ("is_folded", 5, "bool", False)],
    "Line": [("function_id", 1, "uint64", False), ("line", 2, "int64", False), ("column", 3, "int64", False)],
    "Function": [("id", 1, "uint64", False), ("name", 2, "int64", False), ("system_name", 3, "int64", False),
                 ("filename", 4, "int64", False), ("start_line", 5, "int64", False)],
}

_FIELD = descriptor_pb2.FieldDescriptorProto
_SCALARS = {"int64": _FIELD.TYPE_INT64, "uint64": _FIELD.TYPE_UINT64, "string": _FIELD.TYPE_STRING,
            "bool": _FIELD.TYPE_BOOL}


def file_descriptor() -> descriptor_pb2.FileDescriptorProto:
    """The schema as a ``FileDescriptorProto`` (what ``protoc`` would make of ``pprof_profile.proto``)."""
    proto = descriptor_pb2.FileDescriptorProto(name=FILE_NAME, package=PACKAGE, syntax="proto3")
    for message, fields in MESSAGES.items():
        out = proto.message_type.add(name=message)
        for name, number, kind, repeated in fields:
            field = out.field.add(name=name, number=number, json_name=_json_name(name),
                                  label=_FIELD.LABEL_REPEATED if repeated else _FIELD.LABEL_OPTIONAL)
            if kind in _SCALARS:
                field.type = _SCALARS[kind]
            else:
                field.type = _FIELD.TYPE_MESSAGE
                field.type_name = f".{PACKAGE}.{kind}"
    return proto


def _json_name(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part.capitalize() for part in rest)


def _classes() -> dict[str, type]:
    pool = descriptor_pool.DescriptorPool()
    pool.Add(file_descriptor())
    return {m: GetMessageClass(pool.FindMessageTypeByName(f"{PACKAGE}.{m}")) for m in MESSAGES}


_BUILT = _classes()
Profile = _BUILT["Profile"]
ValueType = _BUILT["ValueType"]
Sample = _BUILT["Sample"]
Label = _BUILT["Label"]
Mapping = _BUILT["Mapping"]
Location = _BUILT["Location"]
Line = _BUILT["Line"]
Function = _BUILT["Function"]
