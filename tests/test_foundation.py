"""The foundation: settings errors, login, the runs list, healthz, constraints, selections."""

from __future__ import annotations

import os
import subprocess
import sys
from datetime import timedelta
from pathlib import Path

import pytest
from django.db import IntegrityError
from django.urls import reverse
from django.utils import timezone

from jobs.models import AnalysisJob, AnalysisRun, JobStatus, SweeperHeartbeat

ROOT = Path(__file__).resolve().parent.parent


def run_manage(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    """``manage.py`` with a configuration the test spells out in full.

    These tests feed deliberately wrong settings (a missing secret, a MySQL URL, a port nothing
    listens on) and read the one-line error; no database is reached, so the URLs are the input
    under test rather than the suite's database (children that need that use tests.processes).
    """
    base = {k: v for k, v in os.environ.items() if k not in ("DEBUG", "SECRET_KEY", "DATABASE_URL")}
    return subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=ROOT,
        env={**base, **env},
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_missing_secret_in_production_is_one_clear_line():
    proc = run_manage("check", env={"DEBUG": "0", "DATABASE_URL": "postgres://x@127.0.0.1/x"})
    assert proc.returncode != 0
    assert proc.stderr.strip() == (
        "acurio: SECRET_KEY must be set when DEBUG is off (set DEBUG=1 for development)"
    )


def test_wrong_database_url_is_one_clear_line():
    proc = run_manage("check", env={"DEBUG": "1", "DATABASE_URL": "mysql://u@h/db"})
    assert proc.returncode != 0
    assert len(proc.stderr.strip().splitlines()) == 1
    assert "DATABASE_URL must point at PostgreSQL" in proc.stderr


def test_unreachable_database_is_one_clear_line():
    proc = run_manage(
        "migrate", env={"DEBUG": "1", "DATABASE_URL": "postgres://postgres@127.0.0.1:1/nope"}
    )
    assert proc.returncode == 1
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("acurio: cannot reach the database:")


def test_login_page_renders(client):
    response = client.get(reverse("login"))
    assert response.status_code == 200
    assert b"Sign in" in response.content


def test_runs_list_requires_login(client):
    response = client.get(reverse("runs"))
    assert response.status_code == 302
    assert response["Location"].startswith(reverse("login"))


@pytest.mark.django_db
def test_user_logs_in_and_sees_empty_runs_list(client, user):
    response = client.post(
        reverse("login"), {"username": "alice", "password": "pw-alice-123"}, follow=True
    )
    assert response.status_code == 200
    assert b"No reports yet" in response.content


@pytest.mark.django_db
def test_runs_list_shows_only_own_runs(user_client, make_job, other_user):
    mine = make_job(filename="mine.docx")
    theirs = make_job(owner=other_user, filename="theirs.docx")
    for job in (mine, theirs):
        AnalysisRun.objects.create(
            id=job.run_id,
            owner=job.owner,
            job=job,
            document=job.filename,
            status=job.status,
            doc_html=job.doc_html,
            report=job.results,
            saved_by="worker",
        )
    content = user_client.get(reverse("runs")).content
    assert b"mine.docx" in content
    assert b"theirs.docx" not in content


@pytest.mark.django_db
def test_healthz_reports_database_and_sweeper_age(client):
    body = client.get(reverse("healthz")).json()
    assert body == {"database": True, "sweeper_last_tick_age": None}
    SweeperHeartbeat.objects.create(name="h:1", last_tick_at=timezone.now() - timedelta(seconds=7))
    body = client.get(reverse("healthz")).json()
    assert 6 <= body["sweeper_last_tick_age"] < 30


@pytest.mark.django_db
def test_status_is_constrained_in_the_database(make_job):
    job = make_job()
    with pytest.raises(IntegrityError):
        AnalysisJob.objects.filter(pk=job.pk).update(status="exploded")


@pytest.mark.django_db
def test_terminal_job_needs_finished_at(make_job):
    with pytest.raises(IntegrityError):
        make_job(status=JobStatus.COMPLETE, finished_at=None)


@pytest.mark.django_db
def test_saved_by_is_constrained(make_job):
    job = make_job()
    with pytest.raises(IntegrityError):
        AnalysisRun.objects.create(
            id=job.run_id,
            owner=job.owner,
            job=job,
            document="x",
            status="complete",
            saved_by="robot",
        )


@pytest.mark.django_db
def test_ghosts_selection_respects_grace_and_saved_runs(make_job):
    old = make_job()
    AnalysisJob.objects.filter(pk=old.pk).update(updated_at=timezone.now() - timedelta(minutes=5))
    fresh = make_job()
    saved = make_job()
    AnalysisJob.objects.filter(pk=saved.pk).update(
        run_saved_at=timezone.now(), updated_at=timezone.now() - timedelta(minutes=5)
    )
    make_job(status=JobStatus.RUNNING)
    deleted = make_job(deleted_at=timezone.now())
    AnalysisJob.objects.filter(pk=deleted.pk).update(
        updated_at=timezone.now() - timedelta(minutes=5)
    )
    assert set(AnalysisJob.objects.ghosts()) == {old, fresh}
    assert list(AnalysisJob.objects.ghosts(timedelta(seconds=120))) == [old]
    assert list(AnalysisJob.objects.ghosts(120)) == [old]


@pytest.mark.django_db
def test_ghost_query_uses_the_partial_index(make_job):
    from django.db import connection

    sql, params = (
        AnalysisJob.objects.ghosts(120)
        .order_by("updated_at")
        .values("id")[:50]
        .query.sql_with_params()
    )
    with connection.cursor() as cur:
        cur.execute("SET LOCAL enable_seqscan = off")
        cur.execute("EXPLAIN " + sql, params)
        plan = "\n".join(row[0] for row in cur.fetchall())
    assert "job_ghost_idx" in plan, plan
