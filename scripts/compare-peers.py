#!/usr/bin/env python3
"""Compares goodput's figures with llama-server's own per-request timings and, optionally, with
a GuideLLM run of the same workload against the same server (docs/validation.md).

    scripts/compare-peers.py GOODPUT_OUT_DIR [GUIDELLM_JSON]

GOODPUT_OUT_DIR is a `goodput run --out` directory (requests.jsonl, report.json); the
GuideLLM file is the `--output kind=json,path=...` of `guidellm run`. Standard library only.
"""
import json
import statistics
import sys
from pathlib import Path


def pct(values, q):
    """Nearest-rank percentile (q in 0-100)."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    rank = max(1, -(-len(ordered) * q // 100))
    return ordered[int(rank) - 1]


def summary(values):
    return f"{statistics.fmean(values):8.1f} {pct(values, 50):8.1f} {pct(values, 95):8.1f}"


def goodput_rows(out_dir):
    report = json.loads((out_dir / "report.json").read_text())
    step = report["steps"][0]
    records = [json.loads(line) for line in (out_dir / "requests.jsonl").open()]
    ok = [r for r in records if not r.get("failure") and r["phase"] == "measure"]
    ms = lambda a, b: (a - b) / 1e3
    ttft_send = [ms(r["first_token_us"], r["sent_us"]) for r in ok]
    ttft_sched = [ms(r["first_token_us"], r["scheduled_us"]) for r in ok]
    itl = [
        ms(r["last_token_us"], r["first_token_us"]) / (r["output_tokens"] - 1)
        for r in ok
        if r["output_tokens"] > 1
    ]
    e2e = [ms(r["last_token_us"], r["sent_us"]) for r in ok]
    throughput = step["throughput"]
    return {
        "completed": len(ok),
        "req/s": throughput["requests_per_sec"],
        "out tok/s": throughput["output_tokens_per_sec"],
        "TTFT from send": ttft_send,
        "TTFT from schedule": ttft_sched,
        "TPOT (last-first)/(n-1)": itl,
        "E2E from send": e2e,
    }, ok


def guidellm_rows(path):
    bench = json.loads(Path(path).read_text())["benchmarks"][0]
    ok = bench["requests"]["successful"]
    metrics = bench["metrics"]
    sched = [
        (r["info"]["timings"]["first_token_iteration"] - r["info"]["timings"]["targeted_start"]) * 1e3
        for r in ok
    ]
    return {
        "completed": len(ok),
        "req/s": metrics["requests_per_second"]["successful"]["mean"],
        "out tok/s": metrics["output_tokens_per_second"]["successful"]["mean"],
        "TTFT from send": [r["time_to_first_token_ms"] for r in ok],
        "TTFT from schedule": sched,
        "TPOT (last-first)/(n-1)": [r["inter_token_latency_ms"] for r in ok if r["inter_token_latency_ms"]],
        "E2E from send": [r["request_latency"] * 1e3 for r in ok],
    }


def server_agreement(ok):
    """goodput's per-request intervals against llama-server's `timings`."""
    prefill, decode, queue = [], [], []
    for r in ok:
        t = r.get("server_timings") or {}
        if "prompt_ms" not in t or r.get("response_us") is None:
            continue
        # llama-server sends the response head when a slot starts the request, so
        # first token − head is the prefill, and head − send the server's handling of the
        # request (parsing, template, tokenizing) plus the wait for a slot.
        prefill.append((r["first_token_us"] - r["response_us"]) / 1e3 - t["prompt_ms"])
        decode.append((r["last_token_us"] - r["first_token_us"]) / 1e3 - t["predicted_ms"])
        queue.append((r["response_us"] - r["sent_us"]) / 1e3)
    if not prefill:
        return
    print(f"\ngoodput vs llama-server timings ({len(prefill)} requests), ms: mean / p50 / p95")
    print(f"  (first token − response head) − server prompt_ms   {summary(prefill)}")
    print(f"  (last − first token) − server predicted_ms         {summary(decode)}")
    print(f"  response head − send (handling + wait for a slot)  {summary(queue)}")


def main():
    if len(sys.argv) not in (2, 3):
        sys.exit(__doc__)
    tools = {}
    tools["goodput"], ok = goodput_rows(Path(sys.argv[1]))
    if len(sys.argv) == 3:
        tools["GuideLLM"] = guidellm_rows(sys.argv[2])
    names = list(tools)
    print(f"{'':28}" + "".join(f"{name:>28}" for name in names))
    for key in ("completed", "req/s", "out tok/s"):
        print(f"{key:28}" + "".join(f"{tools[n][key]:>28.2f}" for n in names))
    print(f"{'(ms: mean / p50 / p95)':28}")
    for key in ("TTFT from send", "TTFT from schedule", "TPOT (last-first)/(n-1)", "E2E from send"):
        print(f"{key:28}" + "".join(f"{summary(tools[n][key]):>28}" for n in names))
    server_agreement(ok)


if __name__ == "__main__":
    main()
