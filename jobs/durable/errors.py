"""Exceptions of the durable engine; every message is meant to be shown as is."""

from __future__ import annotations


class DurableError(Exception):
    """Base class of the engine's errors."""


class DefinitionError(DurableError, ValueError):
    """A workflow is composed wrongly (bad name, bad option, unknown task path...)."""


class InstanceNotFound(DurableError, LookupError):
    """No workflow instance has this id."""


class SignalError(DurableError):
    """A signal that cannot be delivered (finished instance, no such wait, bad data)."""


class Fenced(DurableError):
    """A step's claim is no longer ours (lease recovered, instance cancelled): roll back."""


class PermanentError(DurableError):
    """Raised by a step for an error that no retry can fix (bad input).

    The step and its instance fail at once, with this exception's message as the error.
    """


class RetryLater(DurableError):
    """Raised by a step to be run again after ``delay`` seconds instead of the backoff.

    ``counts=True`` (an HTTP 429 honouring ``Retry-After``) uses up an attempt like any other
    error; ``counts=False`` (a timer woken before it is due, e.g. after a lease recovery) does
    not. ``delay=None`` puts the step back with no ``run_at`` at all: only a signal wakes it.
    """

    def __init__(self, message: str, delay: float | None, *, counts: bool = True) -> None:
        super().__init__(message)
        self.delay = delay
        self.counts = counts


class Break(Exception):
    """Raised by a task inside ``loop(...)`` to leave the loop; ``value`` is the loop's result.

    The task's step completes with ``value`` (its database writes commit with it), the rest of
    the loop body's iteration is cancelled, and the loop step completes with ``value``.
    """

    def __init__(self, value: object = None) -> None:
        super().__init__(value)
        self.value = value


class WorkflowNotFinished(DurableError):
    """``result()`` of an instance that is still pending or running (it has no result yet)."""


class WorkflowFailed(DurableError):
    """The instance failed; ``error`` is its error message (as ``error(id)`` returns it)."""

    def __init__(self, instance_id: object, error: str) -> None:
        super().__init__(f"workflow instance {instance_id} failed: {error}")
        self.instance_id = instance_id
        self.error = error


class WorkflowCancelled(DurableError):
    """The instance was cancelled before it completed."""

    def __init__(self, instance_id: object) -> None:
        super().__init__(f"workflow instance {instance_id} was cancelled")
        self.instance_id = instance_id


class WorkflowIdConflict(DurableError):
    """``start(id=...)`` with an id an instance of another workflow or input already has."""
