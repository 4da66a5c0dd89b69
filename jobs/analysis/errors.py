"""The one exception type the analysis raises for bad input."""

from __future__ import annotations


class AnalysisInputError(ValueError):
    """The uploaded file cannot be analysed; ``str(exc)`` is a message fit to show the user.

    Raised for empty, oversize, corrupt, encrypted, bomb-like or unsupported files, and for
    unreadable reference libraries. Everything else is a bug, not the user's fault.
    """
