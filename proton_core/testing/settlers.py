"""A settler for tests (plugin_api.register_settler): it stands in for a plugin's own frames."""

from __future__ import annotations

from ..scope import close_unchecked, open_unchecked


class PendingScope:
    """After ``keep()``, the next call opens scope ``name`` (as a plugin's frame would be settled into one);
    ``close()`` closes it. ``calls`` counts every call, ``opened`` the ids opened."""

    def __init__(self, name: str = "frame") -> None:
        self.name, self.pending, self.calls, self.opened = name, False, 0, []

    def keep(self) -> None:
        self.pending = True

    def __call__(self) -> None:
        self.calls += 1
        if self.pending:
            self.pending = False
            self.opened.append(open_unchecked(self.name))

    def close(self) -> None:
        close_unchecked(self.opened[-1])
