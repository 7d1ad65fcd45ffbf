#!/usr/bin/env bash
# A real, throwaway PostgreSQL server for goodput's history-store tests: Debian's `postgresql`
# package (installed when missing, as root or through sudo), a cluster made by initdb in a
# temporary directory, listening on a free port of 127.0.0.1 only, password (SCRAM) auth.
#
#   scripts/postgres-server.sh start        start one; print the GOODPUT_POSTGRES_* variables
#                                           (eval them: GOODPUT_POSTGRES_URL is what tests read)
#   scripts/postgres-server.sh stop DIR     stop the server of GOODPUT_POSTGRES_DIR, remove DIR
#
# PostgreSQL refuses to run as root: as root the server runs as the `postgres` user the
# package creates. Everything lives under DIR (data, socket, log); nothing else is touched.
set -euo pipefail

log() { echo "postgres-server.sh: $*" >&2; }

bin_dir() {
    local dir
    dir="$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1 || true)"
    [[ -n "$dir" && -x "$dir/initdb" ]] && echo "$dir"
}

ensure_installed() {
    if bin_dir >/dev/null; then return; fi
    local sudo=""
    [[ "$(id -u)" -eq 0 ]] || sudo="sudo"
    if ! command -v apt-get >/dev/null 2>&1 || { [[ -n "$sudo" ]] && ! command -v sudo >/dev/null 2>&1; }; then
        log "error: PostgreSQL's server is not installed; install it (Debian/Ubuntu: apt-get install postgresql), then run again"
        exit 2
    fi
    log "installing Debian's postgresql package (the history-store tests run against a real server)"
    export DEBIAN_FRONTEND=noninteractive
    $sudo apt-get update -qq >/dev/null
    $sudo apt-get install -y -qq postgresql >/dev/null
    bin_dir >/dev/null || { log "error: apt-get installed postgresql but no initdb was found"; exit 2; }
}

# Runs a command as the server's user: `postgres` when we are root, else ourselves.
as_server() {
    if [[ "$(id -u)" -eq 0 ]]; then
        runuser -u postgres -- "$@"
    else
        "$@"
    fi
}

free_port() {
    python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

start() {
    ensure_installed
    local bin dir port password=goodput
    bin="$(bin_dir)"
    dir="$(mktemp -d "${TMPDIR:-/tmp}/goodput-postgres.XXXXXX")"
    chmod 755 "$dir"
    printf '%s\n' "$password" >"$dir/pwfile"
    if [[ "$(id -u)" -eq 0 ]]; then chown -R postgres: "$dir"; fi
    as_server "$bin/initdb" -D "$dir/data" -U goodput --pwfile="$dir/pwfile" \
        --auth-host=scram-sha-256 --auth-local=trust -E UTF8 --locale=C.UTF-8 >"$dir/initdb.log" 2>&1 ||
        { cat "$dir/initdb.log" >&2; log "error: initdb failed"; exit 1; }
    port="$(free_port)"
    if ! as_server "$bin/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 30 \
        -o "-c listen_addresses=127.0.0.1 -p $port -c unix_socket_directories=$dir -c fsync=off" start >&2; then
        cat "$dir/server.log" >&2 || true
        log "error: the server did not start"
        exit 1
    fi
    log "PostgreSQL $("$bin/postgres" --version | awk '{print $3}') on 127.0.0.1:$port (data in $dir)"
    echo "export GOODPUT_POSTGRES_URL=postgres://goodput:$password@127.0.0.1:$port/postgres"
    echo "export GOODPUT_POSTGRES_DIR=$dir"
}

stop() {
    local dir="${1:?usage: scripts/postgres-server.sh stop DIR}"
    [[ -d "$dir/data" ]] || { log "no server in $dir"; return 0; }
    local bin
    bin="$(bin_dir)"
    as_server "$bin/pg_ctl" -D "$dir/data" -m fast -w -t 30 stop >&2 || log "pg_ctl stop failed"
    rm -rf "$dir"
}

case "${1:-}" in
    start) start ;;
    stop) stop "${2:-}" ;;
    *)
        sed -n '2,12p' "$0" >&2
        exit 2
        ;;
esac
