#!/usr/bin/env python3
"""The client-side ceiling of one goodput process and of four shards (`--shards 4`) on this
machine (docs/distributed.md): constant arrivals at a ladder of total rates against one
`goodput sim --fixed` process on loopback (TTFT 20 ms, ITL 5 ms, 32 in / 16 out tokens), 6 s per
run after 1 s of warmup, one run per rate and layout. The four shards start together
(`--start-at` 3 s ahead) and are merged with `goodput merge`; a layout keeps up at a rate when
the (merged) dispatch lag p99 is below 1 ms, nothing failed and the realised arrival rate is
within 2 % of the asked one — the criterion of docs/performance.md. Usage:

  GOODPUT_BIN=target/release/goodput python3 bench/shards.py [RATE ...] > result.json
"""

import json
import os
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import GOODPUT, Sim, loadavg  # noqa: E402

LOAD = ["--arrival", "constant", "--duration", "6s", "--warmup", "1s", "--input-tokens", "32",
        "--output-tokens", "16", "--slo", "none", "--quiet", "--seed", "5"]


def summarize(report, rate):
    step = report["steps"][0]
    lag = report["client"]["dispatch_lag_ms"]
    offered = step["throughput"]["offered_requests_per_sec"] or 0
    ok = (lag["p99"] is not None and lag["p99"] < 1.0 and step["requests"]["failed"] == 0
          and offered >= 0.98 * rate)
    row = {"lag_p50_ms": lag["p50"], "lag_p99_ms": lag["p99"], "offered_per_sec": offered,
           "failed": step["requests"]["failed"], "keeps_up": ok}
    shards = report.get("shards")
    if shards:
        row["shard_lag_p99_ms"] = [s["client"]["dispatch_lag_ms"]["p99"] for s in shards["shards"]]
        row["shard_cpu"] = [s["client"]["cpu_utilization"] for s in shards["shards"]]
    else:
        row["cpu"] = report["client"]["cpu_utilization"]
    return row


def one(sim, rate):
    out = subprocess.run([GOODPUT, "run", "--target", sim.url, "--json", "--rate", str(rate)]
                         + LOAD, capture_output=True, check=True)
    return summarize(json.loads(out.stdout), rate)


def four(sim, rate, work):
    start = f"{time.time() + 3:.3f}"
    dirs = [os.path.join(work, f"{rate}-shard-{k}") for k in range(4)]
    procs = [subprocess.Popen([GOODPUT, "run", "--target", sim.url, "--rate", str(rate),
                               "--shards", "4", "--shard-index", str(k), "--start-at", start,
                               "--out", d] + LOAD, stdout=subprocess.DEVNULL)
             for k, d in enumerate(dirs)]
    for proc in procs:
        proc.wait()
    out = subprocess.run([GOODPUT, "merge", "--json", "--out", os.path.join(work, f"{rate}-m")]
                         + dirs, capture_output=True)
    return summarize(json.loads(out.stdout), rate)


def main():
    rates = [int(r) for r in sys.argv[1:]] or [1000, 2000, 3000, 4000]
    rows = []
    with tempfile.TemporaryDirectory() as work, Sim(20, 5) as sim:
        for rate in rates:
            for layout, measure in (("1 process", lambda: one(sim, rate)),
                                    ("4 shards", lambda: four(sim, rate, work))):
                load = loadavg()
                row = {"rate_per_sec": rate, "layout": layout, "load_before": load, **measure()}
                print(json.dumps(row), file=sys.stderr, flush=True)
                rows.append(row)
    json.dump({"measured_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
               "cores": os.cpu_count(), "rows": rows}, sys.stdout, indent=1)


if __name__ == "__main__":
    main()
