"""Who is on the other end of a control connection: only the job's own user is admitted.

The directory (0700) and the socket (0600) already keep other users out; the kernel's record of the
connecting process (``SO_PEERCRED`` on Linux, ``getpeereid`` elsewhere) is checked too, so a user who gets
hold of the socket some other way (root, who passes any mode, included) is still refused.
"""

from __future__ import annotations

import os
import socket
import struct


def peer_uid(conn: socket.socket) -> int:
    """The effective uid of the process that connected ``conn`` (the seam tests replace)."""
    if hasattr(socket, "SO_PEERCRED"):
        raw = conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
        _pid, uid, _gid = struct.unpack("3i", raw)
        return uid
    getpeereid = getattr(os, "getpeereid", None)  # not in the standard library today: refuse rather than guess
    if getpeereid is None:
        raise OSError("this system tells no peer credentials")
    return getpeereid(conn.fileno())[0]


def admitted(conn: socket.socket) -> tuple[bool, str]:
    """(whether the peer may control this process, the one-line reason when not)."""
    try:
        uid = peer_uid(conn)
    except OSError as exc:
        return False, f"refused: the peer's credentials cannot be read ({exc.strerror or exc})"
    if uid != os.geteuid():
        return False, (f"refused: uid {uid} may not control this job; only its own user "
                       f"(uid {os.geteuid()}) may")
    return True, ""
