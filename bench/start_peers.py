"""``start()`` one by one beside its peers: what one durable commit per start costs here.

The issue's target is ``start()`` of a 1-step workflow, one by one, each in its own
transaction (as a web request would start one), at >= 1,500 workflows/s. One client that
commits one transaction at a time waits for each commit's WAL flush (``fdatasync`` with
``synchronous_commit=on``), so no enqueue of this kind can beat the machine's flush rate:
that is the floor every peer below shares, and why the engine is shown beside them instead
of alone. One run measures, for ``--starts`` N one-by-one enqueues from one client, each its
own committed transaction:

1. ``engine``:        ``jobs.durable.start(task("bench.peers.engine_tasks.noop"),
                      label="bench", input={"n": i})``: ``case_start`` of
                      ``bench/peers/engine_starts.py``, called as it is;
2. ``raw_insert``:    psycopg 3, autocommit, one prepared one-row ``INSERT INTO raw_starts
                      (id uuid primary key, label text, input jsonb, created_at
                      timestamptz)`` per start: the durable-commit floor (one row, one
                      index, nothing else);
3. ``dtdb``:          django-tasks-db's ``enqueue()`` one by one in Django's autocommit
                      (``bench.peers.dtdb_enqueue.one_by_one``);
4. ``procrastinate``: Procrastinate's sync ``noop.defer()`` one by one
                      (``bench.peers.proc_app.one_by_one``).

Each peer runs in a subprocess of its own (so Django settings never clash) against a
database of its own (``<prefix><peer>``, dropped and re-created at the start of a run;
``--db-prefix``, default ``$BENCH_DB_PREFIX`` or ``acurio_startpeers_``). The run is
``--rounds`` rounds, each running every peer once, the order rotated by one each round so
that drift in the load of this shared machine does not always favour the same peer. Before
each run the peer's tables are emptied (``TRUNCATE``, ``VACUUM ANALYZE``) and the server
takes a ``CHECKPOINT``; every peer has connected before its clock starts, and the clock
covers only the loop of N enqueues (process start-up and imports are excluded). After each
run the orchestrator checks that the peer's table holds exactly N rows.

Figures per peer: starts per second of each round, their median and min-max; client CPU
(the subprocess's ``process_time`` around the call) and PostgreSQL CPU (the ticks of the
peer's backends from ``/proc``, read just before they disconnect: connection set-up and, for
the engine, ``case_start``'s own ``TRUNCATE``/``VACUUM`` are included) per start;
transactions per start (``pg_stat_database.xact_commit``, set-up statements included). The
engine's ratio to each peer is the median of the per-round ratios (the two measured
seconds apart, under the same load). The report also prints ``uptime`` at the start and
the end, the server settings that bound a commit (``synchronous_commit``, ``fsync``,
``wal_sync_method``, ``commit_delay``), and ``pg_test_fsync -s 2``'s rate for one 8 kB
write + ``wal_sync_method`` on the file system of PostgreSQL's data directory: the ceiling
of one client's durable commits on this machine (``--no-fsync-test`` skips its ~30 s).

``--sync-off`` sets ``synchronous_commit = off`` on every peer's database (``ALTER DATABASE
... SET``: it reaches every connection, Django's too, whose own ``options`` parameter would
override a ``PGOPTIONS`` variable): commits no longer wait for the flush, so the rates show
the CPU cost per start. That is NOT durable (a crash loses the last commits) and is for
diagnosis only, never a figure for the target.

The engine runs from ``git archive HEAD`` (exported as the run starts, so a run measures the
engine as committed, not somebody's uncommitted work in the shared tree); ``--engine-src
tree`` uses the working tree. The other peers run from the working tree.

Usage::

    .venv/bin/python bench/start_peers.py [--starts 3000] [--rounds 5] [--sync-off]
        [--peers engine,raw_insert,dtdb,procrastinate] [--out [bench/results/start-peers.md]]
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import glob
import json
import os
import platform
import re
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

import psycopg
from psycopg import sql
from psycopg.types.json import Jsonb

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.peers.common import (  # noqa: E402
    HOST,
    PORT,
    admin_conn,
    dsn,
    git,
    package_versions,
    proc_cpu_ticks,
    recreate_database,
    url,
)

PY = sys.executable
SCRIPT = Path(__file__).resolve()
CLK_TCK = os.sysconf("SC_CLK_TCK")
TARGET = 1500  # the start() target, workflows per second
DEFAULT_OUT = ROOT / "bench" / "results" / "start-peers.md"
COMMIT_SETTINGS = ("synchronous_commit", "fsync", "wal_sync_method", "commit_delay")

RAW_SCHEMA = """
CREATE TABLE IF NOT EXISTS raw_starts (
    id uuid PRIMARY KEY,
    label text NOT NULL,
    input jsonb NOT NULL,
    created_at timestamptz NOT NULL
)
"""
RAW_INSERT = "INSERT INTO raw_starts (id, label, input, created_at) VALUES (%s, %s, %s, now())"


# --- the peers ------------------------------------------------------------------------------


@dataclass
class Peer:
    key: str
    title: str
    tables: tuple[str, ...]  # emptied before each run
    count_table: str  # holds one row per start afterwards
    settings: str | None = None  # DJANGO_SETTINGS_MODULE of its subprocess
    prepare_cmds: list[list[str]] = field(default_factory=list)
    prepare_sql: str = ""
    cwd: Path = ROOT
    extra_env: dict[str, str] = field(default_factory=dict)
    dbname: str = ""

    def env(self) -> dict[str, str]:
        env = dict(os.environ)
        env.update(
            {
                "PYTHONPATH": os.pathsep.join(dict.fromkeys([str(self.cwd), str(ROOT)])),
                "PYTHONUNBUFFERED": "1",
                "BENCH_START_DB": self.dbname,
            }
        )
        env.pop("DJANGO_SETTINGS_MODULE", None)
        if self.settings:
            env["DJANGO_SETTINGS_MODULE"] = self.settings
        env.update(self.extra_env)
        return env


def build_peers(prefix: str, engine_cwd: Path) -> dict[str, Peer]:
    names = {key: f"{prefix}{key}" for key in ("engine", "raw_insert", "dtdb", "procrastinate")}
    peers = [
        Peer(
            key="engine",
            title="Acurio `start()` of a 1-step workflow",
            tables=("durable_instance", "durable_step", "durable_signal"),
            count_table="durable_instance",
            settings="acurio.settings",
            prepare_cmds=[[PY, "manage.py", "migrate", "--noinput", "-v", "0"]],
            cwd=engine_cwd,
            extra_env={
                "DATABASE_URL": url(names["engine"]),
                "SECRET_KEY": "bench-only-not-a-secret-long-enough-for-the-fifty-character-minimum",
                "DEBUG": "0",
                "LOG_LEVEL": "WARNING",
            },
        ),
        Peer(
            key="raw_insert",
            title="raw psycopg prepared one-row INSERT (the floor)",
            tables=("raw_starts",),
            count_table="raw_starts",
            prepare_sql=RAW_SCHEMA,
        ),
        Peer(
            key="dtdb",
            title="django-tasks-db `enqueue()`",
            tables=("django_tasks_database_dbtaskresult",),
            count_table="django_tasks_database_dbtaskresult",
            settings="bench.peers.dtdb_settings",
            prepare_cmds=[[PY, "-m", "django", "migrate", "--noinput", "-v", "0"]],
            extra_env={"BENCH_DTDB_DB": names["dtdb"]},
        ),
        Peer(
            key="procrastinate",
            title="Procrastinate `defer()` (sync)",
            tables=(
                "procrastinate_jobs",
                "procrastinate_events",
                "procrastinate_workers",
                "procrastinate_periodic_defers",
            ),
            count_table="procrastinate_jobs",
            prepare_cmds=[
                [
                    PY,
                    "-m",
                    "procrastinate",
                    "--app",
                    "bench.peers.proc_app.app",
                    "schema",
                    "--apply",
                ]
            ],
            extra_env={"BENCH_PROC_DB": names["procrastinate"]},
        ),
    ]
    for peer in peers:
        peer.dbname = names[peer.key]
    return {p.key: p for p in peers}


# --- the child: one peer, one run -----------------------------------------------------------


def raw_one_by_one(conn: psycopg.Connection, count: int) -> dict[str, Any]:
    """One prepared one-row INSERT per start, each autocommitted: the durable-commit floor."""
    if not conn.autocommit:
        raise RuntimeError("raw_one_by_one needs an autocommit connection")
    began = time.perf_counter()
    with conn.cursor() as cur:
        for i in range(count):
            cur.execute(RAW_INSERT, (uuid.uuid4(), "bench", Jsonb({"n": i})), prepare=True)
    elapsed = time.perf_counter() - began
    return {"count": count, "seconds": elapsed, "per_s": count / elapsed}


def server_side(dbname: str) -> tuple[float | None, str]:
    """CPU seconds of the client backends now connected to ``dbname`` (but this one), from
    ``/proc`` (the server runs on this machine), and the synchronous_commit a connection made
    to it gets (the database's own setting under --sync-off)."""
    with psycopg.connect(dsn(dbname), autocommit=True, prepare_threshold=None) as conn:
        pids = conn.execute(
            "SELECT pid FROM pg_stat_activity WHERE datname = current_database()"
            " AND backend_type = 'client backend' AND pid <> pg_backend_pid()"
        ).fetchall()
        row = conn.execute("SHOW synchronous_commit").fetchone()
    ticks = [proc_cpu_ticks(pid) for (pid,) in pids]
    cpu = None if not ticks or None in ticks else sum(t for t in ticks if t) / CLK_TCK
    return cpu, row[0] if row else "?"


def child(peer: str, count: int) -> dict[str, Any]:
    """Run one peer's ``count`` one-by-one enqueues in this process; figures as a dict."""
    dbname = os.environ["BENCH_START_DB"]
    if peer in ("engine", "dtdb"):
        import django

        django.setup()
    with contextlib.ExitStack() as stack:
        cpu_began = time.process_time()
        if peer == "engine":
            from bench.peers.engine_starts import case_start

            result = case_start(count)
        elif peer == "dtdb":
            from bench.peers.dtdb_enqueue import one_by_one

            result = one_by_one(count)
        elif peer == "procrastinate":
            from bench.peers.proc_app import app, one_by_one

            stack.enter_context(app.open())
            cpu_began = time.process_time()
            result = one_by_one(count)
        elif peer == "raw_insert":
            # psycopg's default threshold: prepare=True prepares from the first INSERT on
            # (a threshold of None would refuse even that).
            conn = stack.enter_context(psycopg.connect(dsn(dbname), autocommit=True))
            cpu_began = time.process_time()
            result = raw_one_by_one(conn, count)
        else:
            raise SystemExit(f"unknown peer {peer!r}")
        result["client_cpu_s"] = time.process_time() - cpu_began
        # Before the peer's connections close (a backend's /proc entry goes with it).
        result["backend_cpu_s"], result["synchronous_commit"] = server_side(dbname)
    return result


# --- the orchestrator -----------------------------------------------------------------------


@dataclass
class Run:
    peer: str
    round: int
    position: int
    ok: bool
    per_s: float = 0.0
    seconds: float = 0.0
    client_cpu_us: float | None = None
    backend_cpu_us: float | None = None
    xacts_per_start: float | None = None
    synchronous_commit: str = ""
    load: str = ""
    error: str = ""


def prepare(peer: Peer, prefix: str, logdir: Path, sync_off: bool = False) -> None:
    recreate_database(peer.dbname, prefix, sync_off=sync_off)
    if peer.prepare_sql:
        with admin_conn(peer.dbname) as conn:
            conn.execute(peer.prepare_sql)
    log = logdir / f"{peer.key}-prepare.log"
    for cmd in peer.prepare_cmds:
        with log.open("ab") as out:
            out.write(f"\n$ {shlex.join(cmd)}\n".encode())
            out.flush()
            done = subprocess.run(cmd, cwd=peer.cwd, env=peer.env(), stdout=out, stderr=out)
        if done.returncode != 0:
            raise RuntimeError(f"{shlex.join(cmd)} exited {done.returncode}; see {log}")


def xact_commits(dbname: str) -> int:
    with admin_conn() as conn:
        row = conn.execute(
            "SELECT xact_commit FROM pg_stat_database WHERE datname = %s", (dbname,)
        ).fetchone()
    return int(row[0]) if row else 0


def run_once(
    peer: Peer, starts: int, rnd: int, position: int, sync_off: bool, logdir: Path, timeout: float
) -> Run:
    run = Run(peer.key, rnd, position, ok=False)
    with admin_conn(peer.dbname) as conn:
        conn.execute(
            sql.SQL("TRUNCATE {} RESTART IDENTITY CASCADE").format(
                sql.SQL(", ").join(sql.Identifier(t) for t in peer.tables)
            )
        )
        for table in peer.tables:
            conn.execute(sql.SQL("VACUUM ANALYZE {}").format(sql.Identifier(table)))
        conn.execute("CHECKPOINT")
    time.sleep(0.3)  # the set-up connection's statistics reach pg_stat_database
    commits_before = xact_commits(peer.dbname)
    cmd = [PY, str(SCRIPT), "--child", peer.key, "--starts", str(starts)]
    log = logdir / f"{peer.key}-r{rnd}.log"
    try:
        done = subprocess.run(
            cmd,
            cwd=peer.cwd,
            env=peer.env(),
            capture_output=True,
            text=True,
            timeout=timeout,
        )
    except subprocess.TimeoutExpired:
        run.error = f"timed out after {timeout:.0f} s"
        return run
    run.load = " ".join(Path("/proc/loadavg").read_text().split()[:3])
    log.write_text(f"$ {shlex.join(cmd)}\n{done.stdout}{done.stderr}")
    lines = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")]
    if done.returncode != 0 or not lines:
        last = (done.stderr.strip().splitlines() or ["?"])[-1]
        run.error = f"exited {done.returncode}: {last} (see {log})"
        return run
    result = json.loads(lines[-1][len("RESULT ") :])
    time.sleep(0.3)
    commits = xact_commits(peer.dbname) - commits_before
    with admin_conn(peer.dbname) as conn:
        row = conn.execute(
            sql.SQL("SELECT count(*) FROM {}").format(sql.Identifier(peer.count_table))
        ).fetchone()
    rows = row[0] if row else 0
    if rows != starts:
        run.error = f"{rows} rows in {peer.count_table} after {starts} starts"
        return run
    run.ok = True
    run.per_s = result["per_s"]
    run.seconds = result["seconds"]
    run.client_cpu_us = 1e6 * result["client_cpu_s"] / starts
    if result.get("backend_cpu_s") is not None:
        run.backend_cpu_us = 1e6 * result["backend_cpu_s"] / starts
    run.xacts_per_start = commits / starts
    run.synchronous_commit = result.get("synchronous_commit", "")
    return run


def uptime() -> str:
    try:
        return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
    except OSError:
        return "load average: " + " ".join(Path("/proc/loadavg").read_text().split()[:3])


def server_facts() -> tuple[str, dict[str, str], str]:
    """(server version, the commit-bounding settings, data directory)."""
    with admin_conn() as conn:
        version = conn.execute("SHOW server_version").fetchone()
        rows = conn.execute(
            "SELECT name, setting || coalesce(unit, '') FROM pg_settings WHERE name = ANY(%s)",
            (list(COMMIT_SETTINGS),),
        ).fetchall()
        try:
            data_dir = conn.execute("SHOW data_directory").fetchone()
        except psycopg.Error:  # only superusers and pg_read_all_settings see it
            data_dir = None
    settings = dict(rows)
    return (
        version[0] if version else "?",
        {n: settings.get(n, "?") for n in COMMIT_SETTINGS},
        data_dir[0] if data_dir else "",
    )


def fsync_test(data_dir: str, method: str) -> str:
    """``pg_test_fsync -s 2`` on the data directory's file system: the rate of one 8 kB
    write + ``method`` (the server's wal_sync_method), or why it was not measured."""
    binaries = sorted(glob.glob("/usr/lib/postgresql/*/bin/pg_test_fsync"))
    if not binaries:
        return "not measured: no pg_test_fsync (/usr/lib/postgresql/*/bin)"
    if HOST not in ("127.0.0.1", "localhost", "::1") or not data_dir:
        return "not measured: the server's data directory is not known to be on this machine"
    try:
        device = os.stat(data_dir).st_dev
    except OSError as exc:
        return f"not measured: cannot stat {data_dir} ({exc.strerror})"
    place = next(
        (d for d in (tempfile.gettempdir(), str(ROOT)) if os.stat(d).st_dev == device), None
    )
    if place is None:
        return f"not measured: no writable directory on the file system of {data_dir}"
    target = Path(place) / f"acurio-start-peers-fsync-{os.getpid()}.tmp"
    try:
        done = subprocess.run(
            [binaries[-1], "-s", "2", "-f", str(target)],
            capture_output=True,
            text=True,
            timeout=180,
        )
    except subprocess.TimeoutExpired:
        return "not measured: pg_test_fsync took over 180 s"
    finally:
        target.unlink(missing_ok=True)
    section = done.stdout.split("using one 8kB write:", 1)[-1].split("\n\n", 1)[0]
    match = re.search(rf"^\s+{re.escape(method)}\s+([\d.]+) ops/sec", section, re.M)
    if not match:
        return f"not measured: no {method} line in pg_test_fsync's output"
    return (
        f"{float(match.group(1)):,.0f} ops/s for one 8 kB write + {method}"
        f" (`{Path(binaries[-1]).name} -s 2` in {place}, the file system of {data_dir})"
    )


def median_ratio(engine: list[Run], other: list[Run]) -> tuple[float, float, float] | None:
    """Median, min and max of the per-round ratios engine ÷ other (rounds both measured)."""
    by_round = {r.round: r.per_s for r in other if r.ok and r.per_s}
    ratios = [r.per_s / by_round[r.round] for r in engine if r.ok and r.round in by_round]
    if not ratios:
        return None
    return statistics.median(ratios), min(ratios), max(ratios)


def _med(values: list[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return statistics.median(known) if known else None


def _cell(value: float | None, digits: int = 0) -> str:
    return "—" if value is None else f"{value:,.{digits}f}"


def render(
    peers: dict[str, Peer],
    runs: list[Run],
    skipped: dict[str, str],
    *,
    command: str,
    started: dt.datetime,
    finished: dt.datetime | None,
    uptime_start: str,
    uptime_end: str,
    facts: list[str],
    sync_off: bool,
) -> str:
    title = "# `start()` one by one beside its peers (bench/start_peers.py)"
    lines = [title, ""]
    if sync_off:
        lines += [
            "**NOT DURABLE — diagnosis only:** every peer's database had "
            "`synchronous_commit = off`, so no commit waited for its WAL flush. These rates "
            "show the CPU cost per start; they are no figure for the target.",
            "",
        ]
    if finished is None:
        lines += ["**Partial: the run was still going when this was written.**", ""]
    lines += [
        f"- command: `{command}`",
        f"- started {started:%Y-%m-%d %H:%M:%S} UTC"
        + (f", finished {finished:%H:%M:%S} UTC" if finished else ""),
        f"- `uptime` at the start: {uptime_start}",
        f"- `uptime` at the end: {uptime_end or '(still running)'}",
        *[f"- {fact}" for fact in facts],
        "",
        "Each peer enqueues the same number of items one by one from one client, each its own "
        "committed transaction; every round runs every peer once (order rotated per round). "
        "The machine has 2 cores shared with other people's work, so figures under load are "
        "indicative only.",
        "",
        "| peer | starts/s per round | median | min-max | client CPU µs/start | "
        "PostgreSQL CPU µs/start | transactions/start | synchronous_commit seen |",
        "|---|---|---:|---:|---:|---:|---:|---|",
    ]
    for key, peer in peers.items():
        mine = sorted((r for r in runs if r.peer == key), key=lambda r: r.round)
        good = [r for r in mine if r.ok]
        if key in skipped or not good:
            why = skipped.get(key) or next((r.error for r in mine if r.error), "not run")
            lines.append(f"| {peer.title} | not run: {why} |" + " — |" * 6)
            continue
        rates = [r.per_s for r in good]
        lines.append(
            f"| {peer.title} | {', '.join(f'{x:,.0f}' for x in rates)} | "
            f"{statistics.median(rates):,.0f} | {min(rates):,.0f}-{max(rates):,.0f} | "
            f"{_cell(_med([r.client_cpu_us for r in good]))} | "
            f"{_cell(_med([r.backend_cpu_us for r in good]))} | "
            f"{_cell(_med([r.xacts_per_start for r in good]), 3)} | "
            f"{', '.join(sorted({r.synchronous_commit for r in good}))} |"
        )
    engine = [r for r in runs if r.peer == "engine"]
    lines += [
        "",
        "CPU per start is the peer's client process plus its PostgreSQL backends; in a "
        "one-client loop it adds to the commit's flush wait. Procrastinate's second "
        "transaction per start is its pool's check of the connection (an empty query).",
        "",
        "| engine ÷ peer | median of per-round ratios | min-max |",
        "|---|---:|---:|",
    ]
    for key, peer in peers.items():
        if key == "engine":
            continue
        ratio = median_ratio(engine, [r for r in runs if r.peer == key])
        if ratio is None:
            lines.append(f"| ÷ {peer.title} | — | — |")
        else:
            lines.append(f"| ÷ {peer.title} | {ratio[0]:.2f} | {ratio[1]:.2f}-{ratio[2]:.2f} |")
    good_engine = [r.per_s for r in engine if r.ok]
    if good_engine:
        med = statistics.median(good_engine)
        verdict = "met" if med >= TARGET else "MISSED"
        lines += [
            "",
            f"Engine median {med:,.0f} starts/s against the target of {TARGET:,}/s: {verdict}"
            + (" (NOT DURABLE run: not a figure for the target)." if sync_off else "."),
        ]
    lines += [
        "",
        "## Every run",
        "",
        "| round | position | peer | ok | starts/s | seconds | client CPU µs/start | "
        "PostgreSQL CPU µs/start | transactions/start | load avg (1/5/15 min) after | note |",
        "|---:|---:|---|---|---:|---:|---:|---:|---:|---|---|",
    ]
    for r in runs:
        lines.append(
            f"| {r.round} | {r.position} | {r.peer} | {'yes' if r.ok else 'NO'} | "
            f"{_cell(r.per_s if r.ok else None)} | {_cell(r.seconds if r.ok else None, 2)} | "
            f"{_cell(r.client_cpu_us)} | {_cell(r.backend_cpu_us)} | "
            f"{_cell(r.xacts_per_start, 3)} | {r.load} | {r.error} |"
        )
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--starts", type=int, default=3000, help="enqueues per run (3000)")
    parser.add_argument("--rounds", type=int, default=5, help="rounds of every peer (5)")
    parser.add_argument("--peers", default="engine,raw_insert,dtdb,procrastinate")
    parser.add_argument(
        "--sync-off",
        action="store_true",
        help="synchronous_commit = off on every peer's database: NOT durable, diagnosis only",
    )
    parser.add_argument("--engine-src", choices=("head", "tree"), default="head")
    parser.add_argument(
        "--db-prefix", default=os.environ.get("BENCH_DB_PREFIX", "acurio_startpeers_")
    )
    parser.add_argument("--no-fsync-test", action="store_true", help="skip pg_test_fsync")
    parser.add_argument("--timeout", type=float, default=900, help="seconds per run (900)")
    parser.add_argument(
        "--out",
        type=Path,
        nargs="?",
        const=DEFAULT_OUT,
        default=None,
        help=f"write the markdown report (default path {DEFAULT_OUT.relative_to(ROOT)})",
    )
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        print("RESULT " + json.dumps(child(args.child, args.starts)), flush=True)
        return 0

    command = shlex.join(["python", "bench/start_peers.py", *(argv or sys.argv[1:])])
    started = dt.datetime.now(dt.UTC)
    uptime_start = uptime()
    print(f"uptime: {uptime_start}", flush=True)
    version, settings, data_dir = server_facts()
    facts = [
        f"machine: {os.cpu_count()} cores, {platform.platform()}, Python "
        f"{platform.python_version()}",
        f"PostgreSQL {version} at {HOST}:{PORT}, "
        + ", ".join(f"{n}={v}" for n, v in settings.items())
        + (f", data directory {data_dir}" if data_dir else ""),
    ]
    if args.sync_off:
        facts.append("every peer's database set synchronous_commit = off (NOT durable)")
    if not args.no_fsync_test:
        print("pg_test_fsync -s 2 ...", flush=True)
        facts.append(
            "the machine's flush rate: " + fsync_test(data_dir, settings["wal_sync_method"])
        )
    print("\n".join(facts), flush=True)
    versions = package_versions()
    facts.append("packages: " + ", ".join(versions))

    wanted = [p.strip() for p in args.peers.split(",") if p.strip()]
    with tempfile.TemporaryDirectory(prefix="acurio-start-peers-src-") as src:
        engine_cwd = Path(src) if args.engine_src == "head" else ROOT
        peers = build_peers(args.db_prefix, engine_cwd)
        unknown = set(wanted) - set(peers)
        if unknown:
            parser.error(f"unknown peers: {', '.join(sorted(unknown))}")
        peers = {k: peers[k] for k in wanted}
        logdir = Path(tempfile.mkdtemp(prefix="acurio-start-peers-logs-"))
        print(f"logs: {logdir}", flush=True)

        if "engine" in peers:
            head = git("rev-parse", "--short", "HEAD")
            if args.engine_src == "head":
                from bench.engine_bench import export_head

                export_head(engine_cwd)
                source = f"`git archive` of main at {head}"
            else:
                dirty = git("status", "--porcelain", "--", "jobs/durable")
                source = f"working tree at {head}" + (
                    " with uncommitted engine changes" if dirty else ""
                )
            facts.append(f"engine code: {source}, taken {dt.datetime.now(dt.UTC):%H:%M:%S} UTC")

        skipped: dict[str, str] = {}
        for key, peer in peers.items():
            missing = {"dtdb": "django-tasks-db", "procrastinate": "procrastinate"}.get(key)
            try:
                if missing:
                    metadata.version(missing)
                prepare(peer, args.db_prefix, logdir, args.sync_off)
            except metadata.PackageNotFoundError:
                skipped[key] = f"{missing} is not installed (pip install -r bench/requirements.txt)"
            except RuntimeError as exc:
                skipped[key] = f"set-up failed: {exc}"
            if key in skipped:
                print(f"{key}: skipped: {skipped[key]}", flush=True)

        def report(finished: dt.datetime | None, uptime_end: str) -> str:
            return render(
                peers,
                runs,
                skipped,
                command=command,
                started=started,
                finished=finished,
                uptime_start=uptime_start,
                uptime_end=uptime_end,
                facts=facts,
                sync_off=args.sync_off,
            )

        runs: list[Run] = []
        keys = [k for k in peers if k not in skipped]
        for rnd in range(1, args.rounds + 1):
            shift = (rnd - 1) % max(len(keys), 1)
            for position, key in enumerate(keys[shift:] + keys[:shift], 1):
                r = run_once(
                    peers[key], args.starts, rnd, position, args.sync_off, logdir, args.timeout
                )
                runs.append(r)
                print(
                    f"round {rnd} #{position} {key:14} "
                    + (
                        f"{r.per_s:7,.0f}/s  {r.seconds:6.2f}s  client {_cell(r.client_cpu_us)}"
                        f" + pg {_cell(r.backend_cpu_us)} µs/start  "
                        f"{_cell(r.xacts_per_start, 3)} xact/start  "
                        f"sync_commit={r.synchronous_commit}  load {r.load}"
                        if r.ok
                        else f"FAILED: {r.error}"
                    ),
                    flush=True,
                )
                if args.out:  # a run cut short still leaves its figures
                    args.out.parent.mkdir(parents=True, exist_ok=True)
                    args.out.write_text(report(None, ""))
    uptime_end = uptime()
    body = report(dt.datetime.now(dt.UTC), uptime_end)
    print()
    print(body)
    if args.out:
        args.out.write_text(body)
        print(f"written to {args.out}")
    return 0 if runs and all(r.ok for r in runs) and not skipped else 1


if __name__ == "__main__":
    sys.exit(main())
