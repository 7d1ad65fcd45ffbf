// goodput page renderer, part 3: the sections other parts of goodput add to a report
// (capacity search, sweep, repeated runs, buckets, turns and image resolutions, models, adapters,
// targets, replicas and SLO classes, server metrics, utilisation, the rest), the run metadata, and the report page
// itself.

function capacitySection(report) {
  var c = report.capacity;
  var box = section("Capacity", "capacity", "The highest load at which the queue stayed stable and the SLO held, found by probing loads; each probe below passed or failed.");
  var unit = c.dimension === "rate" ? " req/s" : " in flight";
  var load = function (v) { return isNum(v) ? fmt(v) + unit : "–"; };
  var verdict = !isNum(c.lower_bound)
    ? "No load passed" + (isNum(c.upper_bound) ? " (the lowest probed, " + load(c.upper_bound) + ", failed)" : "")
    : "Highest sustainable load: " + load(c.lower_bound) + (isNum(c.upper_bound) ? "; fails at " + load(c.upper_bound) : " (the highest probed)");
  box.appendChild(h("p", { "class": "verdict" }, [verdict + " — search " + words(c.conclusion) + "."]));
  box.appendChild(h("p", {}, ["SLO " + c.slo + ": " + pct(c.attainment_target, 1) + " of requests within every threshold, each verdict at " +
    pct(c.confidence, 0) + " confidence, " + c.requests_per_probe + " measured requests per probe at most (each ends once its targets are decided)."]));
  cards(box, [
    { label: "goodput at capacity", value: fmt(c.goodput_at_capacity_per_sec, 2) + " req/s", has: c.goodput_at_capacity_per_sec },
    { label: "DistServe goodput", value: fmt(c.distserve_goodput_per_sec, 2) + " req/s", has: c.distserve_goodput_per_sec },
    { label: "accelerators", value: fmt(c.accelerators), has: c.accelerators },
    { label: "capacity per accelerator", value: fmt(c.per_accelerator, 2) + unit, has: c.per_accelerator }
  ].filter(function (card) { return isNum(card.has); }));
  var probes = c.probes || [];
  var points = function (outcome) {
    return probes.filter(function (p) { return (p.outcome === "pass") === outcome; })
      .map(function (p) { return [p.load, p.goodput_requests_per_sec, "probe " + (p.index + 1) + ": " + p.outcome + (p.reason ? " — " + p.reason : "")]; });
  };
  var grid = h("div", { "class": "grid" });
  box.appendChild(grid);
  chart(grid, { title: "Probes on the load axis", x: c.dimension === "rate" ? "offered load (req/s)" : "concurrency", y: "good requests/s",
    markers: isNum(c.lower_bound) ? [{ x: c.lower_bound, label: "capacity" }] : [], series: [
      { name: "pass", mode: "points", color: "#2b8a3e", points: points(true) },
      { name: "fail", mode: "points", color: "#c62828", points: points(false) }] });
  box.appendChild(table(["probe", "load", "outcome", "req/s", "good req/s", "stable", "decided after", "fixed-sample minimum", "reason"],
    probes.map(function (p) {
      return [p.index + 1, p.load, h("span", { "class": p.outcome === "pass" ? "pass" : "fail" }, [words(p.outcome)]), p.requests_per_sec,
        p.goodput_requests_per_sec, p.stable ? "yes" : "no", isNum(p.decided_after) ? p.decided_after : "–",
        isNum(p.fixed_sample_minimum) ? p.fixed_sample_minimum : "–", p.reason || "–"];
    }), [8], [3, 5]));
}

function sweepSection(report) {
  var sw = report.sweep;
  var box = section("Sweep", "sweep", "One measured step per load level; the knee is where throughput stops growing while latency keeps rising.");
  var means = sw.repeats ? " (on the levels' means across " + sw.repeats + " runs)" : "";
  var knee = sw.knee
    ? "Knee at " + (sw.repeats ? "level " : "step ") + (sw.knee.step + 1) + " (" + sw.dimension + " " + fmt(sw.knee.load) + "): the next level added " +
      pct(sw.knee.next_throughput_gain) + " throughput and " + pct(sw.knee.next_latency_rise) + " E2E p50" + means + "."
    : "No knee: every level raised throughput by at least " + pct(sw.knee_min_gain, 0) + " (or latency did not rise).";
  box.appendChild(h("p", { "class": "verdict" }, [knee]));
  box.appendChild(h("p", {}, ["Levels (" + sw.dimension + "): " + (sw.loads || []).map(function (v) { return fmt(v); }).join(", ")]));
}

// --repeats: a figure's mean with the half-width of its confidence interval.
function meanCell(f) {
  if (!f) return "–";
  var d = Math.abs(f.mean) >= 100 ? 1 : 2;
  return fmt(f.mean, d) + (isNum(f.ci_high) ? " ± " + fmt(f.ci_high - f.mean, d) : "");
}
function figureAt(figures, path) { return (figures || []).filter(function (f) { return f.path === path; })[0]; }
// A repeated sweep's figure at `path` per level: the means and both ends of their intervals.
function levelsChart(grid, levels, dimension, path, y) {
  var at = function (key) {
    return levels.map(function (l) { var f = figureAt(l.figures, path); return [l.load, f ? f[key] : null, f ? meanCell(f) : ""]; });
  };
  chart(grid, { title: y + " per level across runs", x: dimension, y: y, series: [
    { name: "mean", points: at("mean") },
    { name: "95 % interval, low", dash: "4 3", points: at("ci_low") },
    { name: "95 % interval, high", dash: "4 3", points: at("ci_high") }] });
}
function repeatsSection(report) {
  var r = report.repeats;
  var box = section("Across runs", "repeats", "Measured " + r.runs + " times: each figure's mean ± the half-width of its " + pct(r.confidence, 0) +
    " confidence interval (Student's t), so run-to-run noise is counted.");
  if (r.figures && r.figures.length) {
    box.appendChild(table(["figure", "mean ± interval", "unit", "sd", "cv", "range", "per run"], r.figures.map(function (f) {
      return [f.name, meanCell(f), f.unit, fmt(f.sd), pct(f.cv), fmt(f.min) + " – " + fmt(f.max), f.values.map(function (v) { return fmt(v); }).join(", ")];
    }), [0, 2, 6]));
  }
  if (r.levels) {
    var paths = [["throughput.requests_per_sec", "req/s"], ["throughput.output_tokens_per_sec", "out tok/s"], ["latency_ms.ttft.p99", "TTFT p99 ms"],
      ["latency_ms.tpot.p99", "TPOT p99 ms"], ["latency_ms.e2e.p50", "E2E p50 ms"], ["latency_ms.e2e.p99", "E2E p99 ms"]];
    box.appendChild(table(["load", "steps"].concat(paths.map(function (p) { return p[1]; })), r.levels.map(function (l) {
      return [fmt(l.load), l.steps.map(function (i) { return i + 1; }).join(", ")].concat(paths.map(function (p) { return meanCell(figureAt(l.figures, p[0])); }));
    }), [1]));
    var grid = h("div", { "class": "grid" });
    box.appendChild(grid);
    var dimension = (report.sweep || {}).dimension || "load";
    levelsChart(grid, r.levels, dimension, "throughput.requests_per_sec", "requests/s");
    levelsChart(grid, r.levels, dimension, "latency_ms.e2e.p50", "E2E p50 ms");
  }
  if (r.capacity) {
    var c = r.capacity;
    box.appendChild(h("p", { "class": "verdict" }, [c.conclusion.charAt(0).toUpperCase() + c.conclusion.slice(1) + "."]));
    box.appendChild(table(["search", "capacity", "fails at", "conclusion", "steps"], c.searches.map(function (se, i) {
      return [i + 1, fmt(se.lower_bound), fmt(se.upper_bound), words(se.conclusion), (se.first_step + 1) + " – " + (se.first_step + se.steps)];
    }), [3, 4]));
  }
}

// Buckets or turns: one row each with bars, so the slices compare at a glance.
function slicesTable(box, slices, nameOf) {
  var max = function (path) { return Math.max.apply(null, slices.map(function (b) { return get(b, path) || 0; }).concat([0])); };
  var maxRate = max("throughput.requests_per_sec"), maxP99 = max("latency_ms.e2e.p99"), maxTtft = max("latency_ms.ttft.p99");
  var opt = function (i) { return [1, 4, 5, 6].indexOf(i) >= 0 ? { "class": "opt" } : {}; };
  var head = h("tr", {}, ["slice", "completed", "req/s", "", "SLO met", "TTFT p99 ms", "", "E2E p99 ms", ""].map(function (x, i) { return h("th", opt(i), [x]); }));
  var rows = slices.map(function (b) {
    var rate = get(b, "throughput.requests_per_sec"), p99 = get(b, "latency_ms.e2e.p99"), ttft = get(b, "latency_ms.ttft.p99");
    var ttftBar = barCell(ttft, maxTtft, "TTFT p99 " + fmt(ttft, 1) + " ms");
    ttftBar.classList.add("opt");
    return h("tr", {}, [h("td", {}, [nameOf(b)]), h("td", opt(1), [fmt(get(b, "requests.completed"))]), h("td", {}, [fmt(rate, 2)]),
      barCell(rate, maxRate, fmt(rate, 2) + " req/s"), h("td", opt(4), [pct(get(b, "goodput.attained_fraction"))]),
      h("td", opt(5), [fmt(ttft, 1)]), ttftBar,
      h("td", {}, [fmt(p99, 1)]), barCell(p99, maxP99, "E2E p99 " + fmt(p99, 1) + " ms")]);
  });
  box.appendChild(h("div", { "class": "scroll" }, [h("table", {}, [h("thead", {}, [head]), h("tbody", {}, rows)])]));
}
function bucketsSection(st) {
  if (st.buckets && st.buckets.length) {
    var box = section("By prompt length", "buckets", "The step split by input length: whether long prompts are served as fast and as well as short ones.");
    slicesTable(box, st.buckets, function (b) {
      return b.name + " (" + fmt(b.min_input_tokens) + "–" + (isNum(b.max_input_tokens) ? fmt(b.max_input_tokens) : "∞") + " tokens)";
    });
  }
  if (st.turns && st.turns.length) {
    var turns = section("By conversation turn", "turns", "Multi-turn sessions split by turn: whether later turns (longer histories) slow down.");
    slicesTable(turns, st.turns, function (t) { return "turn " + t.turn + (t.and_later ? " and later" : ""); });
  }
  if (st.image_buckets && st.image_buckets.length) {
    var images = section("By image resolution", "images", "Vision prompts split by the sizes of the images a request carried (a mix of sizes is its own bucket): whether bigger images slow the answer.");
    slicesTable(images, st.image_buckets, function (b) {
      return b.resolution + " (" + fmt(b.images) + " images, " + fmt(b.images_per_sec, 2) + " images/s)";
    });
  }
  if (st.image_settings && st.image_settings.length) {
    var settings = section("By image size and steps", "image-settings", "Image generation split by the size and denoising steps each request asked for (--image-size, --image-steps): the latency per image is E2E divided by the images a request returned.");
    slicesTable(settings, st.image_settings, function (g) {
      var perImage = get(g, "latency_ms.e2e_per_item.p50");
      return (g.size || "server's size") + ", " + (isNum(g.steps) ? fmt(g.steps) + " steps" : "server's steps") + " (" + fmt(g.images) + " images, " +
        fmt(get(g, "throughput.items_per_sec"), 2) + " images/s, " + fmt(perImage, 1) + " ms an image p50)";
    });
  }
}

// Per model, adapter and SLO class of a mix (each class's goodput under its own SLO).
function labelsSection(st) {
  if (st.models && st.models.length) {
    var models = section("By model", "models", "A model mix split by model: what each model got of the load and how fast it answered.");
    slicesTable(models, st.models, function (m) { return m.name; });
  }
  if (st.adapters && st.adapters.length) {
    var adapters = section("By adapter", "adapters", "An adapter mix split by LoRA adapter (base: the requests sent to the base model).");
    slicesTable(adapters, st.adapters, function (a) { return a.name; });
  }
  if (st.targets && st.targets.length) {
    var targets = section("By target", "targets", "A fleet split by target: what each target was sent (by --route) and how fast it answered.");
    slicesTable(targets, st.targets, function (t) { return t.name; });
    var counted = st.targets.filter(function (t) { return t.server; });
    if (counted.length) {
      var count = function (v) { return isNum(v) ? fmt(v) : "–"; };
      var head = h("tr", {}, ["target", "requests finished", "prompt tokens", "generated tokens", "metrics"].map(function (x) { return h("th", {}, [x]); }));
      var rows = counted.map(function (t) {
        var s = t.server;
        return h("tr", {}, [t.name, count(s.requests_finished), count(s.prompt_tokens), count(s.generation_tokens), s.problem || s.metrics_url].map(function (x) { return h("td", {}, [x]); }));
      });
      targets.appendChild(h("p", {}, ["Each target's own /metrics over the step (scraped right before it and right after): what the replica says it served, beside what was sent to it."]));
      targets.appendChild(h("div", { "class": "scroll" }, [h("table", {}, [h("thead", {}, [head]), h("tbody", {}, rows)])]));
    }
  }
  if (st.replicas && st.replicas.length) {
    var replicas = section("By replica", "replicas", "Requests split by the replica that served them, as the response header --replica-header named it: whether the router balances.");
    slicesTable(replicas, st.replicas, function (r) { return r.name; });
  }
  if (st.classes && st.classes.length) {
    var classes = section("By SLO class", "classes", "Traffic classes, each judged against its own SLO: SLO met is the class's goodput.");
    slicesTable(classes, st.classes, function (c) { return c.name + " (" + (c.slo || "the run's SLO") + ")"; });
  }
}

function serverSection(report, st) {
  var sv = st.server, m = sv.measurement || {}, a = sv.agreement || {};
  var box = section("Server side", "server", "What the server's own /metrics said during the measured window (" + (sv.flavour || "unrecognised") + ", " +
    fmt(sv.scrapes) + " scrapes every " + fmt(sv.interval_ms) + " ms), aligned with the client's windows.");
  cards(box, [
    { label: "generated tokens", value: fmt(m.generation_tokens_per_sec, 1) + " tok/s", note: "server ÷ client tokens ×" + fmt(a.output_ratio, 3) },
    { label: "prompt tokens", value: fmt(m.prompt_tokens_per_sec, 1) + " tok/s", note: "server ÷ client tokens ×" + fmt(a.input_ratio, 3) },
    { label: "finished requests", value: fmt(m.requests_finished_per_sec, 2) + " req/s" },
    { label: "KV cache usage", value: pct(get(m, "kv_cache_usage.max"), 0), note: "max; mean " + pct(get(m, "kv_cache_usage.mean"), 0) },
    { label: "preemptions", value: fmt(m.preemptions) },
    { label: "prefix-cache hit rate", value: pct(m.prefix_cache_hit_rate) }]);
  if (m.disaggregation) {
    var d = m.disaggregation, gauge = function (g) { return g && g.samples ? fmt(g.mean, 2) + " (max " + fmt(g.max) + ")" : "–"; };
    var t = d.kv_transfer_ms || {};
    cards(box, [
      { label: "prefill: waiting KV room", value: gauge(d.prefill_prealloc_queue), note: "mean requests (SGLang prealloc queue)" },
      { label: "prefill: KV in transfer", value: gauge(d.prefill_inflight_queue), note: "mean requests (inflight queue)" },
      { label: "decode: waiting KV room", value: gauge(d.decode_prealloc_queue), note: "mean requests (prealloc queue)" },
      { label: "decode: awaiting KV", value: gauge(d.decode_transfer_queue), note: "mean requests (transfer queue)" },
      { label: "KV transfer", value: isNum(t.mean) ? fmt(t.mean, 2) + " ms" : gauge(d.kv_transfer_latency_ms), note: isNum(t.count) ? fmt(t.count) + " transfers (NIXL), mean" : "latency gauge" },
      { label: "KV transfers failed", value: fmt(d.kv_transfer_failures) }]);
  }
  var width = (report.run && report.run.window_secs) || 1;
  var windows = st.windows || [], series = sv.series || [], domain = span(windows, width);
  var pick = function (list, key, scale) { return list.map(function (w) { return [w.start_secs, isNum(w[key]) ? w[key] * (scale || 1) : null]; }); };
  var grid = h("div", { "class": "grid" });
  box.appendChild(grid);
  chart(grid, { title: "Queue: server vs client", x: "run time (s)", y: "requests", xDomain: domain, series: [
    { name: "server running", points: pick(series, "running") }, { name: "server waiting", points: pick(series, "waiting") },
    { name: "client in flight", points: pick(windows, "in_flight"), dash: "5 3", color: COLORS[4] }], dropEmpty: true });
  if (series.some(function (w) { return isNum(w.kv_cache_usage); })) {
    chart(grid, { title: "KV cache usage", x: "run time (s)", y: "% of KV blocks", xDomain: domain, series: [
      { name: "KV usage %", points: pick(series, "kv_cache_usage", 100), color: COLORS[3] }] });
  }
  if (series.some(function (w) { return isNum(w.preemptions) && w.preemptions > 0; })) {
    chart(grid, { title: "Preemptions per window", x: "run time (s)", y: "preemptions", xDomain: domain, series: [
      { name: "preemptions", points: pick(series, "preemptions"), color: COLORS[1], mode: "both" }] });
  }
  var range = function (q) { return q ? fmt(q.above_ms) + "–" + fmt(q.at_most_ms) : "–"; };
  var lat = m.latency_ms || {};
  var rows = [["ttft", "TTFT"], ["itl", "ITL"], ["e2e", "E2E"], ["queue", "queue wait"]].filter(function (n) { return lat[n[0]] && isNum(lat[n[0]].count); })
    .map(function (n) { var x = lat[n[0]]; return [n[1], x.count, x.mean, range(x.p50), range(x.p90), range(x.p99)]; });
  if (rows.length) {
    box.appendChild(h("h3", {}, ["Server latency histograms (ms; percentiles lie within the bucket shown)"]));
    box.appendChild(table(["metric", "count", "mean", "p50", "p90", "p99"], rows));
  }
}

function figureValue(f) {
  var v = f.value;
  if (!isNum(v)) return "–";
  if (f.unit === "fraction") return pct(v);
  if (f.unit === "bytes") {
    var scale = [[1e12, "TB"], [1e9, "GB"], [1e6, "MB"], [1e3, "kB"], [1, "B"]].find(function (u) { return Math.abs(v) >= u[0]; }) || [1, "B"];
    return fmt(v / scale[0], 2) + " " + scale[1];
  }
  return fmt(v) + " " + f.unit;
}
function utilisationSection(st) {
  var u = st.utilisation;
  var box = section("Utilisation", "utilisation", u.model + " on " + u.accelerators + " × " + u.accelerator + " (tensor parallel " + u.tensor_parallel +
    ", " + u.replicas + " replica" + (u.replicas === 1 ? "" : "s") + "): derived figures; hover one for its formula and inputs.");
  var list = Object.keys(u).filter(function (k) { return isPlainObject(u[k]) && "value" in u[k]; }).map(function (k) {
    var f = u[k];
    var inputs = Object.keys(f.inputs || {}).map(function (i) { return i + " = " + fmt(f.inputs[i]); }).join(", ");
    return { label: words(k), value: figureValue(f), title: f.formula + (inputs ? "\nwith " + inputs : "") };
  });
  cards(box, list);
}

function figuresSection(title, id, what, value) {
  section(title, id, what).appendChild(flatTable(value));
}
function otherSections(report, st) {
  var known = { speculative_decoding: ["Speculative decoding", "Draft tokens proposed and accepted, and what they saved."],
    cost: ["Cost and energy", "What the measured throughput costs per token and request at the given prices."],
    workload_stats: ["Workload as sent", "The lengths the workload actually produced in this step."] };
  channelSections(st);
  Object.keys(known).forEach(function (k) {
    if (st[k] !== null && st[k] !== undefined) figuresSection(known[k][0], k.replace(/_/g, "-"), known[k][1], st[k]);
  });
  if (report.client) {
    var c = report.client;
    var box = section("Client overhead", "client", "Whether the benchmarking client itself kept up: how late it sent requests and how busy its CPU was.");
    cards(box, [
      { label: "dispatch lag p99", value: fmt(get(c, "dispatch_lag_ms.p99"), 3) + " ms", note: "max " + fmt(get(c, "dispatch_lag_ms.max"), 3) + " ms" },
      { label: "client CPU", value: pct(c.cpu_utilization, 0), note: fmt(c.cpu_secs, 1) + " CPU s on " + c.cores + " cores" + (c.includes_simulator ? ", simulator included" : "") + (c.cpu_ms_per_1000_chunks == null ? "" : ", " + fmt(c.cpu_ms_per_1000_chunks, 1) + " ms per 1,000 chunks") },
      { label: "verdict", value: c.trustworthy ? "trustworthy" : "NOT trustworthy", cls: c.trustworthy ? "pass" : "fail", note: c.reason || "the client was not the bottleneck" }]);
  }
  var skip = ["schema_version", "tool", "run", "steps", "warnings", "capacity", "sweep", "repeats", "client", "tune"];
  Object.keys(report).forEach(function (k) {
    if (skip.indexOf(k) < 0 && report[k] !== null) figuresSection(words(k), "extra-" + k, "A section this page has no dedicated view for, as figures.", report[k]);
  });
}

function metadata(report) {
  var box = section("Run metadata", "metadata", "How the run was made: command line, target, workload, tags and both hosts, to reproduce it.");
  var run = report.run || {};
  var rows = [["tool", (report.tool || {}).name + " " + (report.tool || {}).version], ["git SHA", (report.tool || {}).git_sha],
    ["command line", (run.command_line || []).join(" ")], ["started", run.started_at], ["seed", isNum(run.seed) ? String(run.seed) : run.seed],
    ["target", run.target], ["API", run.api], ["model", run.model], ["streamed", run.stream], ["SLO", run.slo || "none"],
    ["window", run.window_secs + " s"], ["end reason", words(run.end_reason || "–")]];
  box.appendChild(table(["field", "value"], rows, [1]));
  [["Workload", run.workload], ["Tags", run.tags], ["Client host", run.client_host], ["Server", run.server_info]].forEach(function (part) {
    box.appendChild(h("h3", {}, [part[0]]));
    box.appendChild(part[1] && Object.keys(part[1]).length ? flatTable(part[1]) : h("p", { "class": "empty" }, [part[0] === "Tags" ? "no tags (--tag key=value)" : "not recorded"]));
  });
}

function reportPage(report) {
  if (report.tune) { tunePage(report); return; }
  header(report, "goodput report");
  if (!report.steps || !report.steps.length) { section("No steps", "summary", "The run measured nothing."); return; }
  var index = featuredStep(report), st = report.steps[index], many = report.steps.length > 1;
  glance(report, index);
  warnings(report.warnings);
  if (report.capacity) capacitySection(report);
  if (report.sweep) sweepSection(report);
  if (report.repeats) repeatsSection(report);
  if (many) { stepsTable(report); curveCharts(report); }
  var dist = section("Latency distributions", "distributions", "Each curve shows which fraction of requests finished within a given time (further left is faster)" +
    (many ? "; one curve per step." : "."));
  cdfCharts(dist, [{ report: report, label: "" }]);
  timeSeries(report, index);
  latencyTable(st);
  labelsSection(st);
  bucketsSection(st);
  if (st.server) serverSection(report, st);
  if (st.utilisation) utilisationSection(st);
  otherSections(report, st);
  metadata(report);
}

function main() {
  var status = document.getElementById("render-status");
  try {
    var data = JSON.parse(document.getElementById("goodput-data").textContent);
    navBar(data.nav);
    if (data.mode === "compare") comparePage(data);
    else if (data.mode === "runs") runsPage(data.page);
    else if (data.mode === "trend") trendPage(data.page);
    else reportPage(data.report);
    Array.prototype.forEach.call(document.querySelectorAll(".grid"), function (grid) {
      if (!grid.children.length) grid.parentNode.replaceChild(h("p", { "class": "empty" }, ["The report has no data for these charts."]), grid);
    });
    status.textContent = "charts drawn: " + stats.drawn + ", with data: " + stats.withData;
  } catch (e) {
    status.textContent = "render error: " + e;
    status.setAttribute("data-error", String(e));
  }
  status.setAttribute("data-charts", String(stats.drawn));
  status.setAttribute("data-charts-with-data", String(stats.withData));
  status.setAttribute("data-charts-without-data", String(stats.skipped));
}
