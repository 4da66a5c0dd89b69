"""Helpers of the run tests: saving a run, reading what PostgreSQL wrote, a scripted judge."""

from __future__ import annotations

import json
import random
import string
import threading
import time
import uuid
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from django.db import connection, transaction

from jobs.models import AnalysisJob, AnalysisRun
from jobs.runs import SaveResult, save_run


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


class FakeJudge:
    """A local OpenAI-compatible chat-completions server on 127.0.0.1, scripted per test.

    ``replies`` is a queue of (status, body, headers) served in order; when it runs dry the last
    one repeats. ``delay`` seconds are slept before each reply (a slow judge). Every request is
    kept in ``requests`` as (path, headers, json body); ``started`` is set on the first one.
    """

    def __init__(self) -> None:
        self.replies: list[tuple[int, object, dict[str, str]]] = [(200, self.reply(), {})]
        self.delay = 0.0
        self.requests: list[tuple[str, dict[str, str], dict]] = []
        self.started = threading.Event()
        self.answered = threading.Event()
        judge = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                length = int(self.headers.get("Content-Length", 0))
                body = json.loads(self.rfile.read(length) or b"{}")
                judge.requests.append((self.path, dict(self.headers), body))
                judge.started.set()
                time.sleep(judge.delay)
                status, payload, headers = (
                    judge.replies.pop(0) if len(judge.replies) > 1 else judge.replies[0]
                )
                data = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                for k, v in headers.items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(data)
                judge.answered.set()

            def log_message(self, *args):  # keep test output quiet
                pass

        class Server(ThreadingHTTPServer):
            # A test may end while a slow reply is still sleeping: do not wait for it.
            daemon_threads = True
            block_on_close = False

        self.server = Server(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.server.serve_forever, args=(0.05,), daemon=True)
        self.thread.start()

    @staticmethod
    def reply(content: object = None) -> dict:
        if content is None:
            content = {
                "score": 64,
                "summary": "Several citations lack references.",
                "problems": [{"text": "(Doe, 2019)", "reason": "Not in the reference list."}],
            }
        text = content if isinstance(content, str) else json.dumps(content)
        return {"choices": [{"index": 0, "message": {"role": "assistant", "content": text}}]}

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
