/* pysafetensors view: one checkpoint (or two, compared) in the browser.
 *
 * Every string from a checkpoint (tensor names, metadata keys and values) is attacker-controlled,
 * so the page builds its DOM with createElement and textContent only: no HTML parsed from strings,
 * no markup built from strings, no event-handler attributes, and lookups by name go through Map (never a
 * plain object, whose "__proto__" or "constructor" keys are not data).  The numbers come from the
 * server, computed by the same library functions as the CLI's inspect, stats and diff; the page
 * formats them and never recomputes them.
 *
 * The data is the local server's JSON (api/checkpoint, then api/values and api/valuediff on
 * demand) or, in an exported report, a JSON block embedded in the page with the same shape:
 *   {inputs: [{label, format, local, summary, metadata: [[k, v]] | null, modelspec: [[k, v]],
 *              thumbnail, tensors: {name: [], dtype: [], shape: [], params: [], bytes: [],
 *              begin: [], end: [], file: [] | null}, tree: {nodes: [], label: [], params: [],
 *              tensors: [], bytes: [], end: []}, stats: [{stats, histogram}] | null}],
 *    diff: (diff --json) | null, live}
 * A GGUF input (format "gguf") has the same fields; its summary adds gguf_version and alignment,
 * its metadata pairs are inspect's text (long arrays as length and first items) with
 * metadata_types beside them, dtype is the GGML type (Q4_K), and tensors.dims (GGUF's order) and
 * tensors.values (the dtype its values read as) are added.  diff.names gives, per input, the
 * names the diff shows for its tensors (a GGUF's mapped to Hugging Face names) or null.
 * The tree is flat: tree.nodes lists every node but the root depth first, a tensor as its index
 * in the columns (its label is its name after its group's path and a dot), group g as -1 - g;
 * the other tree arrays are per group (0 is the root), end[g] being where g's subtree ends in
 * nodes, so a collapsed group is skipped in one step.
 * Lists are virtualised: only the rows in view exist in the DOM, so a 100,000-tensor header
 * renders as fast as a small one.
 */
"use strict";

const ROW = 26; // px; .row's height in app.css
const AUTO_READ = 16 * 1024 * 1024; // a remote tensor up to this size is read on click; larger ones on request
const THUMBNAIL = /^data:image\/(png|jpeg|webp);base64,[A-Za-z0-9+/]+={0,2}$/;
const state = {
  data: null, input: 0, tab: "overview", selected: null, query: "", sort: { key: "offset", desc: false },
  expanded: new Set(), request: 0, diffFilter: null, log: false,
  answers: new Map(), // "input:tensor index" or "diff:name" -> a reply already fetched
};

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
    node.append(kid instanceof Node ? kid : document.createTextNode(String(kid)));
  }
  return node;
}
function clear(node) { while (node.firstChild) node.removeChild(node.firstChild); return node; }
function fmtInt(n) {
  if (n === null || n === undefined) return "";
  if (typeof n === "string") return n.replace(/\B(?=(\d{3})+(?!\d))/g, ","); // exact big integers
  return Number(n).toLocaleString("en-US");
}
// Sizes in decimal SI units with one decimal (90.9 MB, 11.4 kB; under 1,000: 999 B): the smallest
// unit whose value, rounded half up in integer arithmetic, stays under 1,000.0. The same text as
// the CLI's fmt_size (pysafetensors.cli._common), byte for byte.
const SIZE_UNITS = [["kB", 1e3], ["MB", 1e6], ["GB", 1e9], ["TB", 1e12], ["PB", 1e15]];
function fmtBytes(n) {
  if (n === null || n === undefined) return "";
  const v = Number(n);
  if (v < 1000) return v + " B";
  for (let i = 0; i < SIZE_UNITS.length; i++) {
    const [unit, scale] = SIZE_UNITS[i];
    const tenths = Math.floor((v * 10 + scale / 2) / scale);
    if (tenths < 10000 || i === SIZE_UNITS.length - 1) return Math.floor(tenths / 10) + "." + (tenths % 10) + " " + unit;
  }
  return v + " B";
}
function plural(n, word) { return fmtInt(n) + " " + word + (Number(n) === 1 ? "" : "s"); } // "1 tensor", "3 tensors"
function fmtNum(x) {
  if (x === null || x === undefined) return "—";
  if (typeof x === "string") return x; // "inf", "-inf", "nan", exact big integers
  if (typeof x === "boolean") return x ? "yes" : "no";
  if (Number.isInteger(x)) return fmtInt(x);
  const a = Math.abs(x);
  return a !== 0 && (a < 1e-4 || a >= 1e6) ? x.toExponential(5) : String(Number(x.toPrecision(6)));
}
const shapeText = (s) => "[" + s.join(", ") + "]";
function kvTable(pairs, id, across) { // across: pairs per table row (the detail panel shows two)
  const table = el("table", { class: "kv" + (across > 1 ? " compact" : ""), id });
  const n = across || 1;
  for (let i = 0; i < pairs.length; i += n) {
    const tr = el("tr");
    for (const [k, v] of pairs.slice(i, i + n)) tr.append(el("td", { class: "key" }, k), el("td", { class: "val" }, v));
    table.append(tr);
  }
  return table;
}
function card(label, value, id) {
  return el("div", { class: "card", id }, el("div", { class: "label" }, label), el("div", { class: "value" }, value));
}

function remember(key, value) { // the last 16 replies (a heatmap is a few MB)
  state.answers.delete(key);
  state.answers.set(key, value);
  if (state.answers.size > 16) state.answers.delete(state.answers.keys().next().value);
}

// ---- data: the local server, or the JSON embedded in an exported report --------------------
async function api(path, params) {
  const url = new URL(path, document.baseURI);
  for (const [k, v] of Object.entries(params || {})) url.searchParams.set(k, String(v));
  const reply = await fetch(url, { credentials: "same-origin", headers: { Accept: "application/json" } });
  const body = await reply.json().catch(() => ({ error: reply.status + " " + reply.statusText }));
  if (!reply.ok || body.error) throw new Error(body.error || reply.statusText);
  return body;
}
async function loadData() {
  const embedded = document.getElementById("pst-data");
  if (embedded) return Object.assign(JSON.parse(embedded.textContent), { live: false });
  return api("api/checkpoint");
}
const current = () => state.data.inputs[state.input];
function indexOf(inp) { // name -> tensor index
  if (!inp._index) { inp._index = new Map(); inp.tensors.name.forEach((n, i) => inp._index.set(n, i)); }
  return inp._index;
}
function tensorRow(inp, i) {
  const t = inp.tensors;
  const files = inp.summary.files;
  return { index: i, name: t.name[i], dtype: t.dtype[i], shape: t.shape[i], params: t.params[i], bytes: t.bytes[i],
    begin: t.begin[i], end: t.end[i], file: t.file && files ? files[t.file[i]] : null,
    dims: t.dims ? t.dims[i] : null, values: t.values ? t.values[i] : null };
}

// ---- search: a substring, or a shell glob (fnmatch: * ? [seq] [!seq]) when the query has * ? or [
function globToRegExp(q) {
  let re = "";
  for (let i = 0; i < q.length; i++) {
    const c = q[i];
    if (c === "*") re += "[\\s\\S]*";
    else if (c === "?") re += "[\\s\\S]";
    else if (c === "[") {
      let j = i + 1;
      if (q[j] === "!") j++;
      if (q[j] === "]") j++;
      while (j < q.length && q[j] !== "]") j++;
      if (j >= q.length) { re += "\\["; continue; }
      let body = q.slice(i + 1, j);
      const negate = body.startsWith("!");
      if (negate) body = body.slice(1);
      body = body.replace(/\\/g, "\\\\").replace(/\^/g, "\\^").replace(/\[/g, "\\[");
      re += "[" + (negate ? "^" : "") + body + "]";
      i = j;
    } else re += c.replace(/[.*+?^${}()|[\]\\/]/g, "\\$&");
  }
  return new RegExp("^" + re + "$", "u");
}
function matcher(query) {
  const q = query.trim();
  if (!q) return null;
  if (/[*?[]/.test(q)) {
    try { const rx = globToRegExp(q); return (name) => rx.test(name); } catch { /* fall through */ }
  }
  return (name) => name.includes(q);
}

// ---- a virtual list: a fixed-height scroller that holds only the rows in view ---------------
class VList {
  constructor(id, head) {
    this.box = el("div", { class: "vlist", id });
    this.head = head || null;
    this.spacer = el("div", { class: "spacer" });
    if (this.head) this.box.append(this.head);
    this.box.append(this.spacer);
    this.count = 0; this.render = null; this.drawn = "";
    this.box.addEventListener("scroll", () => this.draw());
  }
  set(count, render, keepScroll) {
    this.count = count; this.render = render; this.drawn = "";
    this.spacer.style.height = count * ROW + "px";
    if (!keepScroll) this.box.scrollTop = 0;
    this.draw();
    requestAnimationFrame(() => this.draw()); // once laid out, the real height is known
  }
  draw() {
    const top = this.box.scrollTop - (this.head ? ROW : 0);
    const height = this.box.clientHeight || 600;
    const first = Math.max(0, Math.floor(top / ROW) - 8);
    const last = Math.min(this.count, Math.ceil((top + height) / ROW) + 8);
    const key = first + ":" + last + ":" + this.count;
    if (key === this.drawn) return;
    this.drawn = key;
    clear(this.spacer);
    for (let i = first; i < last; i++) {
      const row = this.render(i);
      row.style.top = i * ROW + "px";
      this.spacer.append(row);
    }
  }
}
function searchBox(onInput, placeholder) {
  const box = el("input", { type: "search", id: "search", placeholder, autocomplete: "off", spellcheck: "false" });
  box.value = state.query;
  let timer = null;
  box.addEventListener("input", () => { clearTimeout(timer); timer = setTimeout(() => { state.query = box.value; onInput(); }, 40); });
  return box;
}

// ---- tabs -----------------------------------------------------------------------------------
const TABS = [["overview", "Overview"], ["tree", "Tree"], ["table", "Table"], ["diff", "Diff"]];
function renderTabs() {
  const nav = clear(document.getElementById("tabs"));
  for (const [id, label] of TABS) {
    if (id === "diff" && !state.data.diff) continue;
    nav.append(el("button", { class: state.tab === id ? "active" : "", "data-tab": id,
      on: { click: () => { state.tab = id; render(); } } }, label));
  }
  const picker = document.getElementById("input-picker");
  if (state.data.inputs.length > 1) {
    document.getElementById("input-picker-label").hidden = false;
    clear(picker);
    state.data.inputs.forEach((inp, i) => picker.append(el("option", { value: i, selected: i === state.input },
      (i === 0 ? "A: " : "B: ") + inp.label)));
    picker.onchange = () => { state.input = Number(picker.value); state.selected = null; state.expanded = new Set(); render(); };
  }
}
function render() {
  renderTabs();
  const inp = current();
  const title = state.data.diff ? state.data.inputs.map((x) => x.label).join("  vs  ") : inp.label;
  document.getElementById("title").textContent = title;
  document.title = title + " — pysafetensors view";
  const view = clear(document.getElementById("view"));
  if (state.tab === "overview") renderOverview(view, inp);
  else if (state.tab === "tree") renderTree(view, inp);
  else if (state.tab === "table") renderTable(view, inp);
  else if (state.tab === "diff") renderDiff(view);
  if (state.tab === "diff") document.getElementById("detail").hidden = true;
  else renderDetail();
}

// ---- overview: what inspect prints ------------------------------------------------------------
function renderOverview(view, inp) {
  const s = inp.summary;
  const cards = el("div", { class: "cards" },
    card("Parameters", fmtInt(s.parameter_count), "param-count"),
    card("Tensors", fmtInt(s.tensor_count), "tensor-count"),
    card(s.files ? "Total size" : "File size", fmtBytes(s.file_size), "file-size"),
    card("Header", fmtBytes(s.header_size), "header-size"),
    card("Format", inp.format === "gguf" ? "GGUF v" + s.gguf_version : inp.format, "format"));
  if (s.files) cards.append(card("Shards", fmtInt(s.files.length), "shard-count"));
  if (inp.format === "gguf") cards.append(card("Alignment", fmtInt(s.alignment), "alignment"));
  view.append(cards);
  view.append(el("p", { class: "muted", id: "path" }, s.path + ": " + fmtInt(s.file_size) + " bytes, header "
    + fmtInt(s.header_size) + " bytes"));
  const typeWord = inp.format === "gguf" ? "type" : "dtype"; // GGUF: the GGML type (Q4_K, F32...)
  const dtypes = el("table", { class: "grid", id: "dtypes" },
    el("tr", {}, el("th", {}, typeWord), el("th", { class: "num" }, "parameters"), el("th", { class: "num" }, "bytes")));
  for (const [dt, n] of Object.entries(s.parameters_by_dtype)) {
    const bytes = s.bytes_by_dtype[dt];
    dtypes.append(el("tr", {}, el("td", {}, dt), el("td", { class: "num" }, fmtInt(n)),
      el("td", { class: "num" }, fmtInt(bytes) + " (" + fmtBytes(bytes) + ")")));
  }
  view.append(el("h2", {}, "Parameters by " + typeWord), dtypes);
  if (s.files) {
    const shards = el("table", { class: "grid", id: "shards" }, el("tr", {}, el("th", {}, "#"), el("th", {}, "shard")));
    s.files.forEach((f, i) => shards.append(el("tr", {}, el("td", { class: "num" }, i + 1), el("td", {}, f))));
    view.append(el("h2", {}, "Shards"), shards);
  }
  if (inp.modelspec && inp.modelspec.length) {
    const box = el("div", { class: "card modelspec", id: "modelspec" });
    const image = inp.thumbnail && THUMBNAIL.test(inp.thumbnail) ? inp.thumbnail : null;
    if (image) box.append(el("img", { src: image, alt: "ModelSpec thumbnail", id: "thumbnail" }));
    const fields = inp.modelspec.filter(([k]) => !(image && k === "modelspec.thumbnail"))
      .map(([k, v]) => [k.slice("modelspec.".length), v]);
    box.append(kvTable(fields, "modelspec-fields"));
    view.append(el("h2", {}, "ModelSpec"), box);
  }
  const where = s.files ? " (from the index)" : "";
  if (inp.format === "gguf") { // typed key/value pairs: key, type, value as inspect shows it
    view.append(el("h2", {}, "Metadata (" + inp.metadata.length + ")"));
    const table = el("table", { class: "grid", id: "metadata" },
      el("tr", {}, el("th", {}, "key"), el("th", {}, "type"), el("th", {}, "value")));
    inp.metadata.forEach(([k, v], i) => table.append(el("tr", {}, el("td", { class: "key" }, k),
      el("td", { class: "type" }, inp.metadata_types[i]), el("td", { class: "val" }, v))));
    view.append(inp.metadata.length ? table : el("p", { class: "muted" }, "Empty."));
  } else if (inp.metadata === null) view.append(el("h2", {}, "Metadata" + where), el("p", { class: "muted" }, "No metadata."));
  else {
    view.append(el("h2", {}, "Metadata (" + inp.metadata.length + ")" + where));
    view.append(inp.metadata.length ? kvTable(inp.metadata, "metadata") : el("p", { class: "muted" }, "Empty."));
  }
  for (const group of s.shard_metadata || []) {
    view.append(el("h2", {}, "Shard header metadata: " + group.files.join(", ")));
    view.append(group.metadata ? kvTable(Object.entries(group.metadata)) : el("p", { class: "muted" }, "None."));
  }
  if (s.metadata_disagreements && s.metadata_disagreements.length) {
    const list = el("ul", { id: "disagreements" });
    for (const d of s.metadata_disagreements) {
      const parts = (d.index !== null ? ["index " + JSON.stringify(d.index)] : [])
        .concat(Object.entries(d.shards).map(([f, v]) => f + " " + (v === null ? "(absent)" : JSON.stringify(v))));
      list.append(el("li", { class: "changed" }, "shard headers disagree on " + d.key + ": " + parts.join(", ")));
    }
    view.append(el("h2", {}, "Disagreements"), list);
  }
}

// ---- tree: the server's tree (inspect --tree's numbers), groups expanded on demand ---------------
function visibleNodes(tree) { // [tensor index or -1 - group, depth, path (groups) or label start (tensors)]
  const nodes = tree.nodes, out = [];
  const open = []; // the expanded groups we are inside: [end, path]
  let i = 0;
  while (i < nodes.length) {
    while (open.length && i >= open[open.length - 1][0]) open.pop();
    const depth = open.length, parent = depth ? open[depth - 1][1] : "";
    const n = nodes[i];
    if (n >= 0) { out.push([n, depth, depth ? parent.length + 1 : 0]); i++; continue; }
    const g = -1 - n, path = depth ? parent + "." + tree.label[g] : tree.label[g];
    out.push([n, depth, path]);
    if (state.expanded.has(path)) { open.push([tree.end[g], path]); i++; } else i = tree.end[g];
  }
  return out;
}
function tensorCells(inp, i) {
  const t = inp.tensors;
  return [el("span", { class: "cell w1" }, t.dtype[i]), el("span", { class: "cell w2" }, shapeText(t.shape[i])),
    el("span", { class: "cell w3" }, fmtInt(t.params[i]))];
}
function renderTree(view, inp) {
  const list = new VList("tree");
  const status = el("span", { class: "muted", id: "match-count" });
  const fill = (keep) => fillTree(list, inp, status, keep);
  view.append(el("div", { class: "toolbar" }, searchBox(() => fill(false), "Filter: substring, or glob (e.g. *.attention.*)"),
    status, el("button", { class: "action", id: "collapse", on: { click: () => { state.expanded = new Set(); fill(false); } } }, "Collapse all")));
  view.append(list.box);
  fill(false);
}
function fillTree(list, inp, status, keep) {
  const match = matcher(state.query);
  const names = inp.tensors.name;
  if (match) { // filtering: the matching tensors by full name
    const hits = [];
    for (let i = 0; i < names.length; i++) if (match(names[i])) hits.push(i);
    status.textContent = fmtInt(hits.length) + " of " + plural(names.length, "tensor");
    list.set(hits.length, (k) => tensorLine(inp, hits[k], names[hits[k]], 0), keep);
    return;
  }
  status.textContent = plural(names.length, "tensor");
  const tree = inp.tree, nodes = visibleNodes(tree);
  list.set(nodes.length, (k) => {
    const [n, depth, where] = nodes[k];
    if (n >= 0) { const label = names[n].slice(where); return tensorLine(inp, n, label === "" ? '""' : label, depth); }
    const g = -1 - n, path = where, label = tree.label[g], params = tree.params[g], count = tree.tensors[g];
    const open = state.expanded.has(path);
    const row = el("div", { class: "row group", "data-path": path },
      el("span", { class: "name" }, el("span", { class: "twisty" }, open ? "▾" : "▸"), label === "" ? '""' : label),
      el("span", { class: "cell w1" }, ""), el("span", { class: "cell w2" }, plural(count, "tensor")),
      el("span", { class: "cell w3" }, fmtInt(params)));
    row.style.paddingLeft = 8 + depth * 16 + "px";
    row.addEventListener("click", () => {
      if (open) state.expanded.delete(path); else state.expanded.add(path);
      fillTree(list, inp, status, true);
    });
    return row;
  }, keep);
}
function tensorLine(inp, i, label, depth) {
  const row = el("div", { class: "row" + (i === state.selected ? " selected" : ""), "data-tensor": inp.tensors.name[i] },
    el("span", { class: "name" }, el("span", { class: "twisty" }, ""), label), ...tensorCells(inp, i));
  row.style.paddingLeft = 8 + depth * 16 + "px";
  row.addEventListener("click", () => selectTensor(i, row));
  return row;
}
function selectTensor(i, row) {
  state.selected = i;
  document.querySelectorAll(".row.selected").forEach((r) => r.classList.remove("selected"));
  if (row) row.classList.add("selected");
  renderDetail();
}

// ---- table: flat, sortable -----------------------------------------------------------------------
const COLUMNS = [["name", "name", "name"], ["dtype", "dtype", "cell w1"], ["shape", "shape", "cell w2"],
  ["params", "parameters", "cell w3"], ["bytes", "bytes", "cell w3"], ["offset", "data offsets", "cell w4"]];
function sortedOrder(inp) { // cached per input and key; descending is the reverse
  inp._orders = inp._orders || new Map();
  const key = state.sort.key;
  if (!inp._orders.has(key)) {
    const t = inp.tensors, n = t.name.length;
    const order = Array.from({ length: n }, (_, i) => i);
    const by = {
      name: (a, b) => (t.name[a] < t.name[b] ? -1 : t.name[a] > t.name[b] ? 1 : 0),
      dtype: (a, b) => (t.dtype[a] < t.dtype[b] ? -1 : t.dtype[a] > t.dtype[b] ? 1 : 0) || a - b,
      shape: (a, b) => { const x = t.shape[a], y = t.shape[b]; if (x.length !== y.length) return x.length - y.length;
        for (let k = 0; k < x.length; k++) if (x[k] !== y[k]) return x[k] - y[k]; return a - b; },
      params: (a, b) => t.params[a] - t.params[b] || a - b,
      bytes: (a, b) => t.bytes[a] - t.bytes[b] || a - b,
      offset: null, // file order: the order the columns come in
    }[key];
    if (by) order.sort(by);
    inp._orders.set(key, order);
  }
  const order = inp._orders.get(key);
  return state.sort.desc ? order.slice().reverse() : order;
}
function renderTable(view, inp) {
  const head = el("div", { class: "row head" });
  const list = new VList("table", head);
  const status = el("span", { class: "muted", id: "match-count" });
  view.append(el("div", { class: "toolbar" }, searchBox(() => fillTable(list, inp, status), "Filter: substring, or glob"), status));
  view.append(list.box);
  fillTable(list, inp, status);
}
function fillTable(list, inp, status) {
  const head = clear(list.head);
  for (const [key, label, cls] of COLUMNS) {
    const arrow = state.sort.key === key ? (state.sort.desc ? " ▾" : " ▴") : "";
    head.append(el("span", { class: cls, "data-sort": key, on: { click: () => {
      state.sort = { key, desc: state.sort.key === key ? !state.sort.desc : false };
      fillTable(list, inp, status);
    } } }, label + arrow));
  }
  const match = matcher(state.query);
  const names = inp.tensors.name;
  const order = sortedOrder(inp);
  const hits = match ? order.filter((i) => match(names[i])) : order;
  status.textContent = fmtInt(hits.length) + " of " + plural(names.length, "tensor");
  list.set(hits.length, (k) => {
    const r = tensorRow(inp, hits[k]);
    const row = el("div", { class: "row" + (r.index === state.selected ? " selected" : ""), "data-tensor": r.name },
      el("span", { class: "name" }, r.name), ...tensorCells(inp, r.index),
      el("span", { class: "cell w3" }, fmtBytes(r.bytes)),
      el("span", { class: "cell w4" }, (r.file ? r.file + " " : "") + "[" + r.begin + ", " + r.end + ")"));
    row.addEventListener("click", () => selectTensor(r.index, row));
    return row;
  });
}

// ---- tensor detail: header facts, then stats, histogram and heatmap ------------------------------
function renderDetail() {
  const aside = document.getElementById("detail");
  if (state.selected === null || state.tab === "overview") { aside.hidden = true; return; }
  const inp = current(), r = tensorRow(inp, state.selected);
  aside.hidden = false;
  clear(aside);
  const info = [[r.dims ? "type" : "dtype", r.dtype], ["shape", shapeText(r.shape)], ["parameters", fmtInt(r.params)],
    ["bytes", fmtInt(r.bytes) + " (" + fmtBytes(r.bytes) + ")"], ["data_offsets", "[" + r.begin + ", " + r.end + ")"]];
  if (r.file) info.push(["shard", r.file]);
  if (r.dims) { // GGUF: dims in the file's order, and what the values read as
    info.splice(2, 0, ["GGUF dims", shapeText(r.dims)]);
    info.push(["values", r.values === r.dtype ? r.values : r.values + " (dequantized by gguf-py)"]);
  }
  const out = el("div", { id: "values" });
  aside.append(el("div", { class: "detail" }, el("h3", { id: "detail-name" }, r.name), kvTable(info, "tensor-info"), out));
  if (!state.data.live) {
    const stored = inp.stats ? inp.stats[r.index] : null;
    if (stored) showValues(out, stored, r);
    else out.append(el("p", { class: "muted" }, "Values are not in this report (export with --with-stats)."));
    return;
  }
  const key = state.input + ":" + r.index;
  if (state.answers.has(key)) { showValues(out, state.answers.get(key), r); return; }
  const load = () => {
    const ticket = ++state.request;
    clear(out).append(el("p", { class: "muted", id: "reading" }, "Reading " + fmtBytes(r.bytes) + "…"));
    api("api/values", { i: state.input, name: r.name }).then((v) => {
      remember(key, v);
      if (ticket === state.request) showValues(clear(out), v, r);
    }).catch((e) => {
      if (ticket === state.request) clear(out).append(el("p", { class: "error", id: "stats-error" }, String(e.message || e)));
    });
  };
  if (inp.local || r.bytes <= AUTO_READ) load();
  else out.append(el("button", { class: "action", id: "compute-stats", on: { click: load } },
    "Read values (" + fmtBytes(r.bytes) + " over the network)"));
}
function showValues(out, v, r) {
  if (v.error) { out.append(el("p", { class: "error", id: "stats-error" }, v.error)); return; } // e.g. a GGML type gguf-py cannot read
  const s = v.stats;
  const rows = [["elements", fmtInt(s.elements)]];
  for (const k of ["min", "max", "mean", "std", "nan", "inf", "zeros"]) rows.push([k, fmtNum(s[k])]);
  out.append(el("h2", {}, "Values"), kvTable(rows, "stats", 2));
  if (v.histogram) out.append(histogramBox(v.histogram, "histogram", "Histogram of " + v.histogram.of));
  if (v.heatmap) {
    const h = v.heatmap;
    const cellsDown = h.cells.length, cellsAcross = cellsDown ? h.cells[0].length : 0;
    out.append(el("h2", {}, "Heatmap"));
    out.append(el("p", { class: "muted" }, h.rows + " × " + h.cols + " matrix in " + cellsDown + " × " + cellsAcross
      + " cells (" + (h.reduce === "mean" ? "mean" : "largest magnitude") + " of each)"));
    const width = 392, aspect = h.rows / Math.max(1, h.cols);
    const c = el("canvas", { id: "heatmap", width, height: Math.round(Math.max(48, Math.min(320, width * aspect))) });
    out.append(c);
    const sc = heatScale(h);
    out.append(el("div", { class: "legend", id: "heatmap-legend" }, el("span", {}, "min " + fmtNum(h.min)),
      el("span", { class: "scale" }, "colours span " + fmtNum(sc.lo) + " to " + fmtNum(sc.hi)), el("span", {}, "max " + fmtNum(h.max))));
    drawHeatmap(c, h);
  } else if (r && r.shape.length >= 2 && state.data.live) {
    out.append(el("p", { class: "muted" }, "No heatmap."));
  } else if (r && r.shape.length >= 2) {
    out.append(el("p", { class: "muted" }, "Heatmaps are drawn by the live viewer (pysafetensors view FILE)."));
  }
}
function histogramBox(hist, id, title) {
  const box = el("div", { class: "hist" });
  const canvas = el("canvas", { id, width: 392, height: 120 });
  const toggle = el("label", { class: "muted small" }, el("input", { type: "checkbox", checked: state.log }), " log scale");
  toggle.firstChild.addEventListener("change", (e) => { state.log = e.target.checked; drawHistogram(canvas, hist); });
  box.append(el("h2", {}, title));
  box.append(toggle);
  box.append(canvas);
  const notes = [fmtInt(hist.finite) + " finite"];
  if (hist.nan) notes.push(fmtInt(hist.nan) + " NaN");
  if (hist.inf) notes.push(fmtInt(hist.inf) + " ±Inf");
  if (hist.outside) notes.push(fmtInt(hist.outside) + " outside the range");
  box.append(el("p", { class: "muted small" }, hist.counts.length + " bins, " + notes.join(", ")));
  drawHistogram(canvas, hist);
  return box;
}
function drawHistogram(canvas, hist) {
  const ctx = canvas.getContext("2d"), W = canvas.width, H = canvas.height, base = H - 16;
  ctx.fillStyle = "#ffffff"; ctx.fillRect(0, 0, W, H);
  const counts = hist.counts, scale = state.log ? Math.log1p : (x) => x;
  const max = Math.max(1, ...counts.map(scale));
  const bw = W / counts.length;
  ctx.fillStyle = "#3758c9";
  counts.forEach((n, i) => {
    const h = n ? Math.max(1, (scale(n) / max) * (base - 4)) : 0;
    ctx.fillRect(i * bw + 0.5, base - h, Math.max(1, bw - 1), h);
  });
  ctx.fillStyle = "#98a2b3"; ctx.fillRect(0, base, W, 1);
  const lo = hist.edges[0], hi = hist.edges[hist.edges.length - 1];
  if (lo < 0 && hi > 0) { ctx.fillRect(((0 - lo) / (hi - lo)) * W, 0, 1, base); }
  ctx.fillStyle = "#475467"; ctx.font = "10px sans-serif";
  ctx.fillText(fmtNum(lo), 2, H - 3);
  const right = fmtNum(hi);
  ctx.fillText(right, W - ctx.measureText(right).width - 2, H - 3);
}
// The colour scale spans the 1st to 99th percentile of the cells (a few outliers would wash out the
// rest); diverging blue-white-red around 0 when the cells have both signs, else white to blue.
function heatScale(h) {
  const vals = [];
  for (const line of h.cells) for (const v of line) if (v !== null) vals.push(v);
  if (!vals.length) return { diverging: false, lo: 0, hi: 1 };
  vals.sort((x, y) => x - y);
  const q = (p) => vals[Math.min(vals.length - 1, Math.floor(p * (vals.length - 1)))];
  if (h.min < 0 && h.max > 0) {
    const lim = Math.max(-q(0.01), q(0.99)) || Math.max(-h.min, h.max);
    return { diverging: true, lo: -lim, hi: lim };
  }
  const lo = q(0.01), hi = q(0.99);
  return hi > lo ? { diverging: false, lo, hi } : { diverging: false, lo: h.min, hi: h.max };
}
function heatColor(v, sc) {
  if (v === null) return [208, 213, 221];
  if (sc.diverging) {
    const t = Math.max(-1, Math.min(1, v / sc.hi));
    return t < 0 ? [255 * (1 + t) + 20 * -t, 255 * (1 + t) + 60 * -t, 255 - 80 * -t]
      : [255 - 75 * t, 255 * (1 - t) + 20 * t, 255 * (1 - t) + 30 * t];
  }
  const t = sc.hi > sc.lo ? Math.max(0, Math.min(1, (v - sc.lo) / (sc.hi - sc.lo))) : 0.5;
  return [255 - 215 * t, 255 - 170 * t, 255 - 90 * t];
}
function drawHeatmap(canvas, h) {
  const ctx = canvas.getContext("2d");
  const rows = h.cells.length, cols = rows ? h.cells[0].length : 0;
  ctx.fillStyle = "#f2f4f7"; ctx.fillRect(0, 0, canvas.width, canvas.height);
  if (!rows || !cols) return;
  const img = ctx.createImageData(cols, rows);
  const sc = heatScale(h);
  for (let i = 0; i < rows; i++) {
    const line = h.cells[i];
    for (let j = 0; j < cols; j++) {
      const [r, g, b] = heatColor(line[j], sc);
      img.data.set([r, g, b, 255], (i * cols + j) * 4);
    }
  }
  const off = document.createElement("canvas");
  off.width = cols; off.height = rows;
  off.getContext("2d").putImageData(img, 0, 0);
  ctx.imageSmoothingEnabled = false;
  ctx.drawImage(off, 0, 0, canvas.width, canvas.height);
}

// ---- diff: the diff command's result; value differences on demand ----------------------------------
// The verdicts (d.compared, d.verdict, d.tensor_verdicts, d.verdict_counts) are the diff command's,
// computed once by pysafetensors.tools.diff: the page prints them as they are and never a stronger word.
const EQUAL_VERDICTS = new Set(["identical", "values equal"]); // what "hide equal tensors" hides
const KIND_TEXT = new Map([["+", "added"], ["-", "removed"], ["~", "changed"]]);
const VERDICT_CLASS = new Map([["values differ", "changed"], ["within tolerance", "changed"],
  ["values not compared", "unchecked"], ["identical", "muted"], ["values equal", "muted"]]);
const COMPARED_TEXT = new Map([["structure", "structure only"], ["bytes", "tensor bytes"], ["values", "tensor values"]]);
function diffEntries() { // every tensor of A or B with its kind and verdict from the diff result, by name
  const d = state.data.diff;
  if (d._entries) return d._entries;
  const kind = new Map();
  for (const t of d.tensors_added) kind.set(t.name, "+");
  for (const t of d.tensors_removed) kind.set(t.name, "-");
  for (const c of d.tensors_changed) kind.set(c.name, "~");
  const values = new Map();
  for (const v of d.values || []) values.set(v.name, v);
  const verdicts = new Map(Object.entries(d.tensor_verdicts));
  const [a, b] = state.data.inputs;
  const shown = d.names || [null, null]; // a GGUF's names as the diff shows them (mapped to Hugging Face names)
  const namesA = shown[0] || a.tensors.name;
  const names = namesA.concat(d.tensors_added.map((t) => t.name));
  const entries = names.map((name) => {
    const k = kind.get(name) || "=";
    const label = k === "=" ? verdicts.get(name) : KIND_TEXT.get(k);
    return { name, kind: k, label, value: values.get(name) || null };
  });
  d._entries = entries; d._values = values;
  const byName = (inp, list) => { if (!list) return indexOf(inp); const m = new Map(); list.forEach((n, i) => m.set(n, i)); return m; };
  d._inA = byName(a, shown[0]); d._inB = byName(b, shown[1]);
  return entries;
}
function renderDiff(view) {
  const d = state.data.diff;
  const entries = diffEntries();
  const slug = (text) => text.replace(/[^a-z]+/g, "-");
  const cards = el("div", { class: "cards" },
    card("Added", fmtInt(d.tensors_added.length), "diff-added"), card("Removed", fmtInt(d.tensors_removed.length), "diff-removed"),
    card("Changed", fmtInt(d.tensors_changed.length), "diff-changed"));
  for (const [verdict, n] of Object.entries(d.verdict_counts)) {
    cards.append(card(verdict[0].toUpperCase() + verdict.slice(1), fmtInt(n), "diff-" + slug(verdict)));
  }
  cards.append(card("Metadata", d.metadata_compared === false ? "not compared" : Object.keys(d.metadata_added).length + " added, "
      + Object.keys(d.metadata_removed).length + " removed, " + Object.keys(d.metadata_changed).length + " changed", "diff-metadata-count"),
    card("Compared", COMPARED_TEXT.get(d.compared) || d.compared, "diff-compared"),
    card("Result", d.verdict, "diff-result"));
  if (d.values) {
    const differing = d.values.filter((v) => v.verdict === "values differ" || !v.compared).length;
    cards.append(card("Values", fmtInt(differing) + " of " + fmtInt(d.values.length) + " differ", "diff-values"));
  }
  view.append(cards);
  if (d.compared === "structure") {
    view.append(el("p", { class: "muted", id: "diff-not-compared" }, "Tensor values were not compared (an input is a URL): "
      + "click a tensor to compare its values, or run pysafetensors diff --values."));
  }
  view.append(el("p", { class: "muted" }, "A: " + d.a + "   B: " + d.b));
  const meta = el("table", { class: "grid", id: "diff-metadata" }, el("tr", {}, el("th", {}, ""), el("th", {}, "key"), el("th", {}, "A"), el("th", {}, "B")));
  const keys = (o) => Object.keys(o).sort();
  for (const k of keys(d.metadata_added)) meta.append(el("tr", {}, el("td", { class: "added" }, "+"), el("td", {}, k), el("td", {}, "—"), el("td", { class: "val" }, d.metadata_added[k])));
  for (const k of keys(d.metadata_removed)) meta.append(el("tr", {}, el("td", { class: "removed" }, "−"), el("td", {}, k), el("td", { class: "val" }, d.metadata_removed[k]), el("td", {}, "—")));
  for (const k of keys(d.metadata_changed)) meta.append(el("tr", {}, el("td", { class: "changed" }, "~"), el("td", {}, k), el("td", { class: "val" }, d.metadata_changed[k].a), el("td", { class: "val" }, d.metadata_changed[k].b)));
  const nMeta = meta.rows.length - 1;
  view.append(el("h2", {}, "Metadata changes (" + nMeta + ")"), nMeta ? meta : el("p", { class: "muted" }, "None."));

  const changes = entries.filter((e) => !EQUAL_VERDICTS.has(e.label));
  if (state.diffFilter === null) state.diffFilter = changes.length ? "changes" : "all";
  const select = el("select", { id: "diff-filter" }, el("option", { value: "changes", selected: state.diffFilter === "changes" }, "hide equal tensors"),
    el("option", { value: "all", selected: state.diffFilter === "all" }, "all tensors"));
  const list = new VList("diff-list");
  const status = el("span", { class: "muted", id: "match-count" });
  const fill = () => {
    const match = matcher(state.query);
    const pool = state.diffFilter === "changes" ? changes : entries;
    const hits = match ? pool.filter((e) => match(e.name)) : pool;
    status.textContent = plural(hits.length, "tensor");
    list.set(hits.length, (k) => diffLine(hits[k]));
  };
  select.addEventListener("change", () => { state.diffFilter = select.value; fill(); });
  view.append(el("h2", {}, "Tensors"), el("p", { class: "muted" }, "Click a tensor both hold to compare its values."));
  view.append(el("div", { class: "toolbar" }, searchBox(fill, "Filter: substring, or glob"), select, status));
  view.append(list.box);
  fill();
}
function diffLine(e) {
  const d = state.data.diff, [a, b] = state.data.inputs;
  const ia = d._inA.get(e.name), ib = d._inB.get(e.name);
  const desc = (inp, i) => (i === undefined ? "—" : inp.tensors.dtype[i] + " " + shapeText(inp.tensors.shape[i]));
  const cls = e.kind === "=" ? VERDICT_CLASS.get(e.label) || "muted" : KIND_TEXT.get(e.kind);
  const mark = e.kind === "=" ? (EQUAL_VERDICTS.has(e.label) ? "=" : "≠") : e.kind === "-" ? "−" : e.kind;
  const row = el("div", { class: "row", "data-tensor": e.name, "data-kind": e.label },
    el("span", { class: "cell w0 " + cls }, mark), el("span", { class: "name" }, e.name),
    el("span", { class: "cell w4" }, desc(a, ia)), el("span", { class: "cell w4" }, desc(b, ib)),
    el("span", { class: "cell w2 " + cls }, e.label));
  if (ia !== undefined && ib !== undefined) row.addEventListener("click", () => showValueDiff(e, row));
  else row.classList.add("inert");
  return row;
}
function showValueDiff(e, row) {
  document.querySelectorAll(".row.selected").forEach((r) => r.classList.remove("selected"));
  if (row) row.classList.add("selected");
  const aside = document.getElementById("detail");
  aside.hidden = false;
  clear(aside);
  const out = el("div", { id: "value-diff" });
  aside.append(el("div", { class: "detail" }, el("h3", { id: "detail-name" }, e.name), out));
  const show = (v) => {
    clear(out);
    const diff = v.diff || v;
    const rows = [["verdict", diff.verdict], ["compared", fmtNum(diff.compared)], ["elements", fmtInt(diff.elements)],
      ["differing", fmtInt(diff.differing)], ["max_abs_diff", fmtNum(diff.max_abs_diff)],
      ["cosine_similarity", fmtNum(diff.cosine_similarity)]];
    if (diff.reason) rows.push(["not compared", diff.reason]);
    out.append(el("h2", {}, "Value differences (A − B)"), kvTable(rows, "value-diff-numbers", 2));
    if (v.histogram) out.append(histogramBox(v.histogram, "diff-histogram", "Histogram of A − B"));
    else if (!state.data.live && diff.compared) out.append(el("p", { class: "muted" }, "The histogram of differences is drawn by the live viewer."));
  };
  if (!state.data.live) {
    if (e.value) show(e.value);
    else out.append(el("p", { class: "muted" }, "Value differences are not in this report (export with --with-stats)."));
    return;
  }
  const key = "diff:" + e.name;
  if (state.answers.has(key)) { show(state.answers.get(key)); return; }
  const ticket = ++state.request;
  out.append(el("p", { class: "muted", id: "reading" }, "Comparing values…"));
  api("api/valuediff", { name: e.name }).then((v) => { remember(key, v); if (ticket === state.request) show(v); })
    .catch((err) => { if (ticket === state.request) clear(out).append(el("p", { class: "error", id: "stats-error" }, String(err.message || err))); });
}

// ---- start ------------------------------------------------------------------------------------
loadData().then((data) => {
  state.data = data;
  if (data.diff) state.tab = "diff";
  render();
  document.body.setAttribute("data-ready", "1");
}).catch((e) => {
  const view = clear(document.getElementById("view"));
  view.append(el("p", { class: "error", id: "load-error" }, "Could not load the checkpoint: " + String(e.message || e)));
  document.body.setAttribute("data-ready", "error");
});
