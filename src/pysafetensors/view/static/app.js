/* pysafetensors view: one checkpoint (or two, compared) in the browser.
 *
 * Every string from a checkpoint (tensor names, metadata keys and values) is attacker-controlled,
 * so the page builds its DOM with createElement and textContent only: no HTML parsed from strings,
 * no markup built from strings, no event-handler attributes, and lookups by name go through Map (never a
 * plain object, whose "__proto__" or "constructor" keys are not data).  The numbers come from the
 * server, computed by the same library functions as the CLI's inspect, stats and diff; the page
 * formats them and never recomputes them.
 *
 * The data is the local server's JSON (api/checkpoint, then api/tensors per input, api/values and
 * api/valuediff on demand) or, in an exported report, a JSON block embedded in the page with the
 * same shape, every part present:
 *   {inputs: [{label, format, local, summary, metadata: [[k, v]] | null, modelspec: [[k, v]],
 *              thumbnail, tensors: {name: [], dtype: [], shape: [], params: [], bytes: [],
 *              begin: [], end: [], file: [] | null}, tree: {nodes: [], label: [], params: [],
 *              tensors: [], bytes: [], end: []}, blocks: [{group, path, label, ranges, indices,
 *              members, count, copies, tensors, params, bytes, total_params, total_bytes, whole,
 *              nested, differing: [[group, index, path, reason]]}], stats: [{stats, histogram}] | null}],
 *    diff: (diff --json) | null, live}
 * The live server's first answer leaves tensors, tree and blocks null (a 100,000-tensor header
 * answers at once); api/tensors?i=N gives them, asked for as soon as the page has drawn.
 * A GGUF input (format "gguf") has the same fields; its summary adds gguf_version and alignment,
 * its metadata pairs are inspect's text (long arrays as length and first items) with
 * metadata_types beside them, dtype is the GGML type (Q4_K), and tensors.dims (GGUF's order) and
 * tensors.values (the dtype its values read as) are added.  diff.names gives, per input, the
 * names the diff shows for its tensors (a GGUF's mapped to Hugging Face names) or null.
 * The tree is flat: tree.nodes lists every node but the root depth first, siblings in natural
 * order (layers.2 before layers.10), a tensor as its index in the columns (its label is its name
 * after its group's path and a dot), group g as -1 - g; the other tree arrays are per group (0 is
 * the root), end[g] being where g's subtree ends in nodes, so a collapsed group is skipped in one
 * step.  blocks are tools.blocks' repeated blocks: numbered groups (members) holding the same
 * tensors, shown as one row ("[0–5] × 6"; the group's own row when it holds nothing else).
 * Lists are virtualised: only the rows in view exist in the DOM, so a 100,000-tensor header
 * renders as fast as a small one.
 *
 * The address's hash holds what is shown (#tab=tree&t=NAME&q=FILTER&diff=all&i=1): reload, back
 * and forward restore it, and "Copy link" copies it.
 */
"use strict";

const ROW = 26, ROW_NARROW = 44, NARROW = 560; // px: .row's heights in app.css; a list narrower than NARROW wraps its rows
const AUTO_READ = 16 * 1024 * 1024; // a remote tensor up to this size is read on click; larger ones on request
const THUMBNAIL = /^data:image\/(png|jpeg|webp);base64,[A-Za-z0-9+/]+={0,2}$/;
const THEME_KEY = "pysafetensors-view-theme";
const state = {
  data: null, input: 0, tab: "overview", selected: null, query: "", sort: { key: "offset", desc: false },
  expanded: new Set(), openBlocks: new Set(), request: 0, renders: 0, diffFilter: null, log: false,
  answers: new Map(), // "input:tensor index" or "diff:name" -> a reply already fetched
};
let list = null; // the list on screen (a VList), for the keyboard

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
function fmtShare(part, whole) { // "46.9%"; a sliver is "<0.1%", never a misleading "0.0%" (as inspect prints it)
  const w = Number(whole);
  if (!w) return "";
  const pct = (100 * Number(part)) / w;
  return pct > 0 && pct < 0.05 ? "<0.1%" : pct.toFixed(1) + "%";
}
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
    for (const [k, v] of pairs.slice(i, i + n)) {
      tr.append(el("td", { class: "key" }, across > 1 ? breakable(k) : k), el("td", { class: "val" }, v));
    }
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
function say(text) { const s = document.getElementById("status"); if (s) s.textContent = text; } // read out by screen readers

// ---- copying: the link to what is shown, a tensor's name -----------------------------------------
async function copyText(text, button) {
  let ok = false;
  try { await navigator.clipboard.writeText(text); ok = true; } catch { ok = copyByCommand(text); }
  const was = button.dataset.label || button.textContent;
  button.dataset.label = was;
  button.textContent = ok ? "Copied" : "Copy failed";
  say(ok ? "Copied to the clipboard" : "Could not copy");
  setTimeout(() => { button.textContent = was; }, 1500);
}
function copyByCommand(text) { // where the Clipboard API is refused: a selected, off-screen textarea
  const area = el("textarea", { class: "offscreen", readonly: true, "aria-hidden": "true" });
  area.value = text;
  document.body.append(area);
  area.select();
  let ok = false;
  try { ok = document.execCommand("copy"); } catch { ok = false; }
  area.remove();
  return ok;
}
function pageLink() { return location.href.split("#")[0] + hashOf(); }

// ---- colour theme: the system's, or the one chosen (remembered in localStorage) -------------------
const THEMES = ["auto", "dark", "light"]; // the button goes round them
const THEME_TEXT = new Map([["auto", "Theme: auto"], ["dark", "Theme: dark"], ["light", "Theme: light"]]);
const PALETTES = { // the canvases' colours; diverging: negative, zero, positive; sequential: low, high
  light: { bg: "#ffffff", bar: "#3758c9", axis: "#98a2b3", text: "#475467", none: [208, 213, 221],
    neg: [20, 60, 175], mid: [255, 255, 255], pos: [180, 20, 30], lo: [255, 255, 255], hi: [40, 85, 165] },
  dark: { bg: "#161a21", bar: "#8ea8ff", axis: "#5d6676", text: "#b8c0cc", none: [64, 70, 82],
    neg: [96, 156, 255], mid: [28, 32, 40], pos: [255, 110, 96], lo: [28, 32, 40], hi: [150, 205, 255] },
};
const systemDark = window.matchMedia ? window.matchMedia("(prefers-color-scheme: dark)") : null;
let chosenTheme = null; // this page's choice, kept here too: storage may be refused
function themeChoice() {
  if (chosenTheme !== null) return chosenTheme;
  let t = null;
  try { t = localStorage.getItem(THEME_KEY); } catch { t = null; }
  return THEMES.includes(t) ? t : "auto";
}
function isDark() {
  const t = document.documentElement.dataset.theme;
  return t ? t === "dark" : Boolean(systemDark && systemDark.matches);
}
function palette() { return isDark() ? PALETTES.dark : PALETTES.light; }
function applyTheme() {
  const choice = themeChoice();
  if (choice === "auto") delete document.documentElement.dataset.theme;
  else document.documentElement.dataset.theme = choice;
  const button = document.getElementById("theme");
  if (button) {
    button.textContent = THEME_TEXT.get(choice);
    button.setAttribute("aria-label", "Colour theme: " + choice + (choice === "auto" ? " (follows the system)" : "") + "; change");
  }
  redrawCanvases();
}
function nextTheme() {
  chosenTheme = THEMES[(THEMES.indexOf(themeChoice()) + 1) % THEMES.length];
  try {
    if (chosenTheme === "auto") localStorage.removeItem(THEME_KEY); else localStorage.setItem(THEME_KEY, chosenTheme);
  } catch { /* applied to this page, not remembered */ }
  applyTheme();
  say("Colour theme: " + chosenTheme);
}
function redrawCanvases() { document.querySelectorAll("canvas").forEach((c) => c._draw && c._draw()); }
if (systemDark) systemDark.addEventListener("change", redrawCanvases);
applyTheme(); // before the first paint of the data

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
function ensureTensors(i) { // input i's tensor columns, tree and blocks (asked for once)
  const inp = state.data.inputs[i];
  if (inp.tensors) return Promise.resolve(inp);
  if (!inp._loading) {
    inp._loading = api("api/tensors", { i }).then((part) => Object.assign(inp, part))
      .catch((e) => { inp._loading = null; throw e; });
  }
  return inp._loading;
}
function whenTensors(view, inputs, draw) { // draw now, or once those inputs' tensors have come
  if (inputs.every((i) => state.data.inputs[i].tensors)) { draw(); return; }
  const ticket = state.renders;
  view.append(el("p", { class: "muted", id: "loading-tensors" }, "Loading the tensor list…"));
  Promise.all(inputs.map(ensureTensors)).then(() => { if (ticket === state.renders) render(); })
    .catch((e) => {
      if (ticket === state.renders) clear(view).append(el("p", { class: "error", id: "load-error" }, "Could not load the tensors: " + String(e.message || e)));
    });
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

// ---- the address's hash: tab, input, selected tensor, filter, diff mode ---------------------------
const TABS = [["overview", "Overview"], ["tree", "Tree"], ["table", "Table"], ["diff", "Diff"]];
function hashOf() {
  const p = new URLSearchParams();
  p.set("tab", state.tab);
  if (state.input) p.set("i", String(state.input));
  if (state.selected !== null) p.set("t", state.selected);
  if (state.query) p.set("q", state.query);
  if (state.tab === "diff" && state.diffFilter) p.set("diff", state.diffFilter);
  return "#" + p.toString();
}
function writeHash(push) { // push: a new history entry (back returns here); else the current one changes
  const hash = hashOf();
  if (hash === location.hash) return;
  try { history[push ? "pushState" : "replaceState"](null, "", hash); } catch { /* a page that may not change its address */ }
}
function readHash() {
  const p = new URLSearchParams(location.hash.slice(1));
  const tab = p.get("tab");
  const tabs = TABS.map(([id]) => id).filter((id) => id !== "diff" || state.data.diff);
  state.tab = tabs.includes(tab) ? tab : (state.data.diff ? "diff" : "overview");
  const i = Number(p.get("i") || 0);
  const input = Number.isInteger(i) && i >= 0 && i < state.data.inputs.length ? i : 0;
  if (input !== state.input) { state.expanded = new Set(); state.openBlocks = new Set(); }
  state.input = input;
  state.selected = p.get("t");
  state.query = p.get("q") || "";
  const mode = p.get("diff");
  state.diffFilter = mode === "all" || mode === "changes" ? mode : null;
}
window.addEventListener("popstate", () => { if (!state.data) return; readHash(); render(); reveal(); });

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
function searchBox(apply, placeholder) {
  const box = el("input", { type: "search", id: "search", placeholder, autocomplete: "off", spellcheck: "false",
    "aria-label": "Filter tensors: a substring or a glob (press / to come here, Esc to clear)", "aria-keyshortcuts": "/" });
  box.value = state.query;
  let timer = null;
  const commit = () => {
    clearTimeout(timer);
    if (state.query === box.value) return;
    state.query = box.value;
    writeHash(false);
    apply();
  };
  box.addEventListener("input", () => { clearTimeout(timer); timer = setTimeout(commit, 40); });
  box.addEventListener("keydown", (e) => {
    if ((e.key === "ArrowDown" || e.key === "Enter") && list && list.count) { // into the list
      e.preventDefault();
      commit();
      list.moveTo(e.key === "Enter" ? list.active : 0);
    } else if (e.key === "Escape") {
      e.preventDefault();
      e.stopPropagation();
      if (box.value) { box.value = ""; commit(); } else box.blur();
    }
  });
  box._commit = commit;
  return box;
}

// ---- a virtual list: a fixed-height scroller that holds only the rows in view ---------------
// ARIA: a grid (or treegrid) of rows; one row is active, reachable by Tab (tabindex 0, the
// others -1), moved by the arrow keys, Home/End and PageUp/PageDown; Enter (or Space) opens it;
// in a tree, Right and Left expand and collapse.  The active row is always drawn, even when
// scrolled away, so Tab always finds it.
class VList {
  constructor(id, opts) {
    this.opts = opts || {};
    this.box = el("div", { class: "vlist", id, role: this.opts.role || "grid", "aria-label": this.opts.label });
    this.head = this.opts.head || null;
    this.spacer = el("div", { class: "spacer", role: "rowgroup" });
    if (this.head) { this.head.setAttribute("role", "row"); this.head.setAttribute("aria-rowindex", "1"); this.box.append(this.head); }
    this.box.append(this.spacer);
    this.count = 0; this.render = null; this.drawn = ""; this.active = 0; this.rowH = ROW; this.narrow = false;
    this.box.addEventListener("scroll", () => this.draw());
    this.box.addEventListener("keydown", (e) => this.key(e));
    this.box.addEventListener("focusin", (e) => { // a row focused by a click: the active one, changed in place
      const row = e.target.closest && e.target.closest(".row[data-k]"); // (redrawing now would lose the click)
      if (!row || Number(row.dataset.k) === this.active) return;
      const was = this.spacer.querySelector('.row[tabindex="0"]');
      if (was) was.tabIndex = -1;
      row.tabIndex = 0;
      this.active = Number(row.dataset.k);
      this.drawn = "";
    });
    if (window.ResizeObserver) new ResizeObserver(() => this.layout()).observe(this.box);
  }
  layout() {
    const width = this.box.clientWidth;
    const narrow = width > 0 && width < NARROW;
    if (narrow !== this.narrow) {
      this.narrow = narrow;
      this.box.classList.toggle("narrow", narrow);
      this.rowH = narrow ? ROW_NARROW : ROW;
      this.spacer.style.height = this.count * this.rowH + "px";
      this.drawn = "";
    }
    this.draw();
  }
  set(count, render, keepScroll) {
    this.count = count; this.render = render; this.drawn = "";
    if (!keepScroll) { this.box.scrollTop = 0; this.active = 0; }
    this.active = Math.max(0, Math.min(this.active, count - 1));
    this.box.setAttribute("aria-rowcount", String(count + (this.head ? 1 : 0)));
    this.layout();
    this.spacer.style.height = count * this.rowH + "px";
    this.draw();
    requestAnimationFrame(() => this.layout()); // once laid out, the real width and height are known
  }
  redraw() { this.drawn = ""; this.draw(); }
  draw() {
    if (!this.render) return;
    const top = this.box.scrollTop, height = this.box.clientHeight || 600;
    const first = Math.max(0, Math.floor(top / this.rowH) - 8);
    const last = Math.min(this.count, Math.ceil((top + height) / this.rowH) + 8);
    const key = [first, last, this.count, this.active, this.rowH].join(":");
    if (key === this.drawn) return;
    const focused = this.box.contains(document.activeElement) && document.activeElement !== this.box;
    this.drawn = key;
    clear(this.spacer);
    const put = (i) => {
      const row = this.render(i);
      row.dataset.k = i;
      row.setAttribute("role", "row");
      row.setAttribute("aria-rowindex", String(i + (this.head ? 2 : 1)));
      row.tabIndex = i === this.active ? 0 : -1;
      row.style.top = i * this.rowH + "px";
      this.spacer.append(row);
    };
    for (let i = first; i < last; i++) put(i);
    if (this.count && (this.active < first || this.active >= last)) put(this.active);
    if (focused) this.focusActive();
  }
  key(e) {
    if (!e.target.closest || !e.target.closest(".row[data-k]")) return;
    const k = this.active, page = Math.max(1, Math.floor(this.box.clientHeight / this.rowH) - 2);
    let to;
    switch (e.key) {
      case "ArrowDown": to = k + 1; break;
      case "ArrowUp": to = k - 1; break;
      case "PageDown": to = k + page; break;
      case "PageUp": to = k - page; break;
      case "Home": to = 0; break;
      case "End": to = this.count - 1; break;
      case "Enter": case " ":
        e.preventDefault();
        if (this.opts.activate) this.opts.activate(k);
        return;
      case "ArrowRight": case "ArrowLeft":
        if (this.opts.expand) { e.preventDefault(); this.opts.expand(k, e.key === "ArrowRight"); }
        return;
      default: return;
    }
    e.preventDefault();
    this.moveTo(to);
  }
  moveTo(k) {
    if (!this.count) return;
    this.active = Math.max(0, Math.min(this.count - 1, k));
    const y = this.active * this.rowH, top = this.box.scrollTop;
    const room = this.box.clientHeight - (this.head ? this.head.offsetHeight : 0);
    if (y < top) this.box.scrollTop = y;
    else if (y + this.rowH > top + room) this.box.scrollTop = y + this.rowH - room;
    this.redraw();
    this.focusActive();
  }
  focusActive() {
    const row = this.spacer.querySelector('.row[data-k="' + this.active + '"]');
    if (row && document.activeElement !== row) row.focus({ preventScroll: true });
  }
}
function cell(kind, text, title) { return el("span", { class: "cell " + kind, role: "gridcell", title }, text); }
function headCell(kind, text, title) { return el("span", { class: kind === "name" ? "name" : "cell " + kind, role: "columnheader", title }, text); }

// ---- header: tabs, input picker, actions; then the view --------------------------------------
function renderHeader() {
  const nav = clear(document.getElementById("tabs"));
  const shown = TABS.filter(([id]) => id !== "diff" || state.data.diff);
  for (const [id, label] of shown) {
    const selected = state.tab === id;
    nav.append(el("button", { role: "tab", id: "tab-" + id, "data-tab": id, "aria-selected": String(selected),
      "aria-controls": "view", tabindex: selected ? 0 : -1, class: selected ? "active" : "",
      on: { click: () => showTab(id) } }, label));
  }
  const picker = document.getElementById("input-picker");
  document.getElementById("top").classList.toggle("two", state.data.inputs.length > 1);
  if (state.data.inputs.length > 1) {
    document.getElementById("input-picker-label").hidden = false;
    clear(picker);
    state.data.inputs.forEach((inp, i) => picker.append(el("option", { value: i, selected: i === state.input, title: inp.label },
      (i === 0 ? "A: " : "B: ") + inp.label)));
    picker.onchange = () => {
      state.input = Number(picker.value); state.selected = null; state.expanded = new Set(); state.openBlocks = new Set();
      writeHash(true); render();
    };
  }
  const title = state.data.diff ? state.data.inputs.map((x) => x.label).join("  vs  ") : current().label;
  const h1 = document.getElementById("title");
  h1.textContent = title;
  h1.title = title;
  document.title = title + " — pysafetensors view";
}
function showTab(id) {
  if (state.tab === id) return;
  state.tab = id;
  writeHash(true);
  render();
  reveal();
}
function tabKeys(e) { // Left/Right move between the tabs (the ARIA tabs pattern)
  if (e.key !== "ArrowLeft" && e.key !== "ArrowRight") return;
  const tabs = Array.from(document.querySelectorAll("#tabs [role=tab]"));
  const at = tabs.indexOf(document.activeElement);
  if (at < 0) return;
  e.preventDefault();
  const next = tabs[(at + (e.key === "ArrowRight" ? 1 : tabs.length - 1)) % tabs.length];
  showTab(next.dataset.tab);
  document.getElementById("tab-" + next.dataset.tab).focus();
}
function render() {
  state.renders++;
  renderHeader();
  list = null;
  const inp = current();
  const view = clear(document.getElementById("view"));
  view.setAttribute("aria-labelledby", "tab-" + state.tab);
  if (state.tab === "overview") renderOverview(view, inp);
  else if (state.tab === "tree") whenTensors(view, [state.input], () => renderTree(view, inp));
  else if (state.tab === "table") whenTensors(view, [state.input], () => renderTable(view, inp));
  else if (state.tab === "diff") whenTensors(view, state.data.inputs.map((_, i) => i), () => renderDiff(view));
  renderDetail();
}
function reveal() { // bring the selected tensor into view (after a deep link, back or forward)
  if (!list || state.selected === null) return;
  const k = list.find ? list.find(state.selected) : -1;
  if (k >= 0) list.moveTo(k);
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
  const dtypes = el("table", { class: "grid fit", id: "dtypes" },
    el("tr", {}, el("th", {}, typeWord), el("th", { class: "num" }, "parameters"), el("th", { class: "num" }, "bytes")));
  for (const [dt, n] of Object.entries(s.parameters_by_dtype)) {
    const bytes = s.bytes_by_dtype[dt];
    dtypes.append(el("tr", {}, el("td", {}, dt), el("td", { class: "num" }, fmtInt(n)),
      el("td", { class: "num" }, fmtInt(bytes) + " (" + fmtBytes(bytes) + ")")));
  }
  view.append(el("h2", {}, "Parameters by " + typeWord), dtypes);
  const blocks = el("div", { id: "blocks" });
  view.append(blocks);
  if (inp.blocks) blockSummary(blocks, inp);
  else ensureTensors(state.input).then(() => { if (blocks.isConnected) blockSummary(blocks, inp); }).catch(() => {});
  if (s.files) {
    const shards = el("table", { class: "grid fit", id: "shards" }, el("tr", {}, el("th", { class: "num" }, "#"), el("th", {}, "shard")));
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
    const items = el("ul", { id: "disagreements" });
    for (const d of s.metadata_disagreements) {
      const parts = (d.index !== null ? ["index " + JSON.stringify(d.index)] : [])
        .concat(Object.entries(d.shards).map(([f, v]) => f + " " + (v === null ? "(absent)" : JSON.stringify(v))));
      items.append(el("li", { class: "changed" }, "shard headers disagree on " + d.key + ": " + parts.join(", ")));
    }
    view.append(el("h2", {}, "Disagreements"), items);
  }
}
function blockText(b, total) {
  return plural(b.tensors, "tensor") + " and " + plural(b.params, "parameter") + " each; "
    + (b.copies !== b.count ? fmtInt(b.copies) + " copies, " : "") + plural(b.total_params, "parameter") + " in all ("
    + fmtShare(b.total_params, total) + ")";
}
function blockSummary(box, inp) { // what inspect's "repeated blocks:" lists, each with a way to it in the tree
  const shown = (inp.blocks || []).filter((b) => !b.nested);
  if (!shown.length) return;
  const items = el("ul", { class: "blocks", id: "block-list" });
  for (const b of shown) {
    const item = el("li", { "data-block": b.label }, el("span", { class: "label" }, b.label), " ",
      el("span", { class: "muted" }, blockText(b, inp.summary.parameter_count)), " ",
      el("button", { class: "ghost small", on: { click: () => showBlock(inp, b) } }, "show in the tree"));
    for (const [, , path, reason] of b.differing) {
      item.append(el("div", { class: "small changed" }, path + " is not in it: " + reason));
    }
    items.append(item);
  }
  box.append(el("h2", {}, "Repeated blocks"), items);
}
function showBlock(inp, b) { // the tree, opened down to the block's row
  const bi = blockIndex(inp);
  openGroup(inp, b.whole ? bi.parent[b.group] : b.group);
  state.query = "";
  state.selected = null;
  state.tab = "tree";
  writeHash(true);
  render();
  if (list && list.findGroup) { const k = list.findGroup(b); if (k >= 0) list.moveTo(k); }
}

// ---- tree: the server's tree (inspect --tree's numbers), groups expanded on demand ---------------
function blockIndex(inp) { // per input: where blocks sit, whose members are whose, every group's path and parent
  if (inp._blocks) return inp._blocks;
  const t = inp.tree, groups = t.label.length;
  const gpos = new Array(groups).fill(0), path = new Array(groups).fill(""), parent = new Array(groups).fill(0);
  const open = [[0, t.nodes.length]];
  for (let i = 0; i < t.nodes.length; i++) {
    while (i >= open[open.length - 1][1]) open.pop();
    const n = t.nodes[i];
    if (n >= 0) continue;
    const g = -1 - n, up = open[open.length - 1][0];
    gpos[g] = i; parent[g] = up;
    path[g] = up ? path[up] + "." + t.label[g] : t.label[g];
    open.push([g, t.end[g]]);
  }
  const at = new Map(), member = new Map(), differs = new Map();
  for (const b of inp.blocks || []) {
    if (!at.has(b.group)) at.set(b.group, []);
    at.get(b.group).push(b);
    b.members.forEach((g, k) => member.set(g, [b, k]));
    for (const [g, , , reason] of b.differing) differs.set(g, [b, reason]);
  }
  inp._blocks = { at, member, differs, gpos, path, parent };
  return inp._blocks;
}
const blockKey = (b) => b.group + ":" + b.indices[0];
function wholeBlock(bi, g) { const here = bi.at.get(g); return here && here.length === 1 && here[0].whole ? here[0] : null; }
function visibleRows(inp) {
  // Depth first over the expanded groups: {kind: "tensor" | "group" | "block", ...}.  A block's
  // members are listed under its row (when open), not among their siblings; a group holding
  // nothing but one block is that block's row itself.
  const t = inp.tree, nodes = t.nodes, bi = blockIndex(inp), out = [];
  const stack = [{ pos: 0, end: nodes.length, depth: 0, path: "", top: true }]; // top: path is the root's ("")
  while (stack.length) {
    const f = stack[stack.length - 1];
    let n;
    if (f.list) {
      if (f.k >= f.list.length) { stack.pop(); continue; }
      n = -1 - f.list[f.k++];
    } else {
      if (f.pos >= f.end) { stack.pop(); continue; }
      n = nodes[f.pos];
      f.pos = n >= 0 ? f.pos + 1 : t.end[-1 - n];
    }
    if (n >= 0) { out.push({ kind: "tensor", n, depth: f.depth, cut: f.top ? 0 : f.path.length + 1 }); continue; }
    const g = -1 - n, path = f.top ? t.label[g] : f.path + "." + t.label[g];
    const m = bi.member.get(g);
    if (m && !f.list && !m[0].whole) { // met among its siblings: its block's row stands for it
      const [b, k] = m;
      if (k > 0) continue;
      const open = state.openBlocks.has(blockKey(b));
      out.push({ kind: "block", block: b, depth: f.depth, path: f.top ? b.ranges : f.path + "." + b.ranges, open });
      if (open) stack.push({ list: b.members, k: 0, depth: f.depth + 1, path: f.path, top: f.top });
      continue;
    }
    const open = state.expanded.has(path);
    out.push({ kind: "group", g, depth: f.depth, path, open, block: wholeBlock(bi, g), differs: bi.differs.get(g) || null });
    if (open) stack.push({ pos: bi.gpos[g] + 1, end: t.end[g], depth: f.depth + 1, path, top: false });
  }
  return out;
}
const TREE_HEAD = [["name", "name"], ["dtype", "dtype"], ["shape", "shape"], ["count", "tensors"], ["params", "parameters"],
  ["bytes", "bytes"], ["share", "% of total", "share of all parameters"]];
function renderTree(view, inp) {
  const head = el("div", { class: "row head" }, TREE_HEAD.map(([k, label, title]) => headCell(k, label, title)));
  const rows = { list: [] };
  const tree = new VList("tree", { role: "treegrid", label: "Tensors by dotted prefix", head,
    activate: (k) => activateTreeRow(inp, rows.list[k], tree), expand: (k, open) => expandTreeRow(inp, rows.list, k, open, tree) });
  list = tree;
  const status = el("span", { class: "muted count", id: "match-count", role: "status" });
  tree._rows = rows; tree._status = status;
  const fill = (keep) => fillTree(tree, inp, status, rows, keep);
  const setAll = (open) => {
    const bi = blockIndex(inp);
    state.expanded = open ? new Set(bi.path.slice(1)) : new Set();
    state.openBlocks = open ? new Set((inp.blocks || []).filter((b) => !b.whole).map(blockKey)) : new Set();
    fill(false);
  };
  view.append(el("div", { class: "toolbar" }, searchBox(() => fill(false), "Filter: substring, or glob (e.g. *.attention.*)"),
    status, el("button", { class: "action", id: "expand", on: { click: () => setAll(true) } }, "Expand all"),
    el("button", { class: "action", id: "collapse", on: { click: () => setAll(false) } }, "Collapse all")));
  view.append(tree.box);
  tree.find = (name) => rows.list.findIndex((r) => r.kind === "tensor" && inp.tensors.name[r.n] === name);
  tree.findGroup = (b) => rows.list.findIndex((r) => (r.kind === "block" && r.block === b) || (r.kind === "group" && r.block === b));
  if (state.selected !== null && !state.query) openTo(inp, state.selected);
  fill(false);
}
function openTo(inp, name) { // expand the groups and blocks above a tensor
  const i = indexOf(inp).get(name);
  if (i === undefined) return;
  const t = inp.tree;
  const pos = t.nodes.indexOf(i);
  let g = 0;
  for (let p = 0; p < pos;) { // walk down: the group whose subtree holds pos
    const n = t.nodes[p];
    if (n < 0 && pos < t.end[-1 - n]) { g = -1 - n; p++; } else p = n >= 0 ? p + 1 : t.end[-1 - n];
  }
  openGroup(inp, g);
}
function openGroup(inp, g) { // group g and those above it expanded, and the blocks they are members of open
  const bi = blockIndex(inp);
  for (; g; g = bi.parent[g]) {
    state.expanded.add(bi.path[g]);
    const m = bi.member.get(g);
    if (m && !m[0].whole) state.openBlocks.add(blockKey(m[0]));
  }
}
function fillTree(tree, inp, status, rows, keep) {
  const match = matcher(state.query);
  const names = inp.tensors.name, total = inp.tree.params[0];
  if (match) { // filtering: the matching tensors by full name
    const hits = [];
    for (let i = 0; i < names.length; i++) if (match(names[i])) hits.push(i);
    status.textContent = fmtInt(hits.length) + " of " + plural(names.length, "tensor");
    rows.list = hits.map((n) => ({ kind: "tensor", n, depth: 0, cut: 0 }));
  } else {
    status.textContent = plural(names.length, "tensor");
    rows.list = visibleRows(inp);
  }
  tree.set(rows.list.length, (k) => treeRow(inp, rows.list[k], total, tree), keep);
}
function toggle(set, key, tree, inp) {
  if (set.has(key)) set.delete(key); else set.add(key);
  fillTree(tree, inp, tree._status, tree._rows, true);
}
function treeRow(inp, r, total, tree) {
  const cols = inp.tensors, t = inp.tree;
  let row;
  if (r.kind === "tensor") {
    const name = cols.name[r.n], label = name.slice(r.cut);
    const selected = state.selected === name;
    row = el("div", { class: "row" + (selected ? " selected" : ""), "data-tensor": name, "aria-level": r.depth + 1,
      "aria-selected": String(selected) },
    el("span", { class: "name", role: "gridcell", title: name }, el("span", { class: "twisty", "aria-hidden": "true" }, ""), label === "" ? '""' : label),
    cell("dtype", cols.dtype[r.n]), cell("shape", shapeText(cols.shape[r.n])), cell("count", ""),
    cell("params", fmtInt(cols.params[r.n])), cell("bytes", fmtBytes(cols.bytes[r.n])), cell("share", fmtShare(cols.params[r.n], total)));
    row.addEventListener("click", () => selectTensor(name));
  } else if (r.kind === "group") {
    const g = r.g, label = t.label[g] === "" ? '""' : t.label[g], b = r.block;
    const name = el("span", { class: "name", role: "gridcell", "aria-colspan": 3, // over dtype and shape: a group has none
      title: b ? r.path + " — " + b.label + ": " + blockText(b, total) : r.path },
      el("span", { class: "twisty", "aria-hidden": "true" }, r.open ? "▾" : "▸"), b ? label + "." + b.ranges : label);
    if (b) name.append(el("span", { class: "badge" }, "× " + fmtInt(b.count)), el("span", { class: "note" }, " " + plural(b.params, "param") + " each"));
    if (r.differs) {
      name.title = r.path + " is not in " + r.differs[0].label + ": " + r.differs[1];
      name.append(el("span", { class: "badge warn" }, "differs"), el("span", { class: "note" }, " " + r.differs[1]));
    }
    row = el("div", { class: "row group" + (b ? " block" : ""), "data-path": r.path, "aria-level": r.depth + 1, "aria-expanded": String(r.open) },
      name, cell("count", fmtInt(t.tensors[g])), cell("params", fmtInt(t.params[g])),
      cell("bytes", fmtBytes(t.bytes[g])), cell("share", fmtShare(t.params[g], total)));
    row.addEventListener("click", () => toggle(state.expanded, r.path, tree, inp));
  } else {
    const b = r.block, key = blockKey(b);
    const name = el("span", { class: "name", role: "gridcell", "aria-colspan": 3, title: b.label + ": " + blockText(b, total) },
      el("span", { class: "twisty", "aria-hidden": "true" }, r.open ? "▾" : "▸"), b.ranges, el("span", { class: "badge" }, "× " + fmtInt(b.count)),
      el("span", { class: "note" }, " " + plural(b.params, "param") + " each"));
    row = el("div", { class: "row group block", "data-block": key, "data-path": r.path,
      "aria-level": r.depth + 1, "aria-expanded": String(r.open) },
    name, cell("count", fmtInt(b.tensors * b.count)), cell("params", fmtInt(b.params * b.count)),
    cell("bytes", fmtBytes(b.bytes * b.count)), cell("share", fmtShare(b.params * b.count, total)));
    row.addEventListener("click", () => toggle(state.openBlocks, key, tree, inp));
  }
  row.style.paddingLeft = 8 + r.depth * 16 + "px";
  return row;
}
function activateTreeRow(inp, r, tree) {
  if (!r) return;
  if (r.kind === "tensor") selectTensor(inp.tensors.name[r.n]);
  else if (r.kind === "group") toggle(state.expanded, r.path, tree, inp);
  else toggle(state.openBlocks, blockKey(r.block), tree, inp);
}
function expandTreeRow(inp, rows, k, open, tree) { // Right: open, or go to the first child; Left: close, or go to the parent
  const r = rows[k];
  if (!r) return;
  const isOpen = r.kind !== "tensor" && r.open;
  if (open) {
    if (r.kind === "tensor") return;
    if (!isOpen) activateTreeRow(inp, r, tree); else tree.moveTo(k + 1);
    return;
  }
  if (isOpen) { activateTreeRow(inp, r, tree); return; }
  for (let j = k - 1; j >= 0; j--) if (tree._rows.list[j].depth < r.depth) { tree.moveTo(j); return; }
}
function selectTensor(name, push = true) {
  state.selected = name;
  writeHash(push);
  if (list) list.redraw();
  renderDetail();
}

// ---- table: flat, sortable -----------------------------------------------------------------------
const COLUMNS = [["name", "name", "name"], ["dtype", "dtype", "dtype"], ["shape", "shape", "shape"],
  ["params", "parameters", "params"], ["bytes", "bytes", "bytes"], ["offset", "data offsets", "offsets"]];
function sortedOrder(inp) { // cached per input and key; descending is the reverse
  inp._orders = inp._orders || new Map();
  const key = state.sort.key;
  if (!inp._orders.has(key)) {
    const t = inp.tensors, n = t.name.length;
    let order;
    if (key === "name") order = inp.tree.nodes.filter((x) => x >= 0); // the tree's natural order (layers.2 before layers.10)
    else {
      order = Array.from({ length: n }, (_, i) => i);
      const by = {
        dtype: (a, b) => (t.dtype[a] < t.dtype[b] ? -1 : t.dtype[a] > t.dtype[b] ? 1 : 0) || a - b,
        shape: (a, b) => { const x = t.shape[a], y = t.shape[b]; if (x.length !== y.length) return x.length - y.length;
          for (let k = 0; k < x.length; k++) if (x[k] !== y[k]) return x[k] - y[k]; return a - b; },
        params: (a, b) => t.params[a] - t.params[b] || a - b,
        bytes: (a, b) => t.bytes[a] - t.bytes[b] || a - b,
        offset: null, // file order: the order the columns come in
      }[key];
      if (by) order.sort(by);
    }
    inp._orders.set(key, order);
  }
  const order = inp._orders.get(key);
  return state.sort.desc ? order.slice().reverse() : order;
}
function renderTable(view, inp) {
  const head = el("div", { class: "row head" });
  const hits = { list: [] };
  const table = new VList("table", { role: "grid", label: "Tensors", head,
    activate: (k) => { const i = hits.list[k]; if (i !== undefined) selectTensor(inp.tensors.name[i]); } });
  list = table;
  table.find = (name) => { const i = indexOf(inp).get(name); return i === undefined ? -1 : hits.list.indexOf(i); };
  const status = el("span", { class: "muted count", id: "match-count", role: "status" });
  view.append(el("div", { class: "toolbar" }, searchBox(() => fillTable(table, inp, status, hits), "Filter: substring, or glob"), status));
  view.append(table.box);
  fillTable(table, inp, status, hits);
}
function fillTable(table, inp, status, hits) {
  const head = clear(table.head);
  for (const [key, label, cls] of COLUMNS) {
    const sorted = state.sort.key === key;
    const arrow = sorted ? (state.sort.desc ? " ▾" : " ▴") : "";
    const h = headCell(cls, label + arrow);
    h.setAttribute("data-sort", key);
    h.setAttribute("aria-sort", sorted ? (state.sort.desc ? "descending" : "ascending") : "none");
    h.tabIndex = 0;
    const sort = () => {
      state.sort = { key, desc: state.sort.key === key ? !state.sort.desc : false };
      fillTable(table, inp, status, hits);
    };
    h.addEventListener("click", sort);
    h.addEventListener("keydown", (e) => { if (e.key === "Enter" || e.key === " ") { e.preventDefault(); sort(); } });
    head.append(h);
  }
  const match = matcher(state.query);
  const names = inp.tensors.name;
  const order = sortedOrder(inp);
  hits.list = match ? order.filter((i) => match(names[i])) : order;
  status.textContent = fmtInt(hits.list.length) + " of " + plural(names.length, "tensor");
  table.set(hits.list.length, (k) => {
    const r = tensorRow(inp, hits.list[k]);
    const selected = r.name === state.selected;
    const row = el("div", { class: "row" + (selected ? " selected" : ""), "data-tensor": r.name, "aria-selected": String(selected) },
      el("span", { class: "name", role: "gridcell", title: r.name }, r.name), cell("dtype", r.dtype),
      cell("shape", shapeText(r.shape)), cell("params", fmtInt(r.params)), cell("bytes", fmtBytes(r.bytes)),
      cell("offsets", (r.file ? r.file + " " : "") + "[" + r.begin + ", " + r.end + ")"));
    row.addEventListener("click", () => selectTensor(r.name));
    return row;
  });
}

// ---- tensor detail: header facts, then stats, histogram and heatmap ------------------------------
function breakable(name) { // the name as text, with a line-break opportunity after each dot and underscore
  return name.split(/(?<=[._])/).flatMap((p, i) => (i ? [el("wbr"), p] : [p]));
}
function detailTitle(name) {
  const copy = el("button", { class: "ghost small", id: "copy-name", title: "Copy the tensor's name" }, "Copy name");
  copy.addEventListener("click", () => copyText(name, copy));
  return el("div", { class: "title" }, el("h2", { id: "detail-name" }, breakable(name)), copy);
}
function renderDetail() {
  const aside = document.getElementById("detail");
  if (state.selected === null || state.tab === "overview") { aside.hidden = true; return; }
  if (state.tab === "diff") {
    const d = state.data.diff;
    const e = d && d._entries ? d._entries.find((x) => x.name === state.selected) : null;
    if (e) showValueDiff(e); else aside.hidden = true;
    return;
  }
  const inp = current();
  if (!inp.tensors) { aside.hidden = true; return; }
  const i = indexOf(inp).get(state.selected);
  aside.hidden = false;
  clear(aside);
  if (i === undefined) {
    aside.append(el("div", { class: "detail" }, detailTitle(state.selected),
      el("p", { class: "muted", id: "no-such-tensor" }, "This checkpoint has no tensor of that name.")));
    return;
  }
  const r = tensorRow(inp, i);
  const info = [[r.dims ? "type" : "dtype", r.dtype], ["shape", shapeText(r.shape)], ["parameters", fmtInt(r.params)],
    ["bytes", fmtInt(r.bytes) + " (" + fmtBytes(r.bytes) + ")"], ["data_offsets", "[" + r.begin + ", " + r.end + ")"]];
  if (r.file) info.push(["shard", r.file]);
  if (r.dims) { // GGUF: dims in the file's order, and what the values read as
    info.splice(2, 0, ["GGUF dims", shapeText(r.dims)]);
    info.push(["values", r.values === r.dtype ? r.values : r.values + " (dequantized by gguf-py)"]);
  }
  const out = el("div", { id: "values" });
  aside.append(el("div", { class: "detail" }, detailTitle(r.name), kvTable(info, "tensor-info"), out));
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
  out.append(el("h3", {}, "Values"), kvTable(rows, "stats", 2));
  if (v.histogram) out.append(histogramBox(v.histogram, "histogram", "Histogram of " + v.histogram.of));
  if (v.heatmap) {
    const h = v.heatmap;
    const cellsDown = h.cells.length, cellsAcross = cellsDown ? h.cells[0].length : 0;
    out.append(el("h3", {}, "Heatmap"));
    out.append(el("p", { class: "muted" }, h.rows + " × " + h.cols + " matrix in " + cellsDown + " × " + cellsAcross
      + " cells (" + (h.reduce === "mean" ? "mean" : "largest magnitude") + " of each)"));
    const width = 392, aspect = h.rows / Math.max(1, h.cols);
    const c = el("canvas", { id: "heatmap", width, height: Math.round(Math.max(48, Math.min(320, width * aspect))),
      role: "img", "aria-label": "Heatmap of the values" });
    const sc = heatScale(h);
    const bar = el("canvas", { id: "heatmap-scale", class: "scale", width: 256, height: 10, role: "img",
      "aria-label": "Colour scale from " + fmtNum(sc.lo) + " to " + fmtNum(sc.hi) });
    out.append(c, bar);
    out.append(el("div", { class: "legend", id: "heatmap-legend" }, el("span", {}, fmtNum(sc.lo)),
      el("span", { class: "scale" }, "colours span " + fmtNum(sc.lo) + " to " + fmtNum(sc.hi) + " (min " + fmtNum(h.min)
        + ", max " + fmtNum(h.max) + ")"), el("span", {}, fmtNum(sc.hi))));
    c._draw = () => drawHeatmap(c, h);
    bar._draw = () => drawScale(bar, sc);
    c._draw(); bar._draw();
  } else if (r && r.shape.length >= 2 && state.data.live) {
    out.append(el("p", { class: "muted" }, "No heatmap."));
  } else if (r && r.shape.length >= 2) {
    out.append(el("p", { class: "muted" }, "Heatmaps are drawn by the live viewer (pysafetensors view FILE)."));
  }
}
function histogramBox(hist, id, title) {
  const canvas = el("canvas", { id, width: 392, height: 120, role: "img", "aria-label": title });
  const check = el("input", { type: "checkbox", checked: state.log });
  check.addEventListener("change", () => { state.log = check.checked; redrawCanvases(); });
  const notes = [fmtInt(hist.finite) + " finite"];
  if (hist.nan) notes.push(fmtInt(hist.nan) + " NaN");
  if (hist.inf) notes.push(fmtInt(hist.inf) + " ±Inf");
  if (hist.outside) notes.push(fmtInt(hist.outside) + " outside the range");
  canvas._draw = () => drawHistogram(canvas, hist);
  const box = el("div", { class: "hist" }, el("div", { class: "head" }, el("h3", {}, title),
    el("label", { class: "muted small" }, check, " log scale")), canvas,
  el("p", { class: "muted small" }, hist.counts.length + " bins, " + notes.join(", ")));
  canvas._draw();
  return box;
}
function drawHistogram(canvas, hist) {
  const pal = palette();
  const ctx = canvas.getContext("2d"), W = canvas.width, H = canvas.height, base = H - 16;
  ctx.fillStyle = pal.bg; ctx.fillRect(0, 0, W, H);
  const counts = hist.counts, scale = state.log ? Math.log1p : (x) => x;
  const max = Math.max(1, ...counts.map(scale));
  const bw = W / counts.length;
  ctx.fillStyle = pal.bar;
  counts.forEach((n, i) => {
    const h = n ? Math.max(1, (scale(n) / max) * (base - 4)) : 0;
    ctx.fillRect(i * bw + 0.5, base - h, Math.max(1, bw - 1), h);
  });
  ctx.fillStyle = pal.axis; ctx.fillRect(0, base, W, 1);
  const lo = hist.edges[0], hi = hist.edges[hist.edges.length - 1];
  if (lo < 0 && hi > 0) { ctx.fillRect(((0 - lo) / (hi - lo)) * W, 0, 1, base); }
  ctx.fillStyle = pal.text; ctx.font = "10px sans-serif";
  ctx.fillText(fmtNum(lo), 2, H - 3);
  const right = fmtNum(hi);
  ctx.fillText(right, W - ctx.measureText(right).width - 2, H - 3);
}
// The colour scale spans the 1st to 99th percentile of the cells (a few outliers would wash out the
// rest); diverging (negative, zero, positive) when the cells have both signs, else low to high.
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
function mix(a, b, t) { return [a[0] + (b[0] - a[0]) * t, a[1] + (b[1] - a[1]) * t, a[2] + (b[2] - a[2]) * t]; }
function heatColor(v, sc, pal) {
  if (v === null) return pal.none;
  if (sc.diverging) {
    const t = Math.max(-1, Math.min(1, v / sc.hi));
    return t < 0 ? mix(pal.mid, pal.neg, -t) : mix(pal.mid, pal.pos, t);
  }
  const t = sc.hi > sc.lo ? Math.max(0, Math.min(1, (v - sc.lo) / (sc.hi - sc.lo))) : 0.5;
  return mix(pal.lo, pal.hi, t);
}
function drawHeatmap(canvas, h) {
  const pal = palette();
  const ctx = canvas.getContext("2d");
  const rows = h.cells.length, cols = rows ? h.cells[0].length : 0;
  ctx.fillStyle = pal.bg; ctx.fillRect(0, 0, canvas.width, canvas.height);
  if (!rows || !cols) return;
  const img = ctx.createImageData(cols, rows);
  const sc = heatScale(h);
  for (let i = 0; i < rows; i++) {
    const line = h.cells[i];
    for (let j = 0; j < cols; j++) {
      const [r, g, b] = heatColor(line[j], sc, pal);
      img.data.set([r, g, b, 255], (i * cols + j) * 4);
    }
  }
  const off = document.createElement("canvas");
  off.width = cols; off.height = rows;
  off.getContext("2d").putImageData(img, 0, 0);
  ctx.imageSmoothingEnabled = false;
  ctx.drawImage(off, 0, 0, canvas.width, canvas.height);
}
function drawScale(canvas, sc) { // the heatmap's colours from lo (left) to hi (right)
  const pal = palette(), ctx = canvas.getContext("2d"), W = canvas.width;
  for (let x = 0; x < W; x++) {
    const [r, g, b] = heatColor(sc.lo + ((sc.hi - sc.lo) * (x + 0.5)) / W, sc, pal);
    ctx.fillStyle = "rgb(" + Math.round(r) + "," + Math.round(g) + "," + Math.round(b) + ")";
    ctx.fillRect(x, 0, 1, canvas.height);
  }
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
  const byName = (inp, names) => { if (!names) return indexOf(inp); const m = new Map(); names.forEach((n, i) => m.set(n, i)); return m; };
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
  view.append(el("dl", { class: "inputs", id: "diff-inputs" }, el("dt", {}, "A"), el("dd", {}, d.a), el("dt", {}, "B"), el("dd", {}, d.b)));
  const meta = el("table", { class: "grid", id: "diff-metadata" },
    el("tr", {}, el("th", { class: "mark" }, el("span", { class: "sr-only" }, "change")), el("th", { class: "key" }, "key"), el("th", {}, "A"), el("th", {}, "B")));
  const keys = (o) => Object.keys(o).sort();
  const mark = (cls, text) => el("td", { class: "mark " + cls }, text);
  for (const k of keys(d.metadata_added)) meta.append(el("tr", {}, mark("added", "+"), el("td", { class: "key" }, k), el("td", {}, "—"), el("td", { class: "val" }, d.metadata_added[k])));
  for (const k of keys(d.metadata_removed)) meta.append(el("tr", {}, mark("removed", "−"), el("td", { class: "key" }, k), el("td", { class: "val" }, d.metadata_removed[k]), el("td", {}, "—")));
  for (const k of keys(d.metadata_changed)) meta.append(el("tr", {}, mark("changed", "~"), el("td", { class: "key" }, k), el("td", { class: "val" }, d.metadata_changed[k].a), el("td", { class: "val" }, d.metadata_changed[k].b)));
  const nMeta = meta.rows.length - 1;
  view.append(el("h2", {}, "Metadata changes (" + nMeta + ")"), nMeta ? meta : el("p", { class: "muted" }, "None."));

  const changes = entries.filter((e) => !EQUAL_VERDICTS.has(e.label));
  if (state.diffFilter === null) state.diffFilter = changes.length ? "changes" : "all";
  const select = el("select", { id: "diff-filter", "aria-label": "Which tensors to list" },
    el("option", { value: "changes", selected: state.diffFilter === "changes" }, "hide equal tensors"),
    el("option", { value: "all", selected: state.diffFilter === "all" }, "all tensors"));
  const hits = { list: [] };
  const open = (e) => { if (e && diffBoth(e)) selectTensor(e.name); };
  const head = el("div", { class: "row head" }, headCell("mark", el("span", { class: "sr-only" }, "change")), headCell("name", "name"), headCell("side", "A"),
    headCell("side", "B"), headCell("verdict", "verdict"));
  const rows = new VList("diff-list", { role: "grid", label: "Tensors of A and B", head, activate: (k) => open(hits.list[k]) });
  list = rows;
  rows.find = (name) => hits.list.findIndex((e) => e.name === name);
  const status = el("span", { class: "muted count", id: "match-count", role: "status" });
  const fill = () => {
    const match = matcher(state.query);
    const pool = state.diffFilter === "changes" ? changes : entries;
    hits.list = match ? pool.filter((e) => match(e.name)) : pool;
    status.textContent = plural(hits.list.length, "tensor");
    rows.set(hits.list.length, (k) => diffLine(hits.list[k], open));
  };
  select.addEventListener("change", () => { state.diffFilter = select.value; writeHash(true); fill(); });
  view.append(el("h2", {}, "Tensors"), el("p", { class: "muted" }, "Click a tensor both hold to compare its values."));
  view.append(el("div", { class: "toolbar" }, searchBox(fill, "Filter: substring, or glob"), select, status));
  view.append(rows.box);
  fill();
}
function diffBoth(e) { const d = state.data.diff; return d._inA.get(e.name) !== undefined && d._inB.get(e.name) !== undefined; }
function diffLine(e, open) {
  const d = state.data.diff, [a, b] = state.data.inputs;
  const ia = d._inA.get(e.name), ib = d._inB.get(e.name);
  const desc = (inp, i) => (i === undefined ? "—" : inp.tensors.dtype[i] + " " + shapeText(inp.tensors.shape[i]));
  const cls = e.kind === "=" ? VERDICT_CLASS.get(e.label) || "muted" : KIND_TEXT.get(e.kind);
  const mark = e.kind === "=" ? (EQUAL_VERDICTS.has(e.label) ? "=" : "≠") : e.kind === "-" ? "−" : e.kind;
  const selected = state.selected === e.name;
  const row = el("div", { class: "row" + (selected ? " selected" : ""), "data-tensor": e.name, "data-kind": e.label, "aria-selected": String(selected) },
    cell("mark " + cls, mark), el("span", { class: "name", role: "gridcell", title: e.name }, e.name),
    cell("side", desc(a, ia), desc(a, ia)), cell("side", desc(b, ib), desc(b, ib)), cell("verdict " + cls, e.label, e.label));
  if (ia !== undefined && ib !== undefined) row.addEventListener("click", () => open(e));
  else row.classList.add("inert");
  return row;
}
function showValueDiff(e) {
  const aside = document.getElementById("detail");
  aside.hidden = false;
  clear(aside);
  const out = el("div", { id: "value-diff" });
  aside.append(el("div", { class: "detail" }, detailTitle(e.name), out));
  if (!diffBoth(e)) { out.append(el("p", { class: "muted" }, "Only " + (state.data.diff._inA.get(e.name) === undefined ? "B" : "A") + " holds this tensor.")); return; }
  const show = (v) => {
    clear(out);
    const diff = v.diff || v;
    const rows = [["verdict", diff.verdict], ["compared", fmtNum(diff.compared)], ["elements", fmtInt(diff.elements)],
      ["differing", fmtInt(diff.differing)], ["max_abs_diff", fmtNum(diff.max_abs_diff)],
      ["cosine_similarity", fmtNum(diff.cosine_similarity)]];
    if (diff.reason) rows.push(["not compared", diff.reason]);
    out.append(el("h3", {}, "Value differences (A − B)"), kvTable(rows, "value-diff-numbers", 2));
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

// ---- keys anywhere: / to search, Esc to clear --------------------------------------------------------
document.addEventListener("keydown", (e) => {
  const t = e.target, typing = t && t.closest && t.closest("input, textarea, select");
  if (e.key === "/" && !typing && !e.ctrlKey && !e.metaKey && !e.altKey) {
    const search = document.getElementById("search");
    if (search) { e.preventDefault(); search.focus(); search.select(); }
  } else if (e.key === "Escape" && !typing) {
    const search = document.getElementById("search");
    if (state.query && search) { search.value = ""; search._commit(); } else if (state.selected !== null) {
      state.selected = null;
      writeHash(true);
      if (list) list.redraw();
      renderDetail();
    }
  }
});

// ---- start ------------------------------------------------------------------------------------
document.getElementById("tabs").addEventListener("keydown", tabKeys);
document.getElementById("theme").addEventListener("click", nextTheme);
document.getElementById("copy-link").addEventListener("click", (e) => copyText(pageLink(), e.currentTarget));
loadData().then((data) => {
  state.data = data;
  readHash();
  render();
  reveal();
  document.body.setAttribute("data-ready", "1");
  // The tensor lists, fetched while the overview is read; data-tensors says they are all here.
  Promise.all(state.data.inputs.map((_, i) => ensureTensors(i)))
    .then(() => document.body.setAttribute("data-tensors", "1"), () => document.body.setAttribute("data-tensors", "error"));
}).catch((e) => {
  const view = clear(document.getElementById("view"));
  view.append(el("p", { class: "error", id: "load-error" }, "Could not load the checkpoint: " + String(e.message || e)));
  document.body.setAttribute("data-ready", "error");
});
