"""Who may do what with durable workflows, with Django's permissions (pg_durable's grant_usage).

Three permissions on ``durable.Instance`` (see its ``Meta.permissions``):

* ``durable.start_workflow`` — start any workflow;
* ``durable.use_sql_steps`` — start a workflow that contains ``sql()`` steps. They run under
  the database role ``ACURIO_SQL_STEP_ROLE`` (its grants and row-level security decide what
  they may touch); without that role they would run as the application's own role, so then
  only superusers may start them;
* ``durable.use_http_steps`` — start a workflow that contains ``http()`` steps.

They are checked where a person acts: ``start(..., user=...)``, ``manage.py durable
--user``, and the admin. Application code that starts its own fixed workflow on a user's
behalf (the analysis pipeline passes ``owner=`` only) is trusted and not checked.

Seeing and controlling (status, result, explain, cancel, signal, list): users only their own
instances, staff every instance. Another user's instance is reported as not found, so ids
do not leak whether they exist.
"""

from __future__ import annotations

import uuid
from typing import Any

from django.conf import settings
from django.core.exceptions import PermissionDenied

from jobs.durable.errors import DurableError, InstanceNotFound
from jobs.durable.graph import iter_spec
from jobs.durable.models import Instance

START = "durable.start_workflow"
USE_SQL = "durable.use_sql_steps"
USE_HTTP = "durable.use_http_steps"
# Controlling an instance (cancel, signal, resume): what the admin's controls need.
CONTROL = "durable.change_instance"
# Node kinds that need a permission beyond START.
_KIND_PERMISSIONS = {"sql": USE_SQL, "http": USE_HTTP}


class NotPermitted(DurableError, PermissionDenied):
    """The acting user lacks a permission this action needs."""


def required_permissions(spec: dict[str, Any]) -> list[str]:
    """The permissions starting this compiled graph needs, START first."""
    needed = [START]
    for node in iter_spec(spec):
        perm = _KIND_PERMISSIONS.get(node["kind"])
        if perm and perm not in needed:
            needed.append(perm)
    return needed


def check_start(user: Any, spec: dict[str, Any]) -> None:
    """Raise NotPermitted unless ``user`` may start this compiled graph."""
    needed = required_permissions(spec)
    missing = [perm for perm in needed if not user.has_perm(perm)]
    name = getattr(user, "get_username", lambda: str(user))()
    if (
        not missing
        and USE_SQL in needed
        and not getattr(settings, "ACURIO_SQL_STEP_ROLE", "")
        and not user.is_superuser
    ):
        raise NotPermitted(
            f"user {name!r} may not start a workflow with sql steps: without"
            " ACURIO_SQL_STEP_ROLE they would run as the application's database role, which"
            " only superusers may use"
        )
    if missing:
        raise NotPermitted(
            f"user {name!r} may not start this workflow: missing permission"
            f"{'s' if len(missing) > 1 else ''} {', '.join(missing)}"
        )


def _name(user: Any) -> str:
    return getattr(user, "get_username", lambda: str(user))()


def check_may_start(user: Any) -> None:
    """Raise NotPermitted unless ``user`` may start workflows at all: checked before a
    workflow is imported (``manage.py durable start``), so no code runs for a user who could
    never start it. The workflow's own needs are checked once it is compiled."""
    if not user.is_active or not user.has_perm(START):
        raise NotPermitted(
            f"user {_name(user)!r} may not start workflows: missing permission {START}"
        )


def check_control(user: Any, verb: str) -> None:
    """Raise NotPermitted unless ``user`` may control instances (cancel, signal, resume), as
    the admin's controls require."""
    if not user.is_active or not user.has_perm(CONTROL):
        raise NotPermitted(
            f"user {_name(user)!r} may not {verb} instances: missing permission {CONTROL}"
        )


def can_see(user: Any, owner_id: int | None) -> bool:
    """Whether ``user`` may see an instance owned by ``owner_id``: staff all, others their own."""
    return bool(
        user.is_active and (user.is_staff or (owner_id is not None and owner_id == user.pk))
    )


def visible_instance(user: Any, instance_id: uuid.UUID | str) -> Instance:
    """The instance if ``user`` may see (and so control) it; InstanceNotFound otherwise."""
    instance = Instance.objects.find(instance_id)
    if user is not None and not can_see(user, instance.owner_id):
        raise InstanceNotFound(f"no workflow instance {instance.pk}")
    return instance
