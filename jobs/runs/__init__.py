"""The report a user reads, ``AnalysisRun``: how it is written, recorded and judged.

* ``writer``   — ``save_run``, the single writer (DESIGN.md's precedence table in one statement).
* ``judge``    — the judge: assessing a run, storing the judgment, the judge backstop.
* ``saving``   — ``save_and_judge``: save through the writer, then judge what was written; the
  tab's save and the backstop both go through it.
* ``backstop`` — ``record_jobs``: the runs no tab saved, recorded by the sweeper (or an operator).

The judge's pure scoring lives with the analysis, in ``jobs.analysis.judging``.
"""

from __future__ import annotations

from jobs.analysis.judging import JudgeError
from jobs.runs.backstop import record_jobs
from jobs.runs.judge import judge_backlog, judge_run, judge_runs, judge_soon
from jobs.runs.saving import SavedRun, save_and_judge
from jobs.runs.writer import (
    JobDeleted,
    JobNotFound,
    JobNotTerminal,
    SaveResult,
    SaveRunError,
    save_run,
)

__all__ = [
    "JobDeleted",
    "JobNotFound",
    "JobNotTerminal",
    "JudgeError",
    "SaveResult",
    "SaveRunError",
    "SavedRun",
    "judge_backlog",
    "judge_run",
    "judge_runs",
    "judge_soon",
    "record_jobs",
    "save_and_judge",
    "save_run",
]
