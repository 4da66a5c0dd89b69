#!/usr/bin/env bash
# PgBouncer in transaction mode on 127.0.0.1 in front of the machine's PostgreSQL, for CI and for
# trying the project behind a pooler by hand.
#
#   scripts/pgbouncer_ci.sh start   # prints the DATABASE_URL prefix that goes through it
#   scripts/pgbouncer_ci.sh stop
#
# Settings (environment): PGBOUNCER_BINARY (the pgbouncer on PATH, else Debian's
# /usr/sbin/pgbouncer; scripts/pgbouncer_build.sh prints a 1.24.1 one), PGBOUNCER_PORT (6432),
# PGBOUNCER_DIR (/tmp/acurio-pgbouncer: config, log, pid — one per instance, so two can run
# side by side on two ports), PGBOUNCER_UPSTREAM_HOST/PORT (127.0.0.1, 5432),
# PGBOUNCER_POOL_SIZE (20), PGBOUNCER_MAX_PREPARED_STATEMENTS (200; written only for a
# PgBouncer of 1.21 or later, which then keeps protocol-level prepared statements in
# transaction mode: 0 turns that off; 1.18 knows no such setting and cannot). The
# machine's PostgreSQL trusts local TCP connections (user postgres), so PgBouncer does too;
# any database name is passed through (the test suite creates test_<name> through it).
# PgBouncer refuses to run as root: started by root it switches to the postgres user.
set -euo pipefail

port="${PGBOUNCER_PORT:-6432}"
dir="${PGBOUNCER_DIR:-/tmp/acurio-pgbouncer}"
upstream_host="${PGBOUNCER_UPSTREAM_HOST:-127.0.0.1}"
upstream_port="${PGBOUNCER_UPSTREAM_PORT:-5432}"
pool_size="${PGBOUNCER_POOL_SIZE:-20}"
binary="${PGBOUNCER_BINARY:-$(command -v pgbouncer || echo /usr/sbin/pgbouncer)}"
max_prepared="${PGBOUNCER_MAX_PREPARED_STATEMENTS:-200}"

stop() {
  if [ -f "$dir/pgbouncer.pid" ]; then
    pid="$(cat "$dir/pgbouncer.pid")"
    kill "$pid" 2>/dev/null || true
    for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    rm -f "$dir/pgbouncer.pid"
  fi
}

case "${1:-}" in
  start)
    [ -x "$binary" ] || { echo "pgbouncer_ci: pgbouncer is not installed (apt-get install pgbouncer)" >&2; exit 1; }
    stop
    version="$("$binary" --version | head -n1 | awk '{print $2}')"
    prepared_line="; PgBouncer $version keeps no protocol-level prepared statements in transaction mode"
    if [ "$(printf '%s\n' 1.21 "$version" | sort -V | head -n1)" = 1.21 ]; then
      # 1.21 on: a client's Parse is prepared on whichever server connection runs it, under
      # PgBouncer's own name, and re-prepared on another when needed.
      prepared_line="max_prepared_statements = $max_prepared"
    fi
    mkdir -p "$dir"
    chmod 755 "$dir"
    # trust: PgBouncer checks no password, but the user must be listed.
    echo '"postgres" ""' >"$dir/userlist.txt"
    cat >"$dir/pgbouncer.ini" <<EOF
[databases]
* = host=$upstream_host port=$upstream_port

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = $port
unix_socket_dir =
auth_type = trust
auth_file = $dir/userlist.txt
pool_mode = transaction
default_pool_size = $pool_size
max_client_conn = 1000
; transaction mode hands a server connection back after each transaction: nothing
; session-level (LISTEN, SET, advisory locks; protocol-level prepared statements before
; 1.21 or with max_prepared_statements = 0) survives it
server_reset_query =
$prepared_line
server_check_delay = 10
; the suite drops the databases it created: idle server connections must not hold them
server_idle_timeout = 5
; libpq "options" (-c name=value) is not a parameter PgBouncer can pass on: it would refuse
; the connection. With DATABASE_POOLER=transaction none are sent (each transaction sets the
; code version); listed for clients that still send them, whose options are then dropped
ignore_startup_parameters = extra_float_digits,options
logfile = $dir/pgbouncer.log
pidfile = $dir/pgbouncer.pid
admin_users = postgres
EOF
    chown -R postgres "$dir" 2>/dev/null || true
    user_flag=()
    [ "$(id -u)" = 0 ] && user_flag=(-u postgres)
    "$binary" -d "${user_flag[@]}" "$dir/pgbouncer.ini"
    for _ in $(seq 50); do
      pg_isready -h 127.0.0.1 -p "$port" -q && break
      sleep 0.1
    done
    pg_isready -h 127.0.0.1 -p "$port" -q || {
      echo "pgbouncer_ci: PgBouncer did not start; its log:" >&2
      tail -n 20 "$dir/pgbouncer.log" >&2 || true
      exit 1
    }
    echo "postgres://postgres@127.0.0.1:$port"
    ;;
  stop)
    stop
    ;;
  *)
    echo "usage: $0 start|stop" >&2
    exit 2
    ;;
esac
