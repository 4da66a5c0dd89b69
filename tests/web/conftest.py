"""Fixtures of the web tests: corpus files, a run saved through the single writer."""

from __future__ import annotations

from pathlib import Path

import pytest

from jobs.models import AnalysisRun
from jobs.runs import save_run
from tests.corpus import corpus_dir
from tests.prerequisites import missing


@pytest.fixture
def corpus() -> Path:
    path = corpus_dir()
    if not path.is_dir():
        missing(f"no corpus at {path} (set ACURIO_CORPUS)")
    return path


@pytest.fixture
def saved_run(make_job):
    """A complete job saved as a run by the client, through the single writer (save_run)."""

    def make(**job_fields) -> AnalysisRun:
        job = make_job(**job_fields)
        result = save_run(job.pk, job_fields.pop("saved_by", "client"))
        return AnalysisRun.objects.get(pk=result.run_id)

    return make
