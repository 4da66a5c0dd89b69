"""Change lists: filters, search, current step, cheap pagination, and a job's links."""

from __future__ import annotations

import re
import uuid

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from jobs.admin import workflow_url
from jobs.admin_tools import CheapPaginator
from jobs.models import AnalysisJob, AnalysisRun, JobCitation, JobStatus, RunEvent, RunEventKind

pytestmark = pytest.mark.django_db

JOBS = "/admin/jobs/analysisjob/"
RUNS = "/admin/jobs/analysisrun/"
EVENTS = "/admin/jobs/runevent/"


def listed_ids(response) -> set[int]:
    """The ids of the rows in a change list (from their action checkboxes)."""
    html = response.content.decode()
    return {int(v) for v in re.findall(r'name="_selected_action" value="(\d+)"', html)}


def listed_run_ids(response) -> set[str]:
    """Runs are read-only (no actions, no checkboxes): the ids of their change links."""
    html = response.content.decode()
    return set(re.findall(r'href="/admin/jobs/analysisrun/([0-9a-f-]{36})/change/', html))


# --- jobs ---------------------------------------------------------------------------------


@pytest.fixture
def jobs_world(make_job, make_run, other_user):
    client_saved = make_job(filename="client.docx")
    make_run(client_saved, saved_by="client")
    worker_saved = make_job(filename="worker.docx")
    make_run(worker_saved, saved_by="worker")
    legacy = make_job(filename="legacy.docx")
    make_run(legacy, saved_by=None)
    ghost = make_job(filename="ghost.docx")
    unreadable = make_job(
        status=JobStatus.FAILED,
        filename="broken.docx",
        results={},
        error="Could not read the file: the DOCX is damaged",
        failure_kind="input",
    )
    gave_up = make_job(
        status=JobStatus.FAILED,
        results={},
        filename="slow.pdf",
        error="Gave up after 5 attempts: lease expired",
        failure_kind="internal",
        owner=other_user,
    )
    running = make_job(
        status=JobStatus.RUNNING,
        filename="busy.md",
        progress_step="verify",
        progress_done=4,
        progress_total=12,
    )
    return {
        "client": client_saved,
        "worker": worker_saved,
        "legacy": legacy,
        "ghost": ghost,
        "unreadable": unreadable,
        "gave_up": gave_up,
        "running": running,
    }


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("status__exact=failed", {"unreadable", "gave_up"}),
        ("has_run=yes", {"client", "worker", "legacy"}),
        ("has_run=no", {"ghost", "unreadable", "gave_up", "running"}),
        ("has_run=ghost", {"ghost"}),
        ("saved_by=client", {"client"}),
        ("saved_by=worker", {"worker"}),
        ("saved_by=legacy", {"legacy"}),
        ("failure_kind__exact=input", {"unreadable"}),
        ("failure_kind__exact=internal", {"gave_up"}),
        ("failure_kind__exact=cancelled", set()),
        ("reason=Could+not+read+the+file", {"unreadable"}),
        ("reason=Gave+up+after+5+attempts", {"gave_up"}),
        ("q=broken", {"unreadable"}),
        ("q=BROKEN", {"unreadable"}),  # case-insensitive
        ("q=bob", {"gave_up"}),  # the owner's username
        ("q=bob+slow", {"gave_up"}),  # every term must match, each in the name or the owner
        ("q=bob+broken", set()),
        ("q=%22slow.pdf%22", {"gave_up"}),  # a quoted phrase
        ("q=.docx+status", set()),
    ],
)
def test_job_filters_and_search(staff_client, jobs_world, query, expected):
    response = staff_client.get(f"{JOBS}?{query}")
    assert response.status_code == 200
    assert listed_ids(response) == {jobs_world[name].pk for name in expected}


def test_failed_reason_filter_lists_reasons_with_counts(staff_client, jobs_world):
    html = staff_client.get(JOBS).content.decode()
    assert "Could not read the file (1)" in html
    assert "Gave up after 5 attempts (1)" in html


def test_job_list_shows_current_step_run_writer_and_ghosts(staff_client, jobs_world):
    html = staff_client.get(JOBS).content.decode()
    assert "verify 4/12" in html
    assert ">ghost<" in html
    assert ">legacy<" in html
    run_url = reverse("admin:jobs_analysisrun_change", args=[jobs_world["worker"].run_id])
    assert f'<a href="{run_url}">worker</a>' in html


def test_job_list_names_a_run_held_by_a_newer_job(staff_client, make_job, make_run):
    older = make_job()
    newer = make_job(run_id=older.run_id)
    make_run(newer, saved_by="worker")
    AnalysisJob.objects.filter(pk=older.pk).update(run_saved_at=newer.finished_at)
    html = staff_client.get(JOBS).content.decode()
    assert f"worker (job #{newer.pk})" in html


def test_soft_deleted_filter(staff_client, make_job, now):
    alive = make_job()
    gone = make_job(deleted_at=now)
    assert listed_ids(staff_client.get(f"{JOBS}?deleted=yes")) == {gone.pk}
    assert listed_ids(staff_client.get(f"{JOBS}?deleted=no")) == {alive.pk}


def test_job_list_never_counts_the_whole_table(staff_client, jobs_world):
    with CaptureQueriesContext(connection) as ctx:
        assert staff_client.get(f"{JOBS}?status__exact=failed").status_code == 200
    counts = [q["sql"] for q in ctx.captured_queries if "COUNT(" in q["sql"].upper()]
    assert counts, "the paginator counts the (bounded) page set"
    for sql in counts:
        if "jobs_analysisjob" in sql and "GROUP BY" not in sql.upper():
            assert "LIMIT 1001" in sql, sql


def test_job_list_does_not_fetch_uploads_or_bodies(staff_client, jobs_world):
    with CaptureQueriesContext(connection) as ctx:
        staff_client.get(JOBS)
    page_query = next(
        q["sql"]
        for q in ctx.captured_queries
        if q["sql"].startswith('SELECT "jobs_analysisjob"."id"') and "ORDER BY" in q["sql"]
    )
    for column in ("upload", "doc_html", '"library"'):
        assert f'"jobs_analysisjob".{column}' not in page_query
        assert f'"jobs_analysisjob"."{column}"' not in page_query


# --- the cheap paginator ---------------------------------------------------------------------


def test_paginator_counts_small_sets_exactly(make_job):
    for _ in range(3):
        make_job()
    assert CheapPaginator(AnalysisJob.objects.order_by("-id"), 2).count == 3


def test_paginator_estimates_beyond_its_limit_without_counting(make_job, monkeypatch):
    for _ in range(6):
        make_job()
    monkeypatch.setattr(CheapPaginator, "EXACT_LIMIT", 3)
    with CaptureQueriesContext(connection) as ctx:
        count = CheapPaginator(AnalysisJob.objects.order_by("-id"), 2).count
    assert count >= 4  # at least what it saw; the rest is the planner's estimate
    sqls = [q["sql"] for q in ctx.captured_queries]
    assert any(s.startswith("EXPLAIN (FORMAT JSON)") for s in sqls)
    assert all("LIMIT 4" in s for s in sqls if "COUNT(" in s.upper())


def test_paginator_accepts_plain_lists():
    assert CheapPaginator([1, 2, 3], 2).count == 3


# --- runs ----------------------------------------------------------------------------------


def test_run_filters_saved_by_and_judged(staff_client, make_job, make_run):
    judged = make_job()
    judged_run = make_run(judged, saved_by="client")
    AnalysisRun.objects.filter(pk=judged_run.pk).update(judged_job=judged)
    stale_old = make_job()
    newer = make_job(run_id=stale_old.run_id)
    # Judged an older job's content: not judged for its current job.
    stale_run = make_run(newer, saved_by="worker")
    AnalysisRun.objects.filter(pk=stale_run.pk).update(judged_job=stale_old)
    legacy_run = make_run(make_job(), saved_by=None)

    def ids(query):
        return listed_run_ids(staff_client.get(f"{RUNS}?{query}"))

    assert ids("judged=yes") == {str(judged_run.pk)}
    assert ids("judged=no") == {str(stale_run.pk), str(legacy_run.pk)}
    assert ids("saved_by=legacy") == {str(legacy_run.pk)}
    assert ids("saved_by=worker") == {str(stale_run.pk)}
    assert ids("saved_by=client") == {str(judged_run.pk)}
    html = staff_client.get(RUNS).content.decode()
    assert "legacy (NULL)" in html


def test_run_pages_are_read_only(staff_client, make_job, make_run):
    run = make_run(make_job(), saved_by="client")
    url = reverse("admin:jobs_analysisrun_change", args=[run.pk])
    assert staff_client.get(url).status_code == 200
    staff_client.post(url, {"saved_by": "worker"})
    run.refresh_from_db()
    assert run.saved_by == "client"


# --- diagnostics events --------------------------------------------------------------------


def test_events_list_filters_by_kind(staff_client, event, make_job, now):
    job = make_job()
    recorded = event(RunEventKind.RECORDED, now, lag=42, job=job, run_id=job.run_id)
    event(RunEventKind.TRIMMED, now)
    trimmed = RunEvent.objects.get(kind=RunEventKind.TRIMMED)
    RunEvent.objects.filter(pk=trimmed.pk).update(writer="")
    assert listed_ids(staff_client.get(f"{EVENTS}?writer=none")) == {trimmed.pk}
    assert listed_ids(staff_client.get(f"{EVENTS}?writer=worker")) == {recorded.pk}
    response = staff_client.get(f"{EVENTS}?kind__exact=recorded")
    assert listed_ids(response) == {recorded.pk}
    html = response.content.decode()
    assert "42 s" in html
    assert reverse("admin:jobs_analysisjob_change", args=[job.pk]) in html


# --- a job's page --------------------------------------------------------------------------


def test_job_page_links_its_citations_and_run(staff_client, make_job, make_run):
    job = make_job()
    run = make_run(job, saved_by="worker")
    cited = {
        JobCitation.objects.create(job=job, index=i, text=f"(Smith, 202{i})", verdict="verified").pk
        for i in range(2)
    }
    JobCitation.objects.create(job=make_job(), index=0, text="(Other, 1999)", verdict="verified")
    html = staff_client.get(reverse("admin:jobs_analysisjob_change", args=[job.pk])).content
    html = html.decode()
    citations = reverse("admin:jobs_jobcitation_changelist") + f"?job__id__exact={job.pk}"
    assert f'<a href="{citations}">Citations (2)</a>' in html
    run_url = reverse("admin:jobs_analysisrun_change", args=[run.pk])
    assert f'<a href="{run_url}">Run (worker, holds this job)</a>' in html
    # The citations link lands on exactly this job's citations.
    assert listed_ids(staff_client.get(citations)) == cited


def test_job_page_without_run_says_so(staff_client, make_job):
    job = make_job()
    html = staff_client.get(reverse("admin:jobs_analysisjob_change", args=[job.pk])).content
    assert b"No run row yet" in html


def test_job_page_links_the_workflow_instance_graph(staff_client, make_job):
    from jobs.durable import start, task

    instance_id = start(task("jobs.pipeline.plan"), label="analysis")
    job = make_job(workflow_id=instance_id)
    url = workflow_url(instance_id)
    assert url == reverse("admin:durable_instance_change", args=[instance_id])
    html = staff_client.get(reverse("admin:jobs_analysisjob_change", args=[job.pk])).content
    assert f'<a href="{url}">Workflow instance graph</a>'.encode() in html
    assert staff_client.get(url).status_code == 200


def test_workflow_url_of_no_instance_is_none():
    assert workflow_url(None) is None
    assert workflow_url(uuid.uuid4()).startswith("/admin/durable/instance/")


def test_job_list_links_the_dashboard(staff_client):
    html = staff_client.get(JOBS).content.decode()
    assert reverse("admin:jobs_analysisjob_dashboard") in html


@pytest.mark.parametrize(
    "url",
    [
        JOBS,
        f"{JOBS}?has_run=ghost",
        f"{JOBS}?status__exact=failed",
        f"{JOBS}?saved_by=legacy",
        f"{JOBS}?saved_by=worker",
        RUNS,
        f"{RUNS}?judged=no",
        f"{RUNS}?saved_by=legacy",
        EVENTS,
        f"{EVENTS}?kind__exact=recorded",
    ],
)
def test_change_list_queries_can_be_served_by_indexes(staff_client, jobs_world, url):
    """No change-list query on the big tables needs a sequential scan (priced out here), so
    none reads a whole table; searches (q=) are the exception and are not checked."""
    big = ("jobs_analysisjob", "jobs_analysisrun", "jobs_runevent")
    with CaptureQueriesContext(connection) as ctx:
        assert staff_client.get(url).status_code == 200
    checked = 0
    with connection.cursor() as cursor:
        cursor.execute("SET LOCAL enable_seqscan = off")
        for query in ctx.captured_queries:
            sql = query["sql"].strip()
            if not sql.startswith("SELECT") or not any(t in sql for t in big):
                continue
            cursor.execute("EXPLAIN " + sql)
            plan = "\n".join(row[0] for row in cursor.fetchall())
            for table in big:
                assert f"Seq Scan on {table}" not in plan, f"{sql}\n{plan}"
            checked += 1
    assert checked >= 2


@pytest.mark.parametrize(
    ("url", "index"), [(JOBS, "job_filename_trgm_idx"), (RUNS, "run_document_trgm_idx")]
)
def test_search_is_served_by_the_trigram_and_owner_indexes(staff_client, jobs_world, url, index):
    """A search ORs the name with the owner without a join: a BitmapOr of the name's trigram
    index and the owner index serves it (sequential and plain index scans priced out, so the
    planner shows what can serve it; at scale a rare term picks it on cost)."""
    with CaptureQueriesContext(connection) as ctx:
        assert staff_client.get(f"{url}?q=bo").status_code == 200  # "bob", and "broken.docx"
    table = "jobs_analysisjob" if url == JOBS else "jobs_analysisrun"
    searches = [q["sql"] for q in ctx.captured_queries if "LIKE" in q["sql"] and table in q["sql"]]
    # the owner is matched by the ids of the matching users, not through the joined row
    assert searches and all(re.search(r'"owner_id" IN \(\d', sql) for sql in searches), searches
    with connection.cursor() as cursor:
        cursor.execute("SET LOCAL enable_seqscan = off")
        cursor.execute("SET LOCAL enable_indexscan = off")
        cursor.execute("EXPLAIN " + searches[0])
        plan = "\n".join(row[0] for row in cursor.fetchall())
    assert f"Bitmap Index Scan on {index}" in plan, plan
    assert f"Seq Scan on {table}" not in plan, plan


def test_runs_search_by_document_and_owner(staff_client, make_job, make_run, other_user):
    mine = make_run(make_job(filename="chapter-one.docx"), saved_by="client")
    theirs = make_run(make_job(filename="thesis.pdf", owner=other_user), saved_by="client")
    assert listed_run_ids(staff_client.get(f"{RUNS}?q=CHAPTER")) == {str(mine.pk)}
    assert listed_run_ids(staff_client.get(f"{RUNS}?q=bob")) == {str(theirs.pk)}


def test_a_term_matching_very_many_users_still_finds_their_jobs(
    staff_client, jobs_world, monkeypatch
):
    from jobs.admin import AnalysisJobAdmin

    monkeypatch.setattr(AnalysisJobAdmin, "OWNER_IDS_MAX", 0)  # any match is "very many"
    assert listed_ids(staff_client.get(f"{JOBS}?q=bob")) == {jobs_world["gave_up"].pk}


def test_saved_by_filter_with_no_such_runs_lists_nothing(staff_client, make_job, make_run):
    make_run(make_job(), saved_by="client")
    assert listed_ids(staff_client.get(f"{JOBS}?saved_by=legacy")) == set()
