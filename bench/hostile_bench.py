"""Hostile inputs and fairness: what one user's worst upload costs, and what another user waits.

1. For each input of tests/hostile/inputs.py (or ``--cases a,b``), the analysis as the pipeline
   runs it, in a child process under RLIMIT_AS (``--memory-mb``, default 1024): the outcome (a
   clear error or a completion), the seconds to it (the analysis alone, not building the input)
   and the child's peak RSS.
2. ``--fairness``: in a database of its own (``acurio_bench_hostile``, dropped and re-created),
   one worker process (``manage.py worker``, ``--concurrency`` threads) runs user A's 300-page
   thesis (the corpus's ``large/apa_300p.md``) and a 2,000-page one generated from it (its body
   repeated to 2,000 pages, one reference list); once both are in flight, user B uploads a small
   thesis through ``POST /api/analysis-jobs``; printed: seconds from B's upload to B's report
   ready (job complete), and where A's jobs were then.

Usage::

    .venv/bin/python bench/hostile_bench.py [--cases a,b] [--memory-mb 1024] [--skip-cases]
        [--fairness] [--concurrency 1,3] [--corpus ../shared/corpus]
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
SECRET = "acurio-bench-secret-key-not-for-production-use-0123456789abcdef"


def bench_cases(names: list[str], memory_mb: int) -> None:
    from tests.hostile.inputs import CASES
    from tests.hostile.runner import run_case

    env = dict(os.environ, SECRET_KEY=SECRET, DEBUG="1")
    chosen = [c for c in CASES if not names or c.name in names]
    print("| input | outcome | seconds to it | peak RSS (MB) | message |")
    print("|---|---|---:|---:|---|")
    worst_rss = worst_s = 0.0
    for case in chosen:
        r = run_case(case.name, env, memory_mb=memory_mb)
        message = (
            r.get("message")
            or f"{r.get('citations', '-')} citations, {r.get('entries', '-')} entries"
        )
        seconds = r.get("seconds", r.get("wall", 0.0))
        rss = r.get("peak_rss_mb", 0.0)
        worst_rss, worst_s = max(worst_rss, rss), max(worst_s, seconds)
        print(
            f"| {case.name} | {r['outcome']} | {seconds:.2f} | {rss:.0f} | {message[:110]} |",
            flush=True,
        )
    print(f"\n{len(chosen)} inputs; slowest {worst_s:.1f} s, largest peak RSS {worst_rss:.0f} MB")


# --- Fairness -------------------------------------------------------------------------------


def setup_django(db_name: str) -> str:
    url = os.environ.get("DATABASE_URL", f"postgres://postgres@127.0.0.1:5432/{db_name}")
    base = url.rpartition("/")[0]
    os.environ["DATABASE_URL"] = f"{base}/{db_name}"
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "acurio.settings")
    os.environ.setdefault("DEBUG", "1")
    os.environ.setdefault("SECRET_KEY", SECRET)
    import psycopg

    admin = psycopg.connect(f"{base}/postgres", autocommit=True)
    admin.execute(f'DROP DATABASE IF EXISTS "{db_name}" WITH (FORCE)')
    admin.execute(f'CREATE DATABASE "{db_name}"')
    admin.close()
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", interactive=False, verbosity=0)
    return os.environ["DATABASE_URL"]


def two_thousand_pages(source: str) -> str:
    """The 300-page thesis's body repeated to about 2,000 pages, then its reference list once."""
    match = re.search(r"^#+\s*References\s*$", source, re.M)
    body, refs = (source[: match.start()], source[match.start() :]) if match else (source, "")
    return body * 7 + refs


def bench_fairness(corpus: Path, concurrency: int, db_name: str) -> dict:
    from django.contrib.auth import get_user_model
    from django.test import Client

    from jobs import pipeline
    from jobs.durable.models import Instance
    from jobs.models import AnalysisJob, JobStatus

    User = get_user_model()
    a = User.objects.create_user(f"heavy{concurrency}", password="x")
    b = User.objects.create_user(f"small{concurrency}", password="x")
    thesis300 = (corpus / "large" / "apa_300p.md").read_text()
    thesis2000 = two_thousand_pages(thesis300)
    small_path = corpus / "thesis_1_001.md"
    worker = subprocess.Popen(
        [
            sys.executable,
            "manage.py",
            "worker",
            "--poll-interval",
            "0.2",
            "--concurrency",
            str(concurrency),
        ],
        cwd=ROOT,
        env=dict(os.environ, LOG_LEVEL="WARNING"),
    )
    try:
        big300 = pipeline.submit_analysis(a, "thesis300.md", thesis300.encode())
        big2000 = pipeline.submit_analysis(a, "thesis2000.md", thesis2000.encode())
        # Both of A's jobs in flight: the 2,000-page one has begun (its first step is running).
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            job = AnalysisJob.objects.get(pk=big2000.pk)
            if job.status != JobStatus.QUEUED or job.first_step_running():
                break
            time.sleep(0.05)
        time.sleep(1.0)
        client = Client()
        client.force_login(b)
        uploaded = time.perf_counter()
        with small_path.open("rb") as fh:
            resp = client.post("/api/analysis-jobs", {"file": fh})
        assert resp.status_code == 201, resp.content
        small_id = resp.json()["id"]
        while True:
            small = AnalysisJob.objects.get(pk=small_id)
            if small.status in (JobStatus.COMPLETE, JobStatus.FAILED):
                break
            if time.perf_counter() - uploaded > 600:
                raise SystemExit("the small job did not finish within 600 s")
            time.sleep(0.05)
        ready = time.perf_counter() - uploaded
        states = {
            name: AnalysisJob.objects.only("status", "progress_step").get(pk=j.pk)
            for name, j in (("300 pages", big300), ("2,000 pages", big2000))
        }
        priorities = dict(
            Instance.objects.filter(
                id__in=[big300.workflow_id, big2000.workflow_id, small.workflow_id]
            ).values_list("id", "priority")
        )
        return {
            "concurrency": concurrency,
            "small_status": small.status,
            "small_ready_s": ready,
            "a_jobs": {k: f"{v.status}/{v.progress_step}" for k, v in states.items()},
            "priorities": {
                "300 pages": priorities.get(big300.workflow_id),
                "2,000 pages": priorities.get(big2000.workflow_id),
                "small": priorities.get(small.workflow_id),
            },
            "sizes": (len(thesis300.encode()), len(thesis2000.encode()), small_path.stat().st_size),
        }
    finally:
        worker.terminate()
        try:
            worker.wait(timeout=60)
        except subprocess.TimeoutExpired:
            worker.kill()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", default="", help="input names, comma-separated (default all)")
    parser.add_argument("--memory-mb", type=int, default=1024)
    parser.add_argument("--skip-cases", action="store_true")
    parser.add_argument("--fairness", action="store_true")
    parser.add_argument("--concurrency", default="1,3", help="worker threads per fairness run")
    parser.add_argument("--corpus", default=str(ROOT.parent / "shared" / "corpus"))
    parser.add_argument("--database", default="acurio_bench_hostile")
    args = parser.parse_args()
    if not args.skip_cases:
        bench_cases([n for n in args.cases.split(",") if n], args.memory_mb)
    if args.fairness:
        setup_django(args.database)
        print(
            "\n| worker threads | small job's report ready after upload | A's jobs then | priorities (300 p, 2,000 p, small) |"
        )
        print("|---:|---:|---|---|")
        for n in [int(x) for x in args.concurrency.split(",")]:
            r = bench_fairness(Path(args.corpus), n, args.database)
            p = r["priorities"]
            print(
                f"| {n} | {r['small_ready_s']:.2f} s ({r['small_status']}) | "
                f"{', '.join(f'{k}: {v}' for k, v in r['a_jobs'].items())} | "
                f"{p['300 pages']}, {p['2,000 pages']}, {p['small']} |",
                flush=True,
            )
            from jobs.durable import cancel
            from jobs.durable.models import Instance

            for iid in Instance.objects.exclude(
                status__in=("completed", "failed", "cancelled")
            ).values_list("id", flat=True):
                cancel(iid)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
