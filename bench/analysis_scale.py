"""Scaling benchmark of the citation analysis: a generated text with many markers and entries.

Usage: .venv/bin/python bench/analysis_scale.py [--scales 1,2,4] [--markers 60000]
       [--entries 20000] [--seed 7]

At scale 1 the document is a plain-text thesis of about 3 MB with ``--markers`` invented APA
markers in its body and ``--entries`` invented entries in its reference list; scale k multiplies
both. The markers are a realistic mix: most cite an entry, some with a wrong year, a misspelt
surname or an author the list lacks (those ask for the "closest entry" hint, the costliest path).
Each scale runs ``jobs.analysis.analyze`` (extraction, parsing, matching, report) in a fresh
subprocess; printed per scale: wall-clock and CPU seconds and the child's peak RSS
(``resource.getrusage(RUSAGE_CHILDREN)``), then the growth ratios between scales, which stay
near the scale ratio when every stage is linear (or n log n). A scale past a documented limit
of ``jobs.analysis.Limits`` (10 million characters of text) is reported as refused, with the
time the refusal took.
"""

from __future__ import annotations

import argparse
import json
import random
import resource
import subprocess
import sys
import tempfile
import time
from itertools import pairwise
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SYLLABLES = [
    "ba", "ke", "lo", "mi", "nu", "ra", "se", "ti", "vo", "wa", "zen", "dor", "fal", "gri",
    "hul", "jas", "kor", "lin", "mar", "nes", "pol", "quin", "ros", "sul", "tam", "ver",
]  # fmt: skip
FILLER = ("As shown", "Thus", "See also", "Hence")

CHILD = """
import json, resource, sys, time
sys.path.insert(0, {repo!r})
from jobs.analysis import AnalysisInputError, analyze
data = open({doc!r}, "rb").read()
w, c = time.perf_counter(), time.process_time()
try:
    report = analyze(data, "scale.txt")
except AnalysisInputError as exc:  # a documented limit refuses the document
    w, c = time.perf_counter() - w, time.process_time() - c
    print(json.dumps({{"wall": w, "cpu": c, "refused": str(exc)}}))
    raise SystemExit(0)
w, c = time.perf_counter() - w, time.process_time() - c
print(json.dumps({{"wall": w, "cpu": c, "citations": len(report["citations"]),
                  "references": len(report["references"]), "summary": report["summary"]}}))
"""


def surname(rng: random.Random) -> str:
    return "".join(rng.choice(SYLLABLES) for _ in range(rng.randint(2, 4))).capitalize()


def typo(name: str, rng: random.Random) -> str:
    i = rng.randrange(1, len(name) - 1)
    letters = [c for c in "aeiounrst" if c != name[i]]
    return name[:i] + rng.choice(letters) + name[i + 1 :]


def make_document(markers: int, entries: int, seed: int) -> str:
    """A plain-text thesis: body paragraphs of markers, then the reference list."""
    rng = random.Random(seed)
    refs: list[tuple[str, str, int]] = []
    seen: set[tuple[str, int]] = set()
    while len(refs) < entries:
        first, year = surname(rng), rng.randint(1950, 2024)
        if (first, year) in seen:
            continue
        seen.add((first, year))
        refs.append((first, surname(rng), year))
    body: list[str] = []
    sentence: list[str] = []
    for i in range(markers):
        first, second, year = rng.choice(refs)
        roll = rng.random()
        if roll < 0.05:
            year -= 3  # a wrong year
        elif roll < 0.10:
            first = typo(first, rng)  # a misspelt surname
        elif roll < 0.15:
            first = surname(rng) + "x"  # an author the list lacks
        cite = f"({first}, {year})" if rng.random() < 0.6 else f"({first} & {second}, {year})"
        sentence.append(f"{rng.choice(FILLER)} {cite}.")
        if len(sentence) == 6 or i == markers - 1:
            body.append(" ".join(sentence))
            sentence = []
    refs.sort()
    lines = ["Introduction", "", *(p + "\n" for p in body), "References", ""]
    for first, second, year in refs:
        lines.append(
            f"{first}, A., & {second}, C. ({year}). Invented. J Ex, {year % 50 + 1}, 1-9.\n"
        )
    return "\n".join(lines)


def run(doc: Path) -> dict:
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    code = CHILD.format(repo=str(REPO), doc=str(doc))
    start = time.perf_counter()
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    wall = time.perf_counter() - start
    if out.returncode != 0:
        raise SystemExit(f"analysis failed:\n{out.stderr[-2000:]}")
    result = json.loads(out.stdout.strip().splitlines()[-1])
    # RUSAGE_CHILDREN reports the largest child so far: each scale is larger than the last.
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    result["rss_mb"] = max(peak, before) / 1024
    result["process_wall"] = wall
    return result


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--scales", default="1,2,4")
    ap.add_argument("--markers", type=int, default=60_000)
    ap.add_argument("--entries", type=int, default=20_000)
    ap.add_argument("--seed", type=int, default=7)
    args = ap.parse_args()
    scales = [float(s) for s in args.scales.split(",")]
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for k in sorted(scales):
            text = make_document(int(args.markers * k), int(args.entries * k), args.seed)
            doc = Path(tmp) / f"scale_{k}.txt"
            doc.write_text(text, encoding="utf-8")
            res = run(doc)
            res.update(scale=k, mb=len(text.encode()) / 1e6)
            if "refused" in res:
                # (no RSS: RUSAGE_CHILDREN keeps the largest child so far, an earlier scale's)
                print(
                    f"scale {k:g}: {res['mb']:.1f} MB refused in {res['cpu']:.1f} s CPU "
                    f"({res['process_wall']:.1f} s for the process): {res['refused']}",
                    flush=True,
                )
                continue
            rows.append(res)
            print(
                f"scale {k:g}: {res['mb']:.1f} MB, {res['citations']} markers, "
                f"{res['references']} entries: {res['wall']:.1f} s wall, {res['cpu']:.1f} s CPU "
                f"(process {res['process_wall']:.1f} s), peak RSS {res['rss_mb']:.0f} MB",
                flush=True,
            )
    for a, b in pairwise(rows):
        print(
            f"{a['scale']:g} -> {b['scale']:g} (x{b['scale'] / a['scale']:g}): "
            f"time x{b['cpu'] / max(a['cpu'], 1e-9):.2f}, "
            f"RSS x{b['rss_mb'] / max(a['rss_mb'], 1e-9):.2f}"
        )


if __name__ == "__main__":
    main()
