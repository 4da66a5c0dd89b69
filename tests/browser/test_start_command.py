"""The first README command, end to end: ``./acurio.sh start`` serves web, worker and sweeper.

The launcher runs against this test's database (``DATABASE_URL`` names it), on a free port.
Chromium signs in as the demo user the launcher created, uploads a corpus thesis with its
library, watches the job page, and reads the report the tab saved. Ctrl-C (SIGINT) then stops
everything: exit code 0.
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest
from django.conf import settings as django_settings

from tests.prerequisites import missing
from tests.web.conftest import corpus_dir

pytestmark = [pytest.mark.browser, pytest.mark.slow, pytest.mark.django_db(transaction=True)]

ROOT = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def database_url() -> str:
    db = django_settings.DATABASES["default"]
    return f"postgres://{db['USER']}@{db['HOST'] or '127.0.0.1'}:{db['PORT'] or 5432}/{db['NAME']}"


def wait_healthy(base: str, proc: subprocess.Popen, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert proc.poll() is None, f"./acurio.sh start exited early with {proc.returncode}"
        try:
            with urllib.request.urlopen(f"{base}/healthz", timeout=2) as resp:
                if json.load(resp).get("database"):
                    return
        except OSError:
            pass
        time.sleep(0.3)
    raise AssertionError("the site did not become healthy in time")


@pytest.fixture
def started():
    port = free_port()
    env = {k: v for k, v in os.environ.items() if k not in ("DEBUG", "SECRET_KEY")}
    env.update(DATABASE_URL=database_url(), ACURIO_PORT=str(port), ACURIO_HOST="127.0.0.1")
    proc = subprocess.Popen(
        [str(ROOT / "acurio.sh"), "start"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        wait_healthy(base, proc)
        yield base, proc
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()


def test_start_serves_the_whole_flow_to_the_demo_user(chromium, started):
    from playwright.sync_api import expect

    from jobs.models import AnalysisRun

    base, proc = started
    thesis = corpus_dir() / "thesis_1_000.docx"
    if not thesis.exists():
        missing(f"no corpus thesis at {thesis}")
    context = chromium.new_context(base_url=base)
    page = context.new_page()
    page.goto("/accounts/login/")
    page.fill("#id_username", "demo")
    page.fill("#id_password", "demo-acurio")
    page.click("button[type=submit]")
    page.wait_for_url(f"{base}/")
    page.click("#upload-link")
    page.set_input_files("#id_file", str(thesis))
    page.set_input_files("#id_library", str(thesis.with_suffix(".bib")))
    page.click("#upload-submit")
    page.wait_for_url(re.compile(r"/jobs/\d+/$"))
    # The launcher's worker runs the analysis; the tab saves the run and opens the report.
    page.wait_for_url(re.compile(r"/runs/[0-9a-f-]+/$"), timeout=90_000)
    expect(page.locator(".report-head h1")).to_have_text(thesis.name)
    expect(page.locator("#document mark.cite").first).to_be_visible()
    expect(page.locator("#judgment")).to_contain_text("/ 100")
    run_id = page.url.rstrip("/").rsplit("/", 1)[-1]
    run = AnalysisRun.objects.get(pk=run_id)
    assert run.saved_by == "client"
    assert run.owner.username == "demo"
    context.close()

    proc.send_signal(signal.SIGINT)
    out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 0, out
    assert "acurio: stopped" in out
