// goodput page renderer, part 2: the report page. Every section has a title, one sentence
// saying what it shows, and a table or chart chosen for it; charts that need several load
// steps appear only when there are several.

function loadLabel(load) {
  if (!load) return "–";
  if (load.mode === "closed") return "closed loop, concurrency " + load.concurrency;
  if (load.phases) return "open loop, phases: " + load.phases.map(function (p) { return p.name + " " + fmt(p.rate_per_sec) + " req/s"; }).join(" → ");
  if (isNum(load.rate_per_sec)) {
    return "open loop, " + (load.arrival || "poisson") + " " + fmt(load.rate_per_sec) + " req/s" +
      (load.max_concurrency ? ", cap " + load.max_concurrency : "");
  }
  return words(load.mode || "unknown load");
}
function loadValue(step) {
  var l = step.load || {};
  if (l.mode === "closed") return l.concurrency;
  var offered = get(step, "throughput.offered_requests_per_sec");
  return isNum(offered) ? offered : l.rate_per_sec;
}
// The step a multi-step page details: the knee, the passing probe at capacity, or the last.
function featuredStep(report) {
  var steps = report.steps.length;
  if (report.sweep && report.sweep.knee) return report.sweep.knee.step;
  var c = report.capacity;
  if (c && isNum(c.lower_bound)) {
    var i = (c.probes || []).findIndex(function (p) { return p.load === c.lower_bound && p.outcome === "pass"; });
    var at = i >= 0 ? (c.first_probe_step || 0) + i : -1;
    if (at >= 0 && at < steps) return at;
  }
  return steps - 1;
}
function errorRate(st) {
  var r = st.requests || {};
  var n = (r.completed || 0) + (r.failed || 0);
  return n ? r.failed / n : null;
}
function stabilityWord(st) {
  var v = get(st, "stability.verdict");
  return v ? words(v) : (get(st, "stability.stable") ? "stable" : "unknown");
}

function header(report, title) {
  var run = report.run || {};
  var top = document.getElementById("content");
  top.appendChild(h("h1", {}, [title]));
  var tool = report.tool ? report.tool.name + " " + report.tool.version + (report.tool.git_sha ? " (" + report.tool.git_sha + ")" : "") : "";
  top.appendChild(h("p", { "class": "sub" }, [[tool, run.target, "model " + (run.model || "?"), (run.api || "") + " API",
    "started " + (run.started_at || "?"), "ended: " + words(run.end_reason || "?")].join(" · ")]));
}

function warnings(list, title, none) {
  var box = section(title || "Warnings", "warnings", "What in the run undermines its numbers, and how to fix it.");
  if (!list || !list.length) { box.appendChild(h("p", { "class": "empty" }, [none || "None: nothing in the run undermines its numbers."])); return; }
  // One item per kind of warning: its first occurrence, the others (other steps) folded.
  var groups = [];
  list.forEach(function (w) {
    var g = groups.find(function (x) { return x[0].code === w.code; });
    if (g) g.push(w); else groups.push([w]);
  });
  box.appendChild(h("ul", { "class": "warnings" }, groups.map(function (g) {
    var w = g[0];
    var more = g.length > 1 ? h("details", {}, [h("summary", {}, [(g.length - 1) + " more like it"]),
      h("ul", {}, g.slice(1).map(function (x) { return h("li", {}, [x.message]); }))]) : null;
    return h("li", {}, [h("code", {}, [w.code]), " " + w.message + " ", h("span", { "class": "fix" }, ["→ " + w.fix]), more]);
  })));
}

function glance(report, index) {
  var st = report.steps[index], t = st.throughput || {}, g = st.goodput || {}, l = st.latency_ms || {};
  var many = report.steps.length > 1;
  var box = section("At a glance", "summary", many
    ? "Key figures of step " + (index + 1) + " of " + report.steps.length + " (" + loadLabel(st.load) + "); every step is in the table below."
    : "Key figures of the measured window: " + loadLabel(st.load) + ", " + fmt(st.duration_secs, 1) + " s measured.");
  var ms = function (x) { return isNum(x) ? fmt(x, 1) + " ms" : "–"; };
  cards(box, [
    { label: "throughput", value: fmt(t.requests_per_sec, 2) + " req/s", note: isNum(t.offered_requests_per_sec) ? "offered " + fmt(t.offered_requests_per_sec, 2) + " req/s" : "closed loop" },
    { label: "output tokens", value: fmt(t.output_tokens_per_sec, 1) + " tok/s", note: "input " + fmt(t.input_tokens_per_sec, 1) + " tok/s" },
    { label: "items", value: fmt(t.items_per_sec, 2) + " " + ((report.run && report.run.item_unit) || "items") + "/s", note: "E2E per item p50 " + ms(get(l, "e2e_per_item.p50")) },
    { label: "goodput", value: g.slo ? fmt(g.requests_per_sec, 2) + " req/s" : "no SLO", note: g.slo ? pct(g.attained_fraction) + " met SLO " + g.slo : "give --slo to measure it" },
    { label: "TTFT p50 / p99", value: ms(get(l, "ttft.p50")), note: "p99 " + ms(get(l, "ttft.p99")) },
    { label: "TPOT p50 / p99", value: ms(get(l, "tpot.p50")), note: "p99 " + ms(get(l, "tpot.p99")) },
    { label: "E2E p50 / p99", value: ms(get(l, "e2e.p50")), note: "p99 " + ms(get(l, "e2e.p99")) },
    { label: "errors", value: pct(errorRate(st)), note: fmt(get(st, "requests.failed")) + " of " + fmt((get(st, "requests.completed") || 0) + (get(st, "requests.failed") || 0)) + " requests", cls: get(st, "requests.failed") ? "fail" : "" },
    { label: "stability", value: stabilityWord(st), note: get(st, "stability.reason"), cls: get(st, "stability.stable") ? "pass" : "fail" }
  ]);
  var objectives = g.objectives || [];
  if (objectives.length) {
    box.appendChild(h("h3", {}, ["SLO " + g.slo + ": each objective"]));
    box.appendChild(table(["objective", "limit ms", "measured ms", "verdict"], objectives.map(function (o) {
      return [o.name, o.max_ms, o.measured_ms === null ? "∞ (failures)" : o.measured_ms,
        h("span", { "class": o.pass ? "pass" : "fail" }, [o.pass ? "PASS" : "FAIL"])];
    })));
  }
}

function stepsTable(report) {
  var box = section("Steps", "steps", "One row per load step: what was offered, what completed, the latency tails and whether the queue stayed stable.");
  box.appendChild(table(["step", "load", "req/s", "out tok/s", "goodput req/s", "SLO met", "TTFT p99 ms", "TPOT p99 ms", "E2E p99 ms", "failed", "queue"],
    report.steps.map(function (st, i) {
      var l = st.latency_ms || {};
      return [i + 1, loadLabel(st.load), get(st, "throughput.requests_per_sec"), get(st, "throughput.output_tokens_per_sec"),
        get(st, "goodput.requests_per_sec"), pct(get(st, "goodput.attained_fraction")), get(l, "ttft.p99"), get(l, "tpot.p99"),
        get(l, "e2e.p99"), get(st, "requests.failed"), stabilityWord(st)];
    }), [1], [3, 4, 7, 9]));
}

function latencyTable(st) {
  var box = section("Latency percentiles", "latency", "Milliseconds from the scheduled send (so client-side queueing counts), and from the actual send for comparison.");
  var names = [["ttft", "TTFT"], ["tpot", "TPOT"], ["itl", "ITL"], ["e2e", "E2E"], ["e2e_per_item", "E2E per item"], ["dispatch_lag", "dispatch lag"], ["client_queue_wait", "client queue"]];
  var rows = names.map(function (n) {
    var x = (st.latency_ms || {})[n[0]] || {};
    return [n[1], x.p50, x.p90, x.p99, x.p999, x.max, x.count];
  });
  ["ttft", "e2e"].forEach(function (k) {
    var x = (st.latency_from_send_ms || {})[k] || {};
    rows.push([k.toUpperCase() + " from send", x.p50, x.p90, x.p99, x.p999, x.max, x.count]);
  });
  box.appendChild(table(["metric", "p50", "p90", "p99", "p99.9", "max", "n"], rows, [], [4, 6]));
}

function cdfCharts(box, runs) {
  var grid = h("div", { "class": "grid" });
  box.appendChild(grid);
  [["ttft", "TTFT"], ["tpot", "TPOT"], ["e2e", "E2E"]].forEach(function (m) {
    var series = [];
    runs.forEach(function (r, k) {
      var steps = r.steps || r.report.steps.map(function (_, i) { return i; });
      steps.forEach(function (i, j) {
        var st = r.report.steps[i];
        var points = ((st.distributions_ms || {})[m[0]] || []).map(function (p) { return [p[1], p[0] / 100, "p" + fmt(p[0])]; });
        var name = runs.length > 1 ? r.label : (steps.length > 1 ? "step " + (i + 1) : m[1]);
        series.push({ name: name, points: points, color: COLORS[(runs.length > 1 ? k : j) % COLORS.length], dash: runs.length > 1 && k ? "6 3" : "" });
      });
    });
    chart(grid, { title: m[1] + " distribution (CDF)", x: m[1] + " (ms)", y: "fraction of requests ≤ x", series: series, xMin0: false, tipY: "fraction" });
  });
}

// The windows of a step (the last one when the report has fewer steps).
function windowsOf(report, step) {
  return report.steps.length ? report.steps[Math.min(step, report.steps.length - 1)].windows || [] : [];
}
function span(windows, width) {
  return windows.length ? [windows[0].start_secs, windows[windows.length - 1].start_secs + width] : null;
}

function timeSeries(report, index) {
  var many = report.steps.length > 1;
  var box = section("Over time", "timeseries", (many ? "Step " + (index + 1) + " window by window" : "The run window by window") +
    ": arrivals against completions, requests in flight, output tokens per second and latency, so a growing queue or a slowdown shows.");
  var grid = h("div", { "class": "grid" });
  box.appendChild(grid);
  var width = (report.run && report.run.window_secs) || 1;
  var windows = report.steps[index].windows || [], domain = span(windows, width);
  var pick = function (key, scale) { return windows.map(function (w) { return [w.start_secs, isNum(w[key]) ? w[key] * (scale || 1) : null]; }); };
  chart(grid, { title: "Requests per window (" + fmt(width) + " s)", x: "run time (s)", y: "requests", xDomain: domain, series: [
    { name: "arrivals", points: pick("arrivals") }, { name: "completions", points: pick("completions") },
    { name: "failures", points: pick("failures") }, { name: "in flight", points: pick("in_flight") }] });
  chart(grid, { title: "Output tokens per second", x: "run time (s)", y: "tokens/s", xDomain: domain, series: [
    { name: "output tok/s", points: pick("output_tokens", 1 / width) }] });
  var latency = [{ name: "mean TTFT", points: pick("mean_ttft_ms") }, { name: "mean E2E", points: pick("mean_e2e_ms") }];
  if (latency.some(function (se) { return cleanPoints(se.points).length; })) {
    chart(grid, { title: "Latency per window", x: "run time (s)", y: "ms", xDomain: domain, series: latency, dropEmpty: true });
  }
  if (windows.some(function (w) { return isNum(w.slo_attained); })) {
    chart(grid, { title: "SLO met per window", x: "run time (s)", y: "% of requests", xDomain: domain, series: [
      { name: "SLO met %", points: pick("slo_attained", 100), color: COLORS[2] }] });
  }
}

function curveCharts(report) {
  var box = section("Across load steps", "curves", "How throughput, goodput and latency respond as the load grows; the dashed line marks the knee or the capacity.");
  var grid = h("div", { "class": "grid" });
  box.appendChild(grid);
  var markers = [];
  if (report.sweep && report.sweep.knee) markers.push({ x: loadValue(report.steps[report.sweep.knee.step]), label: "knee" });
  if (report.capacity && isNum(report.capacity.lower_bound)) markers.push({ x: report.capacity.lower_bound, label: "capacity" });
  // Only steps on the featured step's load axis (a capacity search's closed-loop calibration
  // step has no place on a rate axis).
  var mode = get(report.steps[featuredStep(report)], "load.mode");
  var steps = [];
  report.steps.forEach(function (st, i) { if (get(st, "load.mode") === mode) steps.push([st, i]); });
  var xName = mode === "closed" ? "concurrency" : "offered load (req/s)";
  var at = function (path) { return steps.map(function (p) { return [loadValue(p[0]), get(p[0], path), "step " + (p[1] + 1)]; }).sort(function (a, b) { return a[0] - b[0]; }); };
  chart(grid, { title: "Goodput vs load", x: xName, y: "requests/s", markers: markers, series: [
    { name: "throughput", mode: "both", points: at("throughput.requests_per_sec") },
    { name: "goodput", mode: "both", points: at("goodput.requests_per_sec") }] });
  chart(grid, { title: "Latency vs load", x: xName, y: "ms", markers: markers, series: [
    ["ttft.p50", "TTFT p50"], ["ttft.p99", "TTFT p99"], ["e2e.p50", "E2E p50"], ["e2e.p99", "E2E p99"]].map(function (m) {
    return { name: m[1], mode: "both", points: at("latency_ms." + m[0]) };
  }) });
  chart(grid, { title: "Throughput vs latency", x: "completed requests/s", y: "E2E p99 (ms)", series: [
    { name: "E2E p99", mode: "both", points: steps.map(function (p) { return [get(p[0], "throughput.requests_per_sec"), get(p[0], "latency_ms.e2e.p99"), "step " + (p[1] + 1)]; })
      .sort(function (a, b) { return a[0] - b[0]; }) }] });
}
