"""The engine driven in-process: each operator and verb, retries, failures, cancellation,
fencing, lease recovery and upgrade safety. A Worker is driven step by step; time is
controlled with time-machine."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from datetime import timedelta
from pathlib import Path

import pytest
import time_machine
from django.db import connection, transaction
from django.utils import timezone

from jobs.durable import (
    DefinitionError,
    InstanceNotFound,
    Worker,
    cancel,
    current_step,
    explain,
    fan_out,
    instances,
    recover_expired_leases,
    result,
    sql,
    start,
    status,
    task,
)
from jobs.durable.models import Instance, Step
from jobs.durable.worker import claim_sql
from tests.engine.conftest import rows

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("rows_table")]

S = "tests.engine.steps."


def t(name: str, **options) -> object:
    return task(S + name, **options)


def steps_of(instance_id) -> list[Step]:
    return list(Step.objects.filter(instance_id=instance_id).order_by("id"))


# --- operators ------------------------------------------------------------------------------
def test_sequence_runs_in_order_and_named_results_flow(worker):
    flow = t("number").as_("n") >> t("plus_one").as_("n1") >> t("record")
    iid = start(flow, input={"n": 41})
    assert status(iid) == "pending"
    assert worker.drain() == 3
    assert status(iid) == "completed"
    named = {s.name: s.output for s in steps_of(iid) if s.name}
    assert named == {"n": 41, "n1": 42}
    # result() is the last step's output
    last = [s for s in steps_of(iid) if s.kind == "task"][-1]
    assert result(iid) == last.id


def test_join_runs_branches_in_parallel_and_lists_their_outputs(worker):
    flow = (t("number").as_("n") & t("items")) >> t("plus_one")
    iid = start(flow, input={"n": 1, "count": 2})
    claimed = worker.claim(limit=10)
    assert len(claimed) == 2, "both branches are ready at once"
    for step in claimed:
        assert worker.execute(step) == "completed"
    join = Step.objects.get(instance_id=iid, kind="all")
    assert join.status == "completed" and join.output == [1, [0, 1]]
    worker.drain()
    assert result(iid) == 2


def test_fan_out_runs_one_child_per_chunk_and_joins_in_order(worker):
    flow = (
        t("items").as_("xs")
        >> fan_out(t("double_chunk"), over="xs", chunk=3).as_("doubled")
        >> sql("SELECT %(doubled)s::int[] AS doubled")
    )
    iid = start(flow, input={"count": 10})
    worker.run_one()  # items
    children = Step.objects.filter(instance_id=iid, chunk_index__isnull=False).order_by(
        "chunk_index"
    )
    assert [c.chunk for c in children] == [[0, 1, 2], [3, 4, 5], [6, 7, 8], [9]]
    assert {c.status for c in children} == {"ready"}
    # any worker may take any chunk; run them out of order
    other = Worker(worker_id="other")
    claimed = worker.claim(limit=2) + other.claim(limit=2)
    for step in reversed(claimed):
        (other if step in claimed[2:] else worker).execute(step)
    worker.drain()
    assert result(iid) == [{"doubled": [0, 2, 4, 6, 8, 10, 12, 14, 16, 18]}]


def test_fan_out_appends_non_list_outputs_in_chunk_order(worker):
    flow = t("items").as_("xs") >> fan_out(t("chunk_sum"), over="xs", chunk=2)
    iid = start(flow, input={"count": 5})
    worker.drain()
    assert result(iid) == [1, 5, 4]


def test_fan_out_over_an_empty_list_completes_with_an_empty_list(worker):
    iid = start(t("items").as_("xs") >> fan_out(t("chunk_sum"), over="xs"), input={"count": 0})
    worker.drain()
    assert status(iid) == "completed" and result(iid) == []


def test_fan_out_over_a_non_list_fails_the_instance_clearly(worker):
    iid = start(t("not_a_list").as_("xs") >> fan_out(t("chunk_sum"), over="xs"))
    worker.drain()
    assert status(iid) == "failed"
    assert Instance.objects.get(pk=iid).error == "fan_out over 'xs' needs a list result, got dict"


def test_sql_step_binds_named_results_and_returns_rows_or_rowcount(worker):
    flow = (
        t("number").as_("n")
        >> sql("SELECT %(n)s::int * 2 AS twice, %(input)s::jsonb ->> 'who' AS who").as_("rows")
        >> sql(
            "INSERT INTO engine_rows (instance_id, tag) SELECT %(instance_id)s, 'sql'"
            " FROM generate_series(1, %(n)s)"
        )
    )
    iid = start(flow, input={"n": 3, "who": "ada"})
    worker.drain()
    rows_step = Step.objects.get(instance_id=iid, name="rows")
    assert rows_step.output == [{"twice": 6, "who": "ada"}]
    assert result(iid) == 3
    assert len(rows("sql")) == 3


def test_sql_error_is_retried_then_fails_with_the_database_message(worker):
    iid = start(sql("SELECT * FROM no_such_table", max_attempts=1))
    worker.drain()
    assert status(iid) == "failed"
    assert 'relation "no_such_table" does not exist' in Instance.objects.get(pk=iid).error


def test_step_reading_an_unknown_name_fails_permanently(worker):
    iid = start(t("read_missing"))
    worker.drain()
    assert (
        Instance.objects.get(pk=iid).error
        == "no completed step of this workflow is named 'nowhere'"
    )


def test_non_json_output_fails_permanently(worker):
    iid = start(t("bad_output"))
    worker.drain()
    assert "not JSON-serialisable" in Instance.objects.get(pk=iid).error


# --- start and the verbs ----------------------------------------------------------------------
def test_start_joins_the_callers_transaction():
    with pytest.raises(RuntimeError), transaction.atomic():
        iid = start(t("record"))
        assert Instance.objects.filter(pk=iid).exists()
        raise RuntimeError("the view failed after starting")
    assert not Instance.objects.filter(pk=iid).exists()
    assert not Step.objects.filter(instance_id=iid).exists()


def test_start_stores_label_owner_input_and_graph(user):
    iid = start(t("record"), label="analysis", owner=user, input={"job": 7})
    instance = Instance.objects.get(pk=iid)
    assert isinstance(iid, uuid.UUID)
    assert (instance.label, instance.owner, instance.input) == ("analysis", user, {"job": 7})
    assert instance.graph["path"] == S + "record"


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"workflow": task("tests.engine.steps.nope")}, "cannot be imported"),
        ({"workflow": task("tests.engine.steps.ROWS_DDL")}, "is not callable"),
        ({"input": {"when": object()}}, "must be JSON-serialisable"),
        ({"on_failure": "tests.engine.steps.nope"}, "on_failure 'tests.engine.steps.nope'"),
        ({"label": "x" * 201}, "at most 200 characters"),
    ],
)
def test_start_rejects_bad_input_with_a_clear_error(kwargs, message):
    workflow = kwargs.pop("workflow", t("record"))
    with pytest.raises(DefinitionError, match=message):
        start(workflow, **kwargs)
    assert not Instance.objects.exists()


def test_verbs_reject_unknown_and_malformed_ids():
    for verb in (status, result, cancel, explain):
        with pytest.raises(InstanceNotFound, match="no workflow instance"):
            verb(uuid.uuid4())
        with pytest.raises(InstanceNotFound, match="is not a workflow instance id"):
            verb("not-a-uuid")


def test_result_is_none_until_completed(worker):
    iid = start(t("number"), input={"n": 5})
    assert result(iid) is None
    worker.drain()
    assert result(str(iid)) == 5


def test_instances_filters_by_owner_status_and_label(user, other_user, worker):
    a = start(t("number"), label="x", owner=user, input={"n": 1})
    b = start(t("number"), label="y", owner=other_user, input={"n": 1})
    worker.drain()
    c = start(t("number"), label="x", owner=user, input={"n": 1})
    assert [i.id for i in instances(owner=user)] == [c, a]
    assert [i.id for i in instances(status="completed")] == [b, a]
    assert [i.id for i in instances(label="x", status="pending")] == [c]
    assert [i.id for i in instances(user=other_user)] == [b]
    with pytest.raises(ValueError, match="unknown status 'done'"):
        instances(status="done")


def test_explain_gives_states_attempts_timings_as_data_and_text(worker):
    flow = t("items").as_("xs") >> fan_out(t("double_chunk"), over="xs", chunk=2) >> t("record")
    with time_machine.travel("2026-01-05 10:00:00Z", tick=False) as clock:
        iid = start(flow, input={"count": 3})
        worker.run_one()
        clock.shift(2)
        worker.run_one()
    data = explain(iid)
    seq = data["graph"]
    assert data["status"] == "running"
    assert [c["state"] for c in seq["children"]] == ["completed", "running", "not started"]
    assert seq["children"][0]["attempts"] == 1 and seq["children"][0]["seconds"] == 0
    body = seq["children"][1]["children"][0]
    assert body["chunks"] == {"completed": 1, "ready": 1}
    assert "xs (items): completed" in data["text"]
    assert "1 completed, 1 ready" in data["text"]
    assert "record: not started" in data["text"]


def test_current_step_reports_fan_out_progress(worker):
    flow = (
        t("items").as_("xs") >> fan_out(t("double_chunk"), over="xs").as_("verify") >> t("record")
    )
    iid = start(flow, input={"count": 3})
    assert current_step(iid) == {
        "step": "xs",
        "kind": "task",
        "state": "ready",
        "done": 0,
        "total": 2,
    }
    worker.run_one()
    worker.run_one()
    assert current_step(iid) == {
        "step": "verify",
        "kind": "task",
        "state": "ready",
        "done": 1,
        "total": 3,
    }
    worker.drain()
    assert current_step(iid)["state"] == "completed"
    assert current_step(uuid.uuid4()) is None


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
    with transaction.atomic():
        from django.db import connection

        with connection.cursor() as cursor:
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


# --- cancellation -------------------------------------------------------------------------------
def test_cancel_stops_pending_steps_and_calls_the_hook(worker):
    iid = start(t("record") >> t("record"), on_failure=S + "on_failure")
    worker.run_one()
    assert cancel(iid) is True
    assert status(iid) == "cancelled"
    assert [s.status for s in steps_of(iid)] == ["cancelled", "completed", "cancelled"]
    assert worker.drain() == 0
    assert cancel(iid) is False, "already finished"
    assert len(rows("on_failure")) == 1


def test_a_step_running_when_cancelled_never_checkpoints(worker):
    iid = start(t("record") >> t("record"))
    step = worker.claim()[0]
    cancel(iid)
    assert worker.execute(step) == "fenced"
    assert rows() == [], "its writes rolled back with the refused checkpoint"
    assert Step.objects.filter(instance_id=iid, status="completed").count() == 0


# --- leases, recovery and the fence ---------------------------------------------------------
def test_expired_lease_is_recovered_and_resumes_from_the_last_checkpoint():
    with time_machine.travel("2026-01-05 10:00:00Z", tick=False) as clock:
        iid = start(t("record") >> t("record"))
        first = Worker(worker_id="w1", lease_seconds=10, chain=False)
        first.run_one()  # step 1 checkpointed
        lost = first.claim()[0]  # step 2 claimed, then the worker "dies"
        clock.shift(9)
        assert recover_expired_leases() == 0, "lease still valid"
        clock.shift(2)
        assert recover_expired_leases() == 1
        step = Step.objects.get(pk=lost.id)
        assert (step.status, step.lease_owner) == ("ready", "")
        assert "lease expired" in step.error
        second = Worker(worker_id="w2", lease_seconds=10)
        assert second.drain() == 1
    assert status(iid) == "completed"
    assert len(rows()) == 2, "step 1 did not run again"


def test_lease_recovery_fails_the_instance_after_max_attempts(settings):
    settings.ACURIO_MAX_ATTEMPTS = 2
    with time_machine.travel("2026-01-05 10:00:00Z", tick=False) as clock:
        iid = start(t("record"), on_failure=S + "on_failure")
        for _ in range(2):
            Worker(lease_seconds=5).claim()
            clock.shift(6)
            assert recover_expired_leases() == 1
    instance = Instance.objects.get(pk=iid)
    assert instance.status == "failed"
    assert "stopped renewing the lease (attempt 2 of 2); giving up" in instance.error
    assert "giving up" in rows("on_failure")[0][1] or len(rows("on_failure")) == 1


def test_recovered_then_reclaimed_step_never_takes_the_stale_checkpoint():
    """River #1302: a slow worker finishing after its lease was recovered and the step
    reclaimed must not overwrite the newer claim's outcome."""
    with time_machine.travel("2026-01-05 10:00:00Z", tick=False) as clock:
        iid = start(t("record"))
        slow, fast = (
            Worker(worker_id="slow", lease_seconds=5),
            Worker(worker_id="fast", lease_seconds=5),
        )
        stale = slow.claim()[0]
        clock.shift(6)
        assert recover_expired_leases() == 1
        fresh = fast.claim()[0]
        assert (stale.id, stale.attempts, fresh.attempts) == (fresh.id, 1, 2)
        assert slow.execute(stale) == "fenced"
        assert rows() == [], "the stale attempt's writes were rolled back"
        assert Step.objects.get(pk=fresh.id).status == "running"
        assert fast.execute(fresh) == "completed"
        # and the other order: the stale worker cannot fail the step either
        assert (
            slow._record_failure(stale, Instance.objects.get(pk=iid).graph, RuntimeError("x"))
            == "fenced"
        )
    step = Step.objects.get(pk=fresh.id)
    assert (step.status, step.attempts, step.output) == ("completed", 2, fresh.id)
    assert [r[3] for r in rows()] == [2]


def test_heartbeat_renews_running_leases_until_the_timeout():
    from jobs.durable.worker import Heartbeat

    with time_machine.travel("2026-01-05 10:00:00Z", tick=False) as clock:
        start(t("record", timeout=20))
        w = Worker(worker_id="hb", lease_seconds=10)
        step = w.claim()[0]
        w._active[step.id] = timezone.now() + timedelta(seconds=20)
        beat = Heartbeat(w)
        clock.shift(8)
        assert beat.beat() == 1
        assert Step.objects.get(pk=step.id).lease_expires_at == timezone.now() + timedelta(
            seconds=10
        )
        clock.shift(13)  # past the step's timeout: no more renewals
        assert beat.beat() == 0


# --- upgrade safety ---------------------------------------------------------------------------
def test_instance_finishes_on_its_stored_graph_after_the_definition_changes(worker):
    import tests.engine.steps as steps_module

    flows = {"analysis": t("version_a") >> t("version_b")}
    iid = start(flows["analysis"])
    worker.run_one()
    # a deploy: the workflow gains a step and drops one; the function bodies change too
    flows["analysis"] = t("version_a") >> t("version_c") >> t("version_c")
    original = steps_module.version_a
    steps_module.version_a = lambda ctx: "new a"
    try:
        worker.drain()
    finally:
        steps_module.version_a = original
    assert status(iid) == "completed" and result(iid) == "b"
    assert sorted(r[1] for r in rows()) == ["a", "b"]


# --- chaining ---------------------------------------------------------------------------------
def test_worker_chains_into_the_next_step_of_a_sequence_without_claiming_it():
    iid = start(t("record") >> t("record") >> t("record"))
    worker = Worker(worker_id="chainer")
    assert worker.run_one()
    assert status(iid) == "completed", "one claim ran the whole sequence"
    assert {s.attempts for s in steps_of(iid) if s.kind == "task"} == {1}
    assert len(rows()) == 3


def test_a_chained_step_is_an_ordinary_leased_claim():
    with time_machine.travel("2026-01-05 10:00:00Z", tick=False) as clock:
        iid = start(t("record") >> t("record"))
        worker = Worker(worker_id="chainer", lease_seconds=10)
        first = worker.claim()[0]
        assert worker.execute(first, chain=True) == "completed"
        chained = worker._local.chained
        step = Step.objects.get(pk=chained.id)
        assert (step.status, step.attempts, step.lease_owner) == ("running", 1, "chainer")
        # the worker dies before running it: lease recovery hands it to another worker
        clock.shift(11)
        assert recover_expired_leases() == 1
        assert Worker(worker_id="other").drain() == 1
    assert status(iid) == "completed" and len(rows()) == 2


def test_draining_worker_puts_its_chained_step_back():
    iid = start(t("record") >> t("record"))
    worker = Worker(worker_id="drainer")
    original = worker.execute

    def execute_then_signal(step, chain=False):
        outcome = original(step, chain=chain)
        worker.shutdown = True  # SIGTERM arrives during the first step
        return outcome

    worker.execute = execute_then_signal
    assert worker.run_one()
    second = Step.objects.get(instance_id=iid, node_id=2)
    assert (second.status, second.lease_owner) == ("ready", "")
    assert status(iid) == "running"


def test_the_last_checkpoint_of_a_workflow_claims_the_next_ready_step_in_its_transaction():
    first, second = start(t("record")), start(t("record"))
    worker = Worker(worker_id="claimer")
    assert worker.run_one()
    assert status(first) == "completed" and status(second) == "completed", (
        "one claim ran both: the first checkpoint's transaction claimed the second step"
    )
    assert [s.attempts for s in Step.objects.filter(kind="task")] == [1, 1]
    assert len(rows()) == 2


def test_a_bounded_drain_neither_chains_nor_claims_past_its_bound():
    first, second = start(t("record") >> t("record")), start(t("record"))
    assert Worker(worker_id="bounded").drain(max_steps=1) == 1
    assert status(first) == "running" and status(second) == "pending"
    # nothing was claimed ahead: no attempt used, no lease taken
    assert {(s.status, s.attempts, s.lease_owner) for s in steps_of(second)} == {("ready", 0, "")}
    assert Step.objects.filter(instance_id=first, node_id=2).first() is not None
    assert Step.objects.get(instance_id=first, node_id=2).status == "ready"


def test_a_draining_worker_claims_no_next_step():
    first, second = start(t("record")), start(t("record"))
    worker = Worker(worker_id="drainer")
    original = worker.execute

    def execute_then_signal(step, chain=False):
        worker.shutdown = True  # SIGTERM arrives during the step
        return original(step, chain=chain)

    worker.execute = execute_then_signal
    assert worker.run_one()
    assert status(first) == "completed" and status(second) == "pending"
    assert {(s.status, s.attempts) for s in steps_of(second)} == {("ready", 0)}


def test_a_checkpoint_whose_sequence_stopped_meanwhile_activates_nothing():
    iid = start(t("record") >> t("record") >> t("record"))
    worker = Worker(worker_id="w", chain=False)
    step = worker.claim()[0]
    Step.objects.filter(instance_id=iid, parent__isnull=True).update(status="failed")
    assert worker.execute(step, chain=True) == "completed"
    assert [(s.node_id, s.status) for s in steps_of(iid)] == [(0, "failed"), (1, "completed")]
    assert worker._local.chained is None


def test_the_workers_hot_statements_are_prepared_on_the_server():
    """Django connects with prepared statements off; the settings let the engine's explicit
    requests through, so PostgreSQL neither parses nor plans a claim or checkpoint twice."""
    start(t("record") >> t("record") >> t("record"))
    Worker(worker_id="w").drain()
    with connection.cursor() as cursor:
        cursor.execute("SELECT statement FROM pg_prepared_statements WHERE from_sql = false")
        prepared = [row[0] for row in cursor.fetchall()]
    assert any("FOR UPDATE SKIP LOCKED" in text for text in prepared), prepared
    assert any(text.startswith("WITH done AS") for text in prepared), prepared
    # The claim's LIMIT is in its text: a parameter there makes PostgreSQL's generic plan
    # scan whole tables, so it would plan every claim afresh.
    assert "LIMIT 1\n" in claim_sql(1) and "LIMIT 5\n" in claim_sql(5)


@pytest.mark.parametrize(("value", "expected"), [(None, "2147483647"), ("0", "None")])
def test_prepared_statements_can_be_turned_off_for_a_pooler(value, expected):
    env = {k: v for k, v in os.environ.items() if k != "DATABASE_PREPARED_STATEMENTS"}
    env["DEBUG"] = "1"
    if value is not None:
        env["DATABASE_PREPARED_STATEMENTS"] = value
    code = "from django.conf import settings as s; print(s.DATABASES['default']['OPTIONS'].get('prepare_threshold'))"
    done = subprocess.run(
        [sys.executable, "manage.py", "shell", "-c", code],
        cwd=Path(__file__).resolve().parents[2],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines()[-1] == expected


# --- rolling deploys and odd states --------------------------------------------------------------
def test_step_of_an_unknown_kind_is_handed_back_without_using_an_attempt(worker):
    with time_machine.travel("2026-01-05 10:00:00Z", tick=False):
        iid = start(t("record"))
        Instance.objects.filter(pk=iid).update(
            graph={"id": 0, "kind": "teleport", "name": "", "opts": {}}
        )
        Step.objects.filter(instance_id=iid).update(kind="teleport")
        step = worker.claim()[0]
        assert worker.execute(step) == "handed back"
        row = Step.objects.get(pk=step.id)
        assert row.status == "ready" and row.max_attempts == step.max_attempts + 1
        assert "unknown node kind 'teleport'" in row.error
        assert (row.run_at - timezone.now()).total_seconds() == 5
    assert status(iid) == "running"


def test_step_of_a_deleted_instance_is_dropped(worker):
    iid = start(t("record"))
    step = worker.claim()[0]
    Instance.objects.filter(pk=iid).delete()
    assert worker.execute(step) == "fenced"
    assert rows() == []
