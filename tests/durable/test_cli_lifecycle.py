"""The terminal verbs of ids, queues, resume, fork, bulk cancel, purge and schedules
(``manage.py durable ...`` through call_command, and one subprocess)."""

from __future__ import annotations

from datetime import timedelta
from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from django.utils import timezone

from jobs.durable import start, status, task
from jobs.durable.models import Instance, Schedule, instance_pk_for
from tests.durable import lifecycle_steps
from tests.durable.support import run_manage

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("rows_table")]

DECORATED = "tests.durable.decorated.doubling"


def ok(*args: str) -> str:
    out = StringIO()
    call_command("durable", *args, stdout=out)
    return out.getvalue().strip()


def fails(*args: str) -> str:
    with pytest.raises(CommandError) as info:
        ok(*args)
    return str(info.value)


def test_start_with_an_id_queue_priority_and_delay():
    first = ok("start", DECORATED, '{"n": 1}', "--id", "cli-1", "--queue", "q", "--priority", "4")
    assert first == str(instance_pk_for("cli-1"))
    assert ok("start", DECORATED, '{"n": 1}', "--id", "cli-1") == first
    assert "another input" in fails("start", DECORATED, '{"n": 2}', "--id", "cli-1")
    instance = Instance.objects.get(pk=first)
    assert (instance.queue, instance.priority) == ("q", 4)
    assert "priority" in fails("start", DECORATED, "--priority", "12")
    ok("start", DECORATED, '{"n": 1}', "--delay", "60")
    assert ok("status", "cli-1") == "pending"


def test_resume_and_fork_verbs(worker):
    lifecycle_steps.BROKEN["buggy"] = True
    try:
        iid = start(task("tests.durable.lifecycle_steps.buggy"))
        worker.drain()
        pending = ok("start", DECORATED, '{"n": 1}')
        assert "only a failed or cancelled one resumes" in fails("resume", pending)
        lifecycle_steps.BROKEN["buggy"] = False  # the fix
        assert ok("resume", str(iid)).startswith(f"resumed {iid}")
        worker.drain()
        assert status(iid) == "completed"
        forked = ok("fork", str(iid), "--from-step", "buggy")
        worker.drain()
        assert status(forked) == "completed"
        assert "no step named" in fails("fork", str(iid), "--from-step", "nope")
    finally:
        lifecycle_steps.BROKEN["buggy"] = True


def test_cancel_by_filter_and_purge_verbs():
    for _ in range(3):
        ok("start", DECORATED, '{"n": 1}', "--label", "bulk")
    keep = ok("start", DECORATED, '{"n": 1}', "--label", "keep")
    assert ok("cancel", "--label", "bulk") == "cancelled 3 instance(s)"
    assert status(keep) == "pending"
    assert "not both" in fails("cancel", keep, "--label", "bulk")
    assert "at least one filter" in fails("cancel")
    Instance.objects.filter(label="bulk").update(finished_at=timezone.now() - timedelta(days=9))
    assert ok("purge", "--older-than-days", "7") == (
        "purged 3 workflow(s) finished more than 7 day(s) ago, with their child workflows"
    )
    assert Instance.objects.count() == 1


def test_schedule_verbs():
    out = ok("schedule", "nightly", DECORATED, '{"n": 2}', "--cron", "0 3 * * *")
    assert out.startswith("schedule nightly (0 3 * * *): next run ")
    row = Schedule.objects.get()
    assert (row.input, row.next_run_at.hour) == ({"n": 2}, 3)
    assert "cron" in fails("schedule", "bad", DECORATED, "--cron", "every day")
    assert ok("unschedule", "nightly") == "schedule nightly deleted"
    assert "no schedule" in fails("unschedule", "nightly")


@pytest.mark.django_db(transaction=True)
def test_the_new_verbs_in_a_subprocess():
    started = run_manage("durable", "start", DECORATED, '{"n": 3}', "--id", "sub-1")
    assert started.returncode == 0, started.stderr
    assert started.stdout.strip() == str(instance_pk_for("sub-1"))
    cancelled = run_manage("durable", "cancel", "--queue", "default")
    assert (cancelled.returncode, cancelled.stdout.strip()) == (0, "cancelled 1 instance(s)")
    resumed = run_manage("durable", "resume", "sub-1")
    assert resumed.returncode == 0, resumed.stderr
    assert status("sub-1") == "pending"
