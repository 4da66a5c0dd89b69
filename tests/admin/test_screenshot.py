"""The dashboard in a real browser: Playwright + Debian's Chromium against the live server.

Renders the dashboard over a database with a day and a half of realistic traffic and saves a
screenshot — to ``bench/results/dashboard.png`` only when asked (``ACURIO_SCREENSHOT=1``), so a
test run leaves the tree unchanged.
"""

from __future__ import annotations

import os
import random
from datetime import timedelta
from pathlib import Path

import pytest
from django.db import connection
from django.utils import timezone

from jobs.durable import start, task
from jobs.models import (
    AnalysisJob,
    AnalysisRun,
    JobStatus,
    RunEvent,
    RunEventKind,
    SweeperHeartbeat,
)
from tests.chromium import launched_chromium

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

SCREENSHOT = Path(__file__).resolve().parents[2] / "bench" / "results" / "dashboard.png"


@pytest.fixture
def browser():
    with launched_chromium() as chromium:
        yield chromium


def seed(owners) -> dict:
    """36 hours of traffic: finished jobs with runs from both writers, sweeper events with
    lags, a handful of ghosts (within and past grace, one two days old), jobs in flight, an
    alive and a stale sweeper."""
    rng = random.Random(7)
    now = timezone.now()
    jobs, runs, events = [], [], []
    for i in range(260):
        finished = now - timedelta(minutes=rng.uniform(3, 36 * 60))
        jobs.append(
            AnalysisJob(
                owner=rng.choice(owners),
                filename=f"thesis-{i:03d}.docx",
                upload=b"x",
                status=JobStatus.FAILED if i % 23 == 0 else JobStatus.COMPLETE,
                doc_html="<p>Body.</p>",
                results={"summary": {"verified": 3}},
                error="Could not read the file: damaged" if i % 23 == 0 else "",
                failure_kind="input" if i % 23 == 0 else "",
                progress_step="finalize",
                created_at=finished - timedelta(minutes=2),
                finished_at=finished,
            )
        )
    AnalysisJob.objects.bulk_create(jobs)
    for i, job in enumerate(jobs):
        if i % 37 == 5:
            continue  # a ghost
        by_worker = i % 6 == 0
        saved = job.finished_at + timedelta(seconds=130 + rng.uniform(0, 300) if by_worker else 4)
        runs.append(
            AnalysisRun(
                id=job.run_id,
                owner=job.owner,
                job=job,
                document=job.filename,
                status=job.status,
                saved_by="worker" if by_worker else (None if i % 41 == 0 else "client"),
                saved_at=saved,
            )
        )
        if by_worker:
            lag = (saved - job.finished_at).total_seconds()
            events.append(
                RunEvent(
                    kind=RunEventKind.RECORDED,
                    job=job,
                    run_id=job.run_id,
                    writer="worker",
                    lag_seconds=lag,
                    sweeper="web-1:4121",
                    created_at=saved,
                )
            )
            events.append(
                RunEvent(kind=RunEventKind.JUDGED, job=job, run_id=job.run_id, created_at=saved)
            )
    AnalysisRun.objects.bulk_create(runs)
    RunEvent.objects.bulk_create(events)
    with connection.cursor() as cursor:
        # What save_run would have stamped; bulk_create bypassed it. updated_at back to the
        # finish time, as the pipeline leaves it (auto_now stamped "now" on insert).
        cursor.execute(
            "UPDATE jobs_analysisjob j SET run_saved_at = r.saved_at FROM jobs_analysisrun r "
            "WHERE r.job_id = j.id"
        )
        cursor.execute(
            "UPDATE jobs_analysisjob SET updated_at = finished_at WHERE finished_at IS NOT NULL"
        )
    ghosts = list(AnalysisJob.objects.ghosts())
    # One ghost finished a moment ago (within grace) and one is two days old.
    fresh = AnalysisJob.objects.create(
        owner=owners[0],
        filename="chapter-draft.md",
        upload=b"x",
        status=JobStatus.COMPLETE,
        doc_html="<p>x</p>",
        results={"summary": {}},
        finished_at=now - timedelta(seconds=40),
    )
    old = AnalysisJob.objects.create(
        owner=owners[1],
        filename="dissertation-final.pdf",
        upload=b"x",
        status=JobStatus.COMPLETE,
        doc_html="<p>x</p>",
        results={"summary": {}},
        finished_at=now - timedelta(days=2, hours=3),
    )
    AnalysisJob.objects.filter(pk=old.pk).update(updated_at=old.finished_at)
    for i, (status, step, done, total) in enumerate(
        [
            (JobStatus.RUNNING, "verify", 7, 12),
            (JobStatus.RUNNING, "parse", 0, 0),
            (JobStatus.RUNNING, "extract", 0, 0),
            (JobStatus.QUEUED, "queued", 0, 0),
            (JobStatus.QUEUED, "queued", 0, 0),
        ]
    ):
        AnalysisJob.objects.create(
            # A real engine instance, so the dashboard links its graph.
            workflow_id=start(task("jobs.pipeline.plan"), label=f"in-progress-{i}"),
            owner=owners[i % len(owners)],
            filename=f"in-progress-{i}.docx",
            upload=b"x",
            status=status,
            progress_step=step,
            progress_done=done,
            progress_total=total,
            created_at=now - timedelta(minutes=1 + i * 3),
        )
    SweeperHeartbeat.objects.create(
        name="web-1:4121",
        last_tick_at=now - timedelta(seconds=8),
        last_backstop_at=now - timedelta(seconds=8),
        backstop_in_flight=True,
    )
    SweeperHeartbeat.objects.create(
        name="web-2:977",
        last_tick_at=now - timedelta(minutes=14),
        last_backstop_at=now - timedelta(minutes=14),
    )
    return {"ghosts": len(ghosts) + 2, "fresh": fresh, "old": old}


def test_dashboard_renders_in_chromium_and_is_saved_as_a_screenshot(
    browser, live_server, django_user_model, settings, tmp_path
):
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    django_user_model.objects.create_user(
        "operator", password="pw-operator-1", is_staff=True, is_superuser=True
    )
    owners = [
        django_user_model.objects.create_user(name, password="x")
        for name in ("amara", "jonas", "li.wei", "sofia")
    ]
    world = seed(owners)

    context = browser.new_context(base_url=live_server.url, viewport={"width": 1360, "height": 900})
    page = context.new_page()
    page.goto("/admin/login/?next=/admin/")
    page.fill("#id_username", "operator")
    page.fill("#id_password", "pw-operator-1")
    page.click("input[type=submit]")
    page.wait_for_url(f"{live_server.url}/admin/")
    # The admin index links the dashboard.
    page.click("text=Operations dashboard")
    page.wait_for_url(f"{live_server.url}/admin/jobs/analysisjob/dashboard/")

    assert page.locator("#card-ghosts-within").inner_text() == "1"
    assert page.locator("#card-ghosts-past").inner_text() == str(world["ghosts"] - 1)
    assert page.locator("#card-sweepers").inner_text() == "1"
    assert page.locator("#sweeper-banner").count() == 0
    assert page.locator("#card-inflight-n").inner_text() == "5"  # queued or running only
    # Three charts, each drawn with visible bars.
    charts = page.locator(".acurio-chart svg")
    assert charts.count() == 3
    for i in range(3):
        box = charts.nth(i).bounding_box()
        assert box and box["width"] > 250 and box["height"] > 60
    tallest = page.evaluate(
        "Math.max(...[...document.querySelectorAll('.acurio-chart.finished rect')]"
        ".map(r => r.getBoundingClientRect().height))"
    )
    assert tallest > 20

    graphs = page.locator("#inflight a", has_text="graph")
    assert graphs.count() == 5

    shot = SCREENSHOT if os.environ.get("ACURIO_SCREENSHOT") else tmp_path / "dashboard.png"
    page.screenshot(path=str(shot), full_page=True)
    assert shot.stat().st_size > 20_000

    # The "record now" button records the ticked ghost and the page says so.
    page.check(f'input[name="job_ids"][value="{world["old"].pk}"]')
    page.click("text=Record selected now")
    page.wait_for_url(f"{live_server.url}/admin/jobs/analysisjob/dashboard/")
    assert "Record now: 1 written." in page.locator(".messagelist").inner_text()
    assert AnalysisRun.objects.get(pk=world["old"].run_id).saved_by == "worker"
    # A job's workflow link opens the engine's instance page.
    href = page.locator("#inflight a", has_text="graph").first.get_attribute("href")
    assert href.startswith("/admin/durable/instance/")
    assert page.request.get(href).ok
    context.close()
