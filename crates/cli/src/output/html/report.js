// goodput report renderer: reads the report embedded in #goodput-data and draws every table
// and chart as inline SVG. No network, no libraries. After drawing it records how many charts
// it drew and how many had data in #render-status (checked by the headless-browser test).
(function () {
  "use strict";
  var SVG = "http://www.w3.org/2000/svg";
  var COLORS = ["#2f6fdf", "#d9480f", "#2b8a3e", "#862e9c", "#e67700", "#0b7285", "#c2255c", "#5c940d"];
  var stats = { drawn: 0, withData: 0 };

  // ---- DOM helpers -------------------------------------------------------------------------
  function h(tag, attrs, children) {
    var node = document.createElement(tag);
    Object.keys(attrs || {}).forEach(function (k) { node.setAttribute(k, attrs[k]); });
    (children || []).forEach(function (c) {
      node.appendChild(typeof c === "string" ? document.createTextNode(c) : c);
    });
    return node;
  }
  function s(tag, attrs, parent) {
    var node = document.createElementNS(SVG, tag);
    Object.keys(attrs || {}).forEach(function (k) { node.setAttribute(k, attrs[k]); });
    if (parent) parent.appendChild(node);
    return node;
  }
  function text(parent, x, y, content, attrs) {
    var t = s("text", Object.assign({ x: x, y: y }, attrs || {}), parent);
    t.textContent = content;
    return t;
  }
  function fmt(v, digits) {
    if (v === null || v === undefined) return "–";
    if (typeof v === "boolean") return v ? "yes" : "no";
    if (typeof v !== "number") return String(v);
    if (digits === undefined) digits = Math.abs(v) >= 100 ? 1 : Math.abs(v) >= 1 ? 2 : 3;
    if (Number.isInteger(v) && Math.abs(v) < 1e15) return v.toLocaleString("en-US");
    return v.toLocaleString("en-US", { maximumFractionDigits: digits, minimumFractionDigits: 0 });
  }
  function table(headers, rows, textColumns) {
    var head = h("tr", {}, headers.map(function (x) { return h("th", {}, [x]); }));
    var body = rows.map(function (row) {
      return h("tr", {}, row.map(function (cell, i) {
        var attrs = (textColumns || []).indexOf(i) >= 0 ? { "class": "text" } : {};
        if (cell && cell.nodeType) return h("td", attrs, [cell]);
        return h("td", attrs, [typeof cell === "number" ? fmt(cell) : (cell === null || cell === undefined ? "–" : String(cell))]);
      }));
    });
    return h("table", {}, [h("thead", {}, [head]), h("tbody", {}, body)]);
  }
  function section(title, id) {
    var box = h("section", { id: id || "" }, [h("h2", {}, [title])]);
    document.getElementById("content").appendChild(box);
    return box;
  }
  function get(obj, path) {
    return path.split(".").reduce(function (o, k) { return o === null || o === undefined ? undefined : o[k]; }, obj);
  }
  function isPlainObject(v) { return v !== null && typeof v === "object" && !Array.isArray(v); }

  // Any JSON value as nested key/value tables (for sections this page does not know).
  function generic(value) {
    if (Array.isArray(value)) {
      if (value.length && value.every(isPlainObject)) {
        var keys = [];
        value.forEach(function (row) { Object.keys(row).forEach(function (k) { if (keys.indexOf(k) < 0) keys.push(k); }); });
        return table(keys, value.map(function (row) {
          return keys.map(function (k) { var v = row[k]; return isPlainObject(v) || Array.isArray(v) ? JSON.stringify(v) : v; });
        }), []);
      }
      return h("span", {}, [value.map(function (v) { return isPlainObject(v) ? JSON.stringify(v) : fmt(v); }).join(", ")]);
    }
    if (isPlainObject(value)) {
      return table(["field", "value"], Object.keys(value).map(function (k) {
        var v = value[k];
        return [k, isPlainObject(v) || Array.isArray(v) ? generic(v) : (typeof v === "number" ? fmt(v) : (v === null ? "–" : String(v)))];
      }), [1]);
    }
    return h("span", {}, [fmt(value)]);
  }

  // ---- charts ------------------------------------------------------------------------------
  function ticks(min, max, count) {
    if (!(max > min)) { max = min + 1; }
    var raw = (max - min) / count, mag = Math.pow(10, Math.floor(Math.log10(raw)));
    var step = [1, 2, 2.5, 5, 10].map(function (m) { return m * mag; }).find(function (v) { return v >= raw; });
    var out = [], start = Math.ceil(min / step) * step;
    for (var v = start; v <= max + step * 1e-9; v += step) out.push(Math.round(v / step) * step);
    return out;
  }

  // opts: {title, x, y, series: [{name, points: [[x, y]], mode: "line"|"points"|"both"}], xMin0, yMin0}
  function chart(parent, opts) {
    var W = 540, H = 300, L = 62, R = 14, T = 28, B = 46;
    var box = h("div", { "class": "chart-box" });
    parent.appendChild(box);
    var svg = s("svg", { "class": "chart", width: W, height: H, viewBox: "0 0 " + W + " " + H, role: "img" }, box);
    svg.setAttribute("data-title", opts.title);
    text(svg, L, 16, opts.title, { "class": "title" });
    var series = opts.series.map(function (se) {
      return Object.assign({}, se, { points: (se.points || []).filter(function (p) {
        return p && isFinite(p[0]) && isFinite(p[1]) && p[0] !== null && p[1] !== null;
      }) });
    });
    var all = [].concat.apply([], series.map(function (se) { return se.points; }));
    svg.setAttribute("data-points", String(all.length));
    stats.drawn += 1;
    if (!all.length) {
      text(svg, W / 2, H / 2, "no data", { "text-anchor": "middle", "class": "empty" });
      return svg;
    }
    stats.withData += 1;
    var xs = all.map(function (p) { return p[0]; }), ys = all.map(function (p) { return p[1]; });
    var x0 = opts.xMin0 === false ? Math.min.apply(null, xs) : Math.min(0, Math.min.apply(null, xs));
    var x1 = Math.max.apply(null, xs), y0 = opts.yMin0 === false ? Math.min.apply(null, ys) : Math.min(0, Math.min.apply(null, ys));
    var y1 = Math.max.apply(null, ys);
    if (x1 === x0) { x1 = x0 + (Math.abs(x0) || 1); if (opts.xMin0 === false) x0 = x0 - (Math.abs(x0) * 0.1 || 1); }
    if (y1 === y0) { y1 = y0 + (Math.abs(y0) || 1); }
    y1 = y1 * 1.05;
    var xt = ticks(x0, x1, 6), yt = ticks(y0, y1, 5);
    x0 = Math.min(x0, xt[0]); x1 = Math.max(x1, xt[xt.length - 1]);
    y0 = Math.min(y0, yt[0]); y1 = Math.max(y1, yt[yt.length - 1]);
    var sx = function (v) { return L + (v - x0) / (x1 - x0) * (W - L - R); };
    var sy = function (v) { return H - B - (v - y0) / (y1 - y0) * (H - T - B); };
    var axis = s("g", { "class": "axis" }, svg);
    yt.forEach(function (v) {
      s("line", { x1: L, x2: W - R, y1: sy(v), y2: sy(v), "class": "gridline" }, axis);
      text(axis, L - 6, sy(v) + 4, fmt(v), { "text-anchor": "end" });
    });
    xt.forEach(function (v) {
      s("line", { x1: sx(v), x2: sx(v), y1: H - B, y2: H - B + 4 }, axis);
      text(axis, sx(v), H - B + 16, fmt(v), { "text-anchor": "middle" });
    });
    s("line", { x1: L, x2: W - R, y1: H - B, y2: H - B }, axis);
    s("line", { x1: L, x2: L, y1: T, y2: H - B }, axis);
    text(svg, (L + W - R) / 2, H - 8, opts.x, { "text-anchor": "middle" });
    text(svg, 14, (T + H - B) / 2, opts.y, { "text-anchor": "middle", transform: "rotate(-90 14 " + (T + H - B) / 2 + ")" });
    series.forEach(function (se, i) {
      var color = se.color || COLORS[i % COLORS.length];
      var mode = se.mode || "line";
      if (se.points.length > 1 && mode !== "points") {
        var d = se.points.map(function (p, j) { return (j ? "L" : "M") + sx(p[0]).toFixed(1) + "," + sy(p[1]).toFixed(1); }).join("");
        s("path", { d: d, fill: "none", stroke: color, "stroke-width": 1.8, "stroke-dasharray": se.dash || "" }, svg);
      }
      if (mode !== "line" || se.points.length === 1) {
        se.points.forEach(function (p) {
          var c = s("circle", { cx: sx(p[0]), cy: sy(p[1]), r: 3.5, fill: color }, svg);
          s("title", {}, c).textContent = se.name + ": " + fmt(p[0]) + ", " + fmt(p[1]);
        });
      }
      var lx = L + 8 + (i % 3) * 160, ly = T + 6 + Math.floor(i / 3) * 14;
      s("rect", { x: lx, y: ly - 8, width: 10, height: 3, fill: color }, svg);
      text(svg, lx + 14, ly - 4, se.name);
    });
    return svg;
  }

  // ---- report pieces -----------------------------------------------------------------------
  function loadLabel(load) {
    if (!load) return "–";
    if (load.mode === "closed") return "closed loop, concurrency " + load.concurrency;
    if (load.rate_per_sec !== null && load.rate_per_sec !== undefined) {
      return "open loop, " + (load.arrival || "poisson") + " " + fmt(load.rate_per_sec) + " req/s" +
        (load.max_concurrency ? ", cap " + load.max_concurrency : "");
    }
    return load.mode || JSON.stringify(load);
  }
  function loadValue(step) {
    var l = step.load || {};
    if (l.mode === "closed") return l.concurrency;
    var offered = get(step, "throughput.offered_requests_per_sec");
    return offered !== null && offered !== undefined ? offered : l.rate_per_sec;
  }

  function header(report, title) {
    var run = report.run || {};
    var top = document.getElementById("content");
    top.appendChild(h("h1", {}, [title]));
    top.appendChild(h("p", { "class": "sub" }, [
      (report.tool ? report.tool.name + " " + report.tool.version + (report.tool.git_sha ? " (" + report.tool.git_sha + ")" : "") : "") +
      " · " + (run.target || "") + " · model " + (run.model || "?") + " · " + (run.api || "") + " API" +
      " · started " + (run.started_at || "?") + " · ended: " + (run.end_reason || "?")
    ]));
  }

  function warnings(list, title, none) {
    var box = section(title || "Warnings", "warnings");
    if (!list || !list.length) { box.appendChild(h("p", { "class": "empty" }, [none || "None: nothing in the run undermines its numbers."])); return; }
    box.appendChild(h("ul", { "class": "warnings" }, list.map(function (w) {
      return h("li", {}, [h("code", {}, [w.code]), " " + w.message + " ", h("span", { "class": "fix" }, ["→ " + w.fix])]);
    })));
  }

  function summary(report) {
    var box = section("Summary", "summary");
    var rows = report.steps.map(function (st, i) {
      var l = st.latency_ms || {}, t = st.throughput || {}, g = st.goodput || {};
      return [i, loadLabel(st.load), st.duration_secs, t.offered_requests_per_sec, t.requests_per_sec,
        t.input_tokens_per_sec, t.output_tokens_per_sec, g.requests_per_sec, g.attained_fraction === null || g.attained_fraction === undefined ? null : g.attained_fraction * 100,
        get(l, "ttft.p50"), get(l, "ttft.p99"), get(l, "tpot.p50"), get(l, "tpot.p99"), get(l, "e2e.p50"), get(l, "e2e.p99"),
        st.requests ? st.requests.completed : null, st.requests ? st.requests.failed : null,
        st.stability ? (st.stability.stable ? "stable" : "UNSTABLE") : null];
    });
    box.appendChild(table(["step", "load", "window s", "offered req/s", "req/s", "input tok/s", "output tok/s",
      "goodput req/s", "SLO met %", "TTFT p50 ms", "TTFT p99 ms", "TPOT p50 ms", "TPOT p99 ms", "E2E p50 ms", "E2E p99 ms",
      "completed", "failed", "queue"], rows, [1]));
    report.steps.forEach(function (st, i) {
      var objectives = get(st, "goodput.objectives") || [];
      if (objectives.length) {
        box.appendChild(h("h3", {}, ["Step " + i + " objectives (SLO " + (st.goodput.slo || "") + ")"]));
        box.appendChild(table(["objective", "limit ms", "measured ms", "verdict"], objectives.map(function (o) {
          return [o.name, o.max_ms, o.measured_ms === null ? "∞ (failures)" : o.measured_ms,
            h("span", { "class": o.pass ? "pass" : "fail" }, [o.pass ? "PASS" : "FAIL"])];
        })));
      }
    });
  }

  function latencyTables(report) {
    var box = section("Latency percentiles (ms, from the scheduled send)", "latency");
    var names = [["ttft", "TTFT"], ["tpot", "TPOT"], ["itl", "ITL"], ["e2e", "E2E"], ["dispatch_lag", "dispatch lag"], ["client_queue_wait", "client queue"]];
    report.steps.forEach(function (st, i) {
      if (report.steps.length > 1) box.appendChild(h("h3", {}, ["Step " + i + ": " + loadLabel(st.load)]));
      var rows = names.map(function (n) {
        var x = (st.latency_ms || {})[n[0]] || {};
        return [n[1], x.mean, x.p50, x.p90, x.p95, x.p99, x.p999, x.max, x.count];
      });
      ["ttft", "e2e"].forEach(function (k) {
        var x = (st.latency_from_send_ms || {})[k] || {};
        rows.push([k.toUpperCase() + " from send", x.mean, x.p50, x.p90, x.p95, x.p99, x.p999, x.max, x.count]);
      });
      box.appendChild(table(["metric", "mean", "p50", "p90", "p95", "p99", "p99.9", "max", "n"], rows));
    });
  }

  function curveCharts(box, runs) {
    var grid = h("div", { "class": "grid" });
    box.appendChild(grid);
    var series = [];
    runs.forEach(function (r, k) {
      [["ttft.p50", "TTFT p50"], ["ttft.p99", "TTFT p99"], ["e2e.p50", "E2E p50"], ["e2e.p99", "E2E p99"]].forEach(function (m, j) {
        series.push({ name: (runs.length > 1 ? r.label + " " : "") + m[1], mode: "both", color: COLORS[(j + 4 * k) % COLORS.length], dash: k ? "5 3" : "",
          points: r.report.steps.map(function (st) { return [get(st, "throughput.requests_per_sec"), get(st.latency_ms || {}, m[0])]; }) });
      });
    });
    chart(grid, { title: "Throughput vs latency", x: "completed requests/s", y: "latency (ms)", series: series });
    var closed = runs[0].report.steps.every(function (st) { return st.load && st.load.mode === "closed"; });
    var load = [];
    runs.forEach(function (r, k) {
      var prefix = runs.length > 1 ? r.label + " " : "";
      load.push({ name: prefix + "throughput req/s", mode: "both", color: COLORS[2 * k], dash: k ? "5 3" : "",
        points: r.report.steps.map(function (st) { return [loadValue(st), get(st, "throughput.requests_per_sec")]; }) });
      load.push({ name: prefix + "goodput req/s", mode: "both", color: COLORS[2 * k + 1], dash: k ? "5 3" : "",
        points: r.report.steps.map(function (st) { return [loadValue(st), get(st, "goodput.requests_per_sec")]; }) });
    });
    chart(grid, { title: "Goodput vs load", x: closed ? "concurrency" : "offered load (req/s)", y: "requests/s", series: load });
  }

  function cdfCharts(box, runs) {
    var grid = h("div", { "class": "grid" });
    box.appendChild(grid);
    [["ttft", "TTFT"], ["tpot", "TPOT"], ["e2e", "E2E"]].forEach(function (m) {
      var series = [];
      runs.forEach(function (r, k) {
        r.report.steps.forEach(function (st, i) {
          var points = ((st.distributions_ms || {})[m[0]] || []).map(function (p) { return [p[1], p[0] / 100]; });
          var name = (runs.length > 1 ? r.label : "") + (r.report.steps.length > 1 ? " step " + i : (runs.length > 1 ? "" : m[1]));
          series.push({ name: name.trim(), points: points, color: COLORS[(i + 3 * k) % COLORS.length], dash: k ? "5 3" : "" });
        });
      });
      chart(grid, { title: m[1] + " distribution (CDF)", x: m[1] + " (ms)", y: "fraction of requests ≤ x", series: series, xMin0: false });
    });
  }

  function timeSeries(box, report) {
    var grid = h("div", { "class": "grid" });
    box.appendChild(grid);
    var width = (report.run && report.run.window_secs) || 1;
    var windows = [];
    report.steps.forEach(function (st) { (st.windows || []).forEach(function (w) { windows.push(w); }); });
    var pick = function (key, scale) { return windows.map(function (w) { return [w.start_secs, w[key] * (scale || 1)]; }); };
    chart(grid, { title: "Requests per window (" + fmt(width) + " s)", x: "run time (s)", y: "requests", series: [
      { name: "arrivals", points: pick("arrivals") }, { name: "completions", points: pick("completions") },
      { name: "failures", points: pick("failures") }, { name: "in flight", points: pick("in_flight") }] });
    chart(grid, { title: "Output tokens per second", x: "run time (s)", y: "tokens/s", series: [
      { name: "output tok/s", points: pick("output_tokens", 1 / width) }] });
  }

  // The capacity verdict in words, then every probe (steps[first_probe_step + i]).
  function capacitySection(c) {
    var box = section("Capacity verdict", "capacity");
    var unit = c.dimension === "rate" ? " req/s" : " in flight";
    var load = function (v) { return v === null || v === undefined ? "–" : fmt(v) + unit; };
    var verdict = c.lower_bound === null || c.lower_bound === undefined
      ? "No load passed" + (c.upper_bound !== null && c.upper_bound !== undefined ? " (the lowest probed, " + load(c.upper_bound) + ", failed)" : "")
      : "Highest sustainable load: " + load(c.lower_bound) + (c.upper_bound !== null && c.upper_bound !== undefined ? "; fails at " + load(c.upper_bound) : " (the highest probed)");
    box.appendChild(h("p", { "class": "verdict" }, [verdict + " — search " + String(c.conclusion).replace(/_/g, " ") + "."]));
    box.appendChild(h("p", {}, ["SLO " + c.slo + ": " + fmt(c.attainment_target * 100) + " % of requests within every threshold, each verdict at " +
      fmt(c.confidence * 100) + " % confidence, " + c.requests_per_probe + " measured requests per probe."]));
    box.appendChild(table(["figure", "value"], [
      ["goodput at capacity (good req/s)", c.goodput_at_capacity_per_sec],
      ["DistServe goodput (req/s)", c.distserve_goodput_per_sec],
      ["accelerators", c.accelerators],
      ["capacity per accelerator", c.per_accelerator]
    ], [0]));
    box.appendChild(table(["probe", "step", "load", "outcome", "completed req/s", "good req/s", "measured", "stable", "reason"],
      (c.probes || []).map(function (p) {
        return [p.index + 1, (c.first_probe_step || 0) + p.index + 1, p.load, p.outcome, p.requests_per_sec,
          p.goodput_requests_per_sec, p.measured, p.stable ? "yes" : "no", p.reason];
      }), [3, 7, 8]));
  }

  // The sweep's levels and its knee.
  function sweepSection(sw) {
    var box = section("Sweep", "sweep");
    var knee = sw.knee
      ? "Knee at step " + (sw.knee.step + 1) + " (" + sw.dimension + " " + fmt(sw.knee.load) + "): the next level added " +
        fmt(sw.knee.next_throughput_gain * 100) + " % throughput and " + fmt(sw.knee.next_latency_rise * 100) + " % E2E p50."
      : "No knee: every level raised throughput by at least " + fmt(sw.knee_min_gain * 100) + " % (or latency did not rise).";
    box.appendChild(h("p", { "class": "verdict" }, [knee]));
    box.appendChild(h("p", {}, ["Levels (" + sw.dimension + "): " + (sw.loads || []).map(function (v) { return fmt(v); }).join(", ")]));
  }

  function optionalSections(report) {
    // Sections other parts of goodput add (sweeps, server metrics, buckets, capacity) are
    // rendered generically when present.
    if (report.capacity !== undefined && report.capacity !== null) capacitySection(report.capacity);
    if (report.sweep !== undefined && report.sweep !== null) sweepSection(report.sweep);
    var buckets = report.steps.filter(function (st) { return st.buckets !== undefined && st.buckets !== null; });
    if (buckets.length || report.buckets) {
      var bb = section("Per-bucket breakdown", "buckets");
      if (report.buckets) bb.appendChild(generic(report.buckets));
      report.steps.forEach(function (st, i) {
        if (st.buckets === undefined || st.buckets === null) return;
        if (report.steps.length > 1) bb.appendChild(h("h3", {}, ["Step " + i]));
        bb.appendChild(generic(st.buckets));
      });
    }
    var servers = report.steps.filter(function (st) { return st.server !== undefined && st.server !== null; });
    if (servers.length || report.server) {
      var sb = section("Server metrics", "server");
      if (report.server) sb.appendChild(generic(report.server));
      report.steps.forEach(function (st, i) {
        if (st.server === undefined || st.server === null) return;
        if (report.steps.length > 1) sb.appendChild(h("h3", {}, ["Step " + i]));
        sb.appendChild(generic(st.server));
      });
    }
    var known = ["schema_version", "tool", "run", "steps", "warnings", "capacity", "sweep", "buckets", "server"];
    Object.keys(report).forEach(function (k) {
      if (known.indexOf(k) < 0 && report[k] !== null) section(k, "extra-" + k).appendChild(generic(report[k]));
    });
  }

  function metadata(report) {
    var box = section("Run metadata", "metadata");
    var run = Object.assign({}, report.run || {});
    var rows = [["tool", (report.tool || {}).name + " " + (report.tool || {}).version], ["git SHA", (report.tool || {}).git_sha],
      ["command line", (run.command_line || []).join(" ")], ["started", run.started_at], ["seed", run.seed],
      ["target", run.target], ["API", run.api], ["model", run.model], ["streamed", run.stream], ["SLO", run.slo],
      ["window", run.window_secs + " s"], ["end reason", run.end_reason]];
    box.appendChild(table(["field", "value"], rows.map(function (r) { return [r[0], typeof r[1] === "number" ? String(r[1]) : r[1]]; }), [1]));
    box.appendChild(h("h3", {}, ["Workload"]));
    box.appendChild(generic(run.workload || {}));
    box.appendChild(h("h3", {}, ["Load and realised lengths per step"]));
    box.appendChild(table(["step", "load", "input tokens/request (mean, p50, p99, min, max)", "output tokens/request (mean, p50, p99, min, max)", "warmup requests"],
      report.steps.map(function (st, i) {
        var shape = function (c) { c = c || {}; return [c.mean, c.p50, c.p99, c.min, c.max].map(function (v) { return fmt(v, 1); }).join(", "); };
        return [i, loadLabel(st.load), shape(get(st, "tokens.input_per_request")), shape(get(st, "tokens.output_per_request")), get(st, "requests.warmup")];
      }), [1, 2, 3]));
    box.appendChild(h("h3", {}, ["Tags"]));
    box.appendChild(Object.keys(run.tags || {}).length ? generic(run.tags) : h("p", { "class": "empty" }, ["no tags (--tag key=value)"]));
    box.appendChild(h("h3", {}, ["Client host"]));
    box.appendChild(run.client_host ? generic(run.client_host) : h("p", { "class": "empty" }, ["not recorded"]));
    box.appendChild(h("h3", {}, ["Server"]));
    box.appendChild(run.server_info ? generic(run.server_info) : h("p", { "class": "empty" }, ["not recorded"]));
  }

  // ---- pages -------------------------------------------------------------------------------
  function reportPage(report) {
    header(report, "goodput report");
    warnings(report.warnings);
    summary(report);
    curveCharts(section("Throughput, latency and goodput across load steps", "curves"), [{ report: report, label: "" }]);
    cdfCharts(section("Latency distributions", "distributions"), [{ report: report, label: "" }]);
    timeSeries(section("Time series", "timeseries"), report);
    optionalSections(report);
    latencyTables(report);
    metadata(report);
  }

  function comparePage(data) {
    var a = data.a, b = data.b, c = data.comparison, labels = data.labels;
    header(b, "goodput comparison: " + labels[1] + " vs " + labels[0]);
    warnings(c.warnings, "Conditions", "Same workload, load, API, SLO and client: the runs are comparable.");
    var tests = section("Latency distributions: significant changes", "significance");
    tests.appendChild(h("p", { "class": "sub" }, ["Significant = two-sided p < " + c.thresholds.alpha +
      " and the median moved by at least " + fmt(c.thresholds.min_effect * 100) + " %. Method per row."]));
    tests.appendChild(table(["step", "metric", "method", "n A", "n B", "median A ms", "median B ms", "shift %", "p-value", "verdict"],
      c.distributions.map(function (d) {
        var t = d.test;
        var cls = d.verdict === "regression" ? "fail" : d.verdict === "improvement" ? "pass" : "";
        return [d.step, d.metric.toUpperCase(), t.method === "mann_whitney" ? "Mann-Whitney U (journals)" : "bootstrap (quantile points)",
          t.n_a, t.n_b, t.median_a, t.median_b, t.relative_shift === null ? null : t.relative_shift * 100,
          t.p_value < 1e-4 ? "< 0.0001" : fmt(t.p_value, 4), h("span", { "class": cls }, [d.verdict])];
      }), [2, 9]));
    var runs = [{ report: a, label: labels[0] }, { report: b, label: labels[1] }];
    cdfCharts(section("Latency distributions (" + labels[0] + " solid, " + labels[1] + " dashed)", "distributions"), runs);
    curveCharts(section("Throughput, latency and goodput", "curves"), runs);
    var box = section("Every figure", "metrics");
    box.appendChild(table(["figure", labels[0], labels[1], "Δ", "Δ %", "unit"], c.metrics.map(function (m) {
      var cls = "";
      if (m.relative !== null && m.lower_is_better !== null && Math.abs(m.relative) > 1e-9) {
        cls = (m.relative < 0) === m.lower_is_better ? "better" : "worse";
      }
      return [m.path, m.a, m.b, m.delta, h("span", { "class": cls }, [m.relative === null ? "–" : fmt(m.relative * 100, 1) + " %"]), m.unit];
    })));
    var meta = section("Runs", "metadata");
    var field = function (r, p) { var v = get(r, p); return isPlainObject(v) || Array.isArray(v) ? JSON.stringify(v) : v; };
    meta.appendChild(table(["field", labels[0], labels[1]], ["run.started_at", "run.target", "run.model", "run.seed", "run.workload",
      "run.slo", "run.tags", "run.client_host", "run.server_info", "tool.version", "tool.git_sha"].map(function (p) {
      return [p, field(a, p), field(b, p)];
    }), [1, 2]));
  }

  function main() {
    var status = document.getElementById("render-status");
    try {
      var data = JSON.parse(document.getElementById("goodput-data").textContent);
      if (data.mode === "compare") comparePage(data); else reportPage(data.report);
      status.textContent = "charts drawn: " + stats.drawn + ", with data: " + stats.withData;
    } catch (e) {
      status.textContent = "render error: " + e;
      status.setAttribute("data-error", String(e));
    }
    status.setAttribute("data-charts", String(stats.drawn));
    status.setAttribute("data-charts-with-data", String(stats.withData));
  }
  main();
})();
