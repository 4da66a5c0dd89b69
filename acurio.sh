#!/usr/bin/env bash
# Acurio's two entry points, for a fresh machine with nothing but Python >= 3.12:
#   ./acurio.sh start   set up (venv, pinned installs, migrations, demo user) and run web,
#                       worker and sweeper on the embedded PostgreSQL (or $DATABASE_URL)
#   ./acurio.sh test    set up and run the whole test suite (extra args go to pytest)
set -euo pipefail
cd "$(dirname "$0")"

find_python() {
  local c
  for c in ${PYTHON:-} python3.13 python3.12 python3.14 python3; do
    if command -v "$c" >/dev/null 2>&1 &&
       "$c" -c 'import sys, venv; sys.exit(sys.version_info < (3, 12))' >/dev/null 2>&1; then
      command -v "$c"; return 0
    fi
  done
  # pyenv installs that are not on the PATH's active version
  for c in "$HOME"/.pyenv/versions/3.1[2-9]*/bin/python3 /usr/local/bin/python3.1[2-9] /usr/bin/python3.1[2-9]; do
    if [ -x "$c" ] && "$c" -c 'import sys; sys.exit(sys.version_info < (3, 12))' >/dev/null 2>&1; then
      echo "$c"; return 0
    fi
  done
  return 1
}

ensure_venv() {
  local req="$1" stamp=".venv/.installed-$1"
  if [ ! -x .venv/bin/python ] || ! .venv/bin/python -c 'import sys; sys.exit(sys.version_info < (3, 12))' 2>/dev/null; then
    local py
    py=$(find_python) || { echo "acurio: Python 3.12 or newer is required (none found; set PYTHON=/path/to/python3.12)" >&2; exit 1; }
    echo "acurio: creating .venv with $py" >&2
    rm -rf .venv
    "$py" -m venv .venv
    .venv/bin/python -m pip install --quiet --upgrade pip 2>&1 | { grep -v "^WARNING: Location 'file:" || true; } >&2
  fi
  local want
  want=$(cat requirements.txt "$req" | sha256sum | cut -d' ' -f1)
  if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
    echo "acurio: installing $req" >&2
    # (grep drops this machine's noise about absent local package mirrors)
    if ! .venv/bin/python -m pip install --quiet --disable-pip-version-check -r "$req" 2>&1 \
        | { grep -v "^WARNING: Location 'file:" || true; } >&2; then
      echo "acurio: installing $req failed (see above)" >&2; exit 1
    fi
    echo "$want" > "$stamp"
  fi
}

# The project's bytecode, written once: each process the commands (and the tests) start then
# reads it instead of compiling every module again, which it does wherever
# PYTHONDONTWRITEBYTECODE is set (about 0.5 s of CPU per manage.py process here). Quiet, and
# never fatal: a read-only checkout just compiles in memory as before.
compile_project() {
  .venv/bin/python -m compileall -q -x '(^|/)(\.venv|var|node_modules|\.git)(/|$)' . >/dev/null 2>&1 || true
}

cmd="${1:-}"; shift || true
case "$cmd" in
  start)
    ensure_venv requirements.txt
    compile_project
    exec .venv/bin/python -m acurio.launcher "$@"
    ;;
  test)
    ensure_venv requirements-dev.txt
    compile_project
    exec .venv/bin/python -m pytest "$@"
    ;;
  exec)
    # Run a command inside the development environment (used by .ci/run: ruff, manage.py).
    ensure_venv requirements-dev.txt
    PATH="$PWD/.venv/bin:$PATH" exec "$@"
    ;;
  *)
    echo "usage: ./acurio.sh start | test [pytest args] | exec CMD..." >&2
    exit 2
    ;;
esac
