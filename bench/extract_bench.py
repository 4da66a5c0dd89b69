"""Acurio's extract step next to the reader it is built on, measured in the same run.

Usage: .venv/bin/python bench/extract_bench.py [--doc PATH] [--repeat N]

For a DOCX (default: the 300-page APA thesis of the corpus) the peer is mammoth's own
``convert_to_html`` (images dropped, as extraction asks it to); for a PDF it is pypdf's own
``extract_text`` of every page. Three long-lived processes take turns, one run each per round,
so that a load change on the shared machine hits them alike:

* **peer** — a fresh interpreter that imports the reader and converts the document;
* **extract()** — a fresh interpreter that runs ``jobs.analysis.extract`` in-process;
* **extract step** — a process set up as a worker (Django, ``jobs.pipeline``) that runs the
  step's computation as the pipeline does: ``run_isolated(pipeline.extract_html, ...)`` with
  the deployment's extraction limits and step budgets, i.e. a forked child whose result (the
  HTML and the format) comes back pickled. Not included: reading the upload from and writing ``doc_html`` to the job row.

Each process makes one warm-up run first (not counted). Printed: the median of ``--repeat``
runs (wall and CPU seconds; the step's CPU is its child's), the ratio step/peer, the UTC time
and the load average. Issue #16 asks for the step within 2x mammoth's time on the 300-page DOCX.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
DEFAULT_DOC = REPO.parent / "shared" / "corpus" / "large" / "apa_300p.docx"

_LOOP = """
import json, resource, sys, time
def _cpu():
    r = resource.getrusage(resource.RUSAGE_SELF)
    c = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime + c.ru_utime + c.ru_stime
for _line in sys.stdin:
    w, c = time.perf_counter(), _cpu()
    run()
    print(json.dumps({"wall": time.perf_counter() - w, "cpu": _cpu() - c}), flush=True)
"""

MAMMOTH = """
import io
import mammoth
data = open({doc!r}, "rb").read()
def run():
    mammoth.convert_to_html(
        io.BytesIO(data), convert_image=mammoth.images.img_element(lambda image: {{}})
    )
"""

PYPDF = """
import io
import pypdf
data = open({doc!r}, "rb").read()
def run():
    for page in pypdf.PdfReader(io.BytesIO(data)).pages:
        page.extract_text()
"""

EXTRACT = """
import sys
sys.path.insert(0, {repo!r})
from jobs.analysis import extract
data = open({doc!r}, "rb").read()
def run():
    extract(data, {name!r})
"""

STEP = """
import os, sys
sys.path.insert(0, {repo!r})
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "acurio.settings")
os.environ.setdefault("DEBUG", "1")
import django
django.setup()
from django.conf import settings
from jobs import pipeline
from jobs.durable.isolation import run_isolated
data = open({doc!r}, "rb").read()
def run():
    run_isolated(
        pipeline.extract_html, data, {name!r}, limits=pipeline.extraction_limits(),
        memory_mb=settings.ACURIO_STEP_MEMORY_MB, timeout=settings.ACURIO_STEP_TIMEOUT_SECONDS,
        what="extract",
    )
"""


class Runner:
    """One long-lived interpreter that times one run per request."""

    def __init__(self, code: str) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-c", code + _LOOP],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            cwd=REPO,
        )

    def run(self) -> dict:
        assert self.proc.stdin and self.proc.stdout
        self.proc.stdin.write("run\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError(f"benchmark process ended (exit {self.proc.wait()})")
        return json.loads(line)

    def close(self) -> None:
        if self.proc.stdin:
            self.proc.stdin.close()
        self.proc.wait()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--doc", default=str(DEFAULT_DOC))
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    doc = Path(args.doc)
    if not doc.exists():
        print(f"missing benchmark document: {doc}", file=sys.stderr)
        return 2
    fmt = {"docx": "mammoth", "pdf": "pypdf"}.get(doc.suffix.lower().lstrip("."))
    if fmt is None:
        print(
            "the document must be a .docx (peer: mammoth) or a .pdf (peer: pypdf)", file=sys.stderr
        )
        return 2
    fields = {"repo": str(REPO), "doc": str(doc), "name": doc.name}
    runners = {
        f"{fmt} alone": Runner((MAMMOTH if fmt == "mammoth" else PYPDF).format(**fields)),
        "extract() in-process": Runner(EXTRACT.format(**fields)),
        "extract step (forked child)": Runner(STEP.format(**fields)),
    }
    samples: dict[str, list[dict]] = {k: [] for k in runners}
    try:
        for r in runners.values():
            r.run()  # warm-up
        for _ in range(args.repeat):
            for key, r in runners.items():
                samples[key].append(r.run())
    finally:
        for r in runners.values():
            r.close()
    medians = {
        k: (statistics.median(s["wall"] for s in v), statistics.median(s["cpu"] for s in v))
        for k, v in samples.items()
    }
    peer = medians[f"{fmt} alone"]
    load = os.getloadavg()
    print(
        f"{doc.name}, median of {args.repeat} (after one warm-up run each), "
        f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, "
        f"load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}\n"
    )
    print(f"| run | wall s | CPU s | wall / {fmt} | CPU / {fmt} |")
    print("|---|---|---|---|---|")
    for key, (wall, cpu) in medians.items():
        print(f"| {key} | {wall:.3f} | {cpu:.3f} | {wall / peer[0]:.2f} | {cpu / peer[1]:.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
