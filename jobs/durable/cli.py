"""The engine's control verbs for a terminal: what ``manage.py durable <verb>`` runs.

Each verb is a plain function returning the text to print, so tests drive them directly; the
management command only parses arguments. Every failure raises :class:`CliError` with a
one-line message (the command turns it into ``CommandError``: one line, exit status 1).

``user`` (``--user NAME``) makes a verb act as that person: ``start`` then needs the
permissions of :mod:`jobs.durable.permissions`, and the other verbs only find that user's own
instances (staff: all). Without it the verbs act as the operator, with every right.
"""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

from django.contrib.auth import get_user_model
from django.core.serializers.json import DjangoJSONEncoder
from django.utils.module_loading import import_string

from jobs.durable import api, inspection, lifecycle, schedules
from jobs.durable.errors import DurableError
from jobs.durable.graph import Node, compile_graph
from jobs.durable.models import InstanceStatus
from jobs.durable.permissions import (
    check_control,
    check_may_start,
    check_start,
    visible_instance,
)

MAX_PER_PAGE = 500


class CliError(Exception):
    """A one-line error for the terminal."""


def find_user(username: str | None) -> Any:
    if not username:
        return None
    User = get_user_model()
    try:
        return User.objects.get(**{User.USERNAME_FIELD: username})
    except User.DoesNotExist:
        raise CliError(f"no user named {username!r}") from None


def load_workflow(path: str) -> Node:
    """The workflow at a dotted path: a Node, or a function of no arguments returning one."""
    try:
        target = import_string(path)
    except ImportError as exc:
        raise CliError(f"cannot import workflow {path!r}: {exc}") from None
    if callable(target) and not isinstance(target, Node):
        try:
            target = target()
        except TypeError as exc:
            raise CliError(f"workflow factory {path!r} must take no arguments: {exc}") from None
    if not isinstance(target, Node):
        raise CliError(f"{path!r} is not a workflow (got {type(target).__name__})")
    return target


def parse_json(text: str | None, what: str) -> Any:
    if text is None:
        return None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise CliError(f"{what} is not valid JSON: {exc}") from None


def _dumps(value: Any) -> str:
    return json.dumps(value, cls=DjangoJSONEncoder, ensure_ascii=False, indent=2)


def _instance(instance_id: str, user: Any):
    try:
        return visible_instance(user, instance_id)
    except DurableError as exc:
        raise CliError(str(exc)) from None


def _controlled(instance_id: str, user: Any, verb: str):
    """The instance, if ``user`` may see it and control it (the admin's rule)."""
    instance = _instance(instance_id, user)
    if user is not None:
        try:
            check_control(user, verb)
        except DurableError as exc:
            raise CliError(str(exc)) from None
    return instance


def start(
    path: str,
    *,
    input: str | None = None,
    label: str = "",
    user: Any = None,
    on_failure: str = "",
    id: str | None = None,
    queue: str = "default",
    priority: int = 0,
    delay: float | None = None,
) -> str:
    if user is not None:
        # Before the import: importing (or calling a factory) runs code on the user's behalf.
        try:
            check_may_start(user)
        except DurableError as exc:
            raise CliError(str(exc)) from None
    workflow = load_workflow(path)
    data = parse_json(input, "--input")
    try:
        instance_id = api.start(
            workflow, label=label, input=data, user=user, on_failure=on_failure, id=id,
            queue=queue, priority=priority, delay=delay,
        )  # fmt: skip
    except DurableError as exc:
        raise CliError(str(exc)) from None
    return str(instance_id)


def resume(instance_id: str, *, user: Any = None) -> str:
    instance = _controlled(instance_id, user, "resume")
    try:
        lifecycle.resume(instance.pk)
    except DurableError as exc:
        raise CliError(str(exc)) from None
    return f"resumed {instance.pk}: it runs again from its failed steps"


def fork(instance_id: str, *, from_step: str, user: Any = None) -> str:
    instance = _instance(instance_id, user)
    try:
        if user is not None:
            check_start(user, instance.graph)
        new = lifecycle.fork(instance.pk, from_step=from_step)
    except DurableError as exc:
        raise CliError(str(exc)) from None
    return str(new)


def cancel_where(
    *,
    label: str | None = None,
    queue: str | None = None,
    status: str | None = None,
    user: Any = None,
) -> str:
    try:
        count = lifecycle.cancel_where(label=label, queue=queue, status=status, user=user)
    except ValueError as exc:
        raise CliError(str(exc)) from None
    return f"cancelled {count} instance(s)"


def purge(*, older_than_days: float, status: str | None = None, user: Any = None) -> str:
    if user is not None and not user.is_staff:
        raise CliError("only staff may purge instances")
    try:
        count = lifecycle.purge(older_than=timedelta(days=older_than_days), status=status)
    except ValueError as exc:
        raise CliError(str(exc)) from None
    return (
        f"purged {count} workflow(s) finished more than {older_than_days:g} day(s) ago,"
        " with their child workflows"
    )


def schedule(name: str, path: str, *, cron: str, input: str | None = None, user: Any = None) -> str:
    workflow = load_workflow(path)
    data = parse_json(input, "--input")
    try:
        if user is not None:
            check_start(user, compile_graph(workflow))
        row = schedules.schedule(name, workflow, cron=cron, input=data)
    except DurableError as exc:
        raise CliError(str(exc)) from None
    return f"schedule {row.name} ({row.cron}): next run {row.next_run_at.isoformat()}"


def unschedule(name: str, *, user: Any = None) -> str:
    if user is not None and not user.is_staff:
        raise CliError("only staff may delete schedules")
    if schedules.unschedule(name):
        return f"schedule {name} deleted"
    raise CliError(f"no schedule named {name!r}")


def status(instance_id: str, *, user: Any = None) -> str:
    return _instance(instance_id, user).status


def result(instance_id: str, *, user: Any = None) -> str:
    instance = _instance(instance_id, user)
    if instance.status == InstanceStatus.FAILED:
        raise CliError(f"instance {instance.pk} failed: {instance.error}")
    if instance.status != InstanceStatus.COMPLETED:
        raise CliError(f"instance {instance.pk} is {instance.status}: no result yet")
    return _dumps(instance.result)


def cancel(instance_id: str, *, user: Any = None) -> str:
    instance = _controlled(instance_id, user, "cancel")
    if api.cancel(instance.pk):
        return f"cancelled {instance.pk}"
    return f"{instance.pk} had already finished ({api.status(instance.pk)}); nothing to cancel"


def signal(instance_id: str, name: str, *, data: str | None = None, user: Any = None) -> str:
    payload = parse_json(data, "--data")
    instance = _controlled(instance_id, user, "signal")
    try:
        taken = api.signal(instance.pk, name, payload)
    except DurableError as exc:
        raise CliError(str(exc)) from None
    if taken:
        return f"signal {name!r} delivered to {instance.pk}: its waiting step is ready"
    return f"signal {name!r} kept for {instance.pk}: it will be taken when the workflow waits"


def explain(instance_id: str, *, user: Any = None, as_json: bool = False) -> str:
    instance = _instance(instance_id, user)
    data = inspection.explain(instance.pk)
    open_waits = inspection.waits(instance.pk)
    if as_json:
        data["waits"] = open_waits
        return _dumps(data)
    lines = [data["text"]]
    for wait in open_waits:
        until = f"until {wait['until'].isoformat()}" if wait["until"] else "with no timeout"
        state = "; signal received, waiting for a worker" if wait["signalled"] else ""
        lines.append(f"waiting: {wait['label']} {until}{state}")
    return "\n".join(lines)


def list_instances(
    *,
    status: str | None = None,
    label: str | None = None,
    page: int = 1,
    per_page: int = 20,
    user: Any = None,
) -> str:
    if page < 1:
        raise CliError("--page must be 1 or more")
    if not 1 <= per_page <= MAX_PER_PAGE:
        raise CliError(f"--per-page must be between 1 and {MAX_PER_PAGE}")
    try:
        qs = api.instances(status=status, label=label, user=user)
    except ValueError as exc:
        raise CliError(str(exc)) from None
    offset = (page - 1) * per_page
    # One row more than the page tells whether a next page exists, without a count(*) over
    # the whole table (served by the created_at / status / label / owner indexes).
    rows = list(
        qs.select_related("owner").only("id", "label", "status", "created_at", "owner__username")[
            offset : offset + per_page + 1
        ]
    )
    more = len(rows) > per_page
    rows = rows[:per_page]
    if not rows:
        return "no instances" if page == 1 else f"page {page}: no instances"
    lines = [f"{'id':36}  {'status':9}  {'created (UTC)':19}  {'owner':12}  label"]
    for row in rows:
        owner = row.owner.get_username() if row.owner_id else "-"
        created = row.created_at.strftime("%Y-%m-%d %H:%M:%S")
        lines.append(f"{row.pk!s:36}  {row.status:9}  {created:19}  {owner:12}  {row.label}")
    footer = f"page {page}, rows {offset + 1}-{offset + len(rows)}"
    if more:
        footer += f"; next: --page {page + 1}"
    lines.append(footer)
    return "\n".join(lines)
