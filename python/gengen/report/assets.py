"""The report page's style sheet and script (vanilla JavaScript, no library, nothing loaded from the network).

The script reads one JSON block (``<script type="application/json" id="gengen-data">``) and builds:

* ``div[data-table]``: a searchable (every word must match), sortable (click a header), paged table;
* ``div[data-heatmap]``: correlation heatmaps drawn on canvases, test sets in one clustered order in every
  panel, labels as HTML text (≥ 9 px) and a tooltip with the full names and values under the pointer;
* ``div[data-trajectories]``: small multiples of the score trajectories, one SVG panel per test set, one line
  per run on its training progress (step / last step), coloured by model size, runs by shade and dash.

User-supplied names only ever reach the page through ``textContent``/attributes, never as markup.
"""

from __future__ import annotations

CSS = """
body { font-family: system-ui, -apple-system, "Segoe UI", sans-serif; margin: 2em auto; max-width: 1400px;
       padding: 0 1em; color: #1a1a1a; background: #ffffff; font-size: 16px; }
h1 { font-size: 1.6em; } h2 { font-size: 1.3em; margin-top: 2em; border-bottom: 1px solid #ccc; }
h3 { font-size: 1.1em; }
table { border-collapse: collapse; font-size: 0.85em; margin: 0.5em 0 1em 0; }
th, td { border: 1px solid #ddd; padding: 0.25em 0.6em; text-align: left; vertical-align: top; }
th { background: #f3f3f3; } td.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
td.long { font-size: 0.85em; max-width: 18em; color: #333; white-space: nowrap; overflow: hidden;
          text-overflow: ellipsis; }
td.txt { white-space: nowrap; }
td.flag { color: #8a4b00; }
.scroll { overflow-x: auto; }
img { max-width: 100%; height: auto; display: block; margin: 0.5em 0; }
.warning { background: #fff4e5; border-left: 4px solid #e69500; padding: 0.4em 0.8em; margin: 0.3em 0; }
.note { color: #555; font-size: 0.9em; }
.verdict { border: 2px solid #333; border-radius: 6px; padding: 0.4em 1em; margin: 1em 0; background: #fafafa; }
.verdict h2 { margin-top: 0.3em; } /* the page's 2em above a heading left an empty band inside the box */
.verdict-answer { font-size: 1.2em; line-height: 1.45; font-weight: 600; }
.verdict-text { font-size: 1em; line-height: 1.45; }
.verdict-counts td, .verdict-counts th { vertical-align: top; padding: 0.2em 0.8em; }
figcaption { color: #555; font-size: 0.85em; }
/* Figures side by side where they fit (the forest plots of a many-model page): each as wide as its image. */
.figrow { display: flex; flex-wrap: wrap; gap: 0 1.5em; align-items: flex-start; }
.figrow figure { margin: 0; flex: 0 1 auto; }
.figrow figure figcaption { max-width: 36em; }
details.group summary { cursor: pointer; } details.group summary h3 { display: inline; }
nav ul { columns: 2; font-size: 0.95em; }
table.settings td:first-child { white-space: nowrap; color: #333; }
.dt-controls { display: flex; flex-wrap: wrap; gap: 0.6em; align-items: center; font-size: 0.9em; }
.dt-controls input[type=search] { min-width: 22em; padding: 0.2em 0.4em; font-size: 1em; }
.dt-controls button, .dt-controls select { font-size: 1em; }
.dt table th { cursor: pointer; user-select: none; white-space: nowrap; }
.dt table th[aria-sort=ascending]::after { content: " \\25B2"; }
.dt table th[aria-sort=descending]::after { content: " \\25BC"; }
.hm-controls { font-size: 0.9em; margin: 0.4em 0; display: flex; gap: 1em; align-items: center; flex-wrap: wrap; }
.hm-scale { display: inline-block; width: 140px; height: 12px; vertical-align: middle; border: 1px solid #999; }
.hm-panels { display: grid; gap: 16px; justify-content: start; align-items: start; }
.hm-panel { overflow-x: auto; }
.hm-title { font-weight: 600; font-size: 14px; margin: 0.2em 0; }
.hm-grid { display: grid; }
.hm-cols { display: flex; align-items: flex-end; }
.hm-rows { display: flex; flex-direction: column; }
.hm-lbl { overflow: hidden; white-space: nowrap; color: #222; }
.hm-rows .hm-lbl { text-align: right; padding-right: 4px; }
.hm-cols .hm-lbl { writing-mode: vertical-rl; transform: rotate(180deg); text-align: left; padding-top: 4px; }
.hm-lbl.on { background: #ffe08a; }
.hm-small { display: flex; flex-wrap: wrap; gap: 10px 12px; }
.hm-small-title { font-size: 11px; white-space: nowrap; overflow: hidden; text-overflow: ellipsis; }
canvas.hm-canvas { display: block; cursor: crosshair; image-rendering: pixelated; }
.tip { position: fixed; z-index: 10; background: #fff; border: 1px solid #888; padding: 0.3em 0.5em;
       font-size: 13px; pointer-events: none; box-shadow: 0 1px 4px rgba(0,0,0,0.25); display: none;
       max-width: 32em; white-space: pre-line; }
.tm-legend { display: flex; flex-wrap: wrap; gap: 0.4em 1.2em; font-size: 13px; margin: 0.4em 0; }
.tm-swatch { display: inline-block; vertical-align: middle; margin-right: 0.3em; }
.tm-panels { display: flex; flex-wrap: wrap; gap: 4px; }
.tm-panels svg { border: 1px solid #e4e4e4; background: #fff; }
.tm-panels svg.id { border-color: #333; }
.tm-text { font-size: 10px; fill: #222; }
.tm-run { display: none; } .tm-runs-on .tm-run { display: inline; }
.tm-toggle { font-size: 13px; }
.tm-tick { font-size: 9px; fill: #555; }
"""

JS = r"""
(function () {
  "use strict";
  var source = document.getElementById("gengen-data");
  if (!source) { return; }
  var data = JSON.parse(source.textContent);
  var tip = document.createElement("div");
  tip.className = "tip";
  document.body.appendChild(tip);

  function make(tag, className, text) {
    var node = document.createElement(tag);
    if (className) { node.className = className; }
    if (text !== undefined && text !== null) { node.textContent = text; }
    return node;
  }
  function svg(tag, attrs, text) {
    var node = document.createElementNS("http://www.w3.org/2000/svg", tag);
    Object.keys(attrs || {}).forEach(function (key) { node.setAttribute(key, attrs[key]); });
    if (text !== undefined) { node.textContent = text; }
    return node;
  }
  function showTip(event, text) {
    tip.textContent = text;
    tip.style.display = "block";
    var x = event.clientX + 14, y = event.clientY + 14;
    var box = tip.getBoundingClientRect();
    if (x + box.width > window.innerWidth) { x = Math.max(0, event.clientX - box.width - 14); }
    if (y + box.height > window.innerHeight) { y = Math.max(0, event.clientY - box.height - 14); }
    tip.style.left = x + "px";
    tip.style.top = y + "px";
  }
  function hideTip() { tip.style.display = "none"; }
  function fmt(kind, v) {
    if (v === null || v === undefined) { return ""; }
    if (kind === "bool") { return v ? "yes" : "no"; }
    if (kind === "int") { return String(v); }
    var a = Math.abs(v);
    if (v === 0) { return "0"; }
    if (kind === "p") { return a < 1e-3 ? v.toExponential(2) : v.toFixed(a < 0.01 ? 4 : 3); }
    if (a >= 1e5 || a < 1e-3) { return v.toExponential(2); }
    if (Number.isInteger(v) && a >= 2) { return String(v); }
    return v.toFixed(3);
  }

  // ---------------------------------------------------------------- tables
  function buildTable(root, spec) {
    var cols = spec.columns, n = spec.n;
    var textCols = cols.filter(function (c) { return c.kind === "text"; });
    var hay = new Array(n);
    for (var i = 0; i < n; i++) {
      hay[i] = textCols.map(function (c) { return c.levels[c.values[i]]; }).join(" \u0001 ").toLowerCase();
    }
    var sigCol = cols.filter(function (c) { return c.kind === "bool" && /^significant/.test(c.name); })[0];
    var state = { rows: [], sortCol: null, desc: true, page: 0, size: spec.pageSize || 25, query: "", sigOnly: false };
    var controls = make("div", "dt-controls");
    var search = make("input");
    search.type = "search";
    search.placeholder = "search names and methods (all words must match)";
    search.setAttribute("aria-label", "search the table");
    controls.appendChild(search);
    var sigBox = null;
    if (sigCol) {
      var label = make("label");
      sigBox = make("input");
      sigBox.type = "checkbox";
      label.appendChild(sigBox);
      label.appendChild(document.createTextNode(" " + sigCol.name + " only"));
      controls.appendChild(label);
    }
    var sizeSel = make("select");
    [25, 100, 500].forEach(function (size) {
      var option = make("option", null, size + " rows");
      option.value = String(size);
      if (size === state.size) { option.selected = true; }
      sizeSel.appendChild(option);
    });
    controls.appendChild(sizeSel);
    var prev = make("button", null, "\u2190 previous"), next = make("button", null, "next \u2192");
    prev.type = "button"; next.type = "button";
    var count = make("span", "note");
    controls.appendChild(prev); controls.appendChild(next); controls.appendChild(count);
    root.appendChild(controls);
    if (spec.total && spec.total > n) {
      root.appendChild(make("p", "note", "The page holds " + n.toLocaleString("en") + " of the " +
        spec.total.toLocaleString("en") + " rows (" + spec.kept + "); " +
        (spec.file || "the CSV file") + " holds them all, and the heatmaps show every pair on hover."));
    }
    var scroll = make("div", "scroll"), table = make("table"), thead = make("thead"), tbody = make("tbody");
    var headRow = make("tr");
    var headers = cols.map(function (c, index) {
      var th = make("th", null, c.name);
      if (c.help) { th.title = c.help; }
      th.addEventListener("click", function () {
        if (state.sortCol === index) {
          state.desc = !state.desc;
        } else {
          state.sortCol = index;
          state.desc = c.kind !== "text";
        }
        state.page = 0;
        apply();
      });
      headRow.appendChild(th);
      return th;
    });
    thead.appendChild(headRow);
    table.appendChild(thead); table.appendChild(tbody); scroll.appendChild(table); root.appendChild(scroll);

    function sortKey(c, i) {
      var v = c.values[i];
      return c.kind === "text" ? c.levels[v] : v;
    }
    function apply() {
      var words = state.query.toLowerCase().split(/\s+/).filter(Boolean);
      var rows = [];
      for (var i = 0; i < n; i++) {
        if (state.sigOnly && sigCol && !sigCol.values[i]) { continue; }
        var ok = true;
        for (var w = 0; w < words.length; w++) { if (hay[i].indexOf(words[w]) < 0) { ok = false; break; } }
        if (ok) { rows.push(i); }
      }
      if (state.sortCol !== null) {
        var c = cols[state.sortCol], sign = state.desc ? -1 : 1;
        rows.sort(function (a, b) {
          var x = sortKey(c, a), y = sortKey(c, b);
          if (x === null || x === undefined) { return (y === null || y === undefined) ? a - b : 1; }
          if (y === null || y === undefined) { return -1; }
          if (c.kind === "text") { var t = x.localeCompare(y); return t === 0 ? a - b : sign * t; }
          return x === y ? a - b : sign * (x < y ? -1 : 1);
        });
      }
      headers.forEach(function (th, index) {
        if (index === state.sortCol) { th.setAttribute("aria-sort", state.desc ? "descending" : "ascending"); }
        else { th.removeAttribute("aria-sort"); }
      });
      state.rows = rows;
      render();
    }
    function render() {
      var pages = Math.max(1, Math.ceil(state.rows.length / state.size));
      state.page = Math.min(state.page, pages - 1);
      var start = state.page * state.size, stop = Math.min(state.rows.length, start + state.size);
      var body = make("tbody");
      for (var r = start; r < stop; r++) {
        var i = state.rows[r], tr = make("tr");
        cols.forEach(function (c) {
          var text = c.kind === "text" ? c.levels[c.values[i]] : fmt(c.kind, c.values[i]);
          var wrapped = /method$|^diagnostics$/.test(c.name) || text.length > 60;
          var td = make("td", c.kind === "text" ? (wrapped ? "long" : "txt") : "num", text);
          if (wrapped && text) { td.title = text; }  // one line per row; the whole text on hover
          if (c.name === "diagnostics" && text) { td.className += " flag"; }
          tr.appendChild(td);
        });
        body.appendChild(tr);
      }
      table.replaceChild(body, tbody);
      tbody = body;
      count.textContent = state.rows.length ? "rows " + (start + 1) + "\u2013" + stop + " of " + state.rows.length +
        (state.rows.length < n ? " (filtered from " + n + ")" : "") : "no rows match";
      prev.disabled = state.page === 0;
      next.disabled = state.page >= pages - 1;
    }
    search.addEventListener("input", function () { state.query = search.value; state.page = 0; apply(); });
    if (sigBox) {
      sigBox.addEventListener("change", function () { state.sigOnly = sigBox.checked; state.page = 0; apply(); });
    }
    sizeSel.addEventListener("change", function () {
      state.size = parseInt(sizeSel.value, 10);
      state.page = 0;
      render();
    });
    prev.addEventListener("click", function () { state.page -= 1; render(); });
    next.addEventListener("click", function () { state.page += 1; render(); });
    apply();
  }

  // -------------------------------------------------------------- heatmaps
  var MIN_FONT = 9, GAP = 16, FADED = 0.3;
  function buildHeatmaps(root, spec) {
    var m = spec.names.length;
    var cell = Math.max(10, Math.min(26, Math.round(640 / Math.max(m, 1))));
    function fontFor(size) { return Math.max(MIN_FONT, Math.min(12, size - 2)); }
    var font = fontFor(cell);
    var ratio = window.devicePixelRatio || 1;
    var current = spec.values[0];
    var controls = make("div", "hm-controls");
    if (spec.values.length > 1) {
      var label = make("label", null, "show ");
      var select = make("select");
      spec.values.forEach(function (value) {
        var option = make("option", null, value);
        option.value = value;
        select.appendChild(option);
      });
      select.addEventListener("change", function () {
        current = select.value;
        panels.forEach(function (p) { p.draw(); });
      });
      label.appendChild(select);
      controls.appendChild(label);
    }
    var scale = make("span");
    scale.appendChild(document.createTextNode("\u22121 "));
    var bar = make("span", "hm-scale");
    var stops = spec.palette.filter(function (_, k) { return k % 32 === 0 || k === 255; });
    bar.style.background = "linear-gradient(to right," + stops.join(",") + ")";
    scale.appendChild(bar);
    scale.appendChild(document.createTextNode(" +1 \u2003\u25CF significant (other pairs faded)"));
    controls.appendChild(scale);
    root.appendChild(controls);
    var holder = make("div", "hm-panels");
    root.appendChild(holder);
    // Many groups: one labelled heatmap of the common partial correlation, every group as a small multiple below.
    var full = spec.summary ? [spec.summary] : spec.panels;
    // Small multiples: as many panels side by side as fit with cells of at least MIN_FONT px (one label per
    // cell); rows labelled on the first panel of each line, columns on the first line only (same order).
    var fit = layout();
    cell = fit.cell;
    font = fontFor(cell);
    holder.style.gridTemplateColumns = "repeat(" + fit.per + ", auto)";
    function layout() {
      var n = full.length, width = holder.clientWidth || 1200;
      var probe = labels(false);
      holder.appendChild(probe.box);
      var labelWidth = probe.box.getBoundingClientRect().width + 4;
      holder.removeChild(probe.box);
      for (var per = Math.min(n, 4); per > 1; per--) {
        var size = Math.min(cell, Math.floor((width - labelWidth - (per - 1) * GAP) / (per * m)));
        if (size >= MIN_FONT) { return { per: per, cell: size }; }
      }
      return { per: 1, cell: cell };
    }
    function index(i, j) {
      if (i > j) { var t = i; i = j; j = t; }
      return i * m - (i * (i + 1)) / 2 + (j - i - 1);
    }
    function labels(vertical) {
      var box = make("div", vertical ? "hm-cols" : "hm-rows");
      return { box: box, items: spec.labels.map(function (text, k) {
        var node = make("div", "hm-lbl", text);
        node.title = spec.names[k];
        node.style.fontSize = font + "px";
        node.style.lineHeight = cell + "px";
        if (vertical) { node.style.width = cell + "px"; } else { node.style.height = cell + "px"; }
        box.appendChild(node);
        return node;
      }) };
    }
    var rowLabels = [], colLabels = [];
    var panels = full.map(function (panel, k) {
      var line = Math.floor(k / fit.per), column = k % fit.per;
      var wrap = make("div", "hm-panel");
      wrap.appendChild(make("div", "hm-title", panel.title));
      var grid = make("div", "hm-grid");
      grid.style.gridTemplateColumns = (column === 0 ? "auto " : "") + (m * cell) + "px";
      if (column === 0) { rowLabels[line] = labels(false); }
      if (line === 0) { colLabels[column] = labels(true); }
      var rows = rowLabels[line], cols = colLabels[column];
      var canvas = make("canvas", "hm-canvas");
      canvas.width = Math.round(m * cell * ratio);
      canvas.height = Math.round(m * cell * ratio);
      canvas.style.width = (m * cell) + "px";
      canvas.style.height = (m * cell) + "px";
      canvas.setAttribute("role", "img");
      canvas.setAttribute("aria-label", panel.title + ": heatmap of " + m + " test sets");
      if (line === 0) {
        if (column === 0) { grid.appendChild(make("div")); }
        grid.appendChild(cols.box);
      }
      if (column === 0) { grid.appendChild(rows.box); }
      grid.appendChild(canvas);
      wrap.appendChild(grid);
      holder.appendChild(wrap);
      var ctx = canvas.getContext("2d");
      function value(name, i, j) {
        if (i === j) { return name.indexOf("r_") === 0 ? 1 : null; }
        var list = panel.values[name];
        return list ? list[index(i, j)] : null;
      }
      function draw() {
        ctx.setTransform(ratio, 0, 0, ratio, 0, 0);
        ctx.clearRect(0, 0, m * cell, m * cell);
        for (var i = 0; i < m; i++) {
          for (var j = 0; j < m; j++) {
            var v = value(current, i, j);
            var shade = Math.max(0, Math.min(255, Math.round((v + 1) * 127.5)));
            ctx.fillStyle = v === null ? "#e8e8e8" : spec.palette[shade];
            // Pairs that are not significant are faded, so that the colour one sees is a significant pair's.
            var faded = current === spec.values[0] && i !== j && v !== null && panel.sig !== undefined &&
              panel.sig[index(i, j)] !== "1";
            ctx.globalAlpha = faded ? FADED : 1;
            ctx.fillRect(j * cell, i * cell, cell, cell);
            ctx.globalAlpha = 1;
            if (i !== j && current === spec.values[0] && panel.sig !== undefined && panel.sig[index(i, j)] === "1") {
              ctx.fillStyle = "#000";
              ctx.beginPath();
              ctx.arc(j * cell + cell / 2, i * cell + cell / 2, Math.max(1.5, cell * 0.17), 0, 2 * Math.PI);
              ctx.fill();
            }
          }
        }
      }
      var lit = [];
      function light(nodes) {
        lit.forEach(function (node) { node.classList.remove("on"); });
        lit = nodes;
        lit.forEach(function (node) { node.classList.add("on"); });
      }
      canvas.addEventListener("mousemove", function (event) {
        var box = canvas.getBoundingClientRect();
        var j = Math.floor((event.clientX - box.left) / cell), i = Math.floor((event.clientY - box.top) / cell);
        if (i < 0 || j < 0 || i >= m || j >= m) { hideTip(); return; }
        light([rows.items[i], cols.items[j]]);
        var lines = [spec.names[i] + " \u00D7 " + spec.names[j], panel.title];
        spec.values.forEach(function (name) {
          var v = value(name, i, j);
          lines.push(name + " = " + (v === null ? "\u2013" : fmt("num", v)));
        });
        if (i !== j && panel.p_adjusted) { lines.push("p_adjusted = " + fmt("p", panel.p_adjusted[index(i, j)])); }
        if (i !== j && panel.sig !== undefined) {
          lines.push(panel.sig[index(i, j)] === "1" ? "significant" : "not significant");
        }
        if (i !== j && panel.n_significant) {
          lines.push("significant in " + panel.n_significant[index(i, j)] + " of " + panel.n_groups + " groups");
        }
        showTip(event, lines.join("\n"));
      });
      canvas.addEventListener("mouseleave", function () { light([]); hideTip(); });
      return { draw: draw };
    });
    if (spec.summary) { panels = panels.concat(smallMultiples(root, spec, function () { return current; }, index)); }
    panels.forEach(function (p) { p.draw(); });
  }

  // Every group as an unlabelled thumbnail (about 150 px) in the summary's order; names and values on hover.
  function smallMultiples(root, spec, shown, index) {
    var m = spec.names.length, ratio = window.devicePixelRatio || 1;
    root.appendChild(make("p", "note", "Each group (" + spec.panels.length + "), in the same order as above:"));
    var holder = make("div", "hm-small");
    root.appendChild(holder);
    var cell = Math.max(1, Math.floor(150 / Math.max(m, 1))), size = m * cell;
    return spec.panels.map(function (panel) {
      var wrap = make("div", "hm-thumb");
      wrap.style.width = size + "px";
      var title = make("div", "hm-small-title", panel.title);
      title.title = panel.title;  // abbreviated with an ellipsis when longer than the panel; whole on hover
      wrap.appendChild(title);
      var canvas = make("canvas", "hm-canvas");
      canvas.width = Math.round(size * ratio); canvas.height = Math.round(size * ratio);
      canvas.style.width = size + "px"; canvas.style.height = size + "px";
      canvas.setAttribute("role", "img");
      canvas.setAttribute("aria-label", panel.title + ": heatmap of " + m + " test sets");
      wrap.appendChild(canvas);
      holder.appendChild(wrap);
      var ctx = canvas.getContext("2d");
      function draw() {
        var name = shown();
        ctx.setTransform(ratio, 0, 0, ratio, 0, 0);
        ctx.clearRect(0, 0, size, size);
        for (var i = 0; i < m; i++) {
          for (var j = 0; j < m; j++) {
            var v = i === j ? 1 : panel.values[name][index(i, j)];
            var shade = Math.max(0, Math.min(255, Math.round((v + 1) * 127.5)));
            ctx.fillStyle = v === null ? "#e8e8e8" : spec.palette[shade];
            var faded = name === spec.values[0] && i !== j && v !== null && panel.sig[index(i, j)] !== "1";
            ctx.globalAlpha = faded ? FADED : 1;
            ctx.fillRect(j * cell, i * cell, cell, cell);
          }
        }
        ctx.globalAlpha = 1;
      }
      canvas.addEventListener("mousemove", function (event) {
        var box = canvas.getBoundingClientRect();
        var j = Math.floor((event.clientX - box.left) / cell), i = Math.floor((event.clientY - box.top) / cell);
        if (i < 0 || j < 0 || i >= m || j >= m || i === j) { hideTip(); return; }
        var lines = [spec.names[i] + " \u00D7 " + spec.names[j], panel.title];
        spec.values.forEach(function (key) { lines.push(key + " = " + fmt("num", panel.values[key][index(i, j)])); });
        lines.push("p_adjusted = " + fmt("p", panel.p_adjusted[index(i, j)]));
        lines.push(panel.sig[index(i, j)] === "1" ? "significant" : "not significant");
        showTip(event, lines.join("\n"));
      });
      canvas.addEventListener("mouseleave", hideTip);
      return { draw: draw };
    });
  }

  // ---------------------------------------------------------- trajectories
  // More runs than this, and some model with several: each model as its median run and a band from its lowest
  // to its highest run, the runs themselves on demand (32 lines per panel were unreadable).
  var MAX_LINES = 12;
  function modelBands(spec) {
    var models = [], byModel = {};
    spec.groups.forEach(function (group, g) {
      if (!(group.model in byModel)) {
        byModel[group.model] = { label: group.model, color: group.color, members: [] };
        models.push(byModel[group.model]);
      }
      byModel[group.model].members.push(g);
    });
    return models;
  }
  function interpolate(xs, ys, x) {  // ys on the grid xs (ascending), at x; null outside or at a gap
    if (!xs.length || x < xs[0] || x > xs[xs.length - 1]) { return null; }
    for (var k = 1; k < xs.length; k++) {
      if (x <= xs[k]) {
        if (ys[k - 1] === null || ys[k] === null) { return x === xs[k] ? ys[k] : null; }
        var w = xs[k] === xs[k - 1] ? 0 : (x - xs[k - 1]) / (xs[k] - xs[k - 1]);
        return ys[k - 1] + w * (ys[k] - ys[k - 1]);
      }
    }
    return ys[0];
  }
  function bandOf(spec, model, panel, sx) {
    // On the first run's progress grid (x in display units): median, lowest and highest of the model's runs.
    var first = spec.groups[model.members[0]], grid = first.progress.map(sx), out = [];
    grid.forEach(function (x) {
      var values = [];
      model.members.forEach(function (g) {
        var ys = panel.series[g];
        if (!ys) { return; }
        var v = interpolate(spec.groups[g].progress.map(sx), ys, x);
        if (v !== null) { values.push(v); }
      });
      if (!values.length) { return; }
      values.sort(function (a, b) { return a - b; });
      var h = Math.floor(values.length / 2);
      var median = values.length % 2 ? values[h] : (values[h - 1] + values[h]) / 2;
      out.push([x, median, values[0], values[values.length - 1]]);
    });
    return out;
  }
  function buildTrajectories(root, spec) {
    var W = 190, H = 128, left = 40, right = 6, top = 16, bottom = 16;
    function tickText(v) {  // at most 6 characters, so that it fits left of the frame
      var a = Math.abs(v);
      return a !== 0 && (a < 1e-2 || a >= 1e4) ? v.toExponential(0) : String(Number(v.toPrecision(3)));
    }
    var models = modelBands(spec);
    var banded = spec.groups.length > MAX_LINES && models.length < spec.groups.length;
    var legend = make("div", "tm-legend");
    function stepText(s) {
      if (s >= 1e6) { return Number((s / 1e6).toPrecision(3)) + "M"; }
      return s >= 1e3 ? Number((s / 1e3).toPrecision(3)) + "k" : String(s);
    }
    if (banded) {
      var toggle = make("label", "tm-toggle");
      var runsBox = make("input");
      runsBox.type = "checkbox";
      toggle.appendChild(runsBox);
      toggle.appendChild(document.createTextNode(" show every run (" + spec.groups.length + ")"));
      runsBox.addEventListener("change", function () { root.classList.toggle("tm-runs-on", runsBox.checked); });
      root.appendChild(make("p", "note", "Each model: its median run (line) and the band from its lowest to its " +
        "highest run, over " + spec.groups.length + " runs of " + models.length + " models."));
      root.appendChild(toggle);
      models.forEach(function (model) {
        var item = make("span", "tm-item");
        var swatch = svg("svg", { width: 26, height: 10, "class": "tm-swatch" });
        swatch.appendChild(svg("rect", { x: 0, y: 0, width: 26, height: 10, fill: model.color, "fill-opacity": 0.25 }));
        swatch.appendChild(svg("line", { x1: 0, y1: 5, x2: 26, y2: 5, stroke: model.color, "stroke-width": 2.2 }));
        item.appendChild(swatch);
        item.appendChild(document.createTextNode(model.label + " (" + model.members.length + " runs)"));
        legend.appendChild(item);
      });
    }
    spec.groups.forEach(function (group) {
      if (banded) { return; }
      var item = make("span", "tm-item");
      var swatch = svg("svg", { width: 26, height: 8, "class": "tm-swatch" });
      swatch.appendChild(svg("line", { x1: 0, y1: 4, x2: 26, y2: 4, stroke: group.color, "stroke-width": 2.2,
                                       "stroke-dasharray": group.dash || "none" }));
      item.appendChild(swatch);
      item.appendChild(document.createTextNode(group.label + " (last step " + stepText(group.last_step) + ")"));
      legend.appendChild(item);
    });
    root.appendChild(legend);
    var holder = make("div", "tm-panels");
    root.appendChild(holder);
    // Training progress (step / the run's last step) on a log scale from 0.1% to 100%: 0 -> 0, 1 -> 1.
    var K = 999;
    function sx(p) { return Math.log10(1 + K * Math.max(0, p)) / Math.log10(1 + K); }
    var ticks = [[0.01, "1%"], [0.1, "10%"], [1, "100%"]];
    spec.panels.forEach(function (panel) {
      var lo = Infinity, hi = -Infinity;
      panel.series.forEach(function (values) {
        (values || []).forEach(function (v) { if (v !== null) { lo = Math.min(lo, v); hi = Math.max(hi, v); } });
      });
      if (!(hi > lo)) { hi = (isFinite(lo) ? lo : 0) + 0.5; lo = hi - 1; }
      var pad = (hi - lo) * 0.06;
      lo -= pad; hi += pad;
      var box = svg("svg", { width: W, height: H, viewBox: "0 0 " + W + " " + H, role: "img" });
      if (panel.role === "ID") { box.setAttribute("class", "id"); }
      var role = panel.role === "ID" ? " (ID)" : "";
      box.appendChild(svg("title", {}, panel.name + role + " \u2014 " + panel.ylabel));
      var tick = { "class": "tm-tick", "text-anchor": "end" };
      function at(x, y, attrs) { return Object.assign({ x: x, y: y }, attrs); }
      var heading = svg("text", at(4, 12, { "class": "tm-text" }), panel.label + role);
      box.appendChild(heading);
      box.appendChild(svg("text", at(left - 3, top + 8, tick), tickText(hi - pad)));
      box.appendChild(svg("text", at(left - 3, H - bottom, tick), tickText(lo + pad)));
      var frame = { width: W - left - right, height: H - top - bottom, fill: "none", stroke: "#ccc" };
      box.appendChild(svg("rect", at(left, top, frame)));
      function px(p) { return left + sx(p) * (W - left - right); }
      function py(v) { return top + (hi - v) / (hi - lo) * (H - top - bottom); }
      ticks.forEach(function (mark) {
        var x = px(mark[0]);
        box.appendChild(svg("line", { x1: x, y1: H - bottom, x2: x, y2: H - bottom + 3, stroke: "#999" }));
        var anchor = mark[0] === 1 ? "end" : "middle";
        box.appendChild(svg("text", at(mark[0] === 1 ? W - right : x, H - 4, { "class": "tm-tick",
                                                                                "text-anchor": anchor }), mark[1]));
      });
      if (banded) {
        models.forEach(function (model) {
          var band = bandOf(spec, model, panel, sx);
          if (!band.length) { return; }
          function X(x) { return left + x * (W - left - right); }
          var upper = band.map(function (b) { return X(b[0]).toFixed(1) + " " + py(b[3]).toFixed(1); });
          var lower = band.slice().reverse().map(function (b) {
            return X(b[0]).toFixed(1) + " " + py(b[2]).toFixed(1);
          });
          var area = svg("path", { d: "M" + upper.concat(lower).join("L") + "Z", fill: model.color, "fill-opacity": 0.2,
                                   stroke: "none" });
          area.appendChild(svg("title", {}, model.label + " \u2014 " + panel.name + ": lowest to highest of " +
                                            model.members.length + " runs"));
          box.appendChild(area);
          var line = svg("path", { d: "M" + band.map(function (b) { return X(b[0]).toFixed(1) + " " +
                                                                            py(b[1]).toFixed(1); }).join("L"),
                                   fill: "none", stroke: model.color, "stroke-width": 1.6 });
          line.appendChild(svg("title", {}, model.label + " \u2014 " + panel.name + ": median of " +
                                            model.members.length + " runs"));
          box.appendChild(line);
        });
      }
      spec.groups.forEach(function (group, g) {
        var values = panel.series[g];
        if (!values) { return; }
        var d = "", pen = "M";
        for (var k = 0; k < values.length; k++) {
          if (values[k] === null) { pen = "M"; continue; }
          d += pen + px(group.progress[k]).toFixed(1) + " " + py(values[k]).toFixed(1);
          pen = "L";
        }
        if (!d) { return; }
        var path = svg("path", { d: d, fill: "none", stroke: group.color, "stroke-width": 1.4, "stroke-opacity": 0.9 });
        if (group.dash) { path.setAttribute("stroke-dasharray", group.dash); }
        if (banded) { path.setAttribute("class", "tm-run"); }
        path.appendChild(svg("title", {}, group.label + " \u2014 " + panel.name + " (" +
                                          group.steps.length + " checkpoints, last step " +
                                          stepText(group.last_step) + ")"));
        box.appendChild(path);
      });
      holder.appendChild(box);
      // A name longer than the panel is abbreviated with an ellipsis (the whole name is the panel's tooltip).
      var room = W - 8;
      if (heading.getComputedTextLength && heading.getComputedTextLength() > room) {
        var text = panel.label + role;
        while (text.length > 4 && heading.getComputedTextLength() > room) {
          text = text.slice(0, -2);
          heading.textContent = text + "\u2026";
        }
      }
    });
  }

  var builders = [
    ["data-table", "tables", buildTable],
    ["data-heatmap", "heatmaps", buildHeatmaps],
    ["data-trajectories", "trajectories", buildTrajectories]
  ];
  builders.forEach(function (entry) {
    var nodes = document.querySelectorAll("[" + entry[0] + "]");
    Array.prototype.forEach.call(nodes, function (node) {
      var spec = (data[entry[1]] || {})[node.getAttribute(entry[0])];
      if (spec) { entry[2](node, spec); }
    });
  });
})();
"""
