"""MessagePack bytes of a hatchet document, both ways (``hatchet_msgpack``'s encoding, decision 0211).

Its own module, apart from :mod:`proton_core.formats.hatchet_msgpack` (the
writer), so the hatchet reader reads MessagePack without importing the writer
that imports it.  Packing and unpacking go node by node with an explicit stack, so a tree of any depth is
written and read (the msgpack library's own recursion stops near 500 levels).
"""

from __future__ import annotations

import gc

from ..errors import ProtonError
from .errors import HatchetError


def _msgpack():
    try:
        import msgpack
    except ImportError:  # a dependency of proton-profiler; absent only in a broken install
        raise ProtonError("the hatchet_msgpack format needs the msgpack package: pip install 'msgpack>=1.0,<2'") from None
    return msgpack


# ------------------------------------------------------------------ writer ----
def dump(doc: list, out) -> None:
    """Pack ``[root literal, device_info]`` into the binary file ``out``, node by node."""
    msgpack = _msgpack()
    packer = msgpack.Packer(use_bin_type=True)
    write = out.write
    write(packer.pack_array_header(2))
    stack: list = [doc[0]]
    while stack:
        node = stack.pop()
        children = node.get("children") or []
        rest = {k: v for k, v in node.items() if k != "children"}
        write(packer.pack_map_header(len(rest) + 1))
        for key, value in rest.items():
            write(packer.pack(key))
            write(packer.pack(value))
        write(packer.pack("children"))
        write(packer.pack_array_header(len(children)))
        stack.extend(reversed(children))
    write(packer.pack(doc[1]))


def packb(doc: list) -> bytes:
    """``[root literal, device_info]`` as MessagePack bytes (what upstream's ``get_data_msgpack`` returns)."""
    import io

    out = io.BytesIO()
    dump(doc, out)
    return out.getvalue()


# ------------------------------------------------------------------ reader ----
def load(path: str):
    """The document in the MessagePack file at ``path``; HatchetError (one line) where it is not one."""
    msgpack = _msgpack()
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as exc:
        raise HatchetError(f"cannot read {path}: {exc.strerror or exc}") from None
    paused = gc.isenabled()
    gc.disable()  # millions of new containers, no cycles: collections would cost more than the decoding
    try:
        try:
            return msgpack.unpackb(data, raw=False, strict_map_key=False)
        except msgpack.StackError:  # deeper than the library's stack: node by node
            return _load_deep(msgpack, data, path)
        except (ValueError, msgpack.ExtraData, msgpack.FormatError) as exc:
            raise _not_msgpack(path, exc) from None
    finally:
        if paused:
            gc.enable()


def _not_msgpack(path: str, exc) -> HatchetError:
    why = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    return HatchetError(f"{path} is not a hatchet_msgpack profile ({why}): pass a file written by "
                                "proton or Triton's proton")


def _load_deep(msgpack, data: bytes, path: str):
    """``[root, device_info]`` read node by node: a node's own keys whole, its children on a stack.

    Both writers pack ``children`` as a node's last key, which this relies on:
    the bytes after a ``children`` header are the children themselves."""
    unpacker = msgpack.Unpacker(raw=False, strict_map_key=False, max_buffer_size=max(len(data), 1))
    unpacker.feed(data)
    try:
        if unpacker.read_array_header() < 1:
            raise _not_msgpack(path, "an empty list")
        root: dict = {}
        pending = [[root]]  # per open level, the nodes still to read, in file order
        while pending:
            slots = pending.pop()
            node = slots.pop(0) if slots else None
            if slots:
                pending.append(slots)
            if node is None:
                continue
            kids = []
            for _ in range(unpacker.read_map_header()):
                key = unpacker.unpack()
                if key == "children":
                    kids = [{} for _ in range(unpacker.read_array_header())]
                    node["children"] = kids
                else:
                    node[key] = unpacker.unpack()
            if kids:
                pending.append(list(kids))
        devices = unpacker.unpack()
        return [root, devices]
    except (ValueError, msgpack.ExtraData, msgpack.FormatError, msgpack.StackError, msgpack.OutOfData) as exc:
        raise _not_msgpack(path, exc) from None
