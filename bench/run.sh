#!/usr/bin/env bash
# goodput's performance harness: builds the release binary, raises the open-file limit
# (thousands of streams need thousands of sockets, on both the client and the simulator),
# and runs bench/harness.py. Arguments go to the harness, e.g.:
#   bench/run.sh --out bench/results/$(date +%F).json
#   bench/run.sh --quick --only rate,itl
# The machine's load is recorded with every figure: measure when nothing else runs.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release -p goodput
# The independent server for the fidelity scenario (its own small crate, outside the workspace).
cargo build --release --manifest-path bench/exact-server/Cargo.toml
target_dir="${CARGO_TARGET_DIR:-target}"
export GOODPUT_BIN="${GOODPUT_BIN:-$target_dir/release/goodput}"
hard=$(ulimit -Hn)
want=65536
if [ "$hard" != "unlimited" ] && [ "$hard" -lt "$want" ]; then want=$hard; fi
ulimit -n "$want" || echo "note: could not raise the open-file limit (now $(ulimit -n))" >&2
echo "open-file limit $(ulimit -n); load: $(cat /proc/loadavg)"
exec python3 bench/harness.py "$@"
