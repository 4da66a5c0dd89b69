"""Exceptions of the durable engine; every message is meant to be shown as is."""

from __future__ import annotations


class DurableError(Exception):
    """Base class of the engine's errors."""


class DefinitionError(DurableError, ValueError):
    """A workflow is composed wrongly (bad name, bad option, unknown task path...)."""


class InstanceNotFound(DurableError, LookupError):
    """No workflow instance has this id."""


class PermanentError(DurableError):
    """Raised by a step for an error that no retry can fix (bad input).

    The step and its instance fail at once, with this exception's message as the error.
    """
