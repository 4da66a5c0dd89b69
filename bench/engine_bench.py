"""Benchmark of Acurio's durable engine against three PostgreSQL queues.

One run measures, with 1 and with 4 worker processes, each case repeated (``--repeats``):

1. ``raw``    a raw psycopg 3 loop: one row per transaction, ``SELECT ... FOR UPDATE SKIP
              LOCKED LIMIT 1``, mark done, commit (the floor; ``bench/peers/raw_worker.py``);
2. ``dtdb``   django-tasks-db's ``db_worker --batch`` (Django Tasks, ``CONN_MAX_AGE=None``);
3. ``proc``   Procrastinate's worker (``--one-shot``, psycopg connector, concurrency 1);
4. ``engine`` Acurio's engine: no-op 3-step workflows (``task >> task >> task``) run by
              ``manage.py worker --once`` processes.

Each peer has its own database (``acurio_bench_<peer>``, dropped and re-created at the start
of a run: nothing else is ever touched). A case empties the peer's tables, enqueues the jobs
(not timed), runs ``VACUUM ANALYZE`` and ``CHECKPOINT``, then launches the worker processes
and waits until they have all exited and the queue is empty. Figures:

- drain rate: jobs (and steps) divided by the span from the first job's start to the last
  job's finish, both read from the peer's own timestamps in the database: process start-up
  and enqueueing are excluded;
- wall rate: the same jobs over the time from launching the workers until the queue was
  seen empty (polled every 0.1 s): start-up included, for reference;
- peak RSS per worker process (``ru_maxrss`` from ``wait4``), and CPU seconds per step of the
  worker processes (``ru_utime + ru_stime``) and of their PostgreSQL backends (sampled from
  ``/proc/<pid>/stat`` every 0.1 s, so a backend's last < 0.1 s may be missed).

The engine runs from ``git archive HEAD``, exported when its first case starts (so a long run
measures the engine as committed by then, never an engineer's uncommitted work in the tree);
``--engine-src tree`` uses the working tree instead. Repeats alternate the peers' order.

Usage::

    .venv/bin/python bench/engine_bench.py [--jobs 10000] [--workers 1,4] [--repeats 2]
        [--peers raw,dtdb,proc,engine] [--out bench/results/engine.md]
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import shlex
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

import psycopg
from psycopg import sql

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.peers import common as peer_common  # noqa: E402
from bench.peers.common import (  # noqa: E402
    admin_conn,
    dsn,
    git,
    package_versions,
    proc_cpu_ticks,
    recreate_database,
    url,
)

PY = sys.executable
CLK_TCK = os.sysconf("SC_CLK_TCK")
ANALYSIS_MARKER = "<!-- analysis: kept across runs -->"
# Another engineer benchmarking on the same server at the same time sets BENCH_DB_PREFIX so
# that neither run drops the other's databases.
DB_PREFIX = os.environ.get("BENCH_DB_PREFIX", "acurio_bench_")


# --- peers -------------------------------------------------------------------------------


@dataclass
class Peer:
    """One system under test: how to set up its database, enqueue, drain and observe it."""

    key: str
    title: str
    steps_per_job: int
    tables: tuple[str, ...]
    # remaining (unfinished jobs) only: polled every 0.1 s while the workers run.
    remaining_sql: str
    # (remaining, finished steps, failed jobs, first step start, last job finish).
    summary_sql: str
    reset_sql: str
    cwd: Path = ROOT
    extra_env: dict[str, str] = field(default_factory=dict)
    # Enqueue processes, each committing its share in one transaction, all before any worker
    # starts: enqueueing is not timed, and on a shared 2-core machine a slow enqueuer (the
    # ORM ones) would otherwise take longer than the drain itself.
    enqueuers: int = 1

    @property
    def dbname(self) -> str:
        return f"{DB_PREFIX}{self.key}"

    def env(self) -> dict[str, str]:
        env = dict(os.environ)
        env.update(
            {
                "PYTHONPATH": os.pathsep.join(dict.fromkeys([str(self.cwd), str(ROOT)])),
                "PYTHONUNBUFFERED": "1",
                "BENCH_DTDB_DB": f"{DB_PREFIX}dtdb",
                "BENCH_PROC_DB": f"{DB_PREFIX}proc",
            }
        )
        env.update(self.extra_env)
        return env

    def unavailable(self) -> str | None:
        """Why this peer cannot run here, or None."""
        return None

    def prepare_cmds(self) -> list[list[str]]:
        """Commands that create the schema in a fresh database."""
        return []

    def enqueue_cmd(self, jobs: int) -> list[str]:
        raise NotImplementedError

    def worker_cmd(self) -> list[str]:
        raise NotImplementedError


class RawPeer(Peer):
    def prepare_cmds(self) -> list[list[str]]:
        return [[PY, "-m", "bench.peers.raw_worker", self.dbname, "--enqueue", "0"]]

    def enqueue_cmd(self, jobs: int) -> list[str]:
        return [PY, "-m", "bench.peers.raw_worker", self.dbname, "--enqueue", str(jobs)]

    def worker_cmd(self) -> list[str]:
        return [PY, "-m", "bench.peers.raw_worker", self.dbname]


class DtdbPeer(Peer):
    def unavailable(self) -> str | None:
        return _missing("django-tasks-db")

    def prepare_cmds(self) -> list[list[str]]:
        return [[PY, "-m", "django", "migrate", "--noinput", "-v", "0"]]

    def enqueue_cmd(self, jobs: int) -> list[str]:
        return [PY, "-m", "bench.peers.dtdb_enqueue", str(jobs)]

    def worker_cmd(self) -> list[str]:
        return [
            PY,
            "-m",
            "django",
            "db_worker",
            "--batch",
            "--interval",
            "0",
            "--no-startup-delay",
            "--no-reload",
            "--verbosity",
            "0",
        ]


class ProcPeer(Peer):
    APP = "bench.peers.proc_app.app"

    def unavailable(self) -> str | None:
        return _missing("procrastinate")

    def prepare_cmds(self) -> list[list[str]]:
        return [[PY, "-m", "procrastinate", "--app", self.APP, "schema", "--apply"]]

    def enqueue_cmd(self, jobs: int) -> list[str]:
        return [PY, "-m", "bench.peers.proc_app", str(jobs)]

    def worker_cmd(self) -> list[str]:
        return [
            PY,
            "-m",
            "procrastinate",
            "--app",
            self.APP,
            "--log-level",
            "warning",
            "worker",
            "--one-shot",
            "--concurrency",
            "1",
        ]


class EnginePeer(Peer):
    concurrency: int | None = None
    group: int | None = None

    def unavailable(self) -> str | None:
        probes = (
            [PY, "-c", "import django; django.setup(); from jobs.durable import start, task"],
            [PY, "manage.py", "worker", "--help"],
        )
        for probe in probes:
            done = subprocess.run(
                probe, cwd=self.cwd, env=self.env(), capture_output=True, text=True
            )
            if done.returncode != 0:
                last = (done.stderr.strip().splitlines() or ["?"])[-1]
                return f"the engine is not usable here yet (`{shlex.join(probe[1:])}`: {last})"
        return None

    def prepare_cmds(self) -> list[list[str]]:
        return [[PY, "manage.py", "migrate", "--noinput", "-v", "0"]]

    def enqueue_cmd(self, jobs: int) -> list[str]:
        return [PY, "-m", "bench.peers.engine_tasks", str(jobs)]

    def worker_cmd(self) -> list[str]:
        cmd = [PY, "manage.py", "worker", "--once"]
        if self.concurrency is not None:
            cmd += ["--concurrency", str(self.concurrency)]
        if self.group is not None:
            cmd += ["--group", str(self.group)]
        return cmd


def _missing(dist: str) -> str | None:
    try:
        metadata.version(dist)
    except metadata.PackageNotFoundError:
        return f"{dist} is not installed (pip install -r bench/requirements.txt)"
    return None


def build_peers(
    engine_cwd: Path, engine_concurrency: int | None, engine_group: int | None = None
) -> dict[str, Peer]:
    engine_db = f"{DB_PREFIX}engine"
    engine = EnginePeer(
        key="engine",
        title="Acurio engine (3-step workflows)",
        steps_per_job=3,
        tables=("durable_instance", "durable_step"),
        remaining_sql=(
            "SELECT count(*) FROM durable_instance "
            "WHERE status NOT IN ('completed', 'failed', 'cancelled')"
        ),
        summary_sql="""
            SELECT
              (SELECT count(*) FROM durable_instance
                WHERE status NOT IN ('completed', 'failed', 'cancelled')),
              (SELECT count(*) FROM durable_step WHERE kind = 'task' AND status = 'completed'),
              (SELECT count(*) FROM durable_instance WHERE status <> 'completed'),
              (SELECT min(started_at) FROM durable_step WHERE kind = 'task'),
              (SELECT max(finished_at) FROM durable_instance)
        """,
        reset_sql="TRUNCATE durable_instance, durable_step CASCADE",
        cwd=engine_cwd,
        enqueuers=4,
        extra_env={
            "DJANGO_SETTINGS_MODULE": "acurio.settings",
            "DATABASE_URL": url(engine_db),
            "SECRET_KEY": "bench-only-not-a-secret-long-enough-for-the-fifty-character-minimum",
            "DEBUG": "0",
            "LOG_LEVEL": "WARNING",
        },
    )
    engine.concurrency = engine_concurrency
    engine.group = engine_group
    if engine_group is not None:
        # The setting too: a worker command of an older commit that ignores --group still
        # runs with group commit, instead of silently measuring steps one by one.
        engine.extra_env["ACURIO_WORKER_GROUP"] = str(engine_group)
    peers: list[Peer] = [
        RawPeer(
            key="raw",
            title="raw psycopg SKIP LOCKED loop",
            steps_per_job=1,
            tables=("raw_jobs",),
            remaining_sql="SELECT count(*) FROM raw_jobs WHERE status <> 'done'",
            summary_sql="""
                SELECT count(*) FILTER (WHERE status <> 'done'),
                       count(*) FILTER (WHERE status = 'done'),
                       0, min(started_at), max(finished_at)
                FROM raw_jobs
            """,
            reset_sql="TRUNCATE raw_jobs RESTART IDENTITY",
        ),
        DtdbPeer(
            key="dtdb",
            title="django-tasks-db db_worker",
            steps_per_job=1,
            tables=("django_tasks_database_dbtaskresult",),
            remaining_sql=(
                "SELECT count(*) FROM django_tasks_database_dbtaskresult "
                "WHERE status IN ('READY', 'RUNNING')"
            ),
            summary_sql="""
                SELECT count(*) FILTER (WHERE status IN ('READY', 'RUNNING')),
                       count(*) FILTER (WHERE status = 'SUCCESSFUL'),
                       count(*) FILTER (WHERE status = 'FAILED'),
                       min(started_at), max(finished_at)
                FROM django_tasks_database_dbtaskresult
            """,
            reset_sql="TRUNCATE django_tasks_database_dbtaskresult",
            extra_env={"DJANGO_SETTINGS_MODULE": "bench.peers.dtdb_settings"},
            enqueuers=4,
        ),
        ProcPeer(
            key="proc",
            title="Procrastinate worker",
            steps_per_job=1,
            tables=("procrastinate_jobs", "procrastinate_events"),
            remaining_sql=(
                "SELECT count(*) FROM procrastinate_jobs WHERE status IN ('todo', 'doing')"
            ),
            summary_sql="""
                SELECT
                  (SELECT count(*) FROM procrastinate_jobs WHERE status IN ('todo', 'doing')),
                  (SELECT count(*) FROM procrastinate_jobs WHERE status = 'succeeded'),
                  (SELECT count(*) FROM procrastinate_jobs
                    WHERE status NOT IN ('todo', 'doing', 'succeeded')),
                  (SELECT min(at) FROM procrastinate_events WHERE type = 'started'),
                  (SELECT max(at) FROM procrastinate_events WHERE type = 'succeeded')
            """,
            reset_sql=(
                "TRUNCATE procrastinate_jobs, procrastinate_events, procrastinate_workers, "
                "procrastinate_periodic_defers RESTART IDENTITY CASCADE"
            ),
        ),
        engine,
    ]
    return {p.key: p for p in peers}


# --- one case ------------------------------------------------------------------------------


@dataclass
class CaseResult:
    peer: str
    workers: int
    repeat: int
    jobs: int
    steps: int
    ok: bool
    error: str = ""
    enqueue_s: float = 0.0
    span_s: float = 0.0
    wall_s: float = 0.0
    peak_rss_mib: float = 0.0
    worker_cpu_s: float = 0.0
    pg_cpu_s: float = 0.0
    commits: int = 0
    rows_written: int = 0
    load: str = ""  # /proc/loadavg (1, 5, 15 min) as the drain ended: the others' load

    @property
    def steps_per_s(self) -> float:
        return self.steps / self.span_s if self.span_s > 0 else 0.0

    @property
    def jobs_per_s(self) -> float:
        return self.jobs / self.span_s if self.span_s > 0 else 0.0

    @property
    def wall_jobs_per_s(self) -> float:
        return self.jobs / self.wall_s if self.wall_s > 0 else 0.0

    @property
    def worker_cpu_ms_per_step(self) -> float:
        return 1000 * self.worker_cpu_s / self.steps if self.steps else 0.0

    @property
    def pg_cpu_ms_per_step(self) -> float:
        return 1000 * self.pg_cpu_s / self.steps if self.steps else 0.0

    @property
    def commits_per_step(self) -> float:
        return self.commits / self.steps if self.steps else 0.0

    @property
    def rows_per_step(self) -> float:
        return self.rows_written / self.steps if self.steps else 0.0


class Sampler(threading.Thread):
    """Polls the queue's remaining count and the CPU time of the database's backends."""

    def __init__(self, dbname: str, remaining_sql: str, interval: float = 0.1) -> None:
        super().__init__(daemon=True)
        self.dbname = dbname
        self.remaining_sql = remaining_sql
        self.interval = interval
        self.stop_event = threading.Event()
        self.backend_ticks: dict[int, int] = {}
        self.empty_at: float | None = None
        self.error: BaseException | None = None
        self.statements = 0  # its own, subtracted from the database's commit count

    def run(self) -> None:
        try:
            # No automatic prepared statements: they break behind a transaction pooler.
            with psycopg.connect(dsn(self.dbname), autocommit=True, prepare_threshold=None) as conn:
                while not self.stop_event.is_set():
                    self._sample(conn)
                    self.stop_event.wait(self.interval)
                self._sample(conn)
        except BaseException as exc:  # reported by the case, never swallowed
            self.error = exc

    def _sample(self, conn: psycopg.Connection) -> None:
        self.statements += 1
        pids = conn.execute(
            "SELECT pid FROM pg_stat_activity WHERE datname = %s "
            "AND backend_type = 'client backend' AND pid <> pg_backend_pid()",
            (self.dbname,),
        ).fetchall()
        for (pid,) in pids:
            ticks = proc_cpu_ticks(pid)
            if ticks is not None:
                self.backend_ticks[pid] = max(ticks, self.backend_ticks.get(pid, 0))
        if self.empty_at is None:
            self.statements += 1
            row = conn.execute(self.remaining_sql).fetchone()
            if row is not None and row[0] == 0:
                self.empty_at = time.monotonic()


_DB_STATS = (
    "SELECT xact_commit + xact_rollback, tup_inserted + tup_updated + tup_deleted "
    "FROM pg_stat_database WHERE datname = %s"
)


def database_stats(dbname: str) -> tuple[int, int]:
    """(transactions, rows written) of ``dbname`` so far, from a connection to ``postgres``."""
    with admin_conn() as conn:
        row = conn.execute(_DB_STATS, (dbname,)).fetchone()
    return (int(row[0]), int(row[1])) if row else (0, 0)


def run_checked(cmd: Sequence[str], peer: Peer, log: Path) -> None:
    with log.open("ab") as out:
        out.write(f"\n$ {shlex.join(cmd)}\n".encode())
        out.flush()
        proc = subprocess.run(cmd, cwd=peer.cwd, env=peer.env(), stdout=out, stderr=out)
    if proc.returncode != 0:
        raise RuntimeError(f"{shlex.join(cmd)} exited {proc.returncode}; see {log}")


def run_parallel(cmds: Sequence[Sequence[str]], peer: Peer, log: Path) -> None:
    with log.open("ab") as out:
        for cmd in cmds:
            out.write(f"\n$ {shlex.join(cmd)}  (in parallel)\n".encode())
        out.flush()
        procs = [
            subprocess.Popen(cmd, cwd=peer.cwd, env=peer.env(), stdout=out, stderr=out)
            for cmd in cmds
        ]
        codes = [proc.wait() for proc in procs]
    if any(codes):
        raise RuntimeError(f"enqueue exited {codes}; see {log}")


def prepare(peer: Peer, logdir: Path) -> None:
    recreate_database(peer.dbname, DB_PREFIX)
    for cmd in peer.prepare_cmds():
        run_checked(cmd, peer, logdir / f"{peer.key}-prepare.log")


def run_case(
    peer: Peer, workers: int, jobs: int, repeat: int, logdir: Path, timeout: float
) -> CaseResult:
    steps = jobs * peer.steps_per_job
    result = CaseResult(peer.key, workers, repeat, jobs, steps, ok=False)
    log = logdir / f"{peer.key}-w{workers}-r{repeat}.log"
    with admin_conn(peer.dbname) as conn:
        conn.execute(peer.reset_sql)
    started = time.monotonic()
    shares = [jobs // peer.enqueuers + (i < jobs % peer.enqueuers) for i in range(peer.enqueuers)]
    run_parallel([peer.enqueue_cmd(n) for n in shares if n], peer, log)
    result.enqueue_s = time.monotonic() - started
    with admin_conn(peer.dbname) as conn:
        for table in peer.tables:
            conn.execute(sql.SQL("VACUUM ANALYZE {}").format(sql.Identifier(table)))
        remaining = conn.execute(peer.remaining_sql).fetchone()
        conn.execute("CHECKPOINT")
    if remaining is None or remaining[0] != jobs:
        result.error = f"enqueue left {remaining} jobs, expected {jobs}"
        return result

    time.sleep(0.5)  # let the set-up connections' statistics reach pg_stat_database
    stats_before = database_stats(peer.dbname)
    sampler = Sampler(peer.dbname, peer.remaining_sql)
    sampler.start()
    cmd = peer.worker_cmd()
    with log.open("ab") as out:
        out.write(f"\n$ {shlex.join(cmd)}  (x{workers})\n".encode())
        out.flush()
        launched = time.monotonic()
        procs = [
            subprocess.Popen(cmd, cwd=peer.cwd, env=peer.env(), stdout=out, stderr=out)
            for _ in range(workers)
        ]
        usages, codes = _reap(procs, launched + timeout)
    sampler.stop_event.set()
    sampler.join()
    result.load = " ".join(Path("/proc/loadavg").read_text().split()[:3])
    time.sleep(0.5)  # exited backends flush their statistics as they go
    stats_after = database_stats(peer.dbname)
    result.commits = stats_after[0] - stats_before[0] - sampler.statements
    result.rows_written = stats_after[1] - stats_before[1]

    result.peak_rss_mib = max(u.ru_maxrss for u in usages) / 1024
    result.worker_cpu_s = sum(u.ru_utime + u.ru_stime for u in usages)
    result.pg_cpu_s = sum(sampler.backend_ticks.values()) / CLK_TCK
    if sampler.empty_at is not None:
        result.wall_s = sampler.empty_at - launched
    with admin_conn(peer.dbname) as conn:
        summary = conn.execute(peer.summary_sql).fetchone()
    assert summary is not None
    left, finished_steps, failed, first_start, last_finish = summary
    problems = []
    if sampler.error is not None:
        problems.append(f"sampler: {sampler.error!r}")
    if any(code != 0 for code in codes):
        problems.append(f"worker exit codes {codes} (see {log})")
    if left or failed or finished_steps != steps:
        problems.append(f"{left} unfinished, {failed} failed, {finished_steps}/{steps} steps done")
    if first_start is None or last_finish is None:
        problems.append("no timestamps recorded")
    else:
        result.span_s = (last_finish - first_start).total_seconds()
    result.error = "; ".join(problems)
    result.ok = not problems
    return result


def _reap(procs: list[subprocess.Popen], deadline: float) -> tuple[list, list[int]]:
    """Wait for every worker with wait4 (for its rusage); kill them all past the deadline."""
    pending = {p.pid: p for p in procs}
    usages: dict[int, object] = {}
    codes: dict[int, int] = {}
    killed = False
    while pending:
        for pid in list(pending):
            wpid, status, usage = os.wait4(pid, os.WNOHANG)
            if wpid:
                proc = pending.pop(pid)
                proc.returncode = codes[pid] = os.waitstatus_to_exitcode(status)
                usages[pid] = usage
        if pending and not killed and time.monotonic() > deadline:
            for proc in pending.values():
                proc.send_signal(signal.SIGKILL)
            killed = True
        time.sleep(0.02)
    order = [p.pid for p in procs]
    return [usages[pid] for pid in order], [codes[pid] for pid in order]


# --- report --------------------------------------------------------------------------------


@dataclass
class Summary:
    peer: str
    workers: int
    runs: list[CaseResult]

    @property
    def best(self) -> CaseResult:
        return max(self.runs, key=lambda r: r.steps_per_s)

    @property
    def spread(self) -> float:
        """(best - worst) / best of the drain rate, over the runs of this case."""
        rates = [r.steps_per_s for r in self.runs]
        return (max(rates) - min(rates)) / max(rates) if max(rates) else 0.0

    @property
    def median_steps_per_s(self) -> float:
        return statistics.median(r.steps_per_s for r in self.runs)


def summarise(results: list[CaseResult]) -> dict[tuple[str, int], Summary]:
    out: dict[tuple[str, int], Summary] = {}
    for r in results:
        if r.ok:
            out.setdefault((r.peer, r.workers), Summary(r.peer, r.workers, [])).runs.append(r)
    return out


def fmt(value: float, digits: int = 0) -> str:
    return f"{value:,.{digits}f}"


def render(
    peers: dict[str, Peer],
    results: list[CaseResult],
    skipped: dict[str, str],
    worker_counts: list[int],
    command: str,
    started: dt.datetime,
    finished: dt.datetime,
    env_lines: list[str],
    partial: bool = False,
) -> str:
    summaries = summarise(results)
    lines = [
        "# Durable engine benchmark",
        "",
        *(["**Partial: the run was still going when this was written.**", ""] if partial else []),
        f"- command: `{command}`",
        f"- started {started:%Y-%m-%d %H:%M:%S} UTC, finished {finished:%H:%M:%S} UTC",
        *[f"- {line}" for line in env_lines],
        "",
        "Each case drains the queue once per repeat; the table shows the best run (highest "
        "drain rate) and the spread `(best - worst) / best` over the runs. The machine has "
        "2 cores shared with other engineers' test runs while this ran, so the figures are "
        "noisy: read them as a range, not to the last digit.",
        "",
        "| peer | workers | runs | steps/s (best) | jobs/s (best) | spread | median steps/s | "
        "wall jobs/s (incl. start-up) | peak RSS / worker (MiB) | worker CPU ms/step | "
        "PostgreSQL CPU ms/step | commits/step | rows written/step |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for key, peer in peers.items():
        for workers in worker_counts:
            s = summaries.get((key, workers))
            if s is None:
                why = skipped.get(key) or _failure(results, key, workers) or "not run"
                lines.append(f"| {peer.title} | {workers} | 0 | not run: {why} |" + " — |" * 9)
                continue
            b = s.best
            lines.append(
                f"| {peer.title} | {workers} | {len(s.runs)} | {fmt(b.steps_per_s)} | "
                f"{fmt(b.jobs_per_s)} | {s.spread:.0%} | {fmt(s.median_steps_per_s)} | "
                f"{fmt(b.wall_jobs_per_s)} | {b.peak_rss_mib:.1f} | "
                f"{b.worker_cpu_ms_per_step:.2f} | {b.pg_cpu_ms_per_step:.2f} | "
                f"{b.commits_per_step:.2f} | {b.rows_per_step:.2f} |"
            )
    lines += ["", "## Ratios and targets (best runs)", ""]
    lines += ratio_lines(summaries, worker_counts)
    lines += [
        "",
        "## Every run",
        "",
        "| peer | workers | repeat | ok | enqueue s | drain s | wall s | steps/s | jobs/s | "
        "peak RSS MiB | worker CPU s | PG CPU s | commits | load avg (1/5/15 min) | note |",
        "|---|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---|",
    ]
    for r in results:
        lines.append(
            f"| {r.peer} | {r.workers} | {r.repeat} | {'yes' if r.ok else 'NO'} | "
            f"{r.enqueue_s:.1f} | {r.span_s:.2f} | {r.wall_s:.2f} | {fmt(r.steps_per_s)} | "
            f"{fmt(r.jobs_per_s)} | {r.peak_rss_mib:.1f} | {r.worker_cpu_s:.1f} | "
            f"{r.pg_cpu_s:.1f} | {r.commits:,} | {r.load} | {r.error} |"
        )
    return "\n".join(lines) + "\n"


def _failure(results: list[CaseResult], key: str, workers: int) -> str:
    errors = [r.error for r in results if r.peer == key and r.workers == workers and not r.ok]
    return f"failed: {errors[0]}" if errors else ""


def ratio_lines(summaries: dict[tuple[str, int], Summary], worker_counts: list[int]) -> list[str]:
    lines = [
        "| workers | engine steps/s ÷ raw loop (target ≥ 0.5) | engine steps/s ÷ django-tasks-db "
        "jobs/s (target ≥ 2) | engine steps/s ÷ Procrastinate jobs/s (target ≥ 2) | "
        "engine workflows/s ÷ django-tasks-db jobs/s (no target) | engine workflows/s ÷ "
        "Procrastinate jobs/s (no target) |",
        "|---:|---:|---:|---:|---:|---:|",
    ]
    for workers in worker_counts:
        engine = summaries.get(("engine", workers))
        cells = [str(workers)]
        for peer, attr, target in (
            ("raw", "steps_per_s", 0.5),
            ("dtdb", "steps_per_s", 2.0),
            ("proc", "steps_per_s", 2.0),
            ("dtdb", "jobs_per_s", None),
            ("proc", "jobs_per_s", None),
        ):
            other = summaries.get((peer, workers))
            if engine is None or other is None or not other.best.jobs_per_s:
                cells.append("—")
                continue
            ratio = getattr(engine.best, attr) / other.best.jobs_per_s
            if target is None:  # a 3-step workflow against one job: context, not a target
                cells.append(f"{ratio:.2f}")
                continue
            mark = "met" if ratio >= target else "MISSED"
            cells.append(f"{ratio:.2f} ({mark})")
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def environment_lines(engine_source: str) -> list[str]:
    with admin_conn() as conn:
        row = conn.execute("SHOW server_version").fetchone()
        settings = conn.execute(
            "SELECT name, setting FROM pg_settings WHERE name IN "
            "('shared_buffers', 'synchronous_commit', 'fsync', 'max_connections')"
        ).fetchall()
    versions = package_versions()
    return [
        f"machine: {os.cpu_count()} cores, {platform.platform()}, Python {platform.python_version()}",
        f"PostgreSQL {row[0] if row else '?'} at {peer_common.HOST}:{peer_common.PORT}, settings: "
        + ", ".join(f"{n}={s}" for n, s in settings),
        "packages: " + ", ".join(versions),
        f"engine code: {engine_source or 'not run'}",
    ]


def export_head(dest: Path) -> None:
    archive = subprocess.run(["git", "archive", "HEAD"], cwd=ROOT, capture_output=True, check=True)
    subprocess.run(["tar", "-x", "-C", str(dest)], input=archive.stdout, check=True)


def write_report(path: Path, body: str) -> None:
    kept = ""
    if path.exists():
        old = path.read_text()
        if ANALYSIS_MARKER in old:
            kept = old[old.index(ANALYSIS_MARKER) :]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(body + ("\n" + kept if kept else ""))


def _rate(case: dict[str, Any]) -> str:
    """A start case's rate: the median run's, and every run's when there were several."""
    rounds = case.get("rounds_per_s") or [case["per_s"]]
    text = f"{case['per_s']:,.0f} workflows/s"
    if len(rounds) > 1:
        text += f" (median of {len(rounds)}: " + ", ".join(f"{x:,.0f}" for x in rounds) + ")"
    return text


def run_start_cases(peer: Peer, config: str, logdir: Path) -> str:
    """The engine's start, start_many, latency and priority cases, as a report section."""
    load_before = os.getloadavg()
    done = subprocess.run(
        [PY, "-m", "bench.peers.engine_starts", config],
        cwd=peer.cwd,
        env=peer.env(),
        capture_output=True,
        text=True,
        timeout=1800,
    )
    (logdir / "engine-starts.log").write_text(done.stdout + done.stderr)
    lines = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")]
    if done.returncode != 0 or not lines:
        last = (done.stderr.strip().splitlines() or ["?"])[-1]
        return f"\n## Engine starts, latency, priority\n\nFAILED: {last}\n"
    r = json.loads(lines[-1][len("RESULT ") :])
    load_after = os.getloadavg()
    return "\n".join(
        [
            "",
            "## Engine starts, latency, priority (bench/peers/engine_starts.py)",
            "",
            "| case | figure | target |",
            "|---|---|---|",
            f"| `start()` one by one ({r['start']['count']:,} 1-step workflows, a transaction"
            f" each) | {_rate(r['start'])} | ≥ 1,500/s |",
            f"| `start_many()` ({r['start_many']['count']:,} in one call) |"
            f" {_rate(r['start_many'])} | ≥ 15,000/s |",
            f"| start → first step claimed, idle worker ({r['latency']['samples']} starts) |"
            f" median {r['latency']['median_ms']:.1f} ms, p90 {r['latency']['p90_ms']:.1f} ms,"
            f" max {r['latency']['max_ms']:.1f} ms | median ≤ 10 ms |",
            f"| priority 9 1-step workflow behind a {r['priority']['chunks']}-chunk fan-out"
            f" (10 ms chunks, {r['priority']['workers']} workers) |"
            f" done in {r['priority']['urgent_s']:.3f} s with"
            f" {r['priority']['chunks_still_waiting']} chunks still waiting"
            f" (fan-out {r['priority']['fan_out_s']:.1f} s) | ≤ 0.3 s |",
            "",
            f"Load average (1/5/15 min) before: {' / '.join(f'{x:.2f}' for x in load_before)},"
            f" after: {' / '.join(f'{x:.2f}' for x in load_after)}.",
            "",
        ]
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--jobs", type=int, default=10_000, help="jobs per case (default 10000)")
    parser.add_argument("--workers", default="1,4", help="worker process counts (default 1,4)")
    parser.add_argument("--repeats", type=int, default=2, help="runs per case (default 2)")
    parser.add_argument("--peers", default="raw,dtdb,proc,engine")
    parser.add_argument("--engine-src", choices=("head", "tree"), default="head")
    parser.add_argument(
        "--engine-concurrency", type=int, default=None, help="pass --concurrency N to the worker"
    )
    parser.add_argument(
        "--engine-group",
        type=int,
        default=None,
        help="pass --group N to the worker (group commit of N steps)",
    )
    parser.add_argument("--timeout", type=float, default=2400, help="seconds per case")
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "engine.md")
    parser.add_argument("--no-write", action="store_true", help="print only")
    parser.add_argument(
        "--start-cases",
        default='{"starts": 3000, "start_many": 20000, "rounds": 3, "latency_samples": 200,'
        ' "priority_chunks": 400}',
        help="JSON for the engine's start, latency and priority cases"
        " (bench/peers/engine_starts.py); 'off' skips them",
    )
    args = parser.parse_args(argv)
    command = shlex.join(["python", "bench/engine_bench.py", *(argv or sys.argv[1:])])
    worker_counts = [int(w) for w in args.workers.split(",")]
    wanted = [p.strip() for p in args.peers.split(",") if p.strip()]

    started = dt.datetime.now(dt.UTC)
    with tempfile.TemporaryDirectory(prefix="acurio-bench-src-") as src:
        engine_cwd = Path(src) if args.engine_src == "head" else ROOT
        peers = build_peers(engine_cwd, args.engine_concurrency, args.engine_group)
        unknown = set(wanted) - set(peers)
        if unknown:
            parser.error(f"unknown peers: {', '.join(sorted(unknown))}")
        peers = {k: peers[k] for k in wanted}
        logdir = Path(tempfile.mkdtemp(prefix="acurio-bench-logs-"))
        print(f"logs: {logdir}", flush=True)

        skipped: dict[str, str] = {}
        prepared: set[str] = set()
        engine_source = ""

        def set_up(key: str, peer: Peer) -> None:
            """Prepare a peer's database just before its first case (the engine is exported
            from main then, so a run started earlier measures the engine as it is by then)."""
            nonlocal engine_source
            prepared.add(key)
            if key == "engine":
                if args.engine_src == "head":
                    export_head(engine_cwd)
                    engine_source = (
                        f"`git archive` of main at {git('rev-parse', '--short', 'HEAD')}"
                    )
                else:
                    dirty = git("status", "--porcelain", "--", "jobs/durable")
                    engine_source = f"working tree at {git('rev-parse', '--short', 'HEAD')}" + (
                        " with uncommitted engine changes" if dirty else ""
                    )
                engine_source += f", taken {dt.datetime.now(dt.UTC):%H:%M:%S} UTC"
            why = peer.unavailable()
            if why is None:
                try:
                    prepare(peer, logdir)
                except RuntimeError as exc:
                    why = f"set-up failed: {exc}"
            if why:
                skipped[key] = why
                print(f"{key}: skipped: {why}", flush=True)

        results: list[CaseResult] = []
        # Repeats alternate the order (A B C D, then D C B A, ...) so that drift in the load
        # from other people's work on this machine does not always favour the same peer, and
        # a run cut short still has the later peers of the first pass measured a second time.
        for repeat in range(1, args.repeats + 1):
            order = list(peers.items())
            if repeat % 2 == 0:
                order.reverse()
            for key, peer in order:
                if key not in prepared:
                    set_up(key, peer)
                if key in skipped:
                    continue
                for workers in worker_counts:
                    try:
                        r = run_case(peer, workers, args.jobs, repeat, logdir, args.timeout)
                    except RuntimeError as exc:
                        r = CaseResult(key, workers, repeat, args.jobs, 0, ok=False, error=str(exc))
                    results.append(r)
                    if not args.no_write:  # a run cut short still leaves its figures
                        write_report(
                            args.out,
                            render(
                                peers,
                                results,
                                skipped,
                                worker_counts,
                                command,
                                started,
                                dt.datetime.now(dt.UTC),
                                environment_lines(engine_source),
                                partial=True,
                            ),
                        )
                    print(
                        f"{key:7} w={workers} #{repeat}: "
                        + (
                            f"{r.steps_per_s:8,.0f} steps/s {r.jobs_per_s:8,.0f} jobs/s "
                            f"drain {r.span_s:6.2f}s wall {r.wall_s:6.2f}s "
                            f"rss {r.peak_rss_mib:5.1f}MiB cpu {r.worker_cpu_ms_per_step:.2f}"
                            f"+{r.pg_cpu_ms_per_step:.2f}ms/step "
                            f"{r.commits_per_step:.2f} commits/step load {r.load}"
                            if r.ok
                            else f"FAILED: {r.error}"
                        ),
                        flush=True,
                    )
        start_section = ""
        if "engine" in peers and args.start_cases != "off":
            if "engine" not in prepared:
                set_up("engine", peers["engine"])
            if "engine" not in skipped:
                start_section = run_start_cases(peers["engine"], args.start_cases, logdir)
                print(start_section, flush=True)
        env_lines = environment_lines(engine_source)
    finished = dt.datetime.now(dt.UTC)
    body = render(peers, results, skipped, worker_counts, command, started, finished, env_lines)
    body += start_section
    print()
    print(body)
    if not args.no_write:
        write_report(args.out, body)
        print(f"written to {args.out}")
    return 0 if results and all(r.ok for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
