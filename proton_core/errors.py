"""Errors users see: each message names what is wrong and what to do."""


class ProtonError(RuntimeError):
    """A misuse of the Proton API or CLI; the message is one actionable line."""


class BackendUnavailable(ProtonError):
    """A backend cannot run on this machine; the message says why."""


class PluginError(ProtonError):
    """A plugin broke the registration contract (duplicate name, bad value)."""
