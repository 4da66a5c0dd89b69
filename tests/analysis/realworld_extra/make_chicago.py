#!/usr/bin/env python3
"""Render the real-world development papers in Chicago author-date, pandoc's default style.

The shared set (``../shared/realworld``, read-only here) renders five CSL styles; pandoc's
citeproc uses its built-in Chicago Manual of Style author-date (17th ed.) when no ``--csl`` is
given, which is what a student gets from ``pandoc --citeproc`` without choosing a style. This
script reuses the set's own generator (``make_set.py``: same papers, same perturbations, same
truth read off pandoc's AST) with one change: one style, ``chicago``, rendered without
``--csl``, written as DOCX, HTML, Markdown and plain text (no PDFs: their layout is
extraction's concern, not the style's).

    python3 tests/analysis/realworld_extra/make_chicago.py [--set ../shared/realworld]
        [--out /tmp/realworld-chicago]

Needs pandoc >= 2.11 (Debian's ``pandoc`` package: 2.17 here). Deterministic for a given
pandoc version. The output is not committed (it is large and derived): score it with
``score.py --set OUT``.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
FORMATS = ["docx", "html", "md", "txt"]


def load_generator(setdir: Path):
    spec = importlib.util.spec_from_file_location("make_set", setdir / "make_set.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--set", default=str(REPO.parent / "shared" / "realworld"))
    ap.add_argument("--out", default="/tmp/realworld-chicago")
    ap.add_argument("--only", help="comma-separated paper slugs")
    args = ap.parse_args()
    gen = load_generator(Path(args.set))
    # One style, citeproc's built-in default: the empty CSL name means "no --csl".
    gen.STYLES = {"chicago": ("", False)}
    plain_render = gen.render_ast

    def render_default(md_path, refs, csl, nocite, workdir):
        if csl.is_dir():  # HERE / "csl" / "": no style file
            real_sh = gen.sh

            def sh_without_csl(cmd, **kw):
                if "--csl" in cmd:
                    i = cmd.index("--csl")
                    cmd = cmd[:i] + cmd[i + 2 :]
                return real_sh(cmd, **kw)

            gen.sh = sh_without_csl
            try:
                return plain_render(md_path, refs, csl, nocite, workdir)
            finally:
                gen.sh = real_sh
        return plain_render(md_path, refs, csl, nocite, workdir)

    gen.render_ast = render_default
    plain_write = gen.write_formats

    def write_four(ast, title, stem, formats, chromium, lo_queue=None):
        return plain_write(ast, title, stem, FORMATS, None, None)

    gen.write_formats = write_four
    argv = ["make_set.py", "--out", args.out, "--no-pdf", "--no-lo"]
    if args.only:
        argv += ["--only", args.only]
    sys.argv = argv
    gen.main()
    out = Path(args.out)
    count = len(list(out.glob("*.truth.json")))
    (out / "PROVENANCE.json").write_text(
        json.dumps(
            {
                "generator": "tests/analysis/realworld_extra/make_chicago.py",
                "set": str(Path(args.set).resolve()),
                "style": "pandoc citeproc built-in chicago-author-date (no --csl)",
                "formats": FORMATS,
                "documents": count,
            },
            indent=1,
        )
    )
    print(f"{count} documents in {out}")


if __name__ == "__main__":
    main()
