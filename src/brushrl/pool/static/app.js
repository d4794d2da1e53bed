// brushrl pool rating page. Untrusted text (prompts, sources, sketch code) is only ever put into
// the page with textContent / attribute setters, never innerHTML; the server's CSP forbids inline
// script as a second line of defence.
"use strict";

const KEY_TIERS = { "1": "love", "l": "love", "2": "good", "g": "good", "3": "reject", "x": "reject", "r": "reject" };
const FILTERS = ["tier", "prompt", "source", "round"];
let items = [];      // the grid, in display order
let cur = 0;         // index of the current card
const undoStack = []; // {kind: "rate", id, previous} | {kind: "skip", id}
let acked = 0;       // ratings the server confirmed (written to disk)

const $ = (id) => document.getElementById(id);

function el(tag, cls, text) {
  const node = document.createElement(tag);
  if (cls) node.className = cls;
  if (text !== undefined) node.textContent = text;
  return node;
}

function setStatus(text, error) {
  const s = $("status");
  s.textContent = text;
  s.classList.toggle("error", !!error);
}

async function api(path, body) {
  const opts = body === undefined ? {} : {
    method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(body),
  };
  const r = await fetch(path, opts);
  const data = await r.json().catch(() => ({}));
  if (!r.ok) throw new Error(data.error || `${r.status} ${r.statusText}`);
  return data;
}

function showCounts(counts, total) {
  const rated = total - (counts.unrated || 0);
  $("counts").textContent =
    `rated ${rated}/${total} · love ${counts.love || 0} · good ${counts.good || 0} · ` +
    `reject ${counts.reject || 0} · unrated ${counts.unrated || 0}`;
}

function fillSelect(id, values) {
  const sel = $(id);
  const keep = sel.value;
  while (sel.options.length > 1) sel.remove(1);
  for (const v of values) {
    const opt = el("option", null, String(v));
    opt.value = String(v);
    sel.add(opt);
  }
  sel.value = keep;
}

async function loadState() {
  const st = await api("/api/state");
  $("title").textContent = `brushrl pool ${st.pool.version_id}`;
  document.title = `rate ${st.pool.version_id}`;
  showCounts(st.counts, st.total);
  fillSelect("f-prompt", st.facets.prompts);
  fillSelect("f-source", st.facets.sources);
  fillSelect("f-round", st.facets.rounds);
}

let itemsAsked = 0;  // loadItems calls so far: only the newest one's answer may fill the grid

async function loadItems() {
  const q = new URLSearchParams();
  for (const f of FILTERS) {
    const v = $(`f-${f}`).value;
    if (v !== "") q.set(f, v);
  }
  // Two filter changes in a row send two requests whose answers can come back in either order;
  // an older answer arriving last would show the grid of filters no longer selected.
  const ask = ++itemsAsked;
  const got = (await api(`/api/items?${q}`)).items;
  document.body.dataset.itemsAnswered = String(Number(document.body.dataset.itemsAnswered || 0) + 1);
  if (ask !== itemsAsked) return;
  items = got;
  cur = Math.min(cur, Math.max(items.length - 1, 0));
  render();
}

function card(it, i) {
  const c = el("article", "card");
  c.dataset.id = it.id;
  const img = el("img");
  img.src = `/img/${encodeURIComponent(it.id)}`;
  img.alt = it.prompt;
  img.loading = "lazy";
  c.append(img, el("p", "prompt", it.prompt));
  const meta = el("p", "meta");
  meta.append(el("span", `tier-${it.tier}`, it.tier), document.createTextNode(` · ${it.source} · round ${it.round} · ${it.id}`));
  c.append(meta);
  for (const [label, tier] of [["love", "love"], ["good", "good"], ["reject", "reject"]]) {
    const b = el("button", `rate-${tier}`, label);
    b.addEventListener("click", (ev) => { ev.stopPropagation(); cur = i; rate(tier); });
    c.append(b);
  }
  const code = el("button", "show-code", "code");
  code.addEventListener("click", (ev) => { ev.stopPropagation(); cur = i; toggleCode(true); });
  c.append(code);
  c.addEventListener("click", () => { cur = i; highlight(); });
  return c;
}

function render() {
  $("grid").replaceChildren(...items.map(card));
  $("empty").hidden = items.length > 0;
  highlight();
}

function highlight() {
  document.querySelectorAll(".card").forEach((c, i) => c.classList.toggle("current", i === cur));
  const c = document.querySelectorAll(".card")[cur];
  if (c) c.scrollIntoView({ block: "nearest" });
  if (!$("code-panel").hidden) toggleCode(true);
  if (!$("compare").hidden) showCompare();
}

async function rate(tier) {
  const it = items[cur];
  if (!it) return;
  // Move on at once, so fast key presses rate successive paintings; put it back if not saved.
  const at = cur;
  const previousTier = it.tier;
  const filter = $("f-tier").value;
  const leaves = filter !== "" && filter !== tier;
  if (leaves) {
    items.splice(at, 1);
    if (cur >= items.length) cur = Math.max(items.length - 1, 0);
  } else {
    it.tier = tier;
    cur = items.length ? (cur + 1) % items.length : 0;
  }
  render();
  setStatus(`saving ${tier}: ${it.id}…`);
  try {
    const r = await api("/api/rate", { id: it.id, tier });
    undoStack.push({ kind: "rate", id: it.id, previous: r.previous });
    showCounts(r.counts, r.total);
    acknowledge(`saved ${tier}: ${it.id}`);
  } catch (e) {
    if (leaves) items.splice(Math.min(at, items.length), 0, it);
    else it.tier = previousTier;
    render();
    setStatus(`not saved (${e.message}): ${it.id}`, true);
  }
}

// A rating is acknowledged (status "saved", data-acked + 1) only once the server has written it
// to disk and the grid shows its effect.
function acknowledge(text) {
  acked += 1;
  $("status").dataset.acked = String(acked);
  setStatus(text);
}

function skip() {
  const it = items[cur];
  if (!it) return;
  items.splice(cur, 1);
  items.push(it);
  undoStack.push({ kind: "skip", id: it.id });
  setStatus(`skipped ${it.id}`);
  if (cur >= items.length) cur = 0;
  render();
}

async function undo() {
  const last = undoStack.pop();
  if (!last) { setStatus("nothing to undo"); return; }
  if (last.kind === "skip") {
    const i = items.findIndex((x) => x.id === last.id);
    if (i >= 0) { const [it] = items.splice(i, 1); items.splice(cur, 0, it); }
    render();
    setStatus(`unskipped ${last.id}`);
    return;
  }
  try {
    const r = await api("/api/rate", { id: last.id, tier: last.previous });
    showCounts(r.counts, r.total);
    await loadItems();
    const i = items.findIndex((x) => x.id === last.id);
    if (i >= 0) cur = i;
    highlight();
    acknowledge(`undone: ${last.id} is ${last.previous} again`);
  } catch (e) {
    undoStack.push(last);
    setStatus(`undo failed (${e.message})`, true);
  }
}

async function toggleCode(show) {
  const panel = $("code-panel");
  const it = items[cur];
  if (!show || !it) { panel.hidden = true; return; }
  const r = await api(`/api/code/${encodeURIComponent(it.id)}`);
  $("code-title").textContent = `sketch of ${it.id}`;
  $("code").textContent = r.code;
  panel.hidden = false;
}

async function showCompare() {
  const panel = $("compare");
  const it = items[cur];
  if (!it) { panel.hidden = true; return; }
  const refs = (await api(`/api/items?tier=love&prompt=${encodeURIComponent(it.prompt)}`)).items;
  const others = refs.length ? refs : (await api("/api/items?tier=love")).items;
  const figs = [it, ...others.filter((x) => x.id !== it.id).slice(0, 2)].map((x, k) => {
    const f = el("figure");
    const img = el("img");
    img.src = `/img/${encodeURIComponent(x.id)}`;
    img.alt = x.prompt;
    f.append(img, el("figcaption", null, `${k === 0 ? "candidate" : "love reference"}: ${x.id}`));
    return f;
  });
  panel.replaceChildren(...figs);
  panel.hidden = false;
}

function move(d) {
  if (!items.length) return;
  cur = (cur + d + items.length) % items.length;
  highlight();
}

document.addEventListener("keydown", (ev) => {
  if (ev.ctrlKey || ev.metaKey || ev.altKey || ev.target.tagName === "SELECT") return;
  const k = ev.key.toLowerCase();
  if (KEY_TIERS[k]) rate(KEY_TIERS[k]);
  else if (k === "s") skip();
  else if (k === "u" || k === "z") undo();
  else if (k === "c") toggleCode($("code-panel").hidden);
  else if (k === "v") { if ($("compare").hidden) showCompare(); else $("compare").hidden = true; }
  else if (k === "arrowright") move(1);
  else if (k === "arrowleft") move(-1);
  else return;
  ev.preventDefault();
});

for (const f of FILTERS) $(`f-${f}`).addEventListener("change", () => { cur = 0; loadItems(); });

(async () => {
  try {
    await loadState();
    await loadItems();
    document.body.dataset.ready = "1";
  } catch (e) {
    setStatus(`cannot load the pool: ${e.message}`, true);
  }
})();
