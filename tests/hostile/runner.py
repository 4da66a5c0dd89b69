"""Run a hostile input in a child process under an address-space limit (RLIMIT_AS).

The child (tests/hostile/child.py) analyses the input as the pipeline does; the limit makes a
memory regression fail there, as a MemoryError, instead of taking the machine down.
"""

from __future__ import annotations

import json
import resource
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent
MEMORY_LIMIT_MB = 1024


def run_case(
    name: str, env: dict[str, str], *, memory_mb: int = MEMORY_LIMIT_MB, timeout: float = 180
) -> dict:
    """The child's JSON result for input ``name`` (``outcome`` "crash" when it died)."""

    def limit() -> None:
        cap = memory_mb * 1024 * 1024
        resource.setrlimit(resource.RLIMIT_AS, (cap, cap))

    started = time.perf_counter()
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "tests.hostile.child", name],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=timeout,
            preexec_fn=limit,
        )
    except subprocess.TimeoutExpired:
        return {"name": name, "outcome": "crash", "message": f"no answer within {timeout:.0f} s"}
    wall = time.perf_counter() - started
    lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
    if proc.returncode != 0 or not lines:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-3:]
        return {
            "name": name,
            "outcome": "crash",
            "message": f"exit {proc.returncode}: {' | '.join(tail)}"[:800],
            "wall": round(wall, 2),
        }
    result = json.loads(lines[-1])
    result["wall"] = round(wall, 2)
    return result
