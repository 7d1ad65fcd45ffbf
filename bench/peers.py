"""Peer tools side by side with goodput, against the same fixed-timing simulator.

Two experiments per tool, on a server whose truth is known (TTFT 50 ms, ITL 20 ms, 64 output
tokens, 1 token per chunk):
  accuracy  constant arrivals at 20 req/s for 20 s: the tool's reported TTFT and ITL (median)
            and their error against the truth;
  max rate  constant arrivals asked at 3,000 req/s for 10 s (16 output tokens): the request rate
            the tool really sent (completed ÷ wall time) — the ceiling of its dispatcher.

Tools are detected on PATH (a virtualenv's `bin` may be added with PEERS_PATH): `vllm`
(`vllm bench serve`), `guidellm`, `aiperf`, `inference-benchmarker`. A tool that is missing is
listed as such; one whose run fails is listed with the error. No peer code is part of this
repository. GuideLLM (0.8.1) and AIPerf (0.13.0) were run for real, from PyPI, in a virtualenv
outside the repository; the vLLM invocation was written from its documentation and could not
be exercised on the reference machine (vLLM needs a GPU build), and inference-benchmarker is
skipped (it needs a tokenizer from the Hugging Face hub).
"""

import json
import os
import shutil
import subprocess
import tempfile
import time

TTFT_MS, ITL_MS, TOKENS = 50, 20, 64
ACCURACY_RATE, ACCURACY_SECS = 20, 20
MAX_RATE_ASKED, MAX_RATE_SECS, MAX_RATE_TOKENS = 3000, 10, 16
TOKENIZER_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                             "crates", "core", "tests", "fixtures")


def which(name):
    path = os.environ.get("PEERS_PATH", "") + os.pathsep + os.environ.get("PATH", "")
    return shutil.which(name, path=path)


def error_pct(measured, truth):
    return None if measured is None else 100 * abs(measured - truth) / truth


HARNESS = {}


def goodput_accuracy(sim_cls):
    run_goodput = HARNESS["run_goodput"]
    with sim_cls(TTFT_MS, ITL_MS) as sim:
        report, _, _ = run_goodput(sim, [
            "--rate", str(ACCURACY_RATE), "--arrival", "constant",
            "--duration", f"{ACCURACY_SECS}s", "--warmup", "0",
            "--input-tokens", "32", "--output-tokens", str(TOKENS)])
    step = report["steps"][0]
    return step["latency_from_send_ms"]["ttft"]["p50"], step["latency_ms"]["itl"]["p50"]


def goodput_max_rate(sim_cls):
    run_goodput = HARNESS["run_goodput"]
    with sim_cls(TTFT_MS, ITL_MS) as sim:
        started = time.time()
        report, _, _ = run_goodput(sim, [
            "--rate", str(MAX_RATE_ASKED), "--arrival", "constant",
            "--duration", f"{MAX_RATE_SECS}s", "--warmup", "0",
            "--input-tokens", "32", "--output-tokens", str(MAX_RATE_TOKENS)])
        wall = time.time() - started
    step = report["steps"][0]
    return step["requests"]["sent"] / MAX_RATE_SECS, wall


def run(command, cwd, timeout=900):
    HARNESS["wait_for_quiet"]()
    env = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
    proc = subprocess.run(command, cwd=cwd, capture_output=True, text=True, timeout=timeout,
                          env=env)
    if proc.returncode != 0:
        raise RuntimeError(f"exit {proc.returncode}: {(proc.stderr or proc.stdout)[-1500:]}")
    return proc


# GuideLLM ------------------------------------------------------------------------------------

def guidellm_run(binary, sim, rate, seconds, tokens, workdir):
    """GuideLLM 0.8's `guidellm run` (keyword-style options)."""
    out = os.path.join(workdir, f"guidellm-{rate}.json")
    run([binary, "run",
         "--backend", f"kind=openai_http,target={sim.url.removesuffix('/v1')}",
         "--profile", f"kind=constant,rate={rate}",
         "--constraint", f"kind=max_duration,seconds={seconds}",
         "--data", f"kind=synthetic_text,prompt_tokens=32,output_tokens={tokens}",
         "--tokenizer", f"kind=huggingface_auto,model={TOKENIZER_DIR}",
         "--output", f"kind=json,path={out}", "--disable-console-interactive"], cwd=workdir)
    with open(out) as f:
        return json.load(f)["benchmarks"][0]


def guidellm(binary, sim_cls, workdir):
    with sim_cls(TTFT_MS, ITL_MS) as sim:
        result = guidellm_run(binary, sim, ACCURACY_RATE, ACCURACY_SECS, TOKENS, workdir)
    metrics = result["metrics"]
    ttft = metrics["time_to_first_token_ms"]["successful"]["median"]
    itl = metrics["inter_token_latency_ms"]["successful"]["median"]
    with sim_cls(TTFT_MS, ITL_MS) as sim:
        started = time.time()
        result = guidellm_run(binary, sim, MAX_RATE_ASKED, MAX_RATE_SECS, MAX_RATE_TOKENS,
                              workdir)
        wall = time.time() - started
    sent = result["metrics"]["request_totals"]["total"]
    return ttft, itl, sent / MAX_RATE_SECS, wall


# vLLM bench serve ------------------------------------------------------------------------------

def vllm(binary, sim_cls, workdir):
    def once(sim, rate, prompts, tokens):
        run([binary, "bench", "serve", "--backend", "openai-chat", "--base-url",
             sim.url.removesuffix("/v1"), "--endpoint", "/v1/chat/completions",
             "--model", "goodput-sim", "--tokenizer", TOKENIZER_DIR,
             "--dataset-name", "random", "--random-input-len", "32",
             "--random-output-len", str(tokens), "--ignore-eos", "--num-prompts", str(prompts),
             "--request-rate", str(rate), "--save-result", "--result-dir", workdir,
             "--result-filename", f"vllm-{rate}.json"], cwd=workdir)
        with open(os.path.join(workdir, f"vllm-{rate}.json")) as f:
            return json.load(f)

    with sim_cls(TTFT_MS, ITL_MS) as sim:
        result = once(sim, ACCURACY_RATE, ACCURACY_RATE * ACCURACY_SECS, TOKENS)
    ttft, itl = result["median_ttft_ms"], result["median_itl_ms"]
    with sim_cls(TTFT_MS, ITL_MS) as sim:
        started = time.time()
        result = once(sim, MAX_RATE_ASKED, MAX_RATE_ASKED * MAX_RATE_SECS, MAX_RATE_TOKENS)
        wall = time.time() - started
    return ttft, itl, result["completed"] / result["duration"], wall


# AIPerf ----------------------------------------------------------------------------------------

def fake_hf_cache(workdir):
    """AIPerf loads tokenizers only by Hugging Face name (offline: from the hub cache), so the
    test tokenizer is laid out as a cached repository `goodput/fixture-tokenizer`."""
    revision = "0" * 40
    repo = os.path.join(workdir, "hf-cache", "models--goodput--fixture-tokenizer")
    os.makedirs(os.path.join(repo, "refs"), exist_ok=True)
    os.makedirs(os.path.join(repo, "snapshots", revision), exist_ok=True)
    with open(os.path.join(repo, "refs", "main"), "w") as f:
        f.write(revision)
    shutil.copy(os.path.join(TOKENIZER_DIR, "tokenizer.json"),
                os.path.join(repo, "snapshots", revision, "tokenizer.json"))
    return os.path.join(workdir, "hf-cache")


def aiperf(binary, sim_cls, workdir):
    os.environ["HF_HUB_CACHE"] = fake_hf_cache(workdir)

    def once(sim, rate, seconds, tokens):
        out = os.path.join(workdir, f"aiperf-{rate}")
        run([binary, "profile", "--model", "goodput-sim", "--url", sim.url.removesuffix("/v1"),
             "--endpoint-type", "chat", "--streaming",
             "--tokenizer", "goodput/fixture-tokenizer", "--isl", "32", "--osl", str(tokens),
             "--extra-inputs", "ignore_eos:true", "--request-rate", str(rate),
             "--benchmark-duration", str(seconds), "--artifact-dir", out], cwd=workdir)
        with open(os.path.join(out, "profile_export_aiperf.json")) as f:
            return json.load(f)

    try:
        with sim_cls(TTFT_MS, ITL_MS) as sim:
            result = once(sim, ACCURACY_RATE, ACCURACY_SECS, TOKENS)
        ttft = result["time_to_first_token"]["p50"]
        itl = result["inter_token_latency"]["p50"]
        with sim_cls(TTFT_MS, ITL_MS) as sim:
            started = time.time()
            result = once(sim, MAX_RATE_ASKED, MAX_RATE_SECS, MAX_RATE_TOKENS)
            wall = time.time() - started
    finally:
        os.environ.pop("HF_HUB_CACHE", None)
    return ttft, itl, result["request_count"]["avg"] / MAX_RATE_SECS, wall


# inference-benchmarker ------------------------------------------------------------------------

def inference_benchmarker(binary, sim_cls, workdir):
    raise RuntimeError("no non-interactive invocation known to work offline "
                       "(it needs a Hugging Face tokenizer name); run it by hand")


PEERS = [("vllm bench serve", "vllm", vllm), ("GuideLLM", "guidellm", guidellm),
         ("AIPerf", "aiperf", aiperf),
         ("inference-benchmarker", "inference-benchmarker", inference_benchmarker)]


def run_all(sim_cls, quick, run_goodput, wait_for_quiet):
    """Runs goodput and every installed peer; `run_goodput` and `wait_for_quiet` come from the
    harness (so its settings apply)."""
    HARNESS.update(run_goodput=run_goodput, wait_for_quiet=wait_for_quiet)
    rows = []
    ttft, itl = goodput_accuracy(sim_cls)
    rate, wall = goodput_max_rate(sim_cls)
    rows.append(row("goodput", ttft, itl, rate, wall))
    print(f"  goodput: TTFT p50 {ttft} ms, ITL p50 {itl} ms, sent {rate:.0f} req/s", flush=True)
    for label, name, runner in PEERS:
        binary = which(name)
        if binary is None:
            rows.append({"tool": label, "status": "not installed"})
            print(f"  {label}: not installed", flush=True)
            continue
        with tempfile.TemporaryDirectory() as workdir:
            try:
                ttft, itl, rate, wall = runner(binary, sim_cls, workdir)
                rows.append(row(label, ttft, itl, rate, wall))
                print(f"  {label}: TTFT p50 {ttft} ms, ITL p50 {itl} ms, sent {rate:.0f} "
                      f"req/s", flush=True)
            except Exception as error:  # a peer's failure is a result, not a crash
                rows.append({"tool": label, "status": f"failed: {error}"})
                print(f"  {label}: failed: {error}", flush=True)
    return {"truth": {"ttft_ms": TTFT_MS, "itl_ms": ITL_MS, "output_tokens": TOKENS},
            "accuracy_rate_per_sec": ACCURACY_RATE, "max_rate_asked_per_sec": MAX_RATE_ASKED,
            "rows": rows}


def row(tool, ttft, itl, rate, wall):
    return {"tool": tool, "status": "ok", "ttft_p50_ms": ttft,
            "ttft_error_pct": error_pct(ttft, TTFT_MS), "itl_p50_ms": itl,
            "itl_error_pct": error_pct(itl, ITL_MS), "sent_per_sec_at_max": rate,
            "max_rate_wall_secs": wall}
