"""Chaos supervisor for the SIGKILL test: forks real worker processes and SIGKILLs them.

Run as ``python -m tests.durable.chaos --workers 3 --timeout 150`` with ``DATABASE_URL`` set.
The parent sets Django up once, then forks each worker (cheap, so hundreds of kills fit in
a test). At random moments (every ``--min-interval``..``--max-interval`` s, faster while
behind the pace ``--min-kills`` needs) it SIGKILLs a random worker and forks a replacement;
every 0.1 s it plays the sweeper and calls ``recover_expired_leases()``. When no
instance is unfinished it sends SIGTERM to the survivors and prints one JSON line of figures.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import sys
import time
import traceback

import django


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--workers", type=int, default=3)
    parser.add_argument("--timeout", type=float, default=150)
    parser.add_argument("--min-interval", type=float, default=0.02)
    parser.add_argument("--max-interval", type=float, default=0.06)
    parser.add_argument(
        "--min-kills",
        type=int,
        default=0,
        help="kill faster while behind a pace that reaches this many kills by the end",
    )
    parser.add_argument(
        "--releases",
        default="",
        help="a rolling deploy: NAME=DIR,NAME=DIR; each worker forked runs the next release"
        " in turn (DIR first on its import path, NAME its ACURIO_CODE_VERSION)",
    )
    args = parser.parse_args()
    releases = [tuple(pair.split("=", 1)) for pair in args.releases.split(",") if pair]
    spawned = 0

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "acurio.settings")
    django.setup()
    from django.db import connection

    from jobs.durable import Worker, recover_expired_leases
    from jobs.durable.models import Instance

    inherited = []  # the parent's connection objects, kept alive in children (see spawn)

    def spawn() -> int:
        nonlocal spawned
        spawned += 1
        pid = os.fork()
        if pid:
            return pid
        if releases:
            # This worker runs one release's code: its task module, its version.
            from django.conf import settings

            from jobs.durable.sessions import code_version

            name, path = releases[spawned % len(releases)]
            sys.path.insert(0, path)
            settings.ACURIO_CODE_VERSION = name
            code_version.cache_clear()
        # Child: forget the parent's connection without closing it (closing would end the
        # parent's session on the shared socket); keep a reference so it is never finalised.
        inherited.append(connection.connection)
        connection.connection = None
        random.seed()
        code = 0
        try:
            worker = Worker(poll_interval=0.2)
            worker.install_signal_handlers()
            worker.run()
        except BaseException:
            traceback.print_exc()
            code = 3
        os._exit(code)

    children = {spawn() for _ in range(args.workers)}
    kills = crashes = 0
    killed: set[int] = set()
    started = time.monotonic()
    next_kill = started + random.uniform(args.min_interval, args.max_interval)
    next_sweep = started
    recovered = 0
    total = Instance.objects.count() or 1
    progress = 0.0
    last_kill = started
    while True:
        now = time.monotonic()
        if now - started > args.timeout:
            print("timeout", file=sys.stderr)
            break
        if now >= next_sweep:
            recovered += recover_expired_leases()
            left = Instance.objects.unfinished().count()
            if not left:
                break
            # The share of the work done, so kills can keep pace with it on any machine.
            progress = 1 - left / total
            next_sweep = now + 0.1
        # Ahead of the work: the pace reaches --min-kills by 70 % of it, so the last stretch
        # (which a loaded machine may finish within one progress reading) has kills to spare.
        behind = kills < args.min_kills * min(1.0, progress + 0.3)
        if now >= next_kill or (behind and now >= last_kill + 0.01):
            victim = random.choice(sorted(children))
            os.kill(victim, signal.SIGKILL)
            killed.add(victim)  # reaped below, without waiting for it here
            children.discard(victim)
            children.add(spawn())
            kills += 1
            last_kill = now
            next_kill = now + random.uniform(args.min_interval, args.max_interval)
        # a worker that died on its own is a bug: count it and replace it
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if pid == 0:
                break
            if pid in killed:
                killed.discard(pid)
                continue
            children.discard(pid)
            crashes += 1
            children.add(spawn())
        time.sleep(0.005)

    exit_codes = []
    for pid in children:
        os.kill(pid, signal.SIGTERM)
    for pid in children:
        _, status = os.waitpid(pid, 0)
        exit_codes.append(os.waitstatus_to_exitcode(status))
    for pid in killed:
        os.waitpid(pid, 0)
    figures = {
        "kills": kills,
        "crashes": crashes,
        "recovered": recovered,
        "seconds": round(time.monotonic() - started, 2),
        "exit_codes": exit_codes,
        "unfinished": Instance.objects.unfinished().count(),
    }
    print(json.dumps(figures))
    return 0


if __name__ == "__main__":
    sys.exit(main())
