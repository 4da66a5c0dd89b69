"""Race, when and loop/Break, driven in-process with a test worker under frozen time."""

from __future__ import annotations

import pytest

from jobs.durable import (
    Break,
    DefinitionError,
    current_step,
    explain,
    loop,
    result,
    sleep,
    start,
    status,
    task,
    wait_for_signal,
    when,
)
from jobs.durable.errors import DurableError
from jobs.durable.graph import Race
from jobs.durable.models import Instance, Step
from tests.durable import steps
from tests.durable.support import rows

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("rows_table")]

S = "tests.durable.steps."


def t(name: str, **options) -> object:
    return task(S + name, **options)


def step_states(iid) -> dict[str, str]:
    return {s.key: s.status for s in Step.objects.filter(instance_id=iid)}


def tags() -> list[str]:
    return sorted(r[1] for r in rows())


# --- race ---------------------------------------------------------------------------------------
def test_race_first_to_finish_wins_and_the_losers_pending_steps_never_run(worker, clock):
    flow = (t("fast") | (t("slow_a") >> t("slow_b"))) >> t("after")
    iid = start(flow)
    claimed = worker.claim(limit=10)
    assert sorted(s.kind for s in claimed) == ["task", "task"], "both branches start at once"
    fast_step = next(s for s in claimed if s.node_id == 2)
    loser_step = next(s for s in claimed if s.node_id != 2)
    assert worker.execute(fast_step) == "completed"

    # In the database: the race completed with the winner's output, the loser's running
    # step is cancelled, and its next step (slow_b) was never created.
    race = Step.objects.get(instance_id=iid, kind="race")
    assert race.status == "completed" and race.output == "fast"
    loser = Step.objects.get(pk=loser_step.id)
    assert loser.status == "cancelled"
    assert Step.objects.filter(instance_id=iid, node_id=5).count() == 0  # slow_b
    # The loser's worker finishes late: its checkpoint is fenced and its write rolled back.
    assert worker.execute(loser_step) == "fenced"
    worker.drain()
    assert status(iid) == "completed" and result(iid) == "after"
    assert tags() == ["after", "fast"]


def test_race_cancels_a_ready_loser_that_no_worker_claimed_yet(worker, clock):
    iid = start(t("fast") | t("slow_a"))
    first = worker.claim(limit=1)[0]
    assert worker.execute(first) == "completed"
    states = step_states(iid)
    assert sorted(states.values()) == ["cancelled", "completed", "completed"]
    assert worker.drain() == 0, "the cancelled loser is never claimed"
    assert tags() == ["fast" if first.node_id == 1 else "slow_a"]
    assert status(iid) == "completed"


def test_race_against_a_sleep_is_a_timeout(worker, clock):
    flow = (sleep(30).as_("timer") | t("fast")).as_("raced") >> t("after")
    iid = start(flow)
    assert worker.drain() == 2  # fast, after; the sleep is not due
    assert Step.objects.get(instance_id=iid, kind="sleep").status == "cancelled"
    assert status(iid) == "completed"

    # The other way round: the timer wins over a wait that nothing ends in time.
    iid = start(sleep(30) | wait_for_signal("approval"))
    assert worker.drain() == 0
    clock.shift(31)
    assert worker.drain() == 1
    assert result(iid) == {"slept": 30.0}
    assert Step.objects.get(instance_id=iid, kind="wait_for_signal").status == "cancelled"


def test_race_needs_two_branches():
    with pytest.raises(DefinitionError, match="at least two"):
        Race(t("fast"))


# --- when ---------------------------------------------------------------------------------------
@pytest.mark.parametrize(("flag", "taken"), [(True, "yes"), (False, "no")])
def test_when_branches_on_a_named_result(worker, clock, flag, taken):
    iid = start(t("flag").as_("ok") >> when("ok", t("yes"), t("no")), input={"flag": flag})
    worker.drain()
    assert result(iid) == taken and tags() == [taken]
    # the branch not taken never gets a step row
    assert Step.objects.filter(instance_id=iid, kind="task").count() == 2


@pytest.mark.parametrize("cond", [S + "input_flag", steps.input_flag])
def test_when_branches_on_a_callable_by_dotted_path(worker, clock, cond):
    iid = start(when(cond, t("yes"), t("no")), input={"flag": True})
    stored = Instance.objects.get(pk=iid).graph
    assert stored["cond"] == {"path": S + "input_flag"}, "the graph stores a dotted path"
    worker.drain()
    assert result(iid) == "yes"


def test_when_without_otherwise_yields_none_and_goes_on(worker, clock):
    iid = start(t("flag").as_("ok") >> when("ok", t("yes")) >> t("after"), input={"flag": 0})
    worker.drain()
    assert tags() == ["after"] and status(iid) == "completed"
    assert Step.objects.get(instance_id=iid, kind="when").output is None


def test_when_with_a_failing_condition_fails_the_instance_clearly(worker, clock):
    iid = start(t("fast") >> when(S + "broken_condition", t("yes")))
    worker.drain()
    instance = Instance.objects.get(pk=iid)
    assert instance.status == "failed"
    assert "when(): condition tests.durable.steps.broken_condition raised ValueError" in (
        instance.error
    )


def test_when_refuses_conditions_that_cannot_be_stored():
    with pytest.raises(DefinitionError, match="module-level function"):
        when(lambda ctx: True, t("yes"))
    with pytest.raises(DefinitionError, match="result name"):
        when("not a name!", t("yes"))
    with pytest.raises(DefinitionError, match="no step of this workflow is named 'missing'"):
        start(when("missing", t("yes")))
    with pytest.raises(DefinitionError, match="cannot be imported"):
        start(when("tests.durable.steps.nope", t("yes")))


# --- loop ---------------------------------------------------------------------------------------
def test_a_loop_that_breaks_completes_with_the_break_value(worker, clock):
    flow = loop(t("count").as_("n")).as_("counted") >> t("after")
    iid = start(flow, input={"stop": 3})
    worker.drain()
    assert status(iid) == "completed"
    loop_step = Step.objects.get(instance_id=iid, kind="loop")
    assert loop_step.output == {"stopped_at": 3}
    assert [r[1] for r in rows()].count("count") == 3, "each iteration's write committed once"
    keys = sorted(s.key for s in Step.objects.filter(instance_id=iid, kind="task", node_id=2))
    assert keys == ["0/1/2[0]", "0/1/2[1]", "0/1/2[2]"]


def test_break_in_the_middle_of_the_body_skips_the_rest_of_it(worker, clock):
    flow = loop(t("count").as_("n") >> t("after"))
    iid = start(flow, input={"stop": 2})
    worker.drain()
    assert result(iid) == {"stopped_at": 2}
    assert tags() == ["after", "count", "count"], "the second iteration's 'after' never ran"


def test_loop_while_a_condition_holds(worker, clock):
    iid = start(loop(t("count_up").as_("n"), while_=S + "below_three"))
    worker.drain()
    assert result(iid) == 3


def test_loop_max_iterations_protects_the_database(worker, clock):
    iid = start(loop(t("count_up").as_("n"), max_iterations=4))
    worker.drain()
    instance = Instance.objects.get(pk=iid)
    assert instance.status == "failed"
    assert "reached its bound of 4 iterations" in instance.error
    assert Step.objects.filter(instance_id=iid, kind="task").count() == 4


def test_loop_keeps_only_its_last_iterations_history(worker, clock):
    iid = start(loop(t("count").as_("n"), history=2), input={"stop": 6})
    worker.drain()
    assert result(iid) == {"stopped_at": 6}
    kept = sorted(
        s.chunk_index for s in Step.objects.filter(instance_id=iid, kind="task", node_id=1)
    )
    assert kept == [4, 5], "older iterations' rows were deleted as the loop went on"
    assert [r[1] for r in rows()].count("count") == 6


def test_break_outside_a_loop_fails_the_step_permanently(worker, clock):
    iid = start(t("break_outside"))
    worker.drain()
    instance = Instance.objects.get(pk=iid)
    assert instance.status == "failed" and "not inside a loop" in instance.error


def test_loop_bounds_are_validated():
    with pytest.raises(DefinitionError, match="max_iterations"):
        loop(t("count"), max_iterations=0)
    with pytest.raises(DefinitionError, match="history"):
        loop(t("count"), history="all")
    assert isinstance(Break(1), Exception) and not isinstance(Break(1), DurableError)


def test_explain_draws_the_new_operators(worker, clock):
    flow = (t("fast") | t("slow_a")) >> loop(t("count").as_("n")) >> when("n", t("yes"))
    iid = start(flow, input={"stop": 2})
    worker.drain()
    text = explain(iid)["text"]
    assert "race (first wins): completed" in text
    assert "loop until Break: completed" in text
    assert "when n: completed" in text
    assert "cancelled" in text  # the race's loser


def test_current_step_reports_the_leaf_inside_the_new_composites(worker, clock):
    iid = start((t("fast") | t("slow_a")) >> loop(t("count").as_("n")), input={"stop": 2})
    now = current_step(iid)
    assert now["kind"] == "task" and now["state"] == "ready", "not the running race/loop row"
    worker.drain()
    assert current_step(iid)["kind"] == "task" and status(iid) == "completed"
