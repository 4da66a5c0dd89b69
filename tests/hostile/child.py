"""Run hostile inputs through the analysis as the pipeline does, each in a limited process.

``python -m tests.hostile.child NAME`` builds the input ``NAME`` of tests/hostile/inputs.py (or
a probe of tests/hostile/probes.py) and runs extract (the deployment's limits), parse with the
citation and entry limits, verify in the pipeline's chunks, the report and the marked document,
or loads it as a library, in this process. It prints one JSON line: ``outcome`` ("error" for an
AnalysisInputError, "ok", or "crash" with the exception's type for anything else),
``message``, ``seconds`` (the analysis alone, not the building) and ``peak_rss_mb``. The caller
sets RLIMIT_AS, so a memory regression ends here as a MemoryError ("crash") instead of on the
machine.

``python -m tests.hostile.child --serve`` (what tests/hostile/runner.py starts, with the
tests' child environment) imports Django and the analysis once, then reads requests on stdin,
one JSON line each (``name``, ``memory_mb``, ``timeout``), and for each forks a process of its
own that sets RLIMIT_AS to ``memory_mb`` and runs the case as above. It answers one JSON line
per request on stdout: the case's line (plus ``wall``, seconds from fork to exit, and
``pid``), or ``outcome`` "crash" with the exit status and the
tail of the case's stderr when the process died without one (a segfault, a MemoryError outside
the analysis, an exit), or "no answer within N s" when it outlived ``timeout`` (it is killed).
The server is single-threaded and serves one case at a time; the runner starts one per worker.

``peak_rss_mb`` is the peak RSS of the process that ran the case, from the case's start (when
it already holds Django and the analysis, as a worker does) to its end: the kernel's high-water
mark (VmHWM) is reset when the case starts (``5`` written to /proc/self/clear_refs), so neither
the preloaded server's history nor a parent's RSS at fork or exec (which ``ru_maxrss`` carries
over an exec) counts.
"""

from __future__ import annotations

import contextlib
import gc
import importlib
import json
import os
import resource
import select
import signal
import sys
import tempfile
import threading
import time
import traceback

MB = 1024 * 1024


# Imported before any fork: the analysis, what it imports on first use, and the cases.
PRELOAD = (
    "jobs.analysis",
    "jobs.pipeline",
    "bibtexparser",
    "markdown_it",
    "markdown_it.token",
    "rispy",
    "tests.hostile.inputs",
    "tests.hostile.probes",
)


def prepare() -> None:
    """Django set up and everything the cases import, so a forked case finds it loaded."""
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "acurio.settings")
    import django

    django.setup()
    for module in PRELOAD:
        importlib.import_module(module)


def _reset_peak_rss() -> None:
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")  # VmHWM := VmRSS
    except OSError:
        pass  # not Linux: ru_maxrss below, which a fork starts afresh but an exec carries over


def _peak_rss_mb() -> float:
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return round(int(line.split()[1]) / 1024, 1)
    except OSError:
        pass
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)


def analyse(name: str) -> dict:
    """The result of case ``name``, run in this process (its RLIMIT_AS is the caller's)."""
    from django.conf import settings

    from jobs import analysis
    from jobs.pipeline import VERIFY_CHUNK, extraction_limits, parse_bounded
    from tests.hostile.inputs import BY_NAME
    from tests.hostile.probes import PROBES

    case = BY_NAME.get(name) or PROBES[name]
    _reset_peak_rss()
    filename, data = case.build()
    result: dict = {"name": name, "bytes": len(data)}
    started = time.perf_counter()
    try:
        if case.kind == "library":
            library = analysis.load_library(
                data, filename, max_json_depth=settings.ACURIO_JSON_MAX_DEPTH
            )
            result["entries"] = len(library.items)
        else:
            document = analysis.extract(data, filename, limits=extraction_limits())
            del data  # the pipeline's parse step does not hold the upload either
            parsed = parse_bounded(
                document.html,
                max_citations=settings.ACURIO_MAX_CITATIONS,
                max_entries=settings.ACURIO_MAX_ENTRIES,
            )
            citations, references = parsed["citations"], parsed["references"]
            verdicts: list[dict] = []
            for i in range(0, len(citations), VERIFY_CHUNK):
                verdicts += analysis.verify(
                    citations[i : i + VERIFY_CHUNK], references, parsed["style"]
                )
            report = analysis.build_report(filename, parsed, verdicts)
            analysis.annotate_html(document.html, report["citations"])
            result.update(citations=len(citations), entries=len(references))
        result["outcome"] = "ok"
    except analysis.AnalysisInputError as exc:
        result.update(outcome="error", message=str(exc))
    except BaseException as exc:
        result.update(outcome="crash", message=f"{type(exc).__name__}: {exc}"[:500])
    result["seconds"] = round(time.perf_counter() - started, 3)
    result["peak_rss_mb"] = _peak_rss_mb()
    return result


def main(name: str) -> None:
    prepare()
    print(json.dumps(analyse(name)), flush=True)


# --- The preloaded server ------------------------------------------------------------------


def _wait(pid: int, timeout: float) -> int | None:
    """``pid``'s wait status, or None when it outlived ``timeout`` (it is then killed)."""
    if hasattr(os, "pidfd_open"):
        fd = os.pidfd_open(pid)
        try:
            ended = bool(select.select([fd], [], [], timeout)[0])
        finally:
            os.close(fd)
        if ended:
            return os.waitpid(pid, 0)[1]
    else:  # no pidfd: poll
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                return status
            time.sleep(0.05)
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
    return None


def _answer(name: str, code: int, out: str, err: str, wall: float) -> dict:
    lines = [line for line in out.splitlines() if line.startswith("{")]
    if code != 0 or not lines:
        tail = (err or out).strip().splitlines()[-3:]
        how = ""
        if code < 0:
            with contextlib.suppress(ValueError):
                how = f" ({signal.Signals(-code).name})"
        return {
            "name": name,
            "outcome": "crash",
            "message": f"exit {code}{how}: {' | '.join(tail)}"[:800],
            "wall": wall,
        }
    try:
        result = json.loads(lines[-1])
    except ValueError:
        message = f"exit 0 without a readable answer: {lines[-1][:200]}"
        return {"name": name, "outcome": "crash", "message": message, "wall": wall}
    result["wall"] = wall
    return result


def run_forked(name: str, memory_mb: int, timeout: float) -> dict:
    """Case ``name`` in a forked process under RLIMIT_AS = ``memory_mb``, killed after
    ``timeout`` seconds; its result, or a "crash" saying how it ended."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        sys.stdout.flush()
        sys.stderr.flush()
        started = time.perf_counter()
        pid = os.fork()
        if pid == 0:  # the case's process: nothing here returns
            code = 1  # as for an uncaught exception
            try:
                os.dup2(os.open(os.devnull, os.O_RDONLY), 0)
                os.dup2(out.fileno(), 1)
                os.dup2(err.fileno(), 2)
                cap = memory_mb * MB
                resource.setrlimit(resource.RLIMIT_AS, (cap, cap))
                sys.stdout.write(json.dumps(analyse(name)) + "\n")
                sys.stdout.flush()
                code = 0
            except BaseException:
                try:
                    traceback.print_exc()
                    sys.stderr.flush()
                except BaseException:
                    pass
            finally:
                os._exit(code)
        status = _wait(pid, timeout)
        wall = round(time.perf_counter() - started, 2)
        if status is None:
            message = f"no answer within {timeout:.0f} s"
            return {"name": name, "outcome": "crash", "message": message, "wall": wall, "pid": pid}
        out.seek(0)
        err.seek(0)
        answer = _answer(
            name,
            os.waitstatus_to_exitcode(status),
            out.read().decode(errors="replace"),
            err.read().decode(errors="replace"),
            wall,
        )
        answer["pid"] = pid
        return answer


def serve() -> None:
    answers = os.fdopen(os.dup(1), "w", buffering=1)  # the answers alone on stdout
    os.dup2(2, 1)  # anything else printed goes to stderr
    prepare()
    from django.db import connections

    connections.close_all()  # a forked case shares no connection with this process
    if threading.active_count() != 1:
        raise RuntimeError(f"{threading.active_count()} threads: forking would be unsafe")
    gc.collect()
    gc.freeze()  # the preloaded objects stay shared with the cases instead of being copied
    answers.write(json.dumps({"ready": os.getpid()}) + "\n")
    for line in sys.stdin:
        request = json.loads(line)
        answer = run_forked(request["name"], request["memory_mb"], request["timeout"])
        answers.write(json.dumps(answer) + "\n")
    answers.flush()
    os._exit(0)  # end of requests: no slow teardown of the preloaded heap


if __name__ == "__main__":
    if sys.argv[1] == "--serve":
        serve()
    else:
        main(sys.argv[1])
