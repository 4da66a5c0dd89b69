"""Benchmark of the student's report as a browser sees it: upload -> report visible, and the
report page's server time and size.

Starts, against a database of its own (``acurio_bench_report``, dropped and re-created):
gunicorn as ``./acurio.sh start`` runs it (2 workers, 4 threads) and ONE analysis worker
(``manage.py worker``). Headless Chromium (Playwright, Debian's /usr/bin/chromium) signs in and,
for each thesis, ``--repeat`` times:

* presses *Start the analysis* on the upload page (t = 0),
* follows the job page until the tab has saved the run and the report's first screen is
  there (``.report-head h1`` visible: summary, assessment, problems): **report visible**,
* and until the marked document has arrived (``#doc[data-loaded]``): **document in**.

Then, for the last report of each thesis: the report page's server time (the view's
``Server-Timing`` and the whole request, median of 10, signed in with the browser's session),
the document fragment's first (marking) and later (cached) times, the HTML sizes and the
number of elements on the page before and after the document arrives.

Usage::

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/acurio_bench_report \\
        .venv/bin/python bench/report_browser.py [--repeat 3] [--out bench/results/report.md]
"""

from __future__ import annotations

import argparse
import os
import platform
import re
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from tests.corpus import corpus_dir  # noqa: E402

THESES = ("large/apa_300p.docx", "large/apa_300p.pdf")
CHROMIUM = os.environ.get("ACURIO_CHROMIUM", "/usr/bin/chromium")
USER, PASSWORD = "bench", "bench-acurio-1"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def database(url: str) -> str:
    import psycopg

    base, _, name = url.rpartition("/")
    admin = psycopg.connect(f"{base}/postgres", autocommit=True)
    admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    admin.execute(f'CREATE DATABASE "{name}"')
    admin.close()
    return url


def env_for(url: str) -> dict:
    env = dict(os.environ, DATABASE_URL=url, DEBUG="1", LOG_LEVEL="WARNING")
    env.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)
    return env


def manage(env: dict, *args: str) -> None:
    subprocess.run([sys.executable, str(ROOT / "manage.py"), *args], env=env, check=True, cwd=ROOT)


def ms(seconds: float) -> str:
    return f"{seconds * 1000:.0f} ms"


def wait_for_port(port: int, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=2)
            return
        except httpx.HTTPError:
            time.sleep(0.2)
    raise SystemExit("the web server did not start")


def upload_once(page, path: Path) -> dict:
    page.goto("/upload/")
    page.set_input_files("#id_file", str(path))
    started = time.monotonic()
    page.click("#upload-submit")
    page.wait_for_url(re.compile(r"/runs/[0-9a-f-]+/$"), timeout=120_000)
    page.wait_for_selector(".report-head h1", state="visible", timeout=60_000)
    visible = time.monotonic() - started
    page.wait_for_selector("#doc[data-loaded]", timeout=60_000)
    document = time.monotonic() - started
    return {"visible": visible, "document": document, "url": page.url}


def analysis_seconds(url: str, run_url: str) -> float:
    """Queued -> complete of the run's job (the workflow alone, without the tab's part)."""
    import psycopg

    run_id = run_url.rstrip("/").rsplit("/", 1)[1]
    with psycopg.connect(url) as conn:
        row = conn.execute(
            "SELECT extract(epoch FROM finished_at - created_at) FROM jobs_analysisjob"
            " WHERE run_id = %s ORDER BY created_at DESC LIMIT 1",
            [run_id],
        ).fetchone()
    return float(row[0])


def server_figures(page, base: str, report_url: str) -> dict:
    cookies = {c["name"]: c["value"] for c in page.context.cookies()}
    doc_url = report_url.rstrip("/") + "/document"
    with httpx.Client(base_url=base, cookies=cookies, timeout=60) as client:
        # The document fragment: the first request of this process marks it; later ones are
        # cached. gunicorn has 2 workers, so the first request to each marks it once.
        first_doc = []
        for _ in range(2):
            t = time.monotonic()
            r = client.get(doc_url)
            first_doc.append(time.monotonic() - t)
        doc_size = len(r.content)
        doc_times = []
        for _ in range(10):
            t = time.monotonic()
            client.get(doc_url)
            doc_times.append(time.monotonic() - t)
        views, totals = [], []
        for _ in range(10):
            t = time.monotonic()
            r = client.get(report_url)
            totals.append(time.monotonic() - t)
            views.append(float(r.headers["Server-Timing"].split("dur=")[1]) / 1000)
        page_size = len(r.content)
    page.goto(report_url)
    before = page.evaluate("document.getElementsByTagName('*').length")
    page.wait_for_selector("#doc[data-loaded]")
    after = page.evaluate("document.getElementsByTagName('*').length")
    return {
        "view": statistics.median(views),
        "total": statistics.median(totals),
        "page_bytes": page_size,
        "doc_first": max(first_doc),
        "doc_cached": statistics.median(doc_times),
        "doc_bytes": doc_size,
        "elements_first": before,
        "elements_all": after,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    url = os.environ.get("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/acurio_bench_report")
    url = url.rpartition("/")[0] + "/acurio_bench_report"
    env = env_for(database(url))
    manage(env, "migrate", "-v", "0")
    manage(
        env,
        "shell",
        "-c",
        (
            "from django.contrib.auth import get_user_model;"
            f"get_user_model().objects.create_user('{USER}', password='{PASSWORD}')"
        ),
    )
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    web = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "gunicorn",
            "acurio.wsgi",
            "--bind",
            f"127.0.0.1:{port}",
            "--workers",
            "2",
            "--threads",
            "4",
            "--log-level",
            "warning",
        ],
        env=env,
        cwd=ROOT,
    )
    worker = subprocess.Popen(
        [sys.executable, str(ROOT / "manage.py"), "worker"], env=env, cwd=ROOT
    )
    results: dict[str, dict] = {}
    try:
        wait_for_port(port)
        from playwright.sync_api import sync_playwright

        with sync_playwright() as pw:
            browser = pw.chromium.launch(
                executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu"]
            )
            context = browser.new_context(base_url=base, viewport={"width": 1366, "height": 900})
            page = context.new_page()
            page.goto("/accounts/login/")
            page.fill("#id_username", USER)
            page.fill("#id_password", PASSWORD)
            page.click("button[type=submit]")
            page.wait_for_url(f"{base}/")
            for name in THESES:
                path = corpus_dir() / name
                runs = [upload_once(page, path) for _ in range(args.repeat)]
                for r in runs:
                    r["analysis"] = analysis_seconds(url, r["url"])
                results[name] = {
                    "runs": runs,
                    "server": server_figures(page, base, runs[-1]["url"].replace(base, "")),
                }
                print(name, [f"{r['visible']:.2f}/{r['document']:.2f}" for r in runs], flush=True)
            browser.close()
    finally:
        for proc in (worker, web):
            proc.terminate()
        for proc in (worker, web):
            proc.wait(timeout=30)

    load = os.getloadavg()
    lines = [
        f"Machine: {platform.machine()}, {os.cpu_count()} cores, load average at the end"
        f" {load[0]:.2f} / {load[1]:.2f} / {load[2]:.2f} (1/5/15 min; the cores are shared with"
        " other work, so these are busy-machine figures). One analysis worker; gunicorn 2 workers x 4 threads;"
        f" Chromium headless; {args.repeat} uploads per thesis.",
        "",
        "| thesis | upload → report visible (median, min-max) | of which the analysis"
        " (queued → complete) | upload → document in (median) |",
        "|---|---|---|---|",
    ]
    for name, r in results.items():
        vis = [x["visible"] for x in r["runs"]]
        doc = [x["document"] for x in r["runs"]]
        lines.append(
            f"| {name} | {statistics.median(vis):.2f} s ({min(vis):.2f}-{max(vis):.2f}) |"
            f" {statistics.median(x['analysis'] for x in r['runs']):.2f} s |"
            f" {statistics.median(doc):.2f} s |"
        )
    lines += [
        "",
        "| thesis | report page: view / whole request (median of 10) | page HTML | elements"
        " (first screen → with document) | document fragment: first / cached | fragment size |",
        "|---|---|---|---|---|---|",
    ]
    for name, r in results.items():
        s = r["server"]
        lines.append(
            f"| {name} | {ms(s['view'])} / {ms(s['total'])} | {s['page_bytes'] / 1024:.0f} KiB |"
            f" {s['elements_first']:,} → {s['elements_all']:,} |"
            f" {ms(s['doc_first'])} / {ms(s['doc_cached'])} | {s['doc_bytes'] / 1024:.0f} KiB |"
        )
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out:
        args.out.write_text(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
