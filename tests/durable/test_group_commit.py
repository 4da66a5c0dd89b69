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
