"""sql steps: results keep their JSON types, conditions test a result's value, and the
statement runs under ACURIO_SQL_STEP_ROLE, parsed first so it cannot leave that role."""

from __future__ import annotations

from decimal import Decimal

import pytest
from django.db import connection
from psycopg import sql as pgsql

from jobs.durable import DefinitionError, loop, result, sql, start, status, task, when
from jobs.durable.kinds.leaves import json_value
from jobs.durable.models import Instance, Step
from tests.durable.support import rows

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("rows_table")]

S = "tests.durable.steps."


def t(name: str, **options) -> object:
    return task(S + name, **options)


def tags() -> list[str]:
    return sorted(row[1] for row in rows())


# --- types ------------------------------------------------------------------------------------
def test_jsonb_numeric_and_timestamps_keep_their_types(worker):
    flow = sql(
        "SELECT %(input)s::jsonb AS doc, '[1, {\"a\": null}]'::json AS arr,"
        " 12.5::numeric AS price, 3::numeric AS whole, 7::bigint AS n,"
        " 0.1000000000000000000001::numeric AS exact,"
        " timestamptz '2026-03-02 10:00:00.123456+00' AS at, date '2026-03-02' AS day,"
        " interval '90 seconds' AS span, true AS ok, NULL::text AS nothing,"
        " ARRAY[1.5, 2]::numeric[] AS nums"
    )
    iid = start(flow, input={"who": "ada", "tags": ["x", "y"], "n": 2})
    worker.drain()
    (row,) = result(iid)
    assert row == {
        "doc": {"who": "ada", "tags": ["x", "y"], "n": 2},
        "arr": [1, {"a": None}],
        "price": 12.5,
        "whole": 3,
        "n": 7,
        "exact": "0.1000000000000000000001",
        "at": "2026-03-02T10:00:00.123456+00:00",
        "day": "2026-03-02",
        "span": 90.0,
        "ok": True,
        "nothing": None,
        "nums": [1.5, 2],
    }
    assert type(row["whole"]) is int and type(row["price"]) is float


def test_a_jsonb_column_round_trips_through_a_named_result(worker):
    flow = sql("SELECT jsonb_build_object('ids', jsonb_build_array(1, 2, 3)) AS doc").as_("d") >> t(
        "echo_named"
    )
    iid = start(flow, input={"name": "d"})
    worker.drain()
    assert result(iid) == [{"doc": {"ids": [1, 2, 3]}}]


def test_json_value_of_edge_values():
    assert json_value(Decimal("NaN")) == "NaN"
    assert json_value(float("inf")) == "Infinity"
    assert json_value(Decimal("1E+2")) == 100
    assert json_value(b"\x00\xff") == "AP8="


# --- conditions on values ---------------------------------------------------------------------
@pytest.mark.parametrize(
    ("query", "taken"),
    [
        ("SELECT false AS ok", "no"),
        ("SELECT 0 AS n", "no"),
        ("SELECT NULL::int AS n", "no"),
        ("SELECT true AS ok", "yes"),
        ("SELECT count(*) AS n FROM engine_rows", "no"),
        ("SELECT 2 AS n", "yes"),
        ("UPDATE engine_rows SET note = 'x' WHERE false", "no"),  # row count 0
    ],
)
def test_when_tests_the_value_of_an_sql_result(worker, query, taken):
    iid = start(sql(query).as_("c") >> when("c", t("yes"), t("no")))
    worker.drain()
    assert status(iid) == "completed" and result(iid) == taken and tags() == [taken]


def test_a_condition_on_several_columns_or_star_is_refused_at_start():
    for query in ("SELECT 1 AS a, 2 AS b", "SELECT * FROM engine_rows"):
        with pytest.raises(DefinitionError, match="a condition tests one value"):
            start(sql(query).as_("c") >> when("c", t("yes")))
    with pytest.raises(DefinitionError, match="3 columns"):
        start(sql("SELECT 1 AS a, 2, 3").as_("c") >> loop(t("yes"), while_="c"))
    assert not Instance.objects.exists()


@pytest.mark.parametrize(
    ("query", "shape"),
    [
        ("SELECT x FROM generate_series(1, 3) AS x", "3 rows"),
        ("SELECT 1 AS x WHERE false", "0 rows"),
    ],
)
def test_a_condition_on_rows_it_cannot_test_fails_the_step_clearly(worker, query, shape):
    iid = start(sql(query).as_("c") >> when("c", t("yes"), t("no")))
    worker.drain()
    assert status(iid) == "failed" and tags() == []
    assert f"it is {shape}" in Instance.objects.get(pk=iid).error


def test_loop_while_an_sql_value_holds(worker):
    flow = loop(
        t("yes") >> sql("SELECT count(*) < 3 AS again FROM engine_rows").as_("again"),
        while_="again",
    )
    iid = start(flow)
    worker.drain()
    assert status(iid) == "completed" and tags() == ["yes", "yes", "yes"]


# --- the role -----------------------------------------------------------------------------------
@pytest.fixture
def step_role(settings):
    """A role with only what the tests' sql steps need (created in the test's transaction,
    so it goes with its rollback)."""
    name = f"acurio_step_{connection.settings_dict['NAME']}"[:63]
    role = pgsql.Identifier(name)
    with connection.cursor() as cursor:
        cursor.execute(pgsql.SQL("CREATE ROLE {} NOLOGIN").format(role))
        cursor.execute(pgsql.SQL("GRANT SELECT, INSERT ON engine_rows TO {}").format(role))
        cursor.execute(pgsql.SQL("GRANT USAGE ON SEQUENCE engine_rows_id_seq TO {}").format(role))
    settings.ACURIO_SQL_STEP_ROLE = name
    return name


def test_the_auth_user_read_is_refused_under_the_role(worker, step_role):
    iid = start(sql("SELECT username, password FROM auth_user"))
    worker.drain()
    instance = Instance.objects.get(pk=iid)
    assert instance.status == "failed"
    assert "permission denied for table auth_user" in instance.error
    step = Step.objects.get(instance_id=iid, kind="sql")
    assert step.attempts == 1, "a refused privilege is not retried"


def test_granted_tables_work_and_the_checkpoint_runs_as_the_app_again(worker, step_role):
    flow = sql(
        "INSERT INTO engine_rows (instance_id, tag) VALUES (%(instance_id)s, current_user)"
    ) >> sql("SELECT current_user::text AS who, count(*) AS n FROM engine_rows")
    iid = start(flow)
    worker.drain()
    assert result(iid) == [{"who": step_role, "n": 1}]
    assert tags() == [step_role]
    with connection.cursor() as cursor:
        cursor.execute("SELECT current_user = session_user")
        assert cursor.fetchone()[0], "the role ends with the step"


@pytest.mark.parametrize(
    ("query", "message"),
    [
        ("SELECT set_config('role', 'postgres', true)", "set_config"),
        ("RESET ROLE", "not VARIABLESET"),
        ("SET ROLE postgres", "not VARIABLESET"),
        ("SELECT 1; SELECT password FROM auth_user", "one statement expected, got 2"),
        ("DO $$ BEGIN EXECUTE 'SET ROLE postgres'; END $$", "not DO"),
        ("SELECT query_to_xml('SELECT password FROM auth_user', true, false, '')", "query_to_xml"),
        ("SELECT * INTO stolen FROM engine_rows", "SELECT ... INTO"),
        ("SELECT dblink_exec('x')", "dblink_exec"),
        ("SELEC 1", "does not parse"),
    ],
)
def test_statements_that_could_leave_the_role_are_refused_at_start(query, message):
    with pytest.raises(DefinitionError, match=message.replace("(", r"\(")):
        start(sql(query))
    assert not Instance.objects.exists()


def test_row_level_security_by_owner(worker, step_role, user, other_user):
    role = pgsql.Identifier(step_role)
    with connection.cursor() as cursor:
        cursor.execute("CREATE TABLE owned_docs (id serial PRIMARY KEY, owner_id bigint)")
        cursor.execute(
            "INSERT INTO owned_docs (owner_id) VALUES (%s), (%s), (%s)",
            [user.pk, user.pk, other_user.pk],
        )
        cursor.execute(pgsql.SQL("GRANT SELECT ON owned_docs TO {}").format(role))
        cursor.execute("ALTER TABLE owned_docs ENABLE ROW LEVEL SECURITY")
        cursor.execute(
            "CREATE POLICY by_owner ON owned_docs USING"
            " (owner_id = nullif(current_setting('acurio.owner_id', true), '')::bigint)"
        )
    flow = sql("SELECT count(*) AS n FROM owned_docs")
    mine, theirs, nobody = start(flow, owner=user), start(flow, owner=other_user), start(flow)
    worker.drain()
    assert (result(mine), result(theirs), result(nobody)) == ([{"n": 2}], [{"n": 1}], [{"n": 0}])
