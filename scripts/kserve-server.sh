#!/usr/bin/env bash
# A real KServe v2 (Open Inference Protocol) model server for goodput: the PyPI `kserve`
# package's ModelServer serving scripts/kserve-numpy-model.py (a NumPy linear model).
#
#   scripts/kserve-server.sh env            print the GOODPUT_KSERVE_* variables the tests read
#   scripts/kserve-server.sh start [PORT [GRPC_PORT]]   serve on 127.0.0.1:PORT (default 8080),
#                                           v2 over gRPC on GRPC_PORT (default: none)
#
# The venv (kserve, numpy from PyPI, ~450 MB) lives outside the repository, under
# $GOODPUT_CACHE (default ~/.cache/goodput)/kserve-venv, created on first use.
set -euo pipefail

CACHE="${GOODPUT_CACHE:-$HOME/.cache/goodput}"
VENV="$CACHE/kserve-venv"
HERE="$(cd "$(dirname "$0")" && pwd)"
MODEL="$HERE/kserve-numpy-model.py"

log() { echo "kserve-server.sh: $*" >&2; }

ensure_venv() {
    if [[ ! -x "$VENV/bin/python" ]]; then
        log "creating $VENV"
        python3 -m venv "$VENV" || { log "python3 -m venv failed; install python3-venv"; exit 1; }
    fi
    # Pinned: the versions the tests were written against (a new release must not break CI).
    if ! "$VENV/bin/python" -c 'import kserve, numpy, importlib.metadata as m; assert m.version("kserve") == "0.21.0"' 2>/dev/null; then
        log "installing kserve 0.21.0 and numpy into $VENV"
        "$VENV/bin/pip" install -q "kserve==0.21.0" "numpy>=2,<3" >&2
    fi
}

case "${1:-}" in
    env)
        ensure_venv
        echo "export GOODPUT_KSERVE_PYTHON=$VENV/bin/python"
        echo "export GOODPUT_KSERVE_MODEL=$MODEL"
        ;;
    start)
        ensure_venv
        exec "$VENV/bin/python" "$MODEL" --http_port "${2:-8080}" --grpc_port "${3:-0}" --workers 1
        ;;
    *)
        sed -n '2,10p' "$0" >&2
        exit 2
        ;;
esac
