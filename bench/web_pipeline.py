"""Benchmark of the analysis workflow and the web flow around it.

For each thesis (default: one per format from the corpus plus the 300-page APA thesis as DOCX),
in a database of its own (``acurio_bench_web``, dropped and re-created at the start):

1. ``submit_analysis`` queues it (one transaction: the job row and the workflow start);
2. an in-process ``Worker`` runs every step (one worker, as ``manage.py worker --once``);
3. the tab's calls are made with Django's test client: ``GET /api/analysis-jobs/<id>`` (the
   poll; median of 50) and ``POST /api/analysis-runs`` (the save: write, then a repeat no-op),
   then ``GET /runs/<id>/`` (the report page with every citation marked: the first view, then
   the median of 5 more, served from the marked-document cache) and its JSON.

Printed per thesis: citations, the wall time of the workflow and of each stage (from the
engine's step timestamps: extract, parse, the whole fan-out with its chunk count, finalize),
the size of ``doc_html`` next to the largest checkpoint and all checkpoints together (what the
engine stores besides the body, which is written once to the job row), and the latencies of
the web calls. Markdown goes to stdout and, with ``--out``, to a file.

Usage::

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/acurio_bench_web \\
        .venv/bin/python bench/web_pipeline.py [--corpus DIR] [--out bench/results/web.md]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_THESES = (
    "thesis_1_000.docx",
    "thesis_1_001.md",
    "thesis_1_002.html",
    "thesis_1_003.pdf",
    "large/apa_30p.pdf",
    "large/apa_300p.docx",
)


def setup_django(db_name: str) -> None:
    sys.path.insert(0, str(ROOT))
    url = os.environ.get("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/acurio_bench_web")
    base, _, name = url.rpartition("/")
    os.environ["DATABASE_URL"] = f"{base}/{db_name or name}"
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "acurio.settings")
    os.environ.setdefault("DEBUG", "1")
    import psycopg

    admin = psycopg.connect(f"{base}/postgres", autocommit=True)
    target = db_name or name
    admin.execute(f'DROP DATABASE IF EXISTS "{target}" WITH (FORCE)')
    admin.execute(f'CREATE DATABASE "{target}"')
    admin.close()

    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", interactive=False, verbosity=0)


def ms(seconds: float) -> str:
    return f"{seconds * 1000:.0f} ms" if seconds < 10 else f"{seconds:.1f} s"


def kib(n: int) -> str:
    return f"{n / 1024:.0f} KiB"


def step_figures(instance_id) -> dict:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT s.kind, s.name, s.chunk_index, i.graph, s.node_id,"
            " extract(epoch FROM s.finished_at - s.started_at), length(s.output::text),"
            " length(s.chunk::text)"
            " FROM durable_step s JOIN durable_instance i ON i.id = s.instance_id"
            " WHERE s.instance_id = %s ORDER BY s.id",
            [instance_id],
        )
        rows = cursor.fetchall()
    paths = {}
    graph = rows[0][3] if rows else {}
    if isinstance(graph, str):
        graph = json.loads(graph)

    def walk(node):
        paths[node["id"]] = node.get("path", "").rsplit(".", 1)[-1]
        for child in node.get("children", ()):
            walk(child)

    walk(graph if isinstance(graph, dict) else {})
    figures = {"stages": {}, "chunks": 0, "checkpoint_max": 0, "checkpoint_total": 0}
    for kind, _name, chunk_index, _graph, node_id, seconds, out_len, chunk_len in rows:
        size = (out_len or 0) + (chunk_len or 0)
        figures["checkpoint_total"] += size
        if chunk_index is not None:
            figures["chunks"] += 1
            continue
        figures["checkpoint_max"] = max(figures["checkpoint_max"], size)
        label = "verify (fan-out)" if kind == "fan_out" else paths.get(node_id) or kind
        if kind == "seq":
            label = "workflow"
        figures["stages"][label] = float(seconds or 0)
    return figures


def bench_one(path: Path, user, client) -> dict:
    from jobs import pipeline
    from jobs.durable import Worker
    from jobs.models import AnalysisJob

    library = path.with_suffix(".bib")
    if path.parent.name == "large":
        library = path.parent / (path.name.split(".")[0] + ".bib")
    t0 = time.perf_counter()
    job = pipeline.submit_analysis(
        user,
        path.name,
        path.read_bytes(),
        library.read_bytes() if library.exists() else None,
        library.name if library.exists() else "",
    )
    submit = time.perf_counter() - t0
    t0 = time.perf_counter()
    steps = Worker(once=True).drain()
    wall = time.perf_counter() - t0
    job = AnalysisJob.objects.get(pk=job.pk)
    assert job.status == "complete", job.error

    def timed(fn, n=1):
        times = []
        for _ in range(n):
            t = time.perf_counter()
            resp = fn()
            times.append(time.perf_counter() - t)
        return resp, statistics.median(times)

    poll, poll_t = timed(lambda: client.get(f"/api/analysis-jobs/{job.pk}"), 50)
    assert poll.status_code == 200
    save, save_t = timed(
        lambda: client.post(
            "/api/analysis-runs", {"job_id": job.pk}, content_type="application/json"
        )
    )
    assert save.status_code == 201, save.content
    again, again_t = timed(
        lambda: client.post(
            "/api/analysis-runs", {"job_id": job.pk}, content_type="application/json"
        )
    )
    assert again.status_code == 200
    page, first_page_t = timed(lambda: client.get(f"/runs/{job.run_id}/"))
    page, page_t = timed(lambda: client.get(f"/runs/{job.run_id}/"), 5)
    assert page.status_code == 200
    report_json, json_t = timed(lambda: client.get(f"/runs/{job.run_id}.json"), 5)
    assert report_json.status_code == 200
    return {
        "name": path.name,
        "citations": len(job.results["citations"]),
        "doc_html": len(job.doc_html.encode()),
        "submit": submit,
        "wall": wall,
        "steps": steps,
        **step_figures(job.workflow_id),
        "poll": poll_t,
        "save_write": save_t,
        "save_noop": again_t,
        "report_page_first": first_page_t,
        "report_page": page_t,
        "report_bytes": len(page.content),
        "report_json": json_t,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--corpus", default=os.environ.get("ACURIO_CORPUS") or ROOT.parent / "shared" / "corpus"
    )
    parser.add_argument("--theses", default=",".join(DEFAULT_THESES))
    parser.add_argument("--database", default="acurio_bench_web")
    parser.add_argument("--out")
    args = parser.parse_args()

    setup_django(args.database)
    from django.contrib.auth import get_user_model
    from django.test import Client

    user = get_user_model().objects.create_user("bench", password="x")
    client = Client()
    client.force_login(user)
    corpus = Path(args.corpus)
    results = [bench_one(corpus / name, user, client) for name in args.theses.split(",")]

    lines = [
        "# The analysis workflow and the tab's calls",
        "",
        "Produced by `DATABASE_URL=postgres://postgres@127.0.0.1:5432/acurio_bench_web "
        ".venv/bin/python bench/web_pipeline.py --out bench/results/web.md` "
        f"({time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}).",
        "",
        f"Machine: {platform.platform()}, {os.cpu_count()} CPUs (shared with other engineers' "
        "test runs: absolute times are noisy). One in-process worker; PostgreSQL 15 on "
        "127.0.0.1. Library (`.bib`) checked for every thesis.",
        "",
        "| thesis | citations | workflow | extract | parse | verify (chunks) | finalize "
        "| doc_html | largest checkpoint | all checkpoints |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in results:
        st = r["stages"]
        lines.append(
            f"| {r['name']} | {r['citations']} | {ms(st.get('workflow', r['wall']))} "
            f"| {ms(st.get('extract', 0))} | {ms(st.get('parse', 0))} "
            f"| {ms(st.get('verify (fan-out)', 0))} ({r['chunks']}) | {ms(st.get('finalize', 0))} "
            f"| {kib(r['doc_html'])} | {kib(r['checkpoint_max'])} | {kib(r['checkpoint_total'])} |"
        )
    lines += [
        "",
        "| thesis | poll GET (median of 50) | save POST: write (201) | save POST: repeat "
        "no-op (200) | report page: first view | again (median of 5, marked document cached) "
        "| page size | report JSON |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in results:
        lines.append(
            f"| {r['name']} | {ms(r['poll'])} | {ms(r['save_write'])} | {ms(r['save_noop'])} "
            f"| {ms(r['report_page_first'])} | {ms(r['report_page'])} | {kib(r['report_bytes'])} "
            f"| {ms(r['report_json'])} |"
        )
    lines += [
        "",
        "Reading the figures: *workflow* is the instance's wall time from its first step's "
        "start to its last checkpoint; the stage columns are each step's own time (the fan-out "
        "from its first chunk's start to its join). Checkpoint sizes are the JSON the engine "
        "stores (outputs and fan-out chunks) next to the `doc_html` written once to the job "
        "row: the largest is the parsed citations and reference entries (marker texts, keys "
        "and positions; no contexts, no body). The report page's first view marks every "
        "citation in the document (the analysis library's `annotate_html`); later views "
        "within 15 minutes take the marked document from the process's cache.",
    ]
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out:
        Path(args.out).write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
