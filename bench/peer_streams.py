"""Peers side by side at 64, 256 and 1,024 concurrent streams against bench/exact-server
(TTFT 100 ms, ITL 10 ms, 64 tokens, no queue), which reports its own first-token delay and
token gaps: each tool's completed requests/s beside the ideal N / 0.73 s, and its TTFT p50/p99
and ITL mean beside what the server itself did for the same run. Closed loop for every tool
(vLLM `bench serve --max-concurrency`, GuideLLM `concurrent` profile, AIPerf `--concurrency`),
20 s each, no warm-up discarded by anyone (the server counts every request too).

Tools are found as in bench/peers.py (PATH / PEERS_PATH); a missing or failing tool is a row
saying so. Output fields of the peers are read defensively: a field a version does not have
is recorded as null, never guessed.
"""

import json
import os
import tempfile
import time

import peers as base

TTFT_MS, ITL_MS, TOKENS, SECONDS = 100, 10, 64, 20
LEVELS = [64, 256, 1024]


def dig(value, *path):
    """`value[path[0]][path[1]]…`, or None when any step is missing."""
    for key in path:
        if isinstance(value, dict) and key in value:
            value = value[key]
        elif isinstance(value, list) and isinstance(key, int) and len(value) > key:
            value = value[key]
        else:
            return None
    return value


def goodput(_binary, server, streams, workdir):
    report, _, _ = base.HARNESS["run_goodput"](server, [
        "--concurrency", str(streams), "--duration", f"{SECONDS}s", "--warmup", "0",
        "--input-tokens", "32", "--output-tokens", str(TOKENS), "--request-timeout", "120s"])
    s = report["steps"][0]
    ttft = s["latency_from_send_ms"]["ttft"]
    return {"requests_per_sec": s["throughput"]["requests_per_sec"], "ttft_p50_ms": ttft["p50"],
            "ttft_p99_ms": ttft["p99"], "itl_mean_ms": s["latency_ms"]["itl"]["mean"]}


def vllm(binary, server, streams, workdir):
    prompts = streams * int(SECONDS / ((TTFT_MS + (TOKENS - 1) * ITL_MS) / 1000))
    base.run([binary, "bench", "serve", "--backend", "openai-chat", "--base-url",
              server.url.removesuffix("/v1"), "--endpoint", "/v1/chat/completions",
              "--model", "exact", "--tokenizer", base.TOKENIZER_DIR, "--dataset-name", "random",
              "--random-input-len", "32", "--random-output-len", str(TOKENS), "--ignore-eos",
              "--num-prompts", str(prompts), "--max-concurrency", str(streams),
              "--request-rate", "inf", "--percentile-metrics", "ttft,itl,e2el",
              "--metric-percentiles", "50,99", "--save-result", "--result-dir", workdir,
              "--result-filename", "vllm.json"], cwd=workdir)
    with open(os.path.join(workdir, "vllm.json")) as f:
        r = json.load(f)
    return {"requests_per_sec": r.get("request_throughput"), "ttft_p50_ms": r.get("p50_ttft_ms"),
            "ttft_p99_ms": r.get("p99_ttft_ms"), "itl_mean_ms": r.get("mean_itl_ms")}


def guidellm(binary, server, streams, workdir):
    out = os.path.join(workdir, "guidellm.json")
    base.run([binary, "run",
              "--backend", f"kind=openai_http,target={server.url.removesuffix('/v1')}",
              "--profile", f"kind=concurrent,streams={streams}",
              "--constraint", f"kind=max_duration,seconds={SECONDS}",
              "--data", f"kind=synthetic_text,prompt_tokens=32,output_tokens={TOKENS}",
              "--tokenizer", f"kind=huggingface_auto,model={base.TOKENIZER_DIR}",
              "--output", f"kind=json,path={out}", "--disable-console-interactive"], cwd=workdir)
    with open(out) as f:
        m = json.load(f)["benchmarks"][0]["metrics"]
    ttft = dig(m, "time_to_first_token_ms", "successful") or {}
    return {"requests_per_sec": dig(m, "requests_per_second", "successful", "mean"),
            "ttft_p50_ms": ttft.get("median"), "ttft_p99_ms": dig(ttft, "percentiles", "p99"),
            "itl_mean_ms": dig(m, "inter_token_latency_ms", "successful", "mean")}


def aiperf(binary, server, streams, workdir):
    os.environ["HF_HUB_CACHE"] = base.fake_hf_cache(workdir)
    out = os.path.join(workdir, "aiperf")
    try:
        base.run([binary, "profile", "--model", "exact", "--url",
                  server.url.removesuffix("/v1"), "--endpoint-type", "chat", "--streaming",
                  "--tokenizer", "goodput/fixture-tokenizer", "--isl", "32", "--osl",
                  str(TOKENS), "--extra-inputs", "ignore_eos:true", "--concurrency",
                  str(streams), "--benchmark-duration", str(SECONDS), "--artifact-dir", out],
                 cwd=workdir)
    finally:
        os.environ.pop("HF_HUB_CACHE", None)
    with open(os.path.join(out, "profile_export_aiperf.json")) as f:
        r = json.load(f)
    return {"requests_per_sec": dig(r, "request_throughput", "avg"),
            "ttft_p50_ms": dig(r, "time_to_first_token", "p50"),
            "ttft_p99_ms": dig(r, "time_to_first_token", "p99"),
            "itl_mean_ms": dig(r, "inter_token_latency", "avg")}


TOOLS = [("goodput", None, goodput), ("vllm bench serve", "vllm", vllm),
         ("GuideLLM", "guidellm", guidellm), ("AIPerf", "aiperf", aiperf)]


def run_all(exact_cls, run_goodput, wait_for_quiet, levels=None):
    base.HARNESS.update(run_goodput=run_goodput, wait_for_quiet=wait_for_quiet)
    rows = []
    for label, name, runner in TOOLS:
        binary = base.which(name) if name else "goodput"
        for streams in levels or LEVELS:
            row = {"tool": label, "streams": streams,
                   "ideal_per_sec": streams / ((TTFT_MS + (TOKENS - 1) * ITL_MS) / 1000)}
            if binary is None:
                rows.append(dict(row, status="not installed"))
                continue
            with tempfile.TemporaryDirectory() as workdir, \
                    exact_cls(TTFT_MS, ITL_MS, TOKENS) as server:
                try:
                    wait_for_quiet()
                    row["load"] = base_load()
                    started = time.time()
                    row.update(runner(binary, server, streams, workdir), status="ok")
                    row["wall_secs"] = time.time() - started
                    own = server.stats()
                    row.update(server_ttft_p50_ms=dig(own, "first_token_ms", "p50"),
                               server_ttft_p99_ms=dig(own, "first_token_ms", "p99"),
                               server_itl_mean_ms=dig(own, "itl_ms", "mean"),
                               server_completed=own.get("completed"))
                except Exception as error:  # a peer's failure is a result, not a crash
                    row["status"] = f"failed: {str(error)[-600:]}"
            rows.append(row)
            print(f"  {label} at {streams} streams: " + ", ".join(
                f"{k} {v:.1f}" if isinstance(v, float) else f"{k} {v}"
                for k, v in row.items() if k not in ("tool", "streams")), flush=True)
    return {"truth": {"ttft_ms": TTFT_MS, "itl_ms": ITL_MS, "output_tokens": TOKENS,
                      "seconds": SECONDS}, "rows": rows}


def base_load():
    with open("/proc/loadavg") as f:
        return float(f.read().split()[0])
