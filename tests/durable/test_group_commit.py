"""Group commit: a worker claims several ready steps in one statement and commits their
checkpoints together; each step exactly once, a failing or fenced step rolled back to its own
savepoint. (The SIGKILL test in test_processes runs with group commit on as well.)"""

from __future__ import annotations

import pytest

from jobs.durable import Worker, cancel, start, status, task
from jobs.durable.models import Step
from tests.durable.support import rows

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("rows_table")]

Q = "tests.durable.queue_steps."


def test_one_claim_runs_a_group_of_steps_of_different_instances(transactional_db):
    handles = [start(task(Q + "write")) for _ in range(6)]
    worker = Worker(worker_id="g", chain=False, group=6)
    assert worker.run_one() is True
    assert [status(h) for h in handles] == ["completed"] * 6
    assert len(rows("kept")) == 6
    assert worker.steps_run == 6


def test_a_failing_step_rolls_back_to_its_own_savepoint():
    ok_before = start(task(Q + "write"))
    doomed = start(task(Q + "write_then_fail", max_attempts=2))
    ok_after = start(task(Q + "write"))
    worker = Worker(worker_id="g", chain=False, group=3)
    worker.run_one()
    assert status(ok_before) == status(ok_after) == "completed"
    assert rows("doomed") == []  # its write went with its savepoint
    step = Step.objects.get(instance_id=doomed)
    assert (step.status, step.attempts) == ("ready", 1)  # a retry is scheduled
    assert "fails after writing" in step.error


def test_a_step_fenced_in_a_group_leaves_nothing_and_the_others_commit():
    keep = start(task(Q + "write"))
    gone = start(task(Q + "write"))
    worker = Worker(worker_id="g", chain=False, group=2)
    claimed = worker.claim(2)
    cancel(gone)  # its claim is lost before the group runs
    counts = worker.execute_group(claimed)
    assert counts == {"completed": 1, "fenced": 1, "failed": 0}
    assert status(keep) == "completed" and status(gone) == "cancelled"
    assert [r[0] for r in rows("kept")] == [keep.id]


def test_a_group_holds_steps_of_one_priority_so_an_urgent_step_never_waits_for_others():
    """A group commits together, so a claim takes the most urgent priority it finds and
    nothing below it: an urgent step is not held back by the steps grouped with it."""
    low = [start(task(Q + "write"), priority=0) for _ in range(4)]
    urgent = [start(task(Q + "write"), priority=9) for _ in range(2)]
    worker = Worker(worker_id="g", chain=False, group=6)
    claimed = worker.claim(6)
    assert sorted(s.instance_id for s in claimed) == sorted(urgent)
    assert set(Step.objects.filter(instance_id__in=low).values_list("status", flat=True)) == {
        "ready"
    }
    worker.execute_group(claimed)
    assert [status(h) for h in urgent] == ["completed"] * 2
    assert {s.instance_id for s in worker.claim(6)} == set(low)  # then the rest, together


def test_the_group_size_is_checked():
    with pytest.raises(ValueError, match="group"):
        Worker(group=0)


def test_group_commit_saves_commits(monkeypatch, transactional_db):
    committed = []
    from django.db import connections

    wrapper = type(connections["default"])
    original = wrapper._commit

    def counting(self):
        committed.append(1)
        return original(self)

    monkeypatch.setattr(wrapper, "_commit", counting)
    for _ in range(20):
        start(task(Q + "write"))
    del committed[:]
    Worker(worker_id="g", chain=False, group=10).drain()
    grouped = len(committed)
    for _ in range(20):
        start(task(Q + "write"))
    del committed[:]
    Worker(worker_id="s", chain=False, group=1).drain()
    single = len(committed)
    assert len(rows("kept")) == 40
    # Two groups of ten: two checkpoint transactions; one by one: one per step.
    assert (grouped, single) == (2, 20)


def _count_commits(monkeypatch) -> list[int]:
    from django.db import connections

    committed: list[int] = []
    wrapper = type(connections["default"])
    original = wrapper._commit

    def counting(self):
        committed.append(1)
        return original(self)

    monkeypatch.setattr(wrapper, "_commit", counting)
    return committed


def test_a_group_chains_its_sequences_next_steps_and_commits_once_per_group(
    monkeypatch, transactional_db
):
    flows = [start(task(Q + "write") >> task(Q + "write") >> task(Q + "write")) for _ in range(10)]
    committed = _count_commits(monkeypatch)
    worker = Worker(worker_id="g", group=10)
    assert worker.run_one() is True
    # One claim (its own short statement), then one transaction per step of the sequences:
    # each checkpoint inserted the next step already claimed, so no claim in between.
    assert len(committed) == 3
    assert [status(h) for h in flows] == ["completed"] * 10
    assert len(rows("kept")) == 30
    tasks = Step.objects.filter(kind="task")
    assert {(s.status, s.attempts) for s in tasks} == {("completed", 1)}
    assert worker.steps_run == 30


def test_a_group_transaction_claims_the_next_group(monkeypatch, transactional_db):
    flows = [start(task(Q + "write")) for _ in range(12)]
    committed = _count_commits(monkeypatch)
    worker = Worker(worker_id="g", group=4)
    assert worker.run_one() is True
    # The first claim commits alone (a statement, no transaction); each group's transaction
    # claims the next group (the last one finds nothing): three groups, three commits.
    assert len(committed) == 3
    assert [status(h) for h in flows] == ["completed"] * 12
    assert {s.attempts for s in Step.objects.filter(kind="task")} == {1}


def test_a_failing_step_of_a_chained_group_rolls_back_alone_and_chains_nothing():
    ok = start(task(Q + "write") >> task(Q + "write"))
    doomed = start(task(Q + "write") >> task(Q + "write_then_fail", max_attempts=1))
    worker = Worker(worker_id="g", group=2)
    worker.run_one()
    assert status(ok) == "completed"
    assert status(doomed) == "failed"
    assert rows("doomed") == []
    assert len(rows("kept")) == 3


def test_a_bounded_drain_with_groups_neither_chains_nor_claims_past_its_bound():
    first, second = start(task(Q + "write") >> task(Q + "write")), start(task(Q + "write"))
    assert Worker(worker_id="g", group=10).drain(max_steps=2) == 2
    assert status(second) == "completed" and status(first) == "running"
    nxt = Step.objects.get(instance_id=first, node_id=2)
    assert (nxt.status, nxt.attempts, nxt.lease_owner) == ("ready", 0, "")


def test_a_draining_worker_puts_its_carried_steps_back():
    flows = [start(task(Q + "write") >> task(Q + "write")) for _ in range(3)]
    worker = Worker(worker_id="g", group=3)
    original = worker.execute_group

    def group_then_signal(steps, **options):
        counts = original(steps, **options)
        worker.shutdown = True  # SIGTERM arrives during the first group
        return counts

    worker.execute_group = group_then_signal
    assert worker.run_one()
    second = Step.objects.filter(node_id=2, instance_id__in=flows)
    assert {(s.status, s.lease_owner) for s in second} == {("ready", "")}


def test_the_worker_command_passes_its_group_on(monkeypatch):
    from django.core.management import call_command

    from jobs.durable.management.commands import worker as command

    made = {}

    class Recorder:
        def __init__(self, **options):
            made.update(options)

        def install_signal_handlers(self):
            pass

        def run(self):
            return 0

    monkeypatch.setattr(command, "Worker", Recorder)
    call_command("worker", "--once", "--group", "7")
    assert made["group"] == 7


def test_a_step_fenced_in_a_batched_group_leaves_nothing_and_the_others_commit_once():
    keep = start(task(Q + "write") >> task(Q + "write"))
    gone = start(task(Q + "write") >> task(Q + "write"))
    worker = Worker(worker_id="g", group=2)
    claimed = worker.claim(2)
    cancel(gone)  # its claim is lost before the group runs
    # The batched checkpoint finds it fenced: the group rolls back and runs step by step.
    counts = worker.execute_group(claimed, chain=True, claim_up_to=2)
    assert counts == {"completed": 1, "fenced": 1, "failed": 0}
    assert status(gone) == "cancelled"
    assert [r[0] for r in rows("kept")] == [keep.id]  # its task ran twice, committed once
    (carried,) = worker._local.carried
    assert (carried.instance_id, carried.node_id, carried.attempts) == (keep.id, 2, 1)
    worker.execute_group([carried])
    assert status(keep) == "completed" and len(rows("kept")) == 2


def test_a_batched_checkpoint_whose_sequence_stopped_meanwhile_activates_nothing():
    iid = start(task(Q + "write") >> task(Q + "write"))
    worker = Worker(worker_id="g", group=2)
    claimed = worker.claim(2)
    Step.objects.filter(instance_id=iid, parent__isnull=True).update(status="failed")
    assert worker.execute_group(claimed, chain=True, claim_up_to=2)["completed"] == 1
    steps = Step.objects.filter(instance_id=iid).order_by("node_id")
    assert [(s.node_id, s.status) for s in steps] == [(0, "failed"), (1, "completed")]
    assert worker._local.carried == []
