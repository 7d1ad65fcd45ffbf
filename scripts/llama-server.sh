#!/usr/bin/env bash
# A real inference server for goodput: llama.cpp's llama-server, built from the llama.cpp tree
# vendored in the PyPI source package `llama-cpp-python`, serving small generated GGUF models.
#
#   scripts/llama-server.sh build            build (or reuse the cached) llama-server; print its path
#   scripts/llama-server.sh model tiny|small generate (or reuse) a model; print its path
#   scripts/llama-server.sh start [tiny|small] [PORT] [extra llama-server flags...]
#                                            serve a model on 127.0.0.1:PORT (default 8080)
#   scripts/llama-server.sh env              print the GOODPUT_LLAMA_* variables the tests read
#
# Everything lives outside the repository, under $GOODPUT_CACHE (default ~/.cache/goodput):
#   venv/                         cmake, ninja, gguf, numpy (from PyPI)
#   llama-server/<version>/bin/   the built binary, reused by later runs on this machine
#   llama-server/<version>/vocab/ the vocab-only GGUF files shipped in the llama.cpp tree
#   llama-server/<version>/models/<generator hash>/{tiny,small}.gguf
# The models have random weights (their text is gibberish) but a real tokenizer and chat
# template, so the server does real tokenization, batching, slots and streaming.
set -euo pipefail

VERSION="${GOODPUT_LLAMA_CPP_PYTHON_VERSION:-0.3.36}"
CACHE="${GOODPUT_CACHE:-$HOME/.cache/goodput}"
DIR="$CACHE/llama-server/$VERSION"
HERE="$(cd "$(dirname "$0")" && pwd)"
GENERATOR="$HERE/gen-gguf-model.py"
JOBS="${GOODPUT_BUILD_JOBS:-2}"

log() { echo "llama-server.sh: $*" >&2; }
die() { log "error: $*"; exit 1; }

# The Python tools (cmake, ninja, gguf, numpy) in a venv outside the repository.
ensure_venv() {
    local venv="$CACHE/venv"
    if [[ ! -x "$venv/bin/python" ]]; then
        log "creating $venv"
        python3 -m venv "$venv" || die "python3 -m venv failed; install python3-venv"
    fi
    if ! "$venv/bin/python" -c 'import gguf, numpy' 2>/dev/null \
        || [[ ! -x "$venv/bin/cmake" || ! -x "$venv/bin/ninja" ]]; then
        log "installing cmake ninja gguf numpy into $venv"
        "$venv/bin/pip" install -q cmake ninja gguf numpy >&2
    fi
    echo "$venv"
}

# Unpacks the llama-cpp-python sdist into $DIR/src (once) and prints the llama.cpp tree.
ensure_source() {
    local venv="$1" tree="$DIR/src/llama_cpp_python-$VERSION/vendor/llama.cpp"
    if [[ ! -f "$tree/CMakeLists.txt" ]]; then
        mkdir -p "$DIR/src"
        log "downloading llama-cpp-python==$VERSION (source package, ~76 MB)"
        "$venv/bin/pip" download -q --no-deps --no-binary llama-cpp-python \
            "llama-cpp-python==$VERSION" -d "$DIR/src" >&2
        tar xzf "$DIR/src/llama_cpp_python-$VERSION.tar.gz" -C "$DIR/src"
    fi
    mkdir -p "$DIR/vocab"
    cp -u "$tree"/models/ggml-vocab-*.gguf "$DIR/vocab/"
    echo "$tree"
}

cmd_build() {
    local bin="$DIR/bin/llama-server"
    if [[ -x "$bin" ]]; then echo "$bin"; return; fi
    mkdir -p "$DIR"
    exec 9>"$DIR/.build.lock"
    flock 9 # another process may be building the same version: wait for it
    if [[ -x "$bin" ]]; then echo "$bin"; return; fi
    local venv tree build="$DIR/build" start=$SECONDS
    venv="$(ensure_venv)"
    tree="$(ensure_source "$venv")"
    export PATH="$venv/bin:$PATH"
    log "configuring llama.cpp in $build"
    cmake -S "$tree" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=OFF \
        -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_TOOLS=ON \
        -DLLAMA_BUILD_SERVER=ON -DLLAMA_BUILD_UI=OFF -DLLAMA_USE_PREBUILT_UI=OFF \
        -DBUILD_SHARED_LIBS=OFF -DLLAMA_CURL=OFF >"$DIR/configure.log" 2>&1 \
        || die "cmake configure failed; see $DIR/configure.log"
    log "building llama-server (about 10 minutes on 2 cores; log in $DIR/build.log)"
    nice -n 19 cmake --build "$build" --target llama-server -j "$JOBS" >"$DIR/build.log" 2>&1 \
        || die "build failed; see $DIR/build.log"
    mkdir -p "$DIR/bin"
    cp "$build/bin/llama-server" "$bin.tmp" && mv "$bin.tmp" "$bin"
    rm -rf "$build" "$DIR/src/llama_cpp_python-$VERSION"
    log "built $bin in $((SECONDS - start)) s"
    echo "$bin"
}

cmd_model() {
    local size="${1:-tiny}" venv hash out
    [[ "$size" == tiny || "$size" == small ]] || die "model size must be tiny or small, not '$size'"
    venv="$(ensure_venv)"
    [[ -f "$DIR/vocab/ggml-vocab-llama-spm.gguf" ]] || ensure_source "$venv" >/dev/null
    hash="$(sha256sum "$GENERATOR" | cut -c1-12)"
    out="$DIR/models/$hash/$size.gguf"
    if [[ ! -f "$out" ]]; then
        mkdir -p "$(dirname "$out")"
        "$venv/bin/python" "$GENERATOR" --size "$size" \
            --vocab "$DIR/vocab/ggml-vocab-llama-spm.gguf" --out "$out.tmp" >&2
        mv "$out.tmp" "$out"
    fi
    echo "$out"
}

cmd_env() {
    local bin tiny small
    bin="$(cmd_build)"
    tiny="$(cmd_model tiny)"
    small="$(cmd_model small)"
    printf 'export GOODPUT_LLAMA_SERVER=%q\n' "$bin"
    printf 'export GOODPUT_LLAMA_MODEL_TINY=%q\n' "$tiny"
    printf 'export GOODPUT_LLAMA_MODEL_SMALL=%q\n' "$small"
}

cmd_start() {
    local size="${1:-tiny}" port="${2:-8080}" bin model
    shift $(($# < 2 ? $# : 2))
    bin="$(cmd_build)"
    model="$(cmd_model "$size")"
    log "serving $model on http://127.0.0.1:$port (try: goodput run --target http://127.0.0.1:$port/v1 ...)"
    exec "$bin" -m "$model" --host 127.0.0.1 --port "$port" -np 4 -c 8192 -t 2 --metrics "$@"
}

case "${1:-}" in
    build) cmd_build ;;
    model) cmd_model "${2:-tiny}" ;;
    env) cmd_env ;;
    start) shift; cmd_start "$@" ;;
    *) sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2 ;;
esac
