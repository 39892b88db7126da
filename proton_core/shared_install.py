"""A framework hook installed while any session uses it and removed after the last one.

Layered context sources patch global framework state (Triton's launch hooks,
PyTorch's dispatch mode and module hooks, JAX's compile entry point).
Several sessions may name the same source, so the patch is reference counted
here, once, instead of in every source.
"""

from __future__ import annotations

import threading
from typing import Any, Callable


class SharedInstall:
    """``acquire()`` installs on the first user, ``release()`` uninstalls after the last.

    ``install()`` returns whatever ``uninstall(state)`` needs to undo it; when
    ``install`` raises, nothing is counted and the error reaches the caller.
    """

    def __init__(self, install: Callable[[], Any], uninstall: Callable[[Any], None]) -> None:
        self._install = install
        self._uninstall = uninstall
        self._lock = threading.Lock()
        self.users = 0
        self.state: Any = None

    def acquire(self) -> None:
        with self._lock:
            if self.users == 0:
                self.state = self._install()
            self.users += 1

    def release(self) -> None:
        with self._lock:
            if self.users == 0:
                return
            self.users -= 1
            if self.users == 0:
                state, self.state = self.state, None
                self._uninstall(state)

    def reinstall(self) -> None:
        """Undo and redo the install now, if installed (what it installs changed: e.g. other hooks)."""
        with self._lock:
            if self.users:
                state, self.state = self.state, None
                self._uninstall(state)
                self.state = self._install()
