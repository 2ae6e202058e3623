/* pysafetensors view: one checkpoint (or two, diffed) in the browser.
 *
 * Every string from the checkpoint (tensor names, metadata keys and values) is attacker-
 * controlled, so the page builds its DOM with createElement/textContent only: no innerHTML,
 * no string-built markup.  The data comes from the local server's JSON API, or, in an exported
 * report, from a JSON block embedded in the page (the same shapes), so one code path renders
 * both.  Lists are virtualised: only the rows in view exist in the DOM, so a 100,000-tensor
 * header renders as fast as a small one.
 */
"use strict";

const ROW = 26; // px, must match .row height in app.css
const state = { data: null, input: 0, tab: "overview", selected: null, query: "", sort: { key: "offset", desc: false },
  expanded: new Set([""]), embedded: false };

// ---- DOM helpers (text only) ------------------------------------------------------------
function el(tag, attrs, ...kids) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k === "class") node.className = v;
    else if (k === "on") for (const [ev, fn] of Object.entries(v)) node.addEventListener(ev, fn);
    else node.setAttribute(k, v === true ? "" : String(v));
  }
  for (const kid of kids.flat()) {
    if (kid === null || kid === undefined || kid === false) continue;
    node.appendChild(kid instanceof Node ? kid : document.createTextNode(String(kid)));
  }
  return node;
}
function clear(node) { while (node.firstChild) node.removeChild(node.firstChild); return node; }
const fmtInt = (n) => (n === null || n === undefined ? "" : Number(n).toLocaleString("en-US"));
function fmtBytes(n) {
  if (n === null || n === undefined) return "";
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let v = Number(n), u = 0;
  while (v >= 1024 && u < units.length - 1) { v /= 1024; u++; }
  return (u === 0 ? String(v) : v.toFixed(v >= 100 ? 0 : v >= 10 ? 1 : 2)) + " " + units[u];
}
function fmtNum(x) {
  if (x === null || x === undefined) return "";
  if (typeof x === "string") return x; // "inf", "-inf", "nan", exact big integers
  if (Number.isInteger(x)) return fmtInt(x);
  const a = Math.abs(x);
  return a !== 0 && (a < 1e-3 || a >= 1e6) ? x.toExponential(4) : x.toPrecision(6);
}
const shapeText = (s) => "[" + s.join(", ") + "]";

// ---- data access: the local server, or the JSON embedded in an exported report ------------
async function api(path, params) {
  const url = new URL(path, document.baseURI);
  for (const [k, v] of Object.entries(params || {})) url.searchParams.set(k, v);
  const reply = await fetch(url, { credentials: "same-origin", headers: { Accept: "application/json" } });
  const body = await reply.json().catch(() => ({ error: reply.statusText }));
  if (!reply.ok || body.error) throw new Error(body.error || reply.statusText);
  return body;
}
async function loadData() {
  const embedded = document.getElementById("pst-data");
  if (embedded) { state.embedded = true; return JSON.parse(embedded.textContent); }
  return api("api/checkpoint");
}
const current = () => state.data.inputs[state.input];
function tensorCount(inp) { return inp.tensors.name.length; }
function tensorRow(inp, i) {
  const t = inp.tensors;
  return { index: i, name: t.name[i], dtype: t.dtype[i], shape: t.shape[i], params: t.params[i], bytes: t.bytes[i],
    begin: t.begin[i], end: t.end[i], file: t.file ? t.file[i] : null };
}

// ---- search: substring, or a glob when the query holds * ? or [ --------------------------
function matcher(query) {
  const q = query.trim();
  if (!q) return null;
  if (/[*?[]/.test(q)) {
    let re = "";
    for (let i = 0; i < q.length; i++) {
      const c = q[i];
      if (c === "*") re += ".*";
      else if (c === "?") re += ".";
      else if (c === "[") {
        const end = q.indexOf("]", i + 1);
        if (end < 0) { re += "\\["; continue; }
        let body = q.slice(i + 1, end).replace(/\\/g, "\\\\");
        if (body.startsWith("!")) body = "^" + body.slice(1);
        re += "[" + body + "]"; i = end;
      } else re += c.replace(/[.+^${}()|\\\]]/g, "\\$&");
    }
    let rx;
    try { rx = new RegExp("^" + re + "$"); } catch { return (name) => name.includes(q); }
    return (name) => rx.test(name);
  }
  return (name) => name.includes(q);
}

// ---- tabs ---------------------------------------------------------------------------------
const TABS = [["overview", "Overview"], ["tree", "Tree"], ["table", "Table"], ["diff", "Diff"]];
function renderTabs() {
  const nav = clear(document.getElementById("tabs"));
  for (const [id, label] of TABS) {
    if (id === "diff" && !state.data.diff) continue;
    nav.appendChild(el("button", { class: state.tab === id ? "active" : "", "data-tab": id,
      on: { click: () => { state.tab = id; render(); } } }, label));
  }
  const picker = document.getElementById("input-picker");
  if (state.data.inputs.length > 1) {
    picker.hidden = false;
    clear(picker);
    state.data.inputs.forEach((inp, i) => picker.appendChild(el("option", { value: i, selected: i === state.input }, inp.label)));
    picker.onchange = () => { state.input = Number(picker.value); state.selected = null; state.expanded = new Set([""]); render(); };
  }
}
function render() {
  renderTabs();
  const inp = current();
  document.getElementById("title").textContent = inp.label;
  document.title = inp.label + " — pysafetensors view";
  const view = clear(document.getElementById("view"));
  if (state.tab === "overview") renderOverview(view, inp);
  else if (state.tab === "tree") renderTree(view, inp);
  else if (state.tab === "table") renderTable(view, inp);
  else if (state.tab === "diff") renderDiff(view);
  renderDetail();
}

// ---- overview -----------------------------------------------------------------------------
function card(label, value, id) {
  return el("div", { class: "card", id }, el("div", { class: "label" }, label), el("div", { class: "value" }, value));
}
function kvTable(obj, id) {
  const table = el("table", { class: "kv", id });
  for (const [k, v] of Object.entries(obj)) table.appendChild(el("tr", {}, el("td", {}, k), el("td", { class: "val" }, v)));
  return table;
}
function renderOverview(view, inp) {
  const s = inp.summary;
  view.appendChild(el("div", { class: "cards" },
    card("Parameters", fmtInt(s.parameter_count), "param-count"),
    card("Tensors", fmtInt(s.tensor_count), "tensor-count"),
    card(s.files ? "Total size" : "File size", fmtBytes(s.file_size) + " (" + fmtInt(s.file_size) + " B)"),
    card("Header", fmtBytes(s.header_size)),
    card("Format", inp.format + (inp.format_version ? " v" + inp.format_version : ""))));
  const dtypes = el("table", { class: "grid", id: "dtypes" },
    el("tr", {}, el("th", {}, "dtype"), el("th", { class: "num" }, "parameters"), el("th", { class: "num" }, "bytes")));
  for (const [dt, n] of Object.entries(s.parameters_by_dtype)) {
    dtypes.appendChild(el("tr", {}, el("td", {}, dt), el("td", { class: "num" }, fmtInt(n)),
      el("td", { class: "num" }, fmtBytes((s.bytes_by_dtype || {})[dt]))));
  }
  view.appendChild(el("h2", {}, "Parameters by dtype"), dtypes);
  if (s.files && s.files.length) {
    const shards = el("table", { class: "grid", id: "shards" }, el("tr", {}, el("th", {}, "shard"), el("th", { class: "num" }, "tensors")));
    const counts = {};
    (inp.tensors.file || []).forEach((f) => { counts[f] = (counts[f] || 0) + 1; });
    for (const f of s.files) shards.appendChild(el("tr", {}, el("td", {}, f), el("td", { class: "num" }, fmtInt(counts[f] || 0))));
    view.appendChild(el("h2", {}, "Shards (" + s.files.length + ")"), shards);
  }
  if (inp.modelspec && Object.keys(inp.modelspec).length) {
    const box = el("div", { class: "card modelspec", id: "modelspec" });
    if (inp.thumbnail) box.appendChild(el("img", { src: inp.thumbnail, alt: "ModelSpec thumbnail", id: "thumbnail" }));
    const fields = {};
    for (const [k, v] of Object.entries(inp.modelspec)) if (!(k === "modelspec.thumbnail" && inp.thumbnail)) fields[k] = v;
    box.appendChild(kvTable(fields));
    view.appendChild(el("h2", {}, "ModelSpec"), box);
  }
  const meta = inp.metadata || {};
  view.appendChild(el("h2", {}, "Metadata (" + Object.keys(meta).length + ")"));
  view.appendChild(Object.keys(meta).length ? kvTable(meta, "metadata") : el("p", { class: "muted" }, "No metadata."));
  if (inp.notes && inp.notes.length) view.appendChild(el("h2", {}, "Notes"), el("ul", {}, inp.notes.map((n) => el("li", {}, n))));
}

// ---- virtual list -------------------------------------------------------------------------
function virtualList(container, count, renderRow) {
  const spacer = el("div", { class: "spacer" });
  spacer.style.height = count * ROW + "px";
  container.appendChild(spacer);
  let drawn = "";
  function draw() {
    const first = Math.max(0, Math.floor(container.scrollTop / ROW) - 10);
    const last = Math.min(count, Math.ceil((container.scrollTop + container.clientHeight) / ROW) + 10);
    const key = first + ":" + last;
    if (key === drawn) return;
    drawn = key;
    clear(spacer);
    for (let i = first; i < last; i++) {
      const row = renderRow(i);
      row.style.top = i * ROW + "px";
      spacer.appendChild(row);
    }
  }
  container.addEventListener("scroll", () => requestAnimationFrame(draw));
  requestAnimationFrame(draw);
  draw();
}
function searchBox(onInput, placeholder) {
  const box = el("input", { type: "search", id: "search", placeholder, value: state.query, autocomplete: "off" });
  let timer = null;
  box.addEventListener("input", () => { clearTimeout(timer); timer = setTimeout(() => { state.query = box.value; onInput(); }, 60); });
  return box;
}
function selectTensor(i) { state.selected = i; renderDetail(); document.querySelectorAll(".row.selected").forEach((r) => r.classList.remove("selected")); }

// ---- tree: the server's tree (same numbers as inspect --tree), expanded on demand -----------
// node = [label, parameters, tensors, bytes, children, tensorIndex]; label is the dotted path.
function visibleNodes(root) {
  const out = [];
  (function walk(node, depth) {
    for (const child of node[4]) {
      out.push([child, depth]);
      if (child[4].length && state.expanded.has(child[0])) walk(child, depth + 1);
    }
  })(root, 0);
  return out;
}
function renderTree(view, inp) {
  const list = el("div", { class: "vlist", id: "tree" });
  const status = el("span", { class: "muted", id: "match-count" });
  const redraw = () => { clear(list); list.scrollTop = 0; fillTree(list, inp, status); };
  view.appendChild(el("div", { class: "toolbar" }, searchBox(redraw, "Filter tensors: substring or glob (e.g. *.attention.*)"), status,
    el("button", { class: "action", on: { click: () => { state.expanded = new Set([""]); redraw(); } } }, "Collapse all")));
  view.appendChild(list);
  fillTree(list, inp, status);
}
function fillTree(list, inp, status) {
  const match = matcher(state.query);
  if (match) { // filtering: the matching tensors, flat
    const hits = [];
    const names = inp.tensors.name;
    for (let i = 0; i < names.length; i++) if (match(names[i])) hits.push(i);
    status.textContent = fmtInt(hits.length) + " of " + fmtInt(names.length) + " tensors";
    virtualList(list, hits.length, (k) => tensorRowEl(inp, hits[k], 0));
    return;
  }
  status.textContent = fmtInt(tensorCount(inp)) + " tensors";
  const nodes = visibleNodes(inp.tree);
  virtualList(list, nodes.length, (k) => {
    const [node, depth] = nodes[k];
    const [path, params, count, , kids, index] = node;
    const label = depth === 0 ? path : path.slice(path.lastIndexOf(".", path.length - 1) + 1) || path;
    const open = state.expanded.has(path);
    const row = el("div", { class: "row" + (index >= 0 && index === state.selected ? " selected" : ""), "data-path": path },
      el("span", { class: "name" }, el("span", { class: "twisty" }, kids.length ? (open ? "▾" : "▸") : ""), labelFor(node, depth, label)),
      el("span", { class: "cell w1" }, index >= 0 ? inp.tensors.dtype[index] : ""),
      el("span", { class: "cell w2" }, index >= 0 ? shapeText(inp.tensors.shape[index]) : fmtInt(count) + " tensors"),
      el("span", { class: "cell w3" }, fmtInt(params)));
    row.style.paddingLeft = 8 + depth * 16 + "px";
    row.addEventListener("click", () => {
      if (kids.length) {
        if (open) state.expanded.delete(path); else state.expanded.add(path);
        const keep = list.scrollTop; clear(list); fillTree(list, inp, status); list.scrollTop = keep;
      }
      if (index >= 0) selectTensor(index);
    });
    return row;
  });
}
function labelFor(node, depth, label) { return depth === 0 ? node[0] : label; }
function tensorRowEl(inp, i, depth) {
  const r = tensorRow(inp, i);
  const row = el("div", { class: "row" + (i === state.selected ? " selected" : ""), "data-tensor": r.name },
    el("span", { class: "name" }, r.name),
    el("span", { class: "cell w1" }, r.dtype),
    el("span", { class: "cell w2" }, shapeText(r.shape)),
    el("span", { class: "cell w3" }, fmtInt(r.params)));
  row.style.paddingLeft = 8 + depth * 16 + "px";
  row.addEventListener("click", () => { selectTensor(i); row.classList.add("selected"); });
  return row;
}

// ---- table: flat, sortable ------------------------------------------------------------------
const COLUMNS = [["name", "name", "name"], ["dtype", "dtype", "cell w1"], ["shape", "shape", "cell w2"],
  ["params", "params", "cell w3"], ["bytes", "bytes", "cell w3"], ["offset", "offsets", "cell w4"]];
function sortedIndexes(inp, hits) {
  const t = inp.tensors, { key, desc } = state.sort;
  const val = {
    name: (i) => t.name[i], dtype: (i) => t.dtype[i], shape: (i) => t.shape[i].length * 1e15 + t.params[i],
    params: (i) => t.params[i], bytes: (i) => t.bytes[i], offset: (i) => (t.file ? t.file[i] : "") + ":" + String(t.begin[i]).padStart(20, "0"),
  }[key];
  const cmp = (a, b) => { const x = val(a), y = val(b); return x < y ? -1 : x > y ? 1 : 0; };
  hits.sort((a, b) => (desc ? -cmp(a, b) : cmp(a, b)));
  return hits;
}
function renderTable(view, inp) {
  const list = el("div", { class: "vlist", id: "table" });
  const status = el("span", { class: "muted", id: "match-count" });
  const redraw = () => { clear(list); list.scrollTop = 0; fillTable(list, inp, status); };
  view.appendChild(el("div", { class: "toolbar" }, searchBox(redraw, "Filter tensors: substring or glob"), status));
  view.appendChild(list);
  fillTable(list, inp, status);
}
function fillTable(list, inp, status) {
  const match = matcher(state.query);
  const hits = [];
  for (let i = 0; i < inp.tensors.name.length; i++) if (!match || match(inp.tensors.name[i])) hits.push(i);
  sortedIndexes(inp, hits);
  status.textContent = fmtInt(hits.length) + " tensors";
  const head = el("div", { class: "row head" });
  for (const [key, label, cls] of COLUMNS) {
    const arrow = state.sort.key === key ? (state.sort.desc ? " ▾" : " ▴") : "";
    head.appendChild(el("span", { class: cls, "data-sort": key, on: { click: () => {
      state.sort = { key, desc: state.sort.key === key ? !state.sort.desc : false };
      clear(list); fillTable(list, inp, status);
    } } }, label + arrow));
  }
  list.appendChild(head);
  virtualList(list, hits.length, (k) => {
    const r = tensorRow(inp, hits[k]);
    const row = el("div", { class: "row" + (r.index === state.selected ? " selected" : ""), "data-tensor": r.name },
      el("span", { class: "name" }, r.name), el("span", { class: "cell w1" }, r.dtype),
      el("span", { class: "cell w2" }, shapeText(r.shape)), el("span", { class: "cell w3" }, fmtInt(r.params)),
      el("span", { class: "cell w3" }, fmtBytes(r.bytes)),
      el("span", { class: "cell w4" }, (r.file ? r.file + " " : "") + "[" + r.begin + ", " + r.end + ")"));
    row.style.top = (k + 1) * ROW + "px";
    row.addEventListener("click", () => { selectTensor(r.index); row.classList.add("selected"); });
    return row;
  });
}

// ---- tensor detail, stats, histogram, heatmap ------------------------------------------------
function renderDetail() {
  const aside = document.getElementById("detail");
  if (state.selected === null || state.tab === "overview" || state.tab === "diff") { aside.hidden = true; return; }
  const inp = current(), r = tensorRow(inp, state.selected);
  aside.hidden = false;
  clear(aside);
  const info = { dtype: r.dtype, shape: shapeText(r.shape), parameters: fmtInt(r.params), bytes: fmtBytes(r.bytes) + " (" + fmtInt(r.bytes) + ")",
    data_offsets: "[" + r.begin + ", " + r.end + ")" };
  if (r.file) info.shard = r.file;
  const extra = inp.tensors.extra ? inp.tensors.extra[r.index] : null;
  if (extra) Object.assign(info, extra);
  const out = el("div", { id: "values" });
  aside.appendChild(el("div", { class: "detail" }, el("h3", { id: "detail-name" }, r.name), kvTable(info, "tensor-info"), out));
  const stored = inp.stats && inp.stats[r.name];
  if (stored) { showValues(out, stored, r); return; }
  if (state.embedded) { out.appendChild(el("p", { class: "muted" }, "Values are not in this report (export with --with-stats).")); return; }
  const button = el("button", { class: "action", id: "compute-stats" }, "Compute stats (reads " + fmtBytes(r.bytes) + ")");
  button.addEventListener("click", async () => {
    button.disabled = true; button.textContent = "Reading…";
    try { showValues(clear(out), await api("api/values", { i: state.input, name: r.name }), r); }
    catch (e) { clear(out).appendChild(el("p", { class: "error", id: "stats-error" }, String(e.message || e))); }
  });
  out.appendChild(button);
}
function showValues(out, v, r) {
  const s = v.stats;
  const table = {};
  for (const k of ["min", "max", "mean", "std", "nan", "inf", "zeros"]) if (k in s) table[k] = fmtNum(s[k]);
  out.appendChild(el("h2", {}, "Values"), kvTable(table, "stats"));
  if (v.histogram) {
    out.appendChild(el("h2", {}, "Histogram"));
    const c = el("canvas", { id: "histogram", width: 380, height: 150 });
    out.appendChild(c);
    drawHistogram(c, v.histogram);
  }
  if (v.heatmap) {
    const h = v.heatmap;
    out.appendChild(el("h2", {}, "Heatmap " + h.rows + "×" + h.cols + (h.reduced ? " (block means of " + shapeText(h.source_shape) + ")" : "")));
    const c = el("canvas", { id: "heatmap", width: Math.min(380, Math.max(h.cols, 64)), height: Math.min(380, Math.max(h.rows, 64)) });
    out.appendChild(c);
    out.appendChild(el("div", { class: "legend" }, el("span", {}, fmtNum(h.vmin)), el("span", {}, "0"), el("span", {}, fmtNum(h.vmax))));
    drawHeatmap(c, h);
  } else if (r && r.shape.length >= 2) {
    out.appendChild(el("p", { class: "muted" }, "No heatmap for this dtype."));
  }
}
function drawHistogram(canvas, hist) {
  const ctx = canvas.getContext("2d"), W = canvas.width, H = canvas.height;
  ctx.clearRect(0, 0, W, H);
  const counts = hist.counts, max = Math.max(1, ...counts);
  const bw = W / counts.length;
  ctx.fillStyle = "#3758c9";
  counts.forEach((n, i) => {
    const h = n ? Math.max(1, (Math.log1p(n) / Math.log1p(max)) * (H - 16)) : 0;
    ctx.fillRect(i * bw + 0.5, H - 14 - h, Math.max(1, bw - 1), h);
  });
  ctx.fillStyle = "#667085"; ctx.font = "10px sans-serif";
  ctx.fillText(fmtNum(hist.edges[0]), 2, H - 2);
  const right = fmtNum(hist.edges[hist.edges.length - 1]);
  ctx.fillText(right, W - ctx.measureText(right).width - 2, H - 2);
}
function drawHeatmap(canvas, h) {
  const ctx = canvas.getContext("2d");
  const img = ctx.createImageData(h.cols, h.rows);
  const lim = Math.max(Math.abs(h.vmin), Math.abs(h.vmax)) || 1;
  for (let i = 0; i < h.rows * h.cols; i++) {
    const v = h.values[i];
    let rgb;
    if (v === null) rgb = [255, 0, 255]; // NaN / no value
    else {
      const t = Math.max(-1, Math.min(1, v / lim)); // diverging: blue - white - red
      rgb = t < 0 ? [255 * (1 + t), 255 * (1 + t), 255] : [255, 255 * (1 - t), 255 * (1 - t)];
    }
    img.data.set([rgb[0], rgb[1], rgb[2], 255], i * 4);
  }
  const off = document.createElement("canvas");
  off.width = h.cols; off.height = h.rows;
  off.getContext("2d").putImageData(img, 0, 0);
  ctx.imageSmoothingEnabled = false;
  ctx.drawImage(off, 0, 0, canvas.width, canvas.height);
}

// ---- diff ------------------------------------------------------------------------------------
function renderDiff(view) {
  const d = state.data.diff;
  view.appendChild(el("div", { class: "cards" },
    card("Added", fmtInt(d.added.length), "diff-added"), card("Removed", fmtInt(d.removed.length), "diff-removed"),
    card("Changed", fmtInt(d.changed.length), "diff-changed"), card("Same", fmtInt(d.same_count), "diff-same")));
  const list = el("table", { class: "grid", id: "diff-tensors" }, el("tr", {}, el("th", {}, ""), el("th", {}, "tensor"), el("th", {}, "A"), el("th", {}, "B")));
  const desc = (t) => (t ? t.dtype + " " + shapeText(t.shape) : "");
  for (const t of d.added) list.appendChild(el("tr", {}, el("td", { class: "added" }, "+"), el("td", {}, t.name), el("td", {}), el("td", {}, desc(t))));
  for (const t of d.removed) list.appendChild(el("tr", {}, el("td", { class: "removed" }, "−"), el("td", {}, t.name), el("td", {}, desc(t)), el("td", {})));
  for (const c of d.changed) {
    const row = el("tr", { class: "changed-row", "data-tensor": c.name }, el("td", { class: "changed" }, "~"),
      el("td", {}, c.name, " ", el("span", { class: "badge" }, c.reason)), el("td", {}, desc(c.a)), el("td", {}, desc(c.b)));
    row.style.cursor = "pointer";
    row.addEventListener("click", () => showValueDiff(c));
    list.appendChild(row);
  }
  view.appendChild(el("h2", {}, "Tensors"), list);
  const meta = el("table", { class: "grid", id: "diff-metadata" }, el("tr", {}, el("th", {}, "key"), el("th", {}, "A"), el("th", {}, "B")));
  for (const m of d.metadata) meta.appendChild(el("tr", {}, el("td", {}, m.key), el("td", { class: "val" }, m.a ?? "—"), el("td", { class: "val" }, m.b ?? "—")));
  view.appendChild(el("h2", {}, "Metadata changes (" + d.metadata.length + ")"), d.metadata.length ? meta : el("p", { class: "muted" }, "None."));
}
async function showValueDiff(c) {
  const aside = document.getElementById("detail");
  aside.hidden = false;
  clear(aside);
  const out = el("div", { id: "value-diff" });
  aside.appendChild(el("div", { class: "detail" }, el("h3", {}, c.name), out));
  const stored = state.data.value_diffs && state.data.value_diffs[c.name];
  if (!stored && state.embedded) { out.appendChild(el("p", { class: "muted" }, "Value differences are not in this report.")); return; }
  out.appendChild(el("p", { class: "muted" }, "Comparing values…"));
  try {
    const v = stored || (await api("api/valuediff", { name: c.name }));
    clear(out);
    const rows = {};
    for (const [k, val] of Object.entries(v.diff)) if (typeof val !== "object" || val === null) rows[k] = fmtNum(val);
    out.appendChild(kvTable(rows, "value-diff-numbers"));
    if (v.histogram) {
      out.appendChild(el("h2", {}, "Differences (B − A)"));
      const canvas = el("canvas", { id: "diff-histogram", width: 380, height: 150 });
      out.appendChild(canvas);
      drawHistogram(canvas, v.histogram);
    }
  } catch (e) { clear(out).appendChild(el("p", { class: "error" }, String(e.message || e))); }
}

// ---- start ---------------------------------------------------------------------------------
loadData().then((data) => {
  state.data = data;
  if (data.diff) state.tab = "diff";
  render();
  document.body.setAttribute("data-ready", "1");
}).catch((e) => {
  const view = clear(document.getElementById("view"));
  view.appendChild(el("p", { class: "error", id: "load-error" }, "Could not load the checkpoint: " + String(e.message || e)));
  document.body.setAttribute("data-ready", "error");
});
