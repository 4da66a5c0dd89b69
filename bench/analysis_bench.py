"""Benchmark of the citation analysis on the 30- and 300-page sample theses, per format.

Usage: .venv/bin/python bench/analysis_bench.py [--corpus DIR] [--repeat N] [--write]

Each case runs in fresh subprocesses so peak RSS belongs to that case alone: one process extracts
the document (and stores the HTML in a temporary file), a second one parses, verifies and builds
the report from that HTML, as the pipeline's later steps do. Reported per case: extraction time,
analysis time (after extraction), both as wall-clock and CPU seconds (the best of ``--repeat``
runs), and the peak RSS of each process. ``--write`` also writes bench/results/analysis.md.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
FORMATS = ("docx", "pdf", "html", "md")
SIZES = ("30p", "300p")

EXTRACT = """
import json, resource, sys, time
sys.path.insert(0, {repo!r})
from jobs.analysis import extract
data = open({doc!r}, "rb").read()
w, c = time.perf_counter(), time.process_time()
doc = extract(data, {name!r})
w, c = time.perf_counter() - w, time.process_time() - c
open({out!r}, "w", encoding="utf-8").write(doc.html)
print(json.dumps({{"wall": w, "cpu": c, "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                  "chars": len(doc.text), "paragraphs": len(doc.blocks)}}))
"""

ANALYSE = """
import json, resource, sys, time
sys.path.insert(0, {repo!r})
from jobs.analysis import build_report, parse, verify
html = open({html!r}, encoding="utf-8").read()
base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
w, c = time.perf_counter(), time.process_time()
parsed = parse(html)
verdicts = []
for i in range(0, len(parsed.citations), 200):  # chunked as the pipeline's fan-out does
    verdicts += verify(parsed.citations[i : i + 200], parsed.references, parsed.style)
report = build_report({name!r}, parsed, verdicts)
w, c = time.perf_counter() - w, time.process_time() - c
print(json.dumps({{"wall": w, "cpu": c, "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                  "base_mb": base, "citations": len(report["citations"]), "references": len(report["references"])}}))
"""


def _run(code: str) -> dict:
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def bench_case(doc: Path, repeat: int) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        html = str(Path(tmp) / "doc.html")
        ex = [
            _run(EXTRACT.format(repo=str(REPO), doc=str(doc), name=doc.name, out=html))
            for _ in range(repeat)
        ]
        an = [_run(ANALYSE.format(repo=str(REPO), html=html, name=doc.name)) for _ in range(repeat)]
    best_ex = min(ex, key=lambda r: r["cpu"])
    best_an = min(an, key=lambda r: r["cpu"])
    return {
        "doc": doc.name,
        "extract_wall": min(r["wall"] for r in ex),
        "extract_cpu": best_ex["cpu"],
        "extract_rss": max(r["rss_mb"] for r in ex),
        "analyse_wall": min(r["wall"] for r in an),
        "analyse_cpu": best_an["cpu"],
        "analyse_rss": max(r["rss_mb"] for r in an),
        "analyse_base": best_an["base_mb"],
        "chars": best_ex["chars"],
        "citations": best_an["citations"],
        "references": best_an["references"],
    }


def table(rows: list[dict]) -> str:
    lines = [
        "| document | chars | citations | extract wall s | extract CPU s | extract peak RSS MB "
        "| analysis wall s | analysis CPU s | analysis peak RSS MB |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['doc']} | {r['chars']:,} | {r['citations']} | {r['extract_wall']:.2f} | {r['extract_cpu']:.2f} "
            f"| {r['extract_rss']:.0f} | {r['analyse_wall']:.2f} | {r['analyse_cpu']:.2f} | {r['analyse_rss']:.0f} |"
        )
    return "\n".join(lines)


def ratios(rows: list[dict]) -> str:
    by = {r["doc"]: r for r in rows}
    lines = ["| format | analysis CPU 300p/30p | extraction CPU 300p/30p |", "|---|---|---|"]
    for fmt in FORMATS:
        small, large = by.get(f"apa_30p.{fmt}"), by.get(f"apa_300p.{fmt}")
        if small and large:
            lines.append(
                f"| {fmt} | {large['analyse_cpu'] / small['analyse_cpu']:.1f} "
                f"| {large['extract_cpu'] / small['extract_cpu']:.1f} |"
            )
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--corpus",
        default=os.environ.get("ACURIO_CORPUS") or str(REPO.parent / "shared" / "corpus"),
    )
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--write", action="store_true", help="write bench/results/analysis.md")
    args = ap.parse_args()
    large = Path(args.corpus) / "large"
    docs = [large / f"apa_{size}.{fmt}" for fmt in FORMATS for size in SIZES]
    missing = [d for d in docs if not d.exists()]
    if missing:
        print(f"missing benchmark documents: {', '.join(map(str, missing))}", file=sys.stderr)
        return 2
    rows = []
    for d in docs:
        rows.append(bench_case(d, args.repeat))
        print(
            f"{d.name}: analysis {rows[-1]['analyse_cpu']:.2f} s CPU, {rows[-1]['analyse_rss']:.0f} MB",
            file=sys.stderr,
        )
    out = table(rows) + "\n\n" + ratios(rows)
    print(out)
    if args.write:
        cmd = "DEBUG=1 .venv/bin/python bench/analysis_bench.py --write" + (
            f" --repeat {args.repeat}" if args.repeat != 3 else ""
        )
        load = os.getloadavg()
        text = (
            "# Citation analysis benchmark\n\n"
            f"Command: `{cmd}`\n\n"
            f"Machine: {platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}; "
            f"load average at the end of the run {load[0]:.1f} (the machine was shared, so wall-clock "
            "times run above CPU times).\n\n"
            "Targets: analysis after extraction < 3 s and < 300 MB; time(300p)/time(30p) <= 12.\n"
            "Analysis = parse the stored HTML + verify in chunks of 200 + build the report, in a fresh\n"
            "process that only reads the HTML (its peak RSS includes the interpreter and imports).\n\n"
            + out
            + "\n"
        )
        (REPO / "bench" / "results").mkdir(parents=True, exist_ok=True)
        (REPO / "bench" / "results" / "analysis.md").write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
