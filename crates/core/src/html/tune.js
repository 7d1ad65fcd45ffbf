// goodput page renderer, part 6: the page of `goodput tune` — the best configuration, the
// Pareto front of good output tokens/s per accelerator against tokens/s per user (each point
// labelled with its configuration), every configuration's figures, the failures with the end
// of their server's log and, with --verify-top, the predictions beside the live measurements.

function tuneFigure(c, key) { return c.run && c.run.figures ? c.run.figures[key] : undefined; }
function tuneCapacity(c) {
  var f = c.run && c.run.figures;
  if (!f) return "–";
  if (!isNum(f.capacity)) return "none met the SLO";
  return f.load_unit === "concurrency" ? fmt(f.capacity) + " in flight" : fmt(f.capacity) + " " + f.load_unit;
}
function tuneBest(t, box) {
  var b = t.best;
  box.appendChild(h("p", { "class": "verdict" }, [t.conclusion.charAt(0).toUpperCase() + t.conclusion.slice(1) + "."]));
  if (!b) return;
  var second = isNum(b.runner_up) ? t.configurations[b.runner_up] : null;
  cards(box, [
    { label: "best configuration", value: b.name, note: "rank 1 of " + t.configurations.length },
    { label: "good req/s per accelerator", value: fmt(b.rank_value, 3), note: t.accelerators_basis },
    { label: "margin over the runner-up", value: isNum(b.margin) ? signedPct(b.margin) : "–", note: second ? second.name : "no runner-up" },
    { label: "significance", value: isNum(b.p_value) ? "p = " + fmt(b.p_value, 3) : "not tested",
      cls: b.significant === true ? "pass" : b.significant === false ? "fail" : "", note: b.significance }]);
}
function tuneFront(t, grid) {
  var point = function (c) { return [tuneFigure(c, "tokens_per_sec_per_user"), tuneFigure(c, "good_output_tokens_per_sec_per_accelerator"), c.name]; };
  var front = t.pareto_front.map(function (i) { return point(t.configurations[i]); });
  var others = t.configurations.filter(function (c, i) { return t.pareto_front.indexOf(i) < 0 && isNum(c.rank); }).map(point);
  chart(grid, { title: "Pareto front: throughput against interactivity", x: "tokens/s per user (1000 / TPOT p50)",
    y: "good output tok/s per accelerator", tipX: "tok/s per user", tipY: "good output tok/s per accelerator", series: [
      { name: "on the front", mode: "both", color: "#2b8a3e", labels: true, points: front },
      { name: "dominated", mode: "points", color: "#8a93a3", labels: true, points: others }] });
  var ranked = t.configurations.filter(function (c) { return isNum(c.rank); }).sort(function (a, b) { return a.rank - b.rank; });
  chart(grid, { title: "Goodput per accelerator by rank", x: "rank", y: "good req/s per accelerator", series: [
    { name: "configurations", mode: "points", labels: true, points: ranked.map(function (c) { return [c.rank, tuneFigure(c, "rank_value"), c.name]; }) }] });
}
function tuneTable(t) {
  return table(["rank", "configuration", "capacity", "good req/s per acc.", "good out tok/s per acc.", "tok/s per user", "TTFT p99 ms",
    "cost per M out tokens", "accelerators", "ready s", "failed requests", "front", "failure"],
    t.configurations.map(function (c) {
      var failure = c.run.failure ? c.run.failure.stage + ": " + c.run.failure.reason : "";
      return [isNum(c.rank) ? c.rank : "–", c.name, tuneCapacity(c), tuneFigure(c, "goodput_per_accelerator"),
        tuneFigure(c, "good_output_tokens_per_sec_per_accelerator"), tuneFigure(c, "tokens_per_sec_per_user"), tuneFigure(c, "ttft_p99_ms"),
        tuneFigure(c, "cost_per_million_output_tokens"), c.accelerators, c.run.startup_secs, tuneFigure(c, "requests_failed"),
        c.on_front ? "yes" : "", failure ? h("span", { "class": "fail" }, [failure]) : ""];
    }), [1, 12], [6, 7, 8, 10]);
}
function tuneFailures(t) {
  var failed = t.configurations.filter(function (c) { return c.run.failure; });
  if (!failed.length) return;
  var box = section("Failures", "tune-failures", "Configurations that could not be measured, each with the last lines of its server's log (the whole log is server.log in its directory).");
  failed.forEach(function (c) {
    var f = c.run.failure;
    box.appendChild(h("h3", {}, [c.name + " — " + f.stage]));
    box.appendChild(h("p", {}, [f.reason + (c.run.command ? " (command: " + c.run.command + ")" : "")]));
    if (f.log_tail && f.log_tail.length) box.appendChild(h("pre", { "class": "log" }, [f.log_tail.join("\n")]));
  });
}
function tuneVerification(t) {
  if (!t.verification || !t.verification.length) return;
  var box = section("Predicted against measured", "tune-verification", "The best configurations predicted in virtual time, started from the server template and measured live.");
  box.appendChild(table(["predicted rank", "configuration", "predicted good req/s per acc.", "measured", "measured / predicted"],
    t.verification.map(function (v) {
      var c = t.configurations[v.configuration], m = v.measured;
      var measured = m.failure && !m.figures ? m.failure.stage + ": " + m.failure.reason : fmt(m.figures ? m.figures.rank_value : null, 3);
      return [v.predicted_rank, c.name, fmt(tuneFigure(c, "rank_value"), 3), measured, fmt(v.ratio, 2)];
    }), [1]));
}
function tunePage(report) {
  var t = report.tune;
  header(report, "goodput tune");
  var box = section("Best configuration", "tune", (t.mode === "virtual" ? "Predicted in virtual time: " : "Measured live: ") + t.configurations.length +
    " configurations, " + (t.measure === "capacity" ? "a capacity search" : "a load sweep") + " each under " + t.slo + " at " + pct(t.attainment_target) +
    " attainment" + (t.repeats > 1 ? ", " + t.repeats + " runs each" : "") + "; ranked by " + t.ranked_by + ".");
  tuneBest(t, box);
  var grid = h("div", { "class": "grid" });
  box.appendChild(grid);
  tuneFront(t, grid);
  var all = section("Configurations", "tune-configurations", "Each configuration at its operating point; its own report (every step, the server's metrics) is report.html in its directory.");
  all.appendChild(tuneTable(t));
  tuneFailures(t);
  tuneVerification(t);
  warnings(report.warnings);
  metadata(report);
}
