"""The viewer's errors: each is one line on stderr and exit status 2."""

from __future__ import annotations


class ViewerError(Exception):
    """Bad input for proton-view; the message is one line saying what to do."""


class MissingMetric(ViewerError):
    """A requested metric this profile cannot give.

    Separate from other errors because upstream's commands name metrics a
    profile may lack (``-m time/ns,cpu_time/ns`` on a CPU-only run): the
    viewer shows the others and warns, failing only when none is left.
    """

    def __init__(self, message: str, needs: str | None = None) -> None:
        super().__init__(message)
        self.needs = needs  # the raw metric a derived form lacks, where that is the reason
