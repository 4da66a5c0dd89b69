"""``manage.py durable <verb>``: every verb once in a subprocess against the test database,
and the rest of the behaviour (errors, pagination, permissions) through call_command in-process,
which runs the same command object."""

from __future__ import annotations

import json
import subprocess
import uuid
from io import StringIO

import pytest
from django.contrib.auth.models import Permission
from django.core.management import CommandError, call_command

from jobs.durable import Worker, start, status
from jobs.durable.models import Instance
from tests.durable import flows
from tests.durable.support import run_manage

FLOWS = "tests.durable.flows."


def durable(*args: str) -> subprocess.CompletedProcess:
    return run_manage("durable", *args)


def ok(*args: str) -> str:
    """Run a verb in-process; its printed output."""
    out = StringIO()
    call_command("durable", *args, stdout=out)
    return out.getvalue().strip()


def fails(*args: str) -> str:
    with pytest.raises(CommandError) as info:
        ok(*args)
    message = str(info.value)
    assert "\n" not in message, "one line"
    return message


@pytest.mark.django_db(transaction=True)
def test_every_verb_in_a_subprocess(user):
    def run(*args: str) -> str:
        proc = durable(*args)
        assert proc.returncode == 0, proc.stderr
        return proc.stdout.strip()

    iid = run("start", FLOWS + "approval", "--label", "cli")
    assert Instance.objects.get(pk=uuid.UUID(iid)).label == "cli"
    assert run("status", iid) == "pending"
    text = run("explain", iid)
    assert f"instance {iid} [cli]: pending" in text
    assert "waiting: approval (wait for signal 'approval', timeout 3600s) until 20" in text
    assert "delivered" in run("signal", iid, "approval", '{"by": "ada"}')
    Worker(worker_id="cli-test").drain()
    assert json.loads(run("result", iid))["data"] == {"by": "ada"}
    assert iid in run("list", "--per-page", "5")
    other = str(start(flows.approval))
    assert run("cancel", other) == f"cancelled {other}"
    assert status(other) == "cancelled"

    # errors: one line on stderr, a non-zero exit, no traceback
    for args, message in (
        (("status", "00000000-0000-0000-0000-000000000000"), "no workflow instance"),
        (("start", FLOWS + "squares", "{bad json"), "--input is not valid JSON"),
    ):
        proc = durable(*args)
        assert proc.returncode == 1
        assert proc.stderr.strip().count("\n") == 0 and message in proc.stderr


inprocess = pytest.mark.django_db


@inprocess
def test_start_status_explain_signal_result_in_process(user):
    iid = ok("start", FLOWS + "approval", "--label", "cli")
    instance = Instance.objects.get(pk=uuid.UUID(iid))
    assert instance.label == "cli" and instance.owner is None
    assert ok("status", iid) == "pending"
    Worker(worker_id="cli-test").drain()

    text = ok("explain", iid)
    # pending: no step has been claimed yet (the wait holds no worker)
    assert f"instance {iid} [cli]: pending" in text
    assert "approval (wait for signal 'approval', timeout 3600s): ready" in text
    assert "waiting: approval (wait for signal 'approval', timeout 3600s) until 20" in text
    assert json.loads(ok("explain", iid, "--json"))["waits"][0]["signal"] == "approval"

    assert "delivered" in ok("signal", iid, "approval", '{"by": "ada"}')
    Worker(worker_id="cli-test").drain()
    assert ok("status", iid) == "completed"
    assert json.loads(ok("result", iid)) == {
        "signal": "approval",
        "timed_out": False,
        "data": {"by": "ada"},
    }


@inprocess
def test_start_with_input_and_a_factory():
    iid = ok("start", FLOWS + "squares", '{"items": [1, 2, 3]}')
    Worker(worker_id="cli-test").drain()
    assert json.loads(ok("result", iid)) == [1, 4, 9]
    iid = ok("start", FLOWS + "one_sql")
    Worker(worker_id="cli-test").drain()
    assert json.loads(ok("result", iid)) == [{"one": 1}]


@inprocess
def test_cancel_and_result_of_unfinished_and_cancelled():
    iid = str(start(flows.approval))
    assert "no result yet" in fails("result", iid)
    assert ok("cancel", iid) == f"cancelled {iid}"
    assert status(iid) == "cancelled"
    assert "nothing to cancel" in ok("cancel", iid)
    assert "is cancelled: signal 'approval' cannot be delivered" in fails("signal", iid, "approval")


@inprocess
def test_list_paginates(user):
    ids = [str(start(flows.approval, label=f"n{i}")) for i in range(5)]
    first = ok("list", "--per-page", "2")
    assert ids[4] in first and ids[3] in first and ids[2] not in first
    assert first.splitlines()[-1] == "page 1, rows 1-2; next: --page 2"
    last = ok("list", "--per-page", "2", "--page", "3")
    assert ids[0] in last and last.splitlines()[-1] == "page 3, rows 5-5"
    assert ok("list", "--page", "9") == "page 9: no instances"
    assert ids[1] in ok("list", "--label", "n1") and ids[2] not in ok("list", "--label", "n1")
    assert ok("list", "--status", "completed") == "no instances"


@inprocess
@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("status", "00000000-0000-0000-0000-000000000000"), "no workflow instance"),
        (("result", "not-a-uuid"), "no workflow instance"),  # a workflow id never started
        (("result", ""), "is not a workflow instance id"),
        (("cancel", "00000000-0000-0000-0000-000000000000"), "no workflow instance"),
        (("explain", "00000000-0000-0000-0000-000000000000"), "no workflow instance"),
        (("signal", "00000000-0000-0000-0000-000000000000", "x"), "no workflow instance"),
        (("start", FLOWS + "nope"), "cannot import workflow"),
        (("start", FLOWS + "not_a_workflow"), "is not a workflow"),
        (("start", FLOWS + "squares", "{bad json"), "--input is not valid JSON"),
        (("list", "--status", "sleeping"), "unknown status 'sleeping'"),
        (("list", "--page", "0"), "--page must be 1 or more"),
        (("status", "x", "--user", "nobody"), "no user named 'nobody'"),
    ],
)
def test_clear_one_line_errors(args, message):
    assert message in fails(*args)


@inprocess
def test_signal_bad_data_is_refused_and_nothing_is_kept():
    iid = str(start(flows.approval))
    assert "--data is not valid JSON" in fails("signal", iid, "approval", "{nope")
    assert "never waits for a signal named 'payment'" in fails("signal", iid, "payment")
    assert not Instance.objects.get(pk=iid).signals.exists()


@inprocess
def test_user_permissions_and_ownership(user, other_user):
    # alice may start plain workflows but not SQL ones; she sees only her own instances.
    user.user_permissions.add(Permission.objects.get(codename="start_workflow"))
    mine = ok("start", FLOWS + "approval", "--user", "alice")
    assert Instance.objects.get(pk=mine).owner == user
    assert "missing permission durable.use_sql_steps" in fails(
        "start", FLOWS + "one_sql", "--user", "alice"
    )
    assert "missing permission durable.start_workflow" in fails(
        "start", FLOWS + "approval", "--user", "bob"
    )
    theirs = str(start(flows.approval, owner=other_user))
    for verb in ("status", "result", "cancel", "explain"):
        assert f"no workflow instance {theirs}" in fails(verb, theirs, "--user", "alice")
    assert "no workflow instance" in fails("signal", theirs, "approval", "--user", "alice")
    listed = ok("list", "--user", "alice")
    assert mine in listed and theirs not in listed
    assert ok("status", mine, "--user", "alice") == "pending"


@inprocess
def test_start_checks_the_permission_before_importing_anything(other_user, tmp_path, monkeypatch):
    module = tmp_path / "flow_with_side_effects.py"
    marker = tmp_path / "imported"
    module.write_text(
        "import pathlib\n"
        f"pathlib.Path({str(marker)!r}).touch()  # runs at import\n"
        "from jobs.durable import task\n"
        "flow = task('tests.durable.steps.fast')\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    message = fails("start", "flow_with_side_effects.flow", "--user", "bob")
    assert "may not start workflows: missing permission durable.start_workflow" in message
    assert not marker.exists(), "nothing was imported for a user without permission"
    assert not Instance.objects.exists()
    other_user.user_permissions.add(Permission.objects.get(codename="start_workflow"))
    assert ok("start", "flow_with_side_effects.flow", "--user", "bob")
    assert marker.exists()


@inprocess
def test_cancel_and_signal_need_the_admins_control_permission(django_user_model, other_user):
    staff = django_user_model.objects.create_user("stan", password="pw-stan-123", is_staff=True)
    iid = str(start(flows.approval, owner=other_user))
    for args in (("cancel", iid), ("signal", iid, "approval")):
        message = fails(*args, "--user", "stan")
        assert "missing permission durable.change_instance" in message
    assert Instance.objects.get(pk=iid).status == "pending"
    staff.user_permissions.add(Permission.objects.get(codename="change_instance"))
    assert ok("signal", iid, "approval", "--user", "stan").startswith("signal 'approval'")
    assert ok("cancel", iid, "--user", "stan") == f"cancelled {iid}"
