// goodput page renderer, part 6: the pages of `goodput ui` over a history store — the bar of
// links every served page has, the runs (filtered by model, target, tags and dates through a
// GET form, so every view is a shareable link; two or more ticked runs go to the comparison
// page), and a figure's trend per series with each run's significance mark against the
// previous run of its series.

function navBar(nav) {
  if (!nav || !nav.length) return;
  var top = document.getElementById("content");
  top.appendChild(h("nav", { "class": "ui-nav" }, nav.map(function (link) {
    return h("a", { href: link.href, id: link.id || null }, [link.label]);
  })));
}

function query(params) {
  var parts = [];
  Object.keys(params).forEach(function (k) {
    [].concat(params[k]).forEach(function (v) {
      if (v !== null && v !== undefined && v !== "") parts.push(encodeURIComponent(k) + "=" + encodeURIComponent(v));
    });
  });
  return parts.length ? "?" + parts.join("&") : "";
}
function filterParams(f) {
  return { model: f.model, target: f.target, tag: f.tags, since: f.since, until: f.until };
}
function link(href, label, attrs) { return h("a", Object.assign({ href: href }, attrs || {}), [label]); }

function field(label, input) {
  return h("label", { "class": "field" }, [h("span", {}, [label]), input]);
}
function datalist(id, values) {
  return h("datalist", { id: id }, (values || []).map(function (v) { return h("option", { value: v }); }));
}
// The filter form: GET to `action`, the current filters filled in; `extra` adds fields.
function filterForm(data, action, extra) {
  var f = data.filters, facets = data.facets;
  var input = function (name, value, attrs) { return h("input", Object.assign({ name: name, value: value || "", id: "filter-" + name }, attrs || {})); };
  var form = h("form", { method: "get", action: action, id: "filters", "class": "filters" }, [
    field("model", input("model", f.model, { list: "models", placeholder: "any" })),
    field("target", input("target", f.target, { list: "targets", placeholder: "any" })),
    field("tag", input("tag", (f.tags || []).join(" "), { list: "tags", placeholder: "key=value" })),
    field("from", input("since", f.since, { type: "date" })),
    field("to", input("until", f.until, { type: "date" })),
    field("last", input("last", String(f.last), { type: "number", min: "1" }))
  ].concat(extra || []).concat([
    datalist("models", facets.models), datalist("targets", facets.targets), datalist("tags", facets.tags),
    h("button", { type: "submit", id: "apply-filters" }, ["Apply"]), link(action, "Clear", { id: "clear-filters" })]));
  return form;
}
function tagLinks(tags) {
  var keys = Object.keys(tags || {});
  if (!keys.length) return "–";
  var span = h("span", { "class": "tags" });
  keys.forEach(function (k) {
    span.appendChild(link("/" + query({ tag: k + "=" + tags[k] }), k + "=" + tags[k], { "class": "tag" }));
    span.appendChild(document.createTextNode(" "));
  });
  return span;
}

function runsPage(data) {
  var top = document.getElementById("content");
  top.appendChild(h("h1", {}, ["goodput runs"]));
  top.appendChild(h("p", { "class": "sub" }, [data.store + " · " + data.total + " run" + (data.total === 1 ? "" : "s") +
    " match" + (data.total === 1 ? "es" : "") + (data.total > data.runs.length ? ", the last " + data.runs.length + " shown" : "")]));
  var box = section("Filter", "filter", "Narrow the runs by model, target, tag (key=value, several separated by spaces) and start date; the address keeps the filter, so it can be shared.");
  box.appendChild(filterForm(data, "/", []));
  var list = section("Runs", "runs", "Newest last. Tick two or more runs and compare them (the oldest ticked is the baseline); a tag or model filters by it.");
  if (!data.runs.length) { list.appendChild(h("p", { "class": "empty", id: "no-runs" }, ["No run matches (record runs with goodput run --store, or goodput history --add)."])); return; }
  var form = h("form", { method: "get", action: "/compare", id: "compare-form" });
  var button = h("button", { type: "submit", id: "compare-button", disabled: "disabled" }, ["Compare selected"]);
  var count = h("span", { "class": "what", id: "selected-count" }, ["select two or more runs"]);
  var update = function () {
    var n = form.querySelectorAll("input[name=run]:checked").length;
    if (n >= 2) button.removeAttribute("disabled"); else button.setAttribute("disabled", "disabled");
    count.textContent = n ? n + " selected" : "select two or more runs";
  };
  var rows = data.runs.map(function (r) {
    var box = h("input", { type: "checkbox", name: "run", value: String(r.id), id: "select-" + r.id, "aria-label": "select run " + r.id });
    box.addEventListener("change", update);
    var cells = [h("span", {}, [box, " ", link("/runs/" + r.id, "#" + r.id, { id: "run-" + r.id })]), r.started_at.replace("T", " ").replace("Z", ""),
      link("/" + query({ model: r.model }), r.model, { "class": "model" }), r.target, r.listed.kind];
    r.listed.figures.forEach(function (v, i) { cells.push(data.columns[i].indexOf("errors") >= 0 ? pct(v) : v); });
    cells.push(r.listed.warnings, tagLinks(r.tags));
    return cells;
  });
  form.appendChild(h("p", { "class": "actions" }, [button, " ", count]));
  var n = data.columns.length, text = [0, 1, 2, 3, 4, 6 + n], phone = [3, 4, 6, 7, 9, 10, 5 + n];
  form.appendChild(table(["run", "started (UTC)", "model", "target", "kind"].concat(data.columns).concat(["warnings", "tags"]), rows, text, phone));
  list.appendChild(form);
  var trend = section("Trends", "trend-links", "A figure across these runs, per series, with each change's significance.");
  var links = h("p", {});
  ["ttft.p99", "e2e.p95", "requests_per_sec", "goodput.requests_per_sec", "output_tokens_per_sec"].forEach(function (m, i) {
    if (i) links.appendChild(document.createTextNode(" · "));
    links.appendChild(link("/trend" + query(Object.assign(filterParams(data.filters), { metric: m, by: data.suggested_by })), m, { "class": "trend-link" }));
  });
  trend.appendChild(links);
}

function verdictSpan(p) {
  var cls = p.verdict === "worse" ? "worse" : p.verdict === "better" ? "better" : "";
  var word = p.verdict === "no significant change" ? "not significant" : p.verdict;
  return h("span", { "class": "mark " + cls, title: p.test + (isNum(p.p_value) ? ", p = " + pValue(p.p_value) : "") }, [word]);
}

function trendPage(data) {
  var top = document.getElementById("content");
  var t = data.trend;
  top.appendChild(h("h1", {}, ["goodput trend" + (data.metric ? ": " + data.metric : "")]));
  top.appendChild(h("p", { "class": "sub" }, [data.store + (t ? " · " + t.points.length + " runs" + (t.by ? " by " + t.by : "") : "")]));
  var by = h("select", { name: "by", id: "filter-by" }, [""].concat(data.groupings).map(function (g) {
    var o = h("option", { value: g }, [g || "no grouping"]);
    if (g === data.by) o.setAttribute("selected", "selected");
    return o;
  }));
  var box = section("Figure and filter", "filter", "Any report figure (e.g. ttft.p99, e2e.p95, requests_per_sec, goodput.attained_fraction), one series per model, target or tag value.");
  box.appendChild(filterForm(data, "/trend", [field("figure", h("input", { name: "metric", value: data.metric, list: "metrics", id: "filter-metric" })),
    field("series by", by), datalist("metrics", data.metrics)]));
  if (data.error) { box.appendChild(h("p", { "class": "fail", id: "trend-error" }, [data.error])); return; }
  if (!t || !t.points.length) { box.appendChild(h("p", { "class": "empty" }, ["No run matches."])); return; }
  var unit = t.unit ? " (" + t.unit + ")" : "";
  var chartBox = section("Across runs", "trend", "The figure at " + t.path + " run by run (oldest first), one line per series; a red dot is significantly worse than the previous run of its series, a green one better (as goodput compare judges it).");
  var grid = h("div", { "class": "grid" });
  chartBox.appendChild(grid);
  var color = function (p) { return p.verdict === "worse" ? "#c62828" : p.verdict === "better" ? "#1a7f37" : undefined; };
  // Series colours stay clear of the marks' red and green.
  var palette = ["#2f6fdf", "#862e9c", "#e67700", "#0b7285", "#5f3dc4", "#495057"];
  chart(grid, { title: data.metric + unit + " across runs", x: "run (oldest first)", y: data.metric + unit, xMin0: false, yMin0: false, tipX: "run", series: t.groups.map(function (g, k) {
    return { name: g.name || "all runs", mode: "both", color: palette[k % palette.length], points: t.points.map(function (p, i) { return [i + 1, p.group === g.name ? p.value : null, "#" + p.id + " " + p.verdict, color(p)]; }) };
  }) });
  var marks = section("Run by run", "marks", "Each run against the previous run of its series: the change, its test and p-value, and the verdict (significant: p < " +
    t.thresholds.alpha + " and a change of at least " + pct(t.thresholds.min_effect, 0) + "). Compare opens both runs side by side.");
  marks.appendChild(table(["run", "started (UTC)", "series", t.metric + unit, "Δ %", "p-value", "verdict", "against"], t.points.map(function (p) {
    return [link("/runs/" + p.id, "#" + p.id), p.started_at.replace("T", " ").replace("Z", ""), p.group || "all", p.value, signedPct(p.relative), pValue(p.p_value), verdictSpan(p),
      p.previous ? link("/compare" + query({ run: [p.previous, p.id] }), "compare with #" + p.previous, { "class": "compare-link" }) : "–"];
  }), [0, 1, 2, 6, 7], [1, 5]));
  var series = section("Series", "series", "Per series: runs measured and significant changes.");
  series.appendChild(table(["series", "runs", "first", "last", "worse", "better"], t.groups.map(function (g) {
    return [g.name || "all runs", g.values.length, g.values[0], g.values[g.values.length - 1], g.worse, g.better];
  }), [0]));
}
