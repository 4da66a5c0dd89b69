"""``manage.py analyze`` as a user runs it: a subprocess, its output, stderr and exit code."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.processes import child_env

from .builders import make_docx

REPO = Path(__file__).resolve().parents[2]
HTML = (
    "<p>Text (Smith &amp; Lee, 2020) and (Brown, 2017).</p><h2>References</h2>"
    "<p>Smith, J., &amp; Lee, K. (2020). A study. Journal, 1(2), 3\u20134.</p>"
    "<p>Unused, U. (2001). Never cited. Publisher.</p>"
)


def _run(*args: str) -> subprocess.CompletedProcess:
    # The command reads no table, but settings name a database: the suite's (a child without
    # DATABASE_URL would start or join the embedded server on its own).
    env = child_env(DEBUG="1")
    return subprocess.run(
        [sys.executable, "manage.py", "analyze", *args],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.fixture
def thesis(tmp_path):
    path = tmp_path / "thesis.html"
    path.write_text(HTML, encoding="utf-8")
    return path


def test_summary_lists_counts_then_problems(thesis):
    out = _run(str(thesis))
    assert out.returncode == 0, out.stderr
    assert "verified 1, missing_reference 1" in out.stdout
    assert "[missing_reference] (Brown, 2017): no entry by Brown" in out.stdout
    assert "[never cited] Unused, U. (2001)" in out.stdout


def test_json_is_the_report(thesis, tmp_path):
    lib = tmp_path / "lib.bib"
    lib.write_text(
        "@article{s, author={Smith, J.}, title={A study}, year={2020}}", encoding="utf-8"
    )
    out = _run(str(thesis), "--json", "--library", str(lib))
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)
    assert report["document"] == "thesis.html"
    assert report["summary"]["missing_reference"] == 1
    assert [r["library"] for r in report["references"]] == ["found", "not_found"]


def test_bad_input_is_one_line_on_stderr(tmp_path):
    bad = tmp_path / "broken.docx"
    bad.write_bytes(make_docx([["x"]])[:200])
    out = _run(str(bad))
    assert out.returncode != 0
    assert out.stdout == ""
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and "DOCX" in lines[0]
    assert "Traceback" not in out.stderr


def test_missing_file_is_one_line_on_stderr(tmp_path):
    out = _run(str(tmp_path / "nope.pdf"))
    assert out.returncode != 0
    assert len(out.stderr.strip().splitlines()) == 1
