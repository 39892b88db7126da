"""The control protocol: one short line asks, one line answers, then the connection closes.

A request is a command word and a newline (``start``, ``stop``, ``status``), ASCII, at most
:data:`MAX_REQUEST` bytes.  A reply is ``ok <text>`` or ``error <text>``.  Anything else the server
receives (bytes that are no command, a line too long, nothing at all within :data:`READ_TIMEOUT` s) gets one
``error`` line and changes nothing.
"""

from __future__ import annotations

import socket

COMMANDS = ("start", "stop", "status")
#: The longest request line taken, newline included; anything longer is refused unread.
MAX_REQUEST = 64
#: How long the server waits for a request line (the listener serves one connection at a time).
READ_TIMEOUT = 2.0
#: The longest reply line read by the client.
MAX_REPLY = 1 << 20
OK, ERROR = "ok", "error"


class BadRequest(Exception):
    """A request that is no command: its message is the one-line answer."""


def read_request(conn: socket.socket) -> str:
    """The command the peer sent, or BadRequest saying in one line what is wrong with it."""
    conn.settimeout(READ_TIMEOUT)
    data = b""
    while b"\n" not in data:
        try:
            chunk = conn.recv(MAX_REQUEST + 1 - len(data))
        except socket.timeout:
            raise BadRequest(f"no command within {READ_TIMEOUT:g} s; send one of {', '.join(COMMANDS)} "
                             "and a newline") from None
        if not chunk:
            break
        data += chunk
        if len(data) > MAX_REQUEST:
            raise BadRequest(f"request too long (over {MAX_REQUEST} bytes); send one of {', '.join(COMMANDS)}")
    line = data.split(b"\n", 1)[0].strip()
    if not line:
        raise BadRequest(f"empty request; send one of {', '.join(COMMANDS)} and a newline")
    try:
        command = line.decode("ascii")
    except UnicodeDecodeError:
        raise BadRequest(f"request is not text ({len(data)} bytes); send one of {', '.join(COMMANDS)}") from None
    if command not in COMMANDS:
        shown = command if command.isprintable() and len(command) <= 32 else repr(command)[:34]
        raise BadRequest(f"unknown command {shown!r}; send one of {', '.join(COMMANDS)}")
    return command


def reply_line(status: str, text: str) -> bytes:
    """One reply line: no newline inside, whatever ``text`` holds."""
    return f"{status} {' '.join(text.split())}\n".encode("utf-8", "replace")


def parse_reply(data: bytes) -> tuple[bool, str]:
    """(ok, text) of a reply; a reply in no known form is an error shown as it came."""
    line = data.decode("utf-8", "replace").split("\n", 1)[0].strip()
    status, _, text = line.partition(" ")
    if status == OK:
        return True, text
    if status == ERROR:
        return False, text
    return False, f"unexpected reply {line[:200]!r}" if line else "closed the connection without a reply"


def ask(path: str, command: str, timeout: float) -> tuple[bool, str]:
    """Send ``command`` to the socket at ``path``; (ok, reply text).  OSError when nobody answers."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(timeout)
        sock.connect(path)
        try:
            sock.sendall(command.encode("ascii") + b"\n")
        except (BrokenPipeError, ConnectionResetError):
            pass  # refused before it read the request: the refusal is waiting to be read
        data = b""
        while b"\n" not in data and len(data) < MAX_REPLY:
            try:
                chunk = sock.recv(65536)
            except ConnectionResetError:
                break  # closed with our request unread (a refusal): what came before is the reply
            if not chunk:
                break
            data += chunk
    return parse_reply(data)
