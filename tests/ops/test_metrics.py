"""``/metrics``: every metric after a small workload, access control, the per-process routes
(multiprocess directory, ``--metrics-port``), JSON logs, and the settings' errors.

The workload runs in this process (a thesis through the pipeline, a retried step, a worker that
"dies" holding a lease, a ghost run pushed past its grace, one sweeper tick, a remote judge that
fails), so the in-process counters and the database gauges describe the same events; each
figure is checked against what the workload did.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from datetime import timedelta
from pathlib import Path

import pytest
from django.db import OperationalError
from django.utils import timezone
from prometheus_client.parser import text_string_to_metric_families

from jobs import pipeline
from jobs.durable import Worker, start, status, task
from jobs.metrics import DatabaseCollector
from jobs.models import AnalysisJob, AnalysisRun, JobStatus
from jobs.runs import JudgeError, judge_run
from jobs.sweeper import Sweeper
from tests.corpus import corpus_dir
from tests.processes import ROOT, child_env

TOKEN = "metrics-test-token-0123456789"
Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


@pytest.fixture
def metrics_on(settings):
    settings.ACURIO_METRICS_TOKEN = TOKEN
    settings.ACURIO_METRICS_ALLOW = []
    settings.ACURIO_TRUSTED_PROXIES = 0


def parse(text: str) -> Samples:
    samples: Samples = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            samples[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return samples


def scrape(client) -> Samples:
    response = client.get("/metrics", HTTP_AUTHORIZATION=f"Bearer {TOKEN}")
    assert response.status_code == 200, response.content
    assert response["Content-Type"].startswith("text/plain; version=")
    return parse(response.content.decode())


def value(samples: Samples, name: str, **labels: str) -> float:
    """A sample's value; a missing sample fails the test (presence is what is checked)."""
    key = (name, tuple(sorted(labels.items())))
    assert key in samples, f"{name}{labels} missing from /metrics"
    return samples[key]


def grew(before: Samples, after: Samples, name: str, **labels: str) -> float:
    key = (name, tuple(sorted(labels.items())))
    return value(after, name, **labels) - before.get(key, 0.0)


@pytest.mark.django_db(transaction=True)
def test_every_metric_after_a_small_workload(client, user, metrics_on, settings):
    before = scrape(client)
    assert value(before, "acurio_database_up") == 1

    # A thesis goes in: one job queued, its first step ready.
    source = corpus_dir() / "thesis_1_001.md"
    job = pipeline.submit_analysis(user, source.name, source.read_bytes())
    queued = scrape(client)
    assert value(queued, "acurio_jobs", status="queued") == 1
    assert value(queued, "acurio_jobs", status="running") == 0
    assert value(queued, "acurio_durable_steps_in_flight", state="ready") == 1
    assert value(queued, "acurio_durable_instances", status="pending") == 1
    assert value(queued, "acurio_durable_oldest_ready_age_seconds") >= 0

    # The worker runs it to the end; no tab saves the run: a ghost within its grace.
    Worker(once=True).drain()
    job.refresh_from_db()
    assert job.status == JobStatus.COMPLETE, job.error
    finished = scrape(client)
    assert value(finished, "acurio_jobs", status="complete") == 1
    assert value(finished, "acurio_jobs", status="queued") == 0
    assert value(finished, "acurio_ghost_runs", grace="within") == 1
    assert value(finished, "acurio_ghost_runs", grace="past") == 0
    assert value(finished, "acurio_backstop_oldest_ghost_age_seconds") == 0
    pipeline_steps = grew(
        before, finished, "acurio_durable_steps_total", kind="task", outcome="completed"
    )
    assert pipeline_steps >= 4  # extract, parse, plan, verify chunk(s), finalize
    assert grew(before, finished, "acurio_durable_step_duration_seconds_count", kind="task") == (
        pipeline_steps
    )
    assert grew(before, finished, "acurio_durable_step_duration_seconds_sum", kind="task") > 0

    # A step that fails once: a retry, waiting for its backoff.
    flaky = start(task("tests.ops.steps.fail_once", backoff=60), label="flaky")
    Worker(once=True).drain()
    assert status(flaky) == "running"

    # A worker that "dies" holding a lease: its step's lease expires.
    orphan = start(task("tests.ops.steps.noop"), label="orphan")
    (claimed,) = Worker(lease_seconds=1).claim(1)
    time.sleep(1.3)
    stuck = scrape(client)
    assert value(stuck, "acurio_durable_steps_in_flight", state="running") == 1
    assert value(stuck, "acurio_durable_steps_in_flight", state="lease_expired") == 1
    assert (
        value(stuck, "acurio_durable_steps_in_flight", state="waiting") == 1
    )  # the retry's backoff

    # The ghost is pushed ten minutes back: past its grace.
    ten_minutes_ago = timezone.now() - timedelta(minutes=10)
    AnalysisJob.objects.filter(pk=job.pk).update(
        updated_at=ten_minutes_ago, finished_at=ten_minutes_ago
    )
    late = scrape(client)
    assert value(late, "acurio_ghost_runs", grace="within") == 0
    assert value(late, "acurio_ghost_runs", grace="past") == 1
    assert 600 <= value(late, "acurio_backstop_oldest_ghost_age_seconds") < 900

    # One sweeper tick: the lease is recovered, the ghost recorded and judged (built in).
    sweeper = Sweeper(grace_seconds=120)
    sweeper.tick()
    assert sweeper.wait_for_backstop(timeout=60)
    run = AnalysisRun.objects.get(pk=job.run_id)
    assert run.judgment is not None

    # A remote judge that cannot be reached: a judge failure, nothing stored.
    settings.ACURIO_JUDGE_URL = "http://127.0.0.1:9/v1"
    settings.ACURIO_JUDGE_MAX_ATTEMPTS = 1
    settings.ACURIO_JUDGE_TIMEOUT_SECONDS = 2
    with pytest.raises(JudgeError):
        judge_run(run.pk)

    after = scrape(client)
    # retries and crashes
    assert grew(before, after, "acurio_durable_steps_total", kind="task", outcome="retry") == 1
    assert grew(before, after, "acurio_durable_leases_recovered_total") == 1
    assert value(after, "acurio_durable_steps_in_flight", state="lease_expired") == 0
    assert value(after, "acurio_durable_steps_in_flight", state="running") == 0
    assert (
        value(after, "acurio_durable_steps_in_flight", state="ready") == 1
    )  # the orphan, put back
    assert value(after, "acurio_durable_steps_in_flight", state="waiting") == 1
    assert value(after, "acurio_durable_instances", status="running") == 2  # flaky, orphan
    assert status(orphan) == "running" and claimed.kind == "task"
    # ghosts and the backstop's lag
    assert value(after, "acurio_ghost_runs", grace="within") == 0
    assert value(after, "acurio_ghost_runs", grace="past") == 0
    assert value(after, "acurio_backstop_oldest_ghost_age_seconds") == 0
    assert value(after, "acurio_backstop_recorded_last_hour") == 1
    assert 600 <= value(after, "acurio_backstop_lag_seconds", stat="max") < 900
    assert value(after, "acurio_backstop_lag_seconds", stat="median") == value(
        after, "acurio_backstop_lag_seconds", stat="max"
    )
    # the judge
    assert grew(before, after, "acurio_judge_duration_seconds_count", judge="builtin") >= 1
    assert grew(before, after, "acurio_judge_duration_seconds_count", judge="remote") == 1
    assert grew(before, after, "acurio_judge_failures_total", judge="remote") == 1
    assert grew(before, after, "acurio_judge_failures_total", judge="builtin") == 0
    assert value(after, "acurio_runs_unjudged") == 0
    # the sweeper
    assert grew(before, after, "acurio_sweeper_ticks_total") == 1
    assert grew(before, after, "acurio_sweeper_tick_duration_seconds_count") == 1
    assert 0 <= value(after, "acurio_sweeper_last_tick_age_seconds") < 60
    assert value(after, "acurio_sweepers_alive") == 1
    # the scrape itself
    assert value(after, "acurio_database_up") == 1
    assert 0 < value(after, "acurio_metrics_scrape_duration_seconds") < 5


@pytest.mark.django_db
def test_an_unreachable_database_is_a_zero_not_an_error(client, metrics_on, monkeypatch):
    def down(*args, **kwargs):
        raise OperationalError("connection refused")

    monkeypatch.setattr(DatabaseCollector, "_read", staticmethod(down))
    samples = scrape(client)
    assert value(samples, "acurio_database_up") == 0
    assert not any(name == "acurio_jobs" for name, _ in samples)
    assert ("acurio_sweeper_ticks_total", ()) in samples  # the process's own figures remain


# --- access control ---------------------------------------------------------------------------


def test_metrics_are_off_unless_configured(client, settings):
    settings.ACURIO_METRICS_TOKEN = ""
    settings.ACURIO_METRICS_ALLOW = []
    response = client.get("/metrics")
    assert response.status_code == 404
    assert b"ACURIO_METRICS_TOKEN" in response.content


@pytest.mark.django_db
def test_the_token_is_required(client, metrics_on):
    missing = client.get("/metrics")
    assert missing.status_code == 401
    assert missing["WWW-Authenticate"].startswith("Bearer")
    assert b"acurio_" not in missing.content
    wrong = client.get("/metrics", HTTP_AUTHORIZATION=f"Bearer {TOKEN}x")
    assert wrong.status_code == 401
    basic = client.get("/metrics", HTTP_AUTHORIZATION=f"Basic {TOKEN}")
    assert basic.status_code == 401
    assert client.get("/metrics", HTTP_AUTHORIZATION=f"Bearer {TOKEN}").status_code == 200
    assert client.post("/metrics", HTTP_AUTHORIZATION=f"Bearer {TOKEN}").status_code == 405


@pytest.mark.django_db
def test_the_address_allow_list(client, settings):
    settings.ACURIO_METRICS_TOKEN = ""
    settings.ACURIO_METRICS_ALLOW = ["10.0.0.0/8", "::1"]
    settings.ACURIO_TRUSTED_PROXIES = 0
    refused = client.get("/metrics", REMOTE_ADDR="192.168.1.5")
    assert refused.status_code == 403
    assert b"acurio_" not in refused.content
    assert client.get("/metrics", REMOTE_ADDR="10.1.2.3").status_code == 200
    assert client.get("/metrics", REMOTE_ADDR="::1").status_code == 200
    # A forged X-Forwarded-For counts for nothing without a trusted proxy...
    forged = client.get("/metrics", REMOTE_ADDR="192.168.1.5", HTTP_X_FORWARDED_FOR="10.1.2.3")
    assert forged.status_code == 403
    # ...and behind one proxy the address it appended is the client's.
    settings.ACURIO_TRUSTED_PROXIES = 1
    proxied = client.get("/metrics", REMOTE_ADDR="10.9.9.9", HTTP_X_FORWARDED_FOR="192.168.1.5")
    assert proxied.status_code == 403
    inside = client.get("/metrics", REMOTE_ADDR="192.168.1.1", HTTP_X_FORWARDED_FOR="10.1.2.3")
    assert inside.status_code == 200


@pytest.mark.django_db
def test_token_and_allow_list_together_both_must_pass(client, settings):
    settings.ACURIO_METRICS_TOKEN = TOKEN
    settings.ACURIO_METRICS_ALLOW = ["127.0.0.1"]
    settings.ACURIO_TRUSTED_PROXIES = 0
    auth = {"HTTP_AUTHORIZATION": f"Bearer {TOKEN}"}
    assert client.get("/metrics", REMOTE_ADDR="127.0.0.1", **auth).status_code == 200
    assert client.get("/metrics", REMOTE_ADDR="127.0.0.1").status_code == 401
    assert client.get("/metrics", REMOTE_ADDR="10.0.0.1", **auth).status_code == 403


# --- the worker's and sweeper's own figures ---------------------------------------------------


def manage(*args: str) -> list[str]:
    return [sys.executable, str(Path(ROOT) / "manage.py"), *args]


@pytest.mark.django_db(transaction=True)
def test_multiprocess_directory_adds_up_a_worker_process(client, metrics_on, tmp_path, monkeypatch):
    for _ in range(3):
        start(task("tests.ops.steps.noop"), label="counted")
    env = child_env(DEBUG="1", PROMETHEUS_MULTIPROC_DIR=str(tmp_path))
    done = subprocess.run(
        manage("worker", "--once"), env=env, cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert any(tmp_path.iterdir()), "the worker wrote its figures to the directory"
    monkeypatch.setenv("PROMETHEUS_MULTIPROC_DIR", str(tmp_path))
    samples = scrape(client)
    # Only the files' figures (this test process writes none there): the child's three steps.
    assert value(samples, "acurio_durable_steps_total", kind="task", outcome="completed") == 3
    assert value(samples, "acurio_durable_step_duration_seconds_count", kind="task") == 3
    assert value(samples, "acurio_database_up") == 1


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.mark.django_db(transaction=True)
def test_sweeper_serves_its_own_metrics_port():
    port = free_port()
    env = child_env(DEBUG="1", ACURIO_SWEEP_TICK_SECONDS="0.3")
    proc = subprocess.Popen(
        manage("sweeper", "--metrics-port", str(port)),
        env=env,
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        ticks = 0.0
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and ticks < 2:
            time.sleep(0.3)
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2) as r:
                    samples = parse(r.read().decode())
            except OSError:
                assert proc.poll() is None, proc.stderr.read()
                continue
            ticks = samples.get(("acurio_sweeper_ticks_total", ()), 0.0)
        assert ticks >= 2
        assert samples[("acurio_sweeper_tick_duration_seconds_count", ())] >= 2
        # The port has no database gauges: those are the web's /metrics.
        assert ("acurio_database_up", ()) not in samples
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)
    assert proc.returncode == 0


# --- JSON logs and the settings' errors -------------------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_log_format_json_writes_one_object_per_line():
    env = child_env(DEBUG="1", LOG_FORMAT="json", LOG_LEVEL="INFO")
    done = subprocess.run(
        manage("sweeper", "--once"), env=env, cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert lines
    records = [json.loads(line) for line in lines]  # every line is one JSON object
    started = [
        r for r in records if r["message"].startswith("sweeper ") and "started" in r["message"]
    ]
    assert started, records
    assert {"time", "level", "logger", "process", "message"} <= set(started[0])
    assert started[0]["level"] == "INFO" and started[0]["logger"] == "jobs.sweeper"


@pytest.mark.parametrize(
    ("variable", "setting", "message"),
    [
        ("ACURIO_METRICS_TOKEN", "short", "ACURIO_METRICS_TOKEN must have at least 16 characters"),
        ("ACURIO_METRICS_ALLOW", "10.0.0.0/8,intranet", "'intranet' is not an address or network"),
        ("LOG_FORMAT", "xml", "LOG_FORMAT must be plain or json"),
        ("DATABASE_DIRECT_URL", "mysql://u@h/db", "DATABASE_DIRECT_URL must point at PostgreSQL"),
        ("DATABASE_POOLER", "statement", "DATABASE_POOLER must be none, session or transaction"),
    ],
)
def test_wrong_settings_are_one_clear_line(variable, setting, message):
    env = {k: v for k, v in os.environ.items() if k not in ("SECRET_KEY",)}
    env.update(DEBUG="1", DATABASE_URL="postgres://x@127.0.0.1/x", **{variable: setting})
    done = subprocess.run(
        manage("check"), env=env, cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 1
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("acurio: ") and message in lines[0], lines
