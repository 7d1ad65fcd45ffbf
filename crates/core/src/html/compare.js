// goodput page renderer, part 4: the comparison page. Runs overlaid (CDFs, time series), each
// candidate's verdict and headline figures with deltas and significance first, every figure
// behind a disclosure.

function pValue(p) { return isNum(p) ? (p < 1e-4 ? "< 0.0001" : fmt(p, 4)) : "–"; }

function headlineTable(box, labels, c) {
  var hl = c.headline;
  box.appendChild(h("p", { "class": "verdict " + hl.verdict.replace(/ /g, "-") }, [labels[1] + " against " + labels[0] + ": " + hl.verdict + ". " + hl.summary]));
  var rows = hl.figures.map(function (f) {
    var value = function (v, t) { return t || (isNum(v) ? fmt(v) : "–"); };
    var cls = f.verdict === "worse" ? "worse" : f.verdict === "better" ? "better" : "";
    var verdict = f.verdict === "no significant change" ? "not significant" : f.verdict;
    return [f.name + (f.unit ? " (" + f.unit + ")" : ""), value(f.a, f.a_text), value(f.b, f.b_text), isNum(f.delta) ? (f.delta >= 0 ? "+" : "−") + fmt(Math.abs(f.delta)) : "–",
      h("span", { "class": cls }, [signedPct(f.relative)]), pValue(f.p_value), h("span", { "class": cls, title: f.test + (isNum(f.p_value) ? ", p = " + pValue(f.p_value) : "") }, [verdict])];
  });
  box.appendChild(table(["figure", labels[0], labels[1], "Δ", "Δ %", "p-value", "verdict"], rows, [6], [3, 5]));
  box.appendChild(h("p", { "class": "what" }, ["Significant = two-sided p < " + c.thresholds.alpha + " and a change of at least " +
    pct(c.thresholds.min_effect, 0) + ". Latency rows carry their distribution's test; throughput and goodput a Poisson rate test; errors a two-proportion test. Hover a verdict for its test. Step " +
    (hl.step + 1) + "."]));
}

function distributionTests(box, labels, c) {
  box.appendChild(table(["step", "metric", "test", "n " + labels[0], "n " + labels[1], "median " + labels[0] + " ms", "median " + labels[1] + " ms", "shift", "p-value", "verdict"],
    c.distributions.map(function (d) {
      var t = d.test;
      var cls = d.verdict === "regression" ? "worse" : d.verdict === "improvement" ? "better" : "";
      return [d.step + 1, d.metric.toUpperCase(), t.method === "mann_whitney" ? "Mann-Whitney U (journals)" : "bootstrap (quantile points)",
        t.n_a, t.n_b, t.median_a, t.median_b, signedPct(t.relative_shift), pValue(t.p_value), h("span", { "class": cls }, [d.verdict])];
    }), [2, 9], [2, 3, 4, 8]));
}

function everyFigure(box, labels, c) {
  var details = h("details", {}, [h("summary", {}, ["Every figure of both reports (" + c.metrics.length + ")"])]);
  box.appendChild(details);
  details.appendChild(table(["figure", labels[0], labels[1], "Δ", "Δ %", "unit"], c.metrics.map(function (m) {
    var cls = "";
    if (isNum(m.relative) && m.lower_is_better !== null && Math.abs(m.relative) > 1e-9) cls = (m.relative < 0) === m.lower_is_better ? "better" : "worse";
    return [m.path.replace(/_/g, " "), m.a, m.b, m.delta, h("span", { "class": cls }, [signedPct(m.relative)]), m.unit];
  }), [], [3, 5]));
}

function overlaidSeries(runs, step) {
  var box = section("Over time", "timeseries", "Each run's step " + (step + 1) + " window by window on the same axes (the baseline solid, candidates dashed): completions, requests in flight and output tokens per second.");
  var grid = h("div", { "class": "grid" });
  box.appendChild(grid);
  [["completions", "Completions per window", "requests", 1], ["in_flight", "Requests in flight", "requests", 1], ["output_tokens", "Output tokens per second", "tokens/s", 0]].forEach(function (m) {
    chart(grid, { title: m[1], x: "run time (s)", y: m[2], series: runs.map(function (r, k) {
      var width = (r.report.run && r.report.run.window_secs) || 1;
      return { name: r.label, color: COLORS[k % COLORS.length], dash: k ? "6 3" : "",
        points: windowsOf(r.report, step).map(function (w) { return [w.start_secs, isNum(w[m[0]]) ? (m[3] ? w[m[0]] : w[m[0]] / width) : null]; }) };
    }) });
  });
}

function overlaidSteps(runs) {
  if (runs.every(function (r) { return r.report.steps.length < 2; })) return;
  var box = section("Across load steps", "curves", "Throughput and latency of every step of every run against the load.");
  var grid = h("div", { "class": "grid" });
  box.appendChild(grid);
  var series = function (path) {
    return runs.map(function (r, k) {
      return { name: r.label, mode: "both", color: COLORS[k % COLORS.length], dash: k ? "6 3" : "",
        points: r.report.steps.map(function (st, i) { return [loadValue(st), get(st, path), "step " + (i + 1)]; }).sort(function (a, b) { return a[0] - b[0]; }) };
    });
  };
  chart(grid, { title: "Goodput vs load", x: "load", y: "good requests/s", series: series("goodput.requests_per_sec") });
  chart(grid, { title: "E2E p99 vs load", x: "load", y: "ms", series: series("latency_ms.e2e.p99") });
}

function runsTable(runs) {
  var box = section("Runs", "metadata", "How each run was made: when, against what, with which workload, tags and hosts.");
  var flat = runs.map(function (r) {
    var rows = {};
    flatRows({ started: r.report.run.started_at, target: r.report.run.target, model: r.report.run.model, seed: String(r.report.run.seed),
      SLO: r.report.run.slo || "none", version: (r.report.tool || {}).version, "git SHA": (r.report.tool || {}).git_sha,
      workload: r.report.run.workload, tags: r.report.run.tags, "client host": r.report.run.client_host }, "").forEach(function (row) { rows[row[0]] = row[1]; });
    return rows;
  });
  var keys = [];
  flat.forEach(function (rows) { Object.keys(rows).forEach(function (k) { if (keys.indexOf(k) < 0) keys.push(k); }); });
  box.appendChild(table(["field"].concat(runs.map(function (r) { return r.label; })), keys.map(function (k) {
    return [k].concat(flat.map(function (rows) { return rows[k] === undefined ? "–" : rows[k]; }));
  }), runs.map(function (_, i) { return i + 1; })));
}

function comparePage(data) {
  var runs = data.runs, comparisons = data.comparisons;
  var labels = runs.map(function (r) { return r.label; });
  header(runs[runs.length - 1].report, "goodput comparison: " + labels.slice(1).join(", ") + " vs " + labels[0]);
  var verdicts = section("Verdict", "summary", "Each candidate against the baseline " + labels[0] + ": the headline figures with their change and whether it is significant.");
  comparisons.forEach(function (pair) {
    if (comparisons.length > 1) verdicts.appendChild(h("h3", {}, [labels[pair.candidate] + " vs " + labels[0]]));
    headlineTable(verdicts, [labels[0], labels[pair.candidate]], pair.comparison);
  });
  var conditions = [];
  comparisons.forEach(function (pair) { (pair.comparison.warnings || []).forEach(function (w) { conditions.push(Object.assign({}, w, { message: labels[pair.candidate] + ": " + w.message })); }); });
  warnings(conditions, "Conditions", "Same workload, load, API, SLO and client: the runs are comparable.");
  var step = comparisons.length ? comparisons[0].comparison.headline.step : 0;
  var dist = section("Latency distributions", "distributions", "Each run's step " + (step + 1) + " as a CDF on the same axes (further left is faster; the baseline solid, candidates dashed).");
  cdfCharts(dist, runs.map(function (r) { return { report: r.report, label: r.label, steps: [Math.min(step, r.report.steps.length - 1)] }; }));
  overlaidSeries(runs, step);
  overlaidSteps(runs);
  var tests = section("Distribution tests", "significance", "Whether each latency distribution moved: the test used, both medians, the shift and its p-value.");
  var all = section("Every figure", "metrics", "Every number of the reports side by side, for the curious; collapsed.");
  comparisons.forEach(function (pair) {
    var pl = [labels[0], labels[pair.candidate]];
    if (comparisons.length > 1) { tests.appendChild(h("h3", {}, [pl[1] + " vs " + pl[0]])); all.appendChild(h("h3", {}, [pl[1] + " vs " + pl[0]])); }
    distributionTests(tests, pl, pair.comparison);
    everyFigure(all, pl, pair.comparison);
  });
  runsTable(runs);
}
