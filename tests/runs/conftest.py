"""Fixtures of the run-durability tests: saving a run, and reading what PostgreSQL wrote."""

from __future__ import annotations

import os
import random
import string
import uuid
from dataclasses import dataclass

import pytest
from django.db import connection, transaction

from jobs.models import AnalysisJob, AnalysisRun
from jobs.persistence import SaveResult, save_run


def big_html(kib: int, seed: int = 0) -> str:
    """A document body that PostgreSQL must move out of line: random words compress poorly."""
    rng = random.Random(seed)
    words = ["".join(rng.choices(string.ascii_lowercase, k=rng.randint(2, 9))) for _ in range(4000)]
    out: list[str] = []
    size = 0
    while size < kib * 1024:
        para = "<p>" + " ".join(rng.choices(words, k=60)) + " (Smith, 2020).</p>\n"
        out.append(para)
        size += len(para)
    return "".join(out)


@dataclass(frozen=True)
class TupleVersion:
    xmin: str
    ctid: str


def run_version(run_id: uuid.UUID) -> TupleVersion | None:
    with connection.cursor() as cur:
        cur.execute(
            f"SELECT xmin::text, ctid::text FROM {AnalysisRun._meta.db_table} WHERE id = %s",
            [run_id],
        )
        row = cur.fetchone()
    return TupleVersion(*row) if row else None


def table_writes(table: str | None = None) -> dict[str, int]:
    """This transaction's tuple writes so far on the run table and on its TOAST relation."""
    table = table or AnalysisRun._meta.db_table
    with connection.cursor() as cur:
        cur.execute(
            """
            SELECT t.n_tup_ins + t.n_tup_upd + t.n_tup_del,
                   coalesce(ts.n_tup_ins + ts.n_tup_upd + ts.n_tup_del, 0)
            FROM pg_class c
            JOIN pg_stat_xact_all_tables t ON t.relid = c.oid
            LEFT JOIN pg_stat_xact_all_tables ts ON ts.relid = c.reltoastrelid
            WHERE c.oid = %s::regclass
            """,
            [table],
        )
        heap, toast = cur.fetchone()
    return {"heap": heap, "toast": toast}


def saved(job: AnalysisJob | int, saved_by: str) -> SaveResult:
    """save_run in its own savepoint, so a tuple it writes gets its own xmin inside the test."""
    with transaction.atomic():
        return save_run(job if isinstance(job, int) else job.pk, saved_by)


def make_legacy(run_id: uuid.UUID) -> None:
    """Turn a stored run into a row from before saved_by existed."""
    with transaction.atomic():
        AnalysisRun.objects.filter(pk=run_id).update(saved_by=None)


def test_database_url(settings) -> str:
    """A DATABASE_URL naming the test database in use, for subprocesses a test starts."""
    db = settings.DATABASES["default"]
    host = db.get("HOST") or "127.0.0.1"
    port = db.get("PORT") or 5432
    user = db.get("USER") or "postgres"
    return f"postgres://{user}@{host}:{port}/{db['NAME']}"


test_database_url.__test__ = False  # a helper, not a test


@pytest.fixture
def subprocess_env(settings) -> dict[str, str]:
    base = {k: v for k, v in os.environ.items() if k not in ("DEBUG", "SECRET_KEY")}
    return {**base, "DATABASE_URL": test_database_url(settings), "DEBUG": "1"}


@pytest.fixture(autouse=True)
def fast_password_hasher(settings):
    # The shared user fixtures hash a password per test; PBKDF2's cost is not under test here.
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
