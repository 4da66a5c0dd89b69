"""Accuracy of the citation analysis on the sample corpus, per style and per format.

Usage: .venv/bin/python scripts/accuracy.py [--corpus DIR | --heldout] [--skip-large] [--errors] [-j N]

The corpus is found at $ACURIO_CORPUS or <repo>/../shared/corpus. Each document is analysed
(with its ``.bib`` as the library) and scored against its ``*.truth.json`` by
``jobs.analysis.evaluation``. ``--heldout`` scores the hand-written held-out theses in
``tests/analysis/heldout`` instead (no libraries), the check that the analysis generalises.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from jobs.analysis.evaluation import evaluate, format_table  # noqa: E402


def corpus_dir(explicit: str | None = None) -> Path:
    return Path(explicit or os.environ.get("ACURIO_CORPUS") or REPO.parent / "shared" / "corpus")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--corpus")
    ap.add_argument(
        "--heldout", action="store_true", help="score tests/analysis/heldout instead of the corpus"
    )
    ap.add_argument("--skip-large", action="store_true", help="leave out large/apa_300p.*")
    ap.add_argument("--errors", action="store_true", help="list every wrong verdict")
    ap.add_argument("-j", "--jobs", type=int, default=2)
    args = ap.parse_args()
    root = REPO / "tests" / "analysis" / "heldout" if args.heldout else corpus_dir(args.corpus)
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
