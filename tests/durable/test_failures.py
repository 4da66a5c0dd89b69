"""Failures driven in-process: retries with backoff, attempts used up, permanent errors,
the on_failure hook (and a broken one), a failed join branch, step timeouts."""

from __future__ import annotations

import pytest
import time_machine
from django.db import connection, transaction
from django.utils import timezone

from jobs.durable import result, sql, start, status, task
from jobs.durable.models import Instance, Step
from tests.durable.support import rows

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("rows_table")]

S = "tests.durable.steps."


def t(name: str, **options) -> object:
    return task(S + name, **options)


def steps_of(instance_id) -> list[Step]:
    return list(Step.objects.filter(instance_id=instance_id).order_by("id"))


# --- retries and failures ---------------------------------------------------------------------
def test_retries_back_off_exponentially_with_jitter_then_succeed(worker):
    with time_machine.travel("2026-01-05 10:00:00Z", tick=False) as clock:
        iid = start(t("fail_first", backoff=2, backoff_cap=5), input={"fail_times": 3})
        expected_windows = [2, 4, 5]  # 2 * 2**(n-1), capped at 5
        for window in expected_windows:
            assert worker.run_one()
            step = Step.objects.get(instance_id=iid)
            assert step.status == "ready" and "transient failure" in step.error
            delay = (step.run_at - timezone.now()).total_seconds()
            assert window / 2 <= delay <= window
            assert not worker.run_one(), "not claimable before its backoff ends"
            clock.shift(delay)
        assert worker.run_one()
    assert status(iid) == "completed" and result(iid) == 4
    assert Step.objects.get(instance_id=iid).attempts == 4
    assert len(rows("fail_first")) == 1


def test_attempts_used_up_fail_the_step_and_instance_and_call_the_hook(worker, settings):
    settings.ACURIO_MAX_ATTEMPTS = 3
    with time_machine.travel("2026-01-05 10:00:00Z", tick=False) as clock:
        iid = start(t("always_fail") >> t("record"), on_failure=S + "on_failure")
        for _ in range(3):
            assert worker.run_one()
            clock.shift(600)
    instance = Instance.objects.get(pk=iid)
    assert instance.status == "failed"
    assert instance.error == (
        "step always_fail failed after 3 attempt(s): RuntimeError: the resolver is down"
    )
    assert rows("always_fail") == [], "each failed attempt's writes were rolled back"
    assert [r[1] for r in rows("on_failure")] == ["on_failure"]
    assert Step.objects.filter(instance_id=iid, kind="task").count() == 1, "next never activated"


def test_permanent_error_fails_at_once_with_its_message(worker):
    iid = start(t("permanent", max_attempts=5) >> t("record"), on_failure=S + "on_failure")
    assert worker.drain() == 1
    instance = Instance.objects.get(pk=iid)
    assert (instance.status, instance.error) == ("failed", "the thesis file is empty")
    step = Step.objects.get(instance_id=iid, kind="task")
    assert (step.status, step.attempts) == ("failed", 1)
    assert rows("permanent") == []
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("SELECT note FROM engine_rows WHERE tag = 'on_failure'")
        assert cursor.fetchall() == [("the thesis file is empty",)]


def test_failed_join_branch_cancels_its_pending_siblings(worker):
    iid = start(t("permanent") & t("record") & t("record"))
    first = worker.claim(limit=1)[0]
    worker.execute(first)
    assert status(iid) == "failed"
    assert sorted(s.status for s in steps_of(iid)) == [
        "cancelled",
        "cancelled",
        "cancelled",
        "failed",
    ]
    assert worker.drain() == 0


def test_broken_hook_does_not_block_the_failure(worker):
    iid = start(t("permanent"), on_failure=S + "broken_hook")
    worker.drain()
    instance = Instance.objects.get(pk=iid)
    assert instance.status == "failed"
    assert instance.error == "the thesis file is empty (on_failure hook failed: hook exploded)"


def test_timeout_fails_an_attempt_that_runs_too_long(worker):
    iid = start(sql("SELECT pg_sleep(2)", timeout=0.2, max_attempts=1))
    worker.drain()
    assert status(iid) == "failed"
    assert "statement timeout" in Instance.objects.get(pk=iid).error
