"""Accuracy of the citation analysis on the sample corpus, per style and per format.

Usage: .venv/bin/python scripts/accuracy.py [--corpus DIR] [--skip-large] [--errors] [-j N]

The corpus is found at $ACURIO_CORPUS or <repo>/../shared/corpus. Each document is analysed
(with its ``.bib`` as the library) and scored against its ``*.truth.json`` by
``jobs.analysis.evaluation``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections import defaultdict
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from jobs.analysis import analyze  # noqa: E402
from jobs.analysis.evaluation import Score, score_citations, score_references  # noqa: E402

DOC_EXTS = (".docx", ".pdf", ".html", ".md", ".txt")
FORMAT_NAMES = {".docx": "docx", ".pdf": "pdf", ".html": "html", ".md": "markdown", ".txt": "text"}


def corpus_dir(explicit: str | None = None) -> Path:
    return Path(explicit or os.environ.get("ACURIO_CORPUS") or REPO.parent / "shared" / "corpus")


def corpus_cases(root: Path, *, skip_large: bool = False) -> list[tuple[Path, Path, Path | None]]:
    """(document, truth, library) triples for every document with a truth file."""
    cases = []
    for doc in sorted(root.rglob("*")):
        if doc.suffix not in DOC_EXTS or not doc.is_file():
            continue
        if skip_large and "300p" in doc.name:
            continue
        truth = doc.with_name(doc.name + ".truth.json")
        if not truth.exists():
            truth = doc.with_suffix(".truth.json")
        if not truth.exists():
            continue
        lib = doc.with_suffix(".bib")
        cases.append((doc, truth, lib if lib.exists() else None))
    return cases


def run_case(case: tuple[Path, Path, Path | None]) -> dict:
    doc, truth_path, lib = case
    truth = json.loads(truth_path.read_text(encoding="utf-8"))
    report = analyze(
        doc.read_bytes(),
        doc.name,
        library=lib.read_bytes() if lib else None,
        library_filename=lib.name if lib else None,
    )
    c = score_citations(truth, report)
    r = score_references(truth, report)
    return {
        "doc": str(doc),
        "style": truth["style"],
        "format": FORMAT_NAMES[doc.suffix],
        "style_ok": report["style"] == truth["style"],
        "cit": (c.correct, c.total, c.errors),
        "ref": (r.correct, r.total, r.errors),
    }


def evaluate(root: Path, *, skip_large: bool = False, jobs: int = 1) -> list[dict]:
    cases = corpus_cases(root, skip_large=skip_large)
    if jobs > 1:
        with ProcessPoolExecutor(jobs) as pool:
            return list(pool.map(run_case, cases))
    return [run_case(c) for c in cases]


def tables(results: list[dict]) -> dict[str, dict[str, tuple[Score, Score]]]:
    """{'overall'|'style'|'format': {name: (citation score, reference score)}}."""
    out: dict[str, dict[str, tuple[Score, Score]]] = defaultdict(dict)
    for res in results:
        for group, name in (("overall", "all"), ("style", res["style"]), ("format", res["format"])):
            c, r = out[group].setdefault(name, (Score(), Score()))
            c.add(Score(*res["cit"]))
            r.add(Score(*res["ref"]))
    return out


def format_table(results: list[dict]) -> str:
    lines = [
        "| group | citations correct | citation accuracy | references correct | reference accuracy |"
    ]
    lines.append("|---|---|---|---|---|")
    t = tables(results)
    for group in ("overall", "style", "format"):
        for name, (c, r) in sorted(t[group].items()):
            label = "overall" if group == "overall" else f"{group}: {name}"
            lines.append(
                f"| {label} | {c.correct}/{c.total} | {c.rate:.2%} | {r.correct}/{r.total} | {r.rate:.2%} |"
            )
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--corpus")
    ap.add_argument("--skip-large", action="store_true", help="leave out large/apa_300p.*")
    ap.add_argument("--errors", action="store_true", help="list every wrong verdict")
    ap.add_argument("-j", "--jobs", type=int, default=2)
    args = ap.parse_args()
    root = corpus_dir(args.corpus)
    if not root.is_dir():
        print(f"corpus not found at {root}", file=sys.stderr)
        return 2
    results = evaluate(root, skip_large=args.skip_large, jobs=args.jobs)
    for res in results:
        c_ok, c_n, c_err = res["cit"]
        r_ok, r_n, r_err = res["ref"]
        flag = "" if res["style_ok"] else "  STYLE WRONG"
        print(f"{res['doc']}: citations {c_ok}/{c_n}, references {r_ok}/{r_n}{flag}")
        if args.errors:
            for e in c_err + r_err:
                print(f"    {e}")
    print()
    print(format_table(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
