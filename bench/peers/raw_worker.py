"""The floor: a raw psycopg 3 queue loop, one row per transaction.

``python -m bench.peers.raw_worker DBNAME`` claims one ``todo`` row with
``SELECT ... FOR UPDATE SKIP LOCKED LIMIT 1``, marks it done and commits, on one connection
kept for the whole run, until no row is left. ``--enqueue N`` fills the queue instead.
No framework, no payload decoding, no result: the least work a PostgreSQL queue can do
per job, which the other peers are measured against.
"""

from __future__ import annotations

import argparse

import psycopg

from bench.peers.common import dsn

SCHEMA = """
CREATE TABLE IF NOT EXISTS raw_jobs (
    id bigserial PRIMARY KEY,
    status text NOT NULL DEFAULT 'todo',
    payload jsonb NOT NULL DEFAULT '{}',
    started_at timestamptz,
    finished_at timestamptz
);
-- serves the claim: SELECT ... WHERE status = 'todo' ORDER BY id LIMIT 1 FOR UPDATE SKIP LOCKED
CREATE INDEX IF NOT EXISTS raw_jobs_todo_idx ON raw_jobs (id) WHERE status = 'todo';
"""

CLAIM = "SELECT id, payload FROM raw_jobs WHERE status = 'todo' ORDER BY id LIMIT 1 FOR UPDATE SKIP LOCKED"
FINISH = (
    "UPDATE raw_jobs SET status = 'done', started_at = now(), finished_at = clock_timestamp() "
    "WHERE id = %s"
)


def drain(dbname: str) -> int:
    """Run jobs until none is left; return how many this process ran."""
    done = 0
    with psycopg.connect(dsn(dbname)) as conn:
        while True:
            with conn.cursor() as cur:
                cur.execute(CLAIM)
                row = cur.fetchone()
                if row is None:
                    conn.commit()
                    return done
                cur.execute(FINISH, (row[0],))
            conn.commit()
            done += 1


def enqueue(dbname: str, count: int) -> None:
    """Create the table if needed and add ``count`` no-op jobs in one transaction."""
    with psycopg.connect(dsn(dbname)) as conn:
        conn.execute(SCHEMA)
        conn.execute(
            "INSERT INTO raw_jobs (payload) SELECT jsonb_build_object('n', g) "
            "FROM generate_series(1, %s) AS g",
            (count,),
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("dbname")
    parser.add_argument("--enqueue", type=int, metavar="N")
    args = parser.parse_args()
    if args.enqueue is not None:
        enqueue(args.dbname, args.enqueue)
    else:
        drain(args.dbname)


if __name__ == "__main__":
    main()
