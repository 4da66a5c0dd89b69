"""Queues: concurrency and rate limits that hold across workers (checked in the database with
four worker processes), limits declared in code or settings, and which queues a worker serves."""

from __future__ import annotations

import signal
import threading

import pytest
from django.db import connection
from django.utils import timezone

from jobs.durable import DefinitionError, Queue, Worker, start, start_many, status, task
from jobs.durable import queues as queues_module
from jobs.durable.models import Instance, QueueState
from jobs.durable.queues import declared_queues, sync_queues
from tests.durable.support import spawn_worker, wait_for

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("rows_table")]

HOLD = task("tests.durable.queue_steps.hold")


@pytest.fixture
def declare():
    """Declare queues for one test (and forget them after it)."""
    names = []

    def declare(name, **limits):
        names.append(name)
        queue = Queue(name, **limits)
        sync_queues(timezone.now(), [queue])
        return queue

    yield declare
    for name in names:
        queues_module._declared.pop(name, None)


def test_queue_declarations_are_checked():
    for limits, message in [
        ({"concurrency": 0}, "concurrency"),
        ({"concurrency": True}, "concurrency"),
        ({"rate": (0, 1.0)}, "rate"),
        ({"rate": (5, 0)}, "rate"),
        ({"rate": 5}, "rate"),
        ({"priority_levels": 0}, "priority_levels"),
        ({"priority_levels": 11}, "priority_levels"),
        ({"priority_levels": True}, "priority_levels"),
    ]:
        with pytest.raises(DefinitionError, match=message):
            Queue("bad", **limits)
    with pytest.raises(DefinitionError, match="queue name"):
        Queue("")


def test_settings_declare_queues_too(settings):
    settings.ACURIO_DURABLE_QUEUES = {"resolver": {"concurrency": 4, "rate": [10, 1.0]}}
    queue = declared_queues()["resolver"]
    assert (queue.concurrency, queue.rate) == (4, (10, 1.0))
    queues_module._declared.pop("resolver", None)
    sync_queues(timezone.now(), [queue])
    row = QueueState.objects.get(name="resolver")
    assert (row.concurrency, row.rate_count, row.rate_seconds, row.tokens) == (4, 10, 1.0, 10)


def test_a_queue_takes_only_the_priority_levels_it_declares(declare, settings):
    from jobs.durable import schedule

    declare("mail", priority_levels=3)
    flow = task("tests.durable.steps.record")
    assert Instance.objects.get(pk=start(flow, queue="mail", priority=2).id).priority == 2
    for attempt in (
        lambda: start(flow, queue="mail", priority=3),
        lambda: start_many(flow, [{}, {}], queue="mail", priority=9),
        lambda: schedule("mail-nightly", flow, cron="0 3 * * *", queue="mail", priority=5),
    ):
        with pytest.raises(
            DefinitionError, match=r"queue 'mail' has 3 priority level\(s\), 0 to 2"
        ):
            attempt()
    assert Instance.objects.filter(queue="mail").count() == 1
    start(flow, queue="other", priority=9)  # an undeclared queue takes every priority
    settings.ACURIO_DURABLE_QUEUES = {"bulk": {"priority_levels": 1}}
    start(flow, queue="bulk")
    with pytest.raises(DefinitionError, match="queue 'bulk' has 1 priority level"):
        start(flow, queue="bulk", priority=1)
    queues_module._declared.pop("bulk", None)


def test_a_limited_queue_never_runs_more_than_its_concurrency(declare):
    declare("small", concurrency=2)
    start_many(HOLD, [{"queue": "small", "hold": 0} for _ in range(5)], queue="small")
    worker = Worker(worker_id="w", chain=False)
    first = worker.claim(limit=5)
    assert len(first) == 2
    assert worker.claim(limit=5) == []
    worker.execute(first[0])
    assert len(worker.claim(limit=5)) == 1  # one slot came free


def test_a_rate_limited_queue_starts_no_more_than_its_rate(declare, clock):
    declare("rated", rate=(2, 1.0))
    start_many(HOLD, [{"queue": "rated", "hold": 0} for _ in range(6)], queue="rated")
    worker = Worker(worker_id="w", chain=False)
    assert len(worker.claim(limit=6)) == 2  # a full bucket
    assert worker.claim(limit=6) == []
    clock.shift(0.5)
    assert len(worker.claim(limit=6)) == 1  # refilled at 2 a second
    clock.shift(10)
    assert len(worker.claim(limit=6)) == 2  # never more than the bucket holds


def test_limited_queue_steps_are_not_chained_and_not_taken_by_the_plain_claim(declare):
    declare("small", concurrency=1)
    iid = start(HOLD >> HOLD, input={"queue": "small", "hold": 0}, queue="small")
    worker = Worker(worker_id="w")  # chaining on
    worker.drain()
    assert status(iid) == "completed"
    # Each step went through the queue's claim: none was inserted already claimed.
    assert [note for *_, note in rows_with_notes()] == ["1", "1"]


def rows_with_notes() -> list[tuple]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT instance_id, tag, note FROM engine_rows ORDER BY id")
        return cursor.fetchall()


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_concurrency_holds_across_four_worker_processes(declare):
    declare("limited", concurrency=3)
    start_many(HOLD, [{"queue": "limited", "hold": 0.15} for _ in range(24)], queue="limited")
    seen: list[int] = []
    stop = threading.Event()

    def sample() -> None:
        # The database's own view, independent of the workers: running leaves of the queue.
        from django.db import connections

        with connections["default"].cursor() as cursor:
            while not stop.is_set():
                cursor.execute(
                    "SELECT count(*) FROM durable_step WHERE queue = 'limited'"
                    " AND status = 'running' AND lease_expires_at IS NOT NULL"
                )
                seen.append(cursor.fetchone()[0])
                stop.wait(0.01)
        connections["default"].close()

    sampler = threading.Thread(target=sample)
    sampler.start()
    workers = [spawn_worker("--concurrency", "2", "--poll-interval", "0.2") for _ in range(4)]
    try:
        wait_for(
            lambda: not Instance.objects.unfinished().exists(), timeout=120, what="all instances"
        )
    finally:
        stop.set()
        sampler.join()
        for proc in workers:
            proc.send_signal(signal.SIGTERM)
        for proc in workers:
            proc.communicate(timeout=30)
    assert Instance.objects.filter(status="completed").count() == 24
    counts = [int(note) for *_, note in rows_with_notes()]
    assert len(counts) == 24
    assert max(seen) <= 3 and max(counts) <= 3, (max(seen), max(counts))
    # The limit was reached, not merely never approached: steps did run side by side.
    assert max(seen + counts) >= 2
    assert len({pid for pid in pids()}) >= 2


def pids() -> list[int]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT DISTINCT pid FROM engine_rows")
        return [row[0] for row in cursor.fetchall()]


def test_a_fair_queue_takes_owners_in_turn(declare, django_user_model):
    declare("shared", fair=True)
    busy = django_user_model.objects.create(username="busy")
    quiet = django_user_model.objects.create(username="quiet")
    hold = {"queue": "shared", "hold": 0}
    start_many(HOLD, [hold] * 5, queue="shared", owner=busy)
    late = start(HOLD, queue="shared", owner=quiet, input=hold)
    worker = Worker(worker_id="w", chain=False)
    first = worker.claim()  # busy's oldest: nobody runs anything yet
    assert Instance.objects.get(pk=first[0].instance_id).owner == busy
    # busy now has one step running, quiet none: quiet's later start goes next.
    assert worker.claim()[0].instance_id == late


def test_priorities_hold_across_limited_and_plain_queues(declare):
    declare("limited", concurrency=5)
    hold = {"queue": "limited", "hold": 0}
    low_limited = start(HOLD, queue="limited", priority=1, input=hold)
    high_plain = start(HOLD, priority=8, input={"queue": "default", "hold": 0})
    low_plain = start(HOLD, priority=0, input={"queue": "default", "hold": 0})
    high_limited = start(HOLD, queue="limited", priority=9, input=hold)
    worker = Worker(worker_id="w", chain=False)
    order = [worker.claim()[0].instance_id for _ in range(4)]
    assert order == [high_limited, high_plain, low_limited, low_plain]


def test_a_group_claim_takes_the_most_urgent_steps_of_every_queue(declare):
    declare("limited", concurrency=5)
    hold = {"queue": "limited", "hold": 0}
    low_limited = start(HOLD, queue="limited", priority=1, input=hold)
    high_plain = start(HOLD, priority=8, input={"queue": "default", "hold": 0})
    start(HOLD, priority=0, input={"queue": "default", "hold": 0})
    worker = Worker(worker_id="w", chain=False)
    assert [s.instance_id for s in worker.claim(limit=2)] == [high_plain, low_limited]


def test_a_limited_queue_at_its_limit_holds_back_no_plain_step(declare):
    declare("single", concurrency=1)
    hold = {"queue": "single", "hold": 0}
    start_many(HOLD, [hold, hold], queue="single", priority=9)
    worker = Worker(worker_id="w", chain=False)
    assert len(worker.claim()) == 1  # the queue's one slot is taken now
    plain = start(HOLD, priority=0, input={"queue": "default", "hold": 0})
    assert [s.instance_id for s in worker.claim()] == [plain]
