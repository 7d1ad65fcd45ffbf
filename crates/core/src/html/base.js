// goodput page renderer, part 1: DOM helpers, number formatting, tables, figure cards and
// inline SVG charts. No network, no libraries. Every chart records its point count
// (data-points); a chart without any data is not drawn. The page records how many charts it
// drew, how many had data and how many it left out in #render-status (checked by the
// headless-browser tests).
"use strict";
var SVG = "http://www.w3.org/2000/svg";
var COLORS = ["#2f6fdf", "#d9480f", "#2b8a3e", "#862e9c", "#e67700", "#0b7285", "#c2255c", "#5c940d"];
var stats = { drawn: 0, withData: 0, skipped: 0 };

function h(tag, attrs, children) {
  var node = document.createElement(tag);
  Object.keys(attrs || {}).forEach(function (k) { if (attrs[k] !== undefined && attrs[k] !== null) node.setAttribute(k, attrs[k]); });
  (children || []).forEach(function (c) {
    if (c === null || c === undefined) return;
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
function isNum(v) { return typeof v === "number" && isFinite(v); }
function fmt(v, digits) {
  if (v === null || v === undefined) return "–";
  if (typeof v === "boolean") return v ? "yes" : "no";
  if (typeof v !== "number") return String(v);
  if (!isFinite(v)) return String(v);
  if (Math.abs(v) >= 1e9 || (v !== 0 && Math.abs(v) < 1e-3)) return v.toExponential(2);
  if (digits === undefined) digits = Math.abs(v) >= 100 ? 1 : Math.abs(v) >= 1 ? 2 : 3;
  if (Number.isInteger(v)) return v.toLocaleString("en-US");
  return v.toLocaleString("en-US", { maximumFractionDigits: digits, minimumFractionDigits: 0 });
}
// Percentages keep their sign with the number (a no-break space before "%").
function pct(fraction, digits) { return isNum(fraction) ? fmt(fraction * 100, digits === undefined ? 1 : digits) + "\u00a0%" : "–"; }
function signedPct(fraction) { return isNum(fraction) ? (fraction >= 0 ? "+" : "−") + fmt(Math.abs(fraction) * 100, 1) + "\u00a0%" : "–"; }
function get(obj, path) {
  return path.split(".").reduce(function (o, k) { return o === null || o === undefined ? undefined : o[k]; }, obj);
}
function isPlainObject(v) { return v !== null && typeof v === "object" && !Array.isArray(v); }
function words(key) { return String(key).replace(/_/g, " "); }

// A table in a box that scrolls sideways on its own when it cannot fit (never the page).
// Columns listed in `optional` are hidden on a phone-width screen.
function table(headers, rows, textColumns, optional) {
  var cls = function (i, base) {
    var list = base ? [base] : [];
    if ((optional || []).indexOf(i) >= 0) list.push("opt");
    return list.length ? { "class": list.join(" ") } : {};
  };
  var head = h("tr", {}, headers.map(function (x, i) { return h("th", cls(i, (textColumns || []).indexOf(i) >= 0 ? "text" : ""), [x]); }));
  var body = rows.map(function (row) {
    return h("tr", {}, row.map(function (cell, i) {
      var attrs = cls(i, (textColumns || []).indexOf(i) >= 0 ? "text" : "");
      if (cell && cell.nodeType) return h("td", attrs, [cell]);
      return h("td", attrs, [typeof cell === "number" ? fmt(cell) : (cell === null || cell === undefined ? "–" : String(cell))]);
    }));
  });
  return h("div", { "class": "scroll" }, [h("table", {}, [h("thead", {}, [head]), h("tbody", {}, body)])]);
}
// A cell with a bar of length value / max (and an optional second bar for a second run).
function barCell(value, max, label, second) {
  var bar = function (v, cls) {
    var width = isNum(v) && max > 0 ? Math.max(0, Math.min(100, 100 * v / max)) : 0;
    return h("span", { "class": "bar" + (cls || ""), style: "width:" + width.toFixed(1) + "%" + (width > 0 ? "" : ";min-width:0") });
  };
  var td = h("td", { "class": "bar-cell", title: label || "" }, [bar(value)]);
  if (second !== undefined) td.appendChild(bar(second, " b"));
  return td;
}
function section(title, id, what) {
  var box = h("section", { id: id || null }, [h("h2", {}, [title])]);
  if (what) box.appendChild(h("p", { "class": "what" }, [what]));
  document.getElementById("content").appendChild(box);
  return box;
}
// cards: [{label, value, note, title}] as a grid of figures.
function cards(parent, list) {
  parent.appendChild(h("div", { "class": "cards" }, list.map(function (c) {
    return h("div", { "class": "card", title: c.title || null }, [
      h("div", { "class": "label" }, [c.label]),
      h("div", { "class": "value " + (c.cls || "") }, [c.value]),
      c.note ? h("div", { "class": "note" }, [c.note]) : null]);
  })));
}
// Any figures as rows "name → value", with nested objects flattened to "a · b" names (never
// JSON text).
function flatRows(value, prefix, rows) {
  rows = rows || [];
  if (Array.isArray(value)) {
    if (value.every(function (v) { return !isPlainObject(v) && !Array.isArray(v); })) {
      rows.push([prefix, value.length ? value.map(function (v) { return fmt(v); }).join(", ") : "none"]);
    } else {
      value.forEach(function (v, i) { flatRows(v, prefix + " " + (i + 1), rows); });
    }
  } else if (isPlainObject(value)) {
    Object.keys(value).forEach(function (k) {
      if (value[k] === null || value[k] === undefined) return;
      flatRows(value[k], prefix ? prefix + " · " + words(k) : words(k), rows);
    });
  } else {
    rows.push([prefix, typeof value === "number" ? fmt(value) : fmt(value)]);
  }
  return rows;
}
function flatTable(value) {
  var rows = flatRows(value, "");
  return rows.length ? table(["figure", "value"], rows, [1]) : h("p", { "class": "empty" }, ["nothing recorded"]);
}

// ---- charts --------------------------------------------------------------------------------
function ticks(min, max, count) {
  if (!(max > min)) { max = min + 1; }
  var raw = (max - min) / count, mag = Math.pow(10, Math.floor(Math.log10(raw)));
  var step = [1, 2, 2.5, 5, 10].map(function (m) { return m * mag; }).find(function (v) { return v >= raw; });
  var out = [], start = Math.ceil(min / step - 1e-9) * step;
  for (var v = start; v <= max + step * 1e-9; v += step) out.push((Math.round(v / step) * step) || 0);
  return out;
}
function cleanPoints(points) {
  return (points || []).filter(function (p) { return p && isNum(p[0]) && isNum(p[1]); });
}
function legend(box, series) {
  box.appendChild(h("div", { "class": "legend" }, series.map(function (se) {
    return h("span", { style: "display:inline-block;margin:0 12px 0 0;font-size:12px" }, [
      h("span", { style: "display:inline-block;width:14px;height:3px;vertical-align:middle;margin-right:4px;background:" + se.color +
        (se.dash ? ";background:repeating-linear-gradient(90deg," + se.color + " 0 5px,transparent 5px 8px)" : "") }), se.name]);
  })));
}

// opts: {title, x, y, series: [{name, points: [[x, y, label?]], mode: "line"|"points"|"both", color, dash,
//        labels (each visible point's label written beside it)}], xMin0, yMin0, xDomain: [x0, x1],
//        markers: [{x, label}], tipX, tipY}
function chart(parent, opts) {
  var box = h("div", { "class": "chart-box" });
  parent.appendChild(box);
  // Drawn at the width it is shown at (so text keeps its size on a phone), 320–540 units.
  var W = Math.round(Math.max(320, Math.min(540, (box.clientWidth || 540) - 18))), H = 290, L = 58, R = 14, T = 26, B = 42;
  var svg = s("svg", { "class": "chart", viewBox: "0 0 " + W + " " + H, role: "img" }, box);
  svg.setAttribute("data-title", opts.title);
  s("title", {}, svg).textContent = opts.title;
  text(svg, L, 16, opts.title, { "class": "title" });
  var series = opts.series.map(function (se, i) {
    return Object.assign({}, se, { color: se.color || COLORS[i % COLORS.length], points: cleanPoints(se.points) });
  }).filter(function (se) { return se.points.length || !opts.dropEmpty; });
  var all = [].concat.apply([], series.map(function (se) { return se.points; }));
  svg.setAttribute("data-points", String(all.length));
  if (!all.length) {
    // Nothing to draw (the report lacks the series): no empty frame, just a count.
    parent.removeChild(box);
    stats.skipped += 1;
    return null;
  }
  stats.drawn += 1;
  stats.withData += 1;
  var xs = all.map(function (p) { return p[0]; }), ys = all.map(function (p) { return p[1]; });
  var x0 = opts.xMin0 === false ? Math.min.apply(null, xs) : Math.min(0, Math.min.apply(null, xs));
  var x1 = Math.max.apply(null, xs);
  if (opts.xDomain) { x0 = Math.min(x0, opts.xDomain[0]); x1 = Math.max(x1, opts.xDomain[1]); }
  var y0 = opts.yMin0 === false ? Math.min.apply(null, ys) : Math.min(0, Math.min.apply(null, ys));
  var y1 = Math.max.apply(null, ys);
  if (x1 === x0) { x1 = x0 + (Math.abs(x0) || 1); if (opts.xMin0 === false) x0 = x0 - (Math.abs(x0) * 0.1 || 1); }
  if (y1 === y0) { y1 = y0 + (Math.abs(y0) || 1); }
  y1 = y1 + (y1 - y0) * 0.05;
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
  text(svg, (L + W - R) / 2, H - 6, opts.x, { "text-anchor": "middle" });
  text(svg, 14, (T + H - B) / 2, opts.y, { "text-anchor": "middle", transform: "rotate(-90 14 " + (T + H - B) / 2 + ")" });
  (opts.markers || []).forEach(function (m) {
    if (!isNum(m.x)) return;
    s("line", { x1: sx(m.x), x2: sx(m.x), y1: T, y2: H - B, "class": "marker" }, svg);
    text(svg, Math.min(sx(m.x) + 4, W - R - 60), T + 10, m.label, { "class": "marker-label" });
  });
  series.forEach(function (se) {
    var mode = se.mode || "line";
    if (se.points.length > 1 && mode !== "points") {
      var d = se.points.map(function (p, j) { return (j ? "L" : "M") + sx(p[0]).toFixed(1) + "," + sy(p[1]).toFixed(1); }).join("");
      s("path", { d: d, fill: "none", stroke: se.color, "stroke-width": 1.8, "stroke-dasharray": se.dash || "" }, svg);
    }
    se.points.forEach(function (p) {
      var visible = mode !== "line" || se.points.length === 1;
      var c = s("circle", { cx: sx(p[0]).toFixed(1), cy: sy(p[1]).toFixed(1), r: visible ? 4 : 5,
        fill: visible ? (p[3] || se.color) : "transparent", "class": visible ? "dot" : "hit" }, svg);
      s("title", {}, c).textContent = se.name + " — " + (opts.tipX || opts.x) + " " + fmt(p[0]) + ", " +
        (opts.tipY || opts.y) + " " + fmt(p[1]) + (p[2] ? " (" + p[2] + ")" : "");
      if (se.labels && visible && p[2]) {
        // Beside the point, kept inside the plot: left of it in the right third.
        var right = sx(p[0]) > L + (W - L - R) * 0.66;
        text(svg, sx(p[0]) + (right ? -7 : 7), sy(p[1]) - 6, p[2], { "class": "point-label", "text-anchor": right ? "end" : "start" });
      }
    });
  });
  legend(box, series);
  return svg;
}
