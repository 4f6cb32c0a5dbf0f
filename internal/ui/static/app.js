// Arbiter dashboard: a single page that reads the API with the session
// cookie the sign-in form set, and follows the event stream to stay live.
// No third-party code. Text from the server is set with textContent only.
"use strict";

// Okabe–Ito, colour-blind safe; tenants take them in order, then repeat
// with a darker shade.
const PALETTE = ["#0072b2", "#e69f00", "#009e73", "#cc79a7", "#56b4e9", "#d55e00", "#f0e442", "#000000"];
const FREE = "#e4e4e4", OTHER = "#9a9a9a", DOWN = "#3a3a3a";
const KINDS = ["free", "guaranteed", "borrowed", "own reservation", "lent reservation"];

const state = { who: null, view: null, revision: 0, es: null, refreshTimer: 0, fleet: null, layout: null, sel: -1, renderMs: 0 };

function el(tag, attrs, ...kids) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k === "class") e.className = v;
    else if (k === "text") e.textContent = v;
    else if (k === "style") { // through the CSSOM: the page's CSP allows no inline style attributes
      for (const decl of String(v).split(";")) {
        const i = decl.indexOf(":");
        if (i > 0) e.style.setProperty(decl.slice(0, i).trim(), decl.slice(i + 1).trim());
      }
    }
    else if (k.startsWith("on")) e.addEventListener(k.slice(2), v);
    else e.setAttribute(k, v === true ? "" : String(v));
  }
  for (const c of kids.flat()) {
    if (c === null || c === undefined) continue;
    e.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return e;
}

async function get(path) {
  const r = await fetch(path, { credentials: "same-origin", headers: { "Accept": "application/json" } });
  if (r.status === 401) { signedOut(); throw new Error("signed out"); }
  if (!r.ok) {
    let msg = r.status + "";
    try { msg = (await r.json()).message || msg; } catch (e) { /* not JSON */ }
    const err = new Error(msg);
    err.status = r.status;
    throw err;
  }
  return r.json();
}

// gpus formats a GPU count (the API's GPUs are whole GPUs, with decimals for shares).
function gpus(n) { return Number(n).toLocaleString(undefined, { maximumFractionDigits: 3 }); }
function ago(t) {
  const s = Math.max(0, (Date.now() - new Date(t).getTime()) / 1000);
  if (s < 90) return Math.round(s) + "s";
  if (s < 5400) return Math.round(s / 60) + "m";
  if (s < 129600) return Math.round(s / 3600) + "h";
  return Math.round(s / 86400) + "d";
}
function fmtNum(v) { return v === undefined || v === null ? "-" : Number(v).toLocaleString(undefined, { maximumFractionDigits: 3 }); }
function tenantColor(i) { return i < 0 ? OTHER : PALETTE[i % PALETTE.length]; }

// ---- sign-in and the live stream ----

function signedOut() {
  state.who = null;
  if (state.es) { state.es.close(); state.es = null; }
  document.getElementById("nav").hidden = true;
  document.getElementById("who").hidden = true;
  document.getElementById("view").replaceChildren();
  document.getElementById("signin").hidden = false;
  const m = /signin=(\w+)/.exec(location.hash);
  const why = { unknown: "Unknown or revoked token.", expired: "That token has expired.", role: "Node and metrics tokens have no dashboard: use the admin token or a tenant's.",
    invalid: "Paste a token.", limited: "Too many failed sign-ins from this address; wait a minute." };
  document.getElementById("signinerr").textContent = m ? (why[m[1]] || "Sign-in failed.") : "";
  document.getElementById("token").focus();
}

async function start() {
  // /ui/session answers 200 signed in or not, so that an unsigned page
  // logs no failed request.
  const r = await fetch("/ui/session", { credentials: "same-origin" });
  const who = r.ok ? await r.json() : {};
  if (!who.role) return signedOut();
  state.who = who;
  if (/signin=/.test(location.hash)) location.hash = "#/fleet";
  document.getElementById("signin").hidden = true;
  document.getElementById("nav").hidden = false;
  document.getElementById("who").hidden = false;
  document.getElementById("whoname").textContent = state.who.admin ? "admin" : "tenant " + state.who.tenant;
  for (const a of document.querySelectorAll("nav a[data-admin]")) a.hidden = !state.who.admin;
  window.addEventListener("hashchange", route);
  route();
}

function follow(after) {
  if (state.es) return;
  const es = new EventSource("/v1/events?after=" + encodeURIComponent(after));
  state.es = es;
  const live = document.getElementById("live");
  es.onopen = () => live.classList.add("on");
  es.onerror = () => live.classList.remove("on");
  const onEvent = () => {
    clearTimeout(state.refreshTimer);
    state.refreshTimer = setTimeout(() => render(true), 200);
  };
  es.onmessage = onEvent;
  for (const t of ["WorkloadSubmitted", "WorkloadPlaced", "WorkloadPreempted", "WorkloadCancelled", "WorkloadSucceeded", "WorkloadFailed",
    "NodeRegistered", "NodeUpdated", "NodeRemoved", "NodeLost", "NodeRecovered", "ReservationCreated", "ReservationResized", "ReservationDeleted",
    "ReservationBound", "PolicyApplied", "PolicyDeleted", "PolicyFiring", "AlertFired", "AlertResolved", "QuotasChanged", "TenantCreated", "TenantDeleted",
    "ReplicaStarted", "ReplicaStopped", "ReplicaExited", "PartitionSet", "PartitionDeleted", "ConfigSeeded", "ProbesApplied", "AlertRulesApplied"]) {
    es.addEventListener(t, onEvent);
  }
}

// ---- routing ----

const VIEWS = { fleet: viewFleet, tenants: viewTenants, queue: viewQueue, workload: viewWorkload, reservations: viewReservations,
  policies: viewPolicies, alerts: viewAlerts, charts: viewCharts };

function route() {
  const parts = location.hash.replace(/^#\/?/, "").split("/").map(decodeURIComponent);
  let name = parts[0] || "fleet";
  if (!VIEWS[name]) name = "fleet";
  state.view = { name, args: parts.slice(1) };
  for (const a of document.querySelectorAll("nav a")) {
    if (a.getAttribute("href") === "#/" + name) a.setAttribute("aria-current", "page"); else a.removeAttribute("aria-current");
  }
  render(false);
}

async function render(refresh) {
  if (!state.who || !state.view) return;
  const v = state.view;
  const view = document.getElementById("view");
  try {
    await VIEWS[v.name](refresh, ...v.args);
  } catch (e) {
    if (e.message !== "signed out") {
      view.replaceChildren(el("h2", { text: "Not available" }), el("p", { class: "error", role: "alert", text: e.status === 404 ? "Not found." : "Could not load: " + e.message }));
    }
  }
  view.dataset.view = v.name; // drawn (tests wait for it)
}

function show(...nodes) {
  const view = document.getElementById("view");
  view.replaceChildren(...nodes.flat(Infinity).filter((n) => n !== null && n !== undefined));
}

// ---- fleet ----

// Cells are larger for small fleets; 10,000 nodes draw at 5 px a GPU.
const GAP = 1, NODE_GAP = 3, ROW_GAP = 3, BLOCK_HEAD = 18, PAD = 8;
let CELL = 5;

async function viewFleet(refresh) {
  const f = await get("/v1/ui/fleet");
  state.fleet = f;
  if (!state.es) follow(f.revision);
  let wrap = document.getElementById("fleetwrap");
  if (!refresh || !wrap) {
    const canvas = el("canvas", { id: "fleet", tabindex: "0", role: "img",
      "aria-label": "Heat map of " + f.nodes + " nodes and " + f.gpus + " GPUs; arrow keys move between nodes" });
    const info = el("aside", { id: "nodeinfo", "aria-live": "polite" }, el("p", { class: "muted", text: "Point at or select a node (arrow keys) for details." }));
    wrap = el("div", { id: "fleetwrap", class: "fleetwrap" }, canvas, info);
    show(el("h2", { text: "Fleet" }), el("p", { id: "fleetsum", class: "muted" }), legend(f), wrap);
    canvas.addEventListener("mousemove", (e) => {
      const r = canvas.getBoundingClientRect();
      const i = hit(e.clientX - r.left, e.clientY - r.top);
      if (i >= 0) { state.sel = i; nodeInfo(); drawFleet(); }
    });
    canvas.addEventListener("keydown", fleetKey);
  } else {
    const lg = document.querySelector(".legend");
    if (lg) lg.replaceWith(legend(f));
  }
  const t0 = performance.now();
  layoutFleet(f);
  drawFleet();
  state.renderMs = performance.now() - t0;
  document.getElementById("fleetsum").textContent = f.nodes + " nodes, " + f.gpus + " GPUs in " + f.regions.length + " region(s).";
  nodeInfo();
}

function legend(f) {
  const items = [];
  f.tenants.forEach((t, i) => items.push(el("span", {}, el("i", { class: "sw", style: "background:" + tenantColor(i) }), t)));
  if (!state.who.admin) items.push(el("span", {}, el("i", { class: "sw", style: "background:" + OTHER }), "other tenants"));
  items.push(el("span", {}, el("i", { class: "sw", style: "background:" + FREE }), "free"));
  items.push(el("span", {}, el("i", { class: "sw", style: "background:" + DOWN }), "down / lost"));
  items.push(el("span", { class: "muted", text: "solid: guaranteed · striped: borrowed · thick border: on own reservation · dot: lent reservation · partly filled: a share of a GPU · struck through: drained (orange) or cordoned (purple)" }));
  return el("div", { class: "legend" }, items);
}

// layoutFleet places every node: blocks in order, each a heading and rows
// of nodes, each node a row of GPU cells.
function layoutFleet(f) {
  CELL = f.nodes <= 64 ? 14 : f.nodes <= 1000 ? 9 : 5;
  const canvas = document.getElementById("fleet");
  const width = Math.max(600, canvas.parentElement.clientWidth - 296);
  const nodes = [], heads = [];
  let y = PAD;
  for (const r of f.regions) for (const z of r.zones) for (const b of z.blocks) {
    heads.push({ y, text: r.name + (z.name ? " / zone " + z.name : "") + " / " + b.name + " (" + b.nodes.length + " nodes)" });
    y += BLOCK_HEAD;
    let x = PAD;
    const nw = Math.max(1, b.nodes.reduce((m, n) => Math.max(m, n.holder.length), 1)) * (CELL + GAP) - GAP;
    for (const n of b.nodes) {
      if (x + nw > width - PAD) { x = PAD; y += CELL + ROW_GAP; }
      nodes.push({ n, x, y, w: n.holder.length * (CELL + GAP) - GAP, block: b.name, region: r.name });
      x += nw + NODE_GAP;
    }
    y += CELL + ROW_GAP + 8;
  }
  state.layout = { width, height: y + PAD, nodes, heads };
  if (state.sel >= nodes.length) state.sel = -1;
}

function drawFleet() {
  const canvas = document.getElementById("fleet");
  const L = state.layout;
  if (!canvas || !L) return;
  const dpr = window.devicePixelRatio || 1;
  if (canvas.width !== L.width * dpr || canvas.height !== L.height * dpr) {
    canvas.width = L.width * dpr; canvas.height = L.height * dpr;
    canvas.style.width = L.width + "px"; canvas.style.height = L.height + "px";
  }
  const g = canvas.getContext("2d");
  g.setTransform(dpr, 0, 0, dpr, 0, 0);
  g.fillStyle = "#ffffff";
  g.fillRect(0, 0, L.width, L.height);
  g.fillStyle = "#1b1b1b";
  g.font = "12px system-ui, sans-serif";
  g.textBaseline = "top";
  for (const h of L.heads) g.fillText(h.text, PAD, h.y + 2);
  for (let i = 0; i < L.nodes.length; i++) {
    const { n, x, y } = L.nodes[i];
    const down = n.state === "down" || n.state === "lost";
    for (let k = 0; k < n.holder.length; k++) {
      const cx = x + k * (CELL + GAP);
      const h = n.holder[k], kind = n.kind[k];
      if (down) { g.fillStyle = DOWN; g.fillRect(cx, y, CELL, CELL); continue; }
      g.fillStyle = FREE;
      g.fillRect(cx, y, CELL, CELL);
      if (h === -1) continue;
      g.fillStyle = tenantColor(h);
      const frac = Math.min(1, (n.milli[k] || 1000) / 1000);
      const fh = Math.max(1, Math.round(CELL * frac));
      g.fillRect(cx, y + CELL - fh, CELL, fh);
      const u = Math.max(1, Math.floor(CELL / 5));
      if (kind === 2) { // borrowed: light marks on the diagonal
        g.fillStyle = "rgba(255,255,255,0.75)";
        g.fillRect(cx, y + CELL - 2 * u, 2 * u, u); g.fillRect(cx + 2 * u, y + u, 2 * u, u);
      } else if (kind === 4) { // lent reservation: a dot
        g.fillStyle = "#ffffff";
        g.fillRect(cx + 2 * u, y + 2 * u, u, u);
      }
    }
    if (n.reserved) {
      g.strokeStyle = n.reserved === "own" ? "#000000" : "#777777";
      g.lineWidth = 1;
      g.strokeRect(x - 1.5, y - 1.5, n.holder.length * (CELL + GAP) - GAP + 3, CELL + 3);
    }
    if (n.state === "drained" || n.state === "cordoned") { // struck through: no new work (drained: its work evicted too)
      g.strokeStyle = n.state === "drained" ? "#d55e00" : "#cc79a7";
      g.beginPath(); g.moveTo(x, y + CELL); g.lineTo(x + n.holder.length * (CELL + GAP), y); g.stroke();
    }
  }
  if (state.sel >= 0 && L.nodes[state.sel]) {
    const s = L.nodes[state.sel];
    g.strokeStyle = "#e69f00"; g.lineWidth = 2;
    g.strokeRect(s.x - 3, s.y - 3, s.w + 6, CELL + 6);
  }
}

function hit(px, py) {
  const L = state.layout;
  if (!L) return -1;
  for (let i = 0; i < L.nodes.length; i++) {
    const s = L.nodes[i];
    if (px >= s.x - 1 && px <= s.x + s.w + 1 && py >= s.y - 1 && py <= s.y + CELL + 1) return i;
  }
  return -1;
}

function fleetKey(e) {
  const L = state.layout;
  if (!L || !L.nodes.length) return;
  let i = state.sel < 0 ? 0 : state.sel;
  const cur = L.nodes[i];
  const nearest = (dir) => {
    let best = -1, bd = Infinity;
    for (let j = 0; j < L.nodes.length; j++) {
      const s = L.nodes[j];
      if (dir > 0 ? s.y <= cur.y : s.y >= cur.y) continue;
      const d = Math.abs(s.y - cur.y) * 1000 + Math.abs(s.x - cur.x);
      if (d < bd) { bd = d; best = j; }
    }
    return best < 0 ? i : best;
  };
  switch (e.key) {
    case "ArrowRight": i = Math.min(L.nodes.length - 1, i + 1); break;
    case "ArrowLeft": i = Math.max(0, i - 1); break;
    case "ArrowDown": i = nearest(1); break;
    case "ArrowUp": i = nearest(-1); break;
    case "Home": i = 0; break;
    case "End": i = L.nodes.length - 1; break;
    default: return;
  }
  e.preventDefault();
  state.sel = i;
  drawFleet();
  nodeInfo();
}

function nodeInfo() {
  const box = document.getElementById("nodeinfo");
  const L = state.layout;
  if (!box || !L || state.sel < 0 || !L.nodes[state.sel]) return;
  const { n, block, region } = L.nodes[state.sel];
  const f = state.fleet;
  const rows = n.holder.map((h, k) => {
    const who = h === -1 ? "free" : h === -2 ? "another tenant" : f.tenants[h];
    const share = h === -1 ? "" : (n.milli[k] < 1000 ? " (" + gpus(n.milli[k] / 1000) + " GPU)" : "");
    return el("li", {}, "GPU " + k + ": " + who + (h < 0 ? "" : ", " + KINDS[n.kind[k]]) + share);
  });
  box.replaceChildren(
    el("h3", { text: n.id }),
    el("dl", { class: "kv" },
      el("dt", { text: "state" }), el("dd", { text: n.state }),
      el("dt", { text: "model" }), el("dd", { text: n.model }),
      el("dt", { text: "block" }), el("dd", { text: region + " / " + block }),
      el("dt", { text: "reservation" }), el("dd", { text: n.reservation || (n.reserved === "other" ? "another tenant's" : "none") })),
    el("ul", {}, rows));
}

// ---- tenants ----

async function viewTenants() {
  const [usage, tenants] = await Promise.all([get("/v1/usage?limit=1000"), get("/v1/tenants?limit=1000")]);
  // Fair share (when the server runs it) is on each tenant's own page:
  // read it for the first 50.
  const fair = {};
  await Promise.all(tenants.items.slice(0, 50).map(async (t) => {
    try {
      const full = await get("/v1/tenants/" + encodeURIComponent(t.name));
      if (full.fair_share) fair[t.name] = full.fair_share;
    } catch (e) { /* not shown */ }
  }));
  const byTenant = new Map();
  for (const u of usage.items) {
    if (!byTenant.has(u.tenant)) byTenant.set(u.tenant, []);
    byTenant.get(u.tenant).push(u);
  }
  const sections = [];
  for (const t of tenants.items) {
    const rows = (byTenant.get(t.name) || []).map((u) => {
      const max = Math.max(u.limit ?? 0, u.guaranteed, u.currentValue, 1);
      const pct = (v) => (100 * v / max).toFixed(2) + "%";
      const bar = el("div", { class: "bar", role: "img",
        "aria-label": `used ${u.currentValue} of guaranteed ${u.guaranteed}, borrowed ${u.borrowed}, limit ${u.limit ?? "none"}` },
        el("i", { class: "used", style: "width:" + pct(u.currentValue - u.borrowed) }),
        el("i", { class: "borrowed", style: "left:" + pct(u.currentValue - u.borrowed) + ";width:" + pct(u.borrowed) }),
        el("i", { class: "guar", style: "width:" + pct(u.guaranteed) }),
        u.limit != null ? el("i", { class: "limit", style: "width:" + pct(u.limit) }) : null);
      return el("tr", {}, el("td", { text: u.flavor }), el("td", { text: u.region }), el("td", {}, bar),
        el("td", { class: "num", text: u.guaranteed }), el("td", { class: "num", text: u.currentValue }),
        el("td", { class: "num", text: u.borrowed }), el("td", { class: "num", text: u.limit ?? "∞" }), el("td", { class: "num", text: u.idle }),
        el("td", { class: "num", text: u.lent }));
    });
    const fs = fair[t.name];
    sections.push(el("h3", { text: t.name + (t.parent ? " (in " + t.parent + ")" : "") }));
    if (fs) {
      sections.push(el("p", { class: "muted", text: "fair share: " + fs.entries.map((e) =>
        (e.flavor || "all") + (e.region ? " in " + e.region : "") + ": share " + fmtNum(e.share) + ", decayed " + fmtNum(e.decayed_gpu_hours) + " GPU-h (" + fmtNum(e.usage) + " of the siblings'), factor " + fmtNum(e.factor)).join("; ") }));
    }
    sections.push(rows.length ? el("table", {}, el("thead", {}, el("tr", {}, ["flavor", "region", "used / guaranteed / limit", "guaranteed", "used", "borrowed", "limit", "idle", "lent"]
      .map((h, i) => el("th", { class: i > 2 ? "num" : null, text: h })))), el("tbody", {}, rows)) : el("p", { class: "muted", text: "no quota entries" }));
  }
  show(el("h2", { text: "Tenants" }),
    el("p", { class: "muted", text: "Bars: blue used within the guarantee, striped borrowed beyond it; the solid line is the guarantee, the dashed one the limit." }),
    sections);
}

// ---- queue ----

async function viewQueue() {
  const q = await get("/v1/ui/queue");
  const filt = state.queueFilter || (state.queueFilter = { tenant: "", priority: "", code: "" });
  const opts = (key) => ["", ...new Set(q.items.map((x) => x[key]).filter(Boolean))].sort();
  const sel = (key, label) => el("label", {}, label + " ",
    el("select", { onchange: (e) => { filt[key] = e.target.value; render(true); } },
      opts(key).map((v) => el("option", { value: v, selected: v === filt[key], text: v || "all" }))));
  const items = q.items.filter((x) => (!filt.tenant || x.tenant === filt.tenant) && (!filt.priority || x.priority === filt.priority) && (!filt.code || x.code === filt.code));
  const rows = items.map((x) => el("tr", {},
    el("td", {}, el("a", { href: "#/workload/" + encodeURIComponent(x.tenant) + "/" + encodeURIComponent(x.name), text: x.tenant + "/" + x.name })),
    el("td", { text: x.priority }), el("td", { class: "num", text: gpus(x.gpus) + " × " + x.replicas }), el("td", { text: ago(x.submitted_at) }),
    el("td", { text: x.code || "" }), el("td", { text: x.reason || "not yet considered" }),
    el("td", { text: x.planned_start ? new Date(x.planned_start).toISOString().slice(0, 16).replace("T", " ") : "" })));
  show(el("h2", { text: "Queue (" + items.length + " pending)" }),
    el("div", { class: "filters" }, sel("tenant", "Tenant"), sel("priority", "Priority"), sel("code", "Reason")),
    el("table", {}, el("thead", {}, el("tr", {}, ["workload", "priority", "GPUs", "waiting", "code", "why", "planned start"].map((h) => el("th", { text: h })))),
      el("tbody", {}, rows)));
}

async function viewWorkload(refresh, tenant, name) {
  const base = "/v1/tenants/" + encodeURIComponent(tenant) + "/workloads/" + encodeURIComponent(name);
  const [w, why] = await Promise.all([get(base), get(base + "/why")]);
  // Its events among the last few thousand (the log is long on a busy
  // server): from a little before the last cycle's revision, page by page.
  const obj = "workloads/" + tenant + "/" + name;
  const events = [];
  let after = Math.max(0, (why.plan_revision || 0) - 3000);
  for (let page = 0; page < 5; page++) {
    let ev;
    try {
      ev = await get("/v1/events?limit=1000&tenant=" + encodeURIComponent(tenant) + "&after=" + after);
    } catch (e) {
      if (e.status !== 410 || after === 0) throw e;
      after = 0; // those were pruned: start from the oldest kept
      ev = await get("/v1/events?limit=1000&tenant=" + encodeURIComponent(tenant) + "&after=0");
    }
    for (const e of ev.items) if (e.object === obj) events.push(e);
    if (ev.items.length < 1000 || ev.next <= after) break;
    after = ev.next;
  }
  const placement = w.running ? w.running.replicas.map((r, i) => el("li", { text: "replica " + i + ": " + r.node + " GPUs " + (r.gpus || []).join(",") })) : [];
  show(el("h2", { text: tenant + "/" + name }),
    el("dl", { class: "kv" },
      el("dt", { text: "state" }), el("dd", { text: w.state }),
      el("dt", { text: "priority" }), el("dd", { text: w.priority + (w.effective_priority ? " (in force: " + w.effective_priority + ")" : "") }),
      el("dt", { text: "GPUs" }), el("dd", { text: gpus(w.gpus) + " × " + (w.replicas || 1) }),
      el("dt", { text: "why" }), el("dd", { text: why.reason }),
      el("dt", { text: "preemptions" }), el("dd", { text: w.preemptions || 0 })),
    placement.length ? [el("h3", { text: "Placement" }), el("ul", {}, placement)] : null,
    w.running ? el("p", {}, el("a", { href: base + "/logs?replica=0", target: "_blank", rel: "noopener", text: "Logs of replica 0" })) : null,
    el("h3", { text: "Events" }),
    el("table", {}, el("tbody", {}, events.map((e) => el("tr", {}, el("td", { text: new Date(e.time).toISOString().replace("T", " ").slice(0, 19) }), el("td", { text: e.type }), el("td", { text: e.message || "" }))))));
}

// ---- reservations, policies, alerts ----

async function viewReservations() {
  const rs = await get("/v1/reservations?limit=1000");
  const rows = rs.items.map((r) => {
    const cap = Math.max(r.reserved_gpus, 1);
    const bar = el("div", { class: "bar", role: "img", "aria-label": `owner uses ${gpus(r.allocated_gpus)}, lent ${gpus(r.borrowed_gpus)} of ${gpus(r.reserved_gpus)} GPUs` },
      el("i", { class: "used", style: "width:" + (100 * r.allocated_gpus / cap).toFixed(2) + "%" }),
      el("i", { class: "borrowed", style: "left:" + (100 * r.allocated_gpus / cap).toFixed(2) + "%;width:" + (100 * r.borrowed_gpus / cap).toFixed(2) + "%" }));
    return el("tr", {}, el("td", { text: r.tenant + "/" + r.name }), el("td", { text: r.state }), el("td", { text: r.region + " " + r.sku + " × " + r.capacity }),
      el("td", {}, bar), el("td", { class: "num", text: gpus(r.allocated_gpus) }), el("td", { class: "num", text: gpus(r.borrowed_gpus) }),
      el("td", { class: "num", text: gpus(r.reserved_gpus - r.allocated_gpus - r.borrowed_gpus) }));
  });
  show(el("h2", { text: "Reservations" }),
    el("table", {}, el("thead", {}, el("tr", {}, ["reservation", "state", "machines", "use", "owner", "lent", "idle"].map((h) => el("th", { text: h })))), el("tbody", {}, rows)));
}

async function viewPolicies() {
  if (!state.who.admin) return show(el("h2", { text: "Policies" }), el("p", { text: "Policies are the admin's." }));
  const ps = await get("/v1/policies?limit=1000");
  const firings = await Promise.all(ps.items.map((p) => get("/v1/policies/" + encodeURIComponent(p.name) + "/firings?limit=1000")));
  const all = [];
  ps.items.forEach((p, i) => firings[i].items.forEach((f) => all.push(f)));
  const out = [el("h2", { text: "Policies" }), timeline(all, ps.items.map((p) => p.name))];
  ps.items.forEach((p, i) => {
    out.push(el("h3", { text: p.name + " (" + p.format + ", " + p.rules.length + " rule(s))" }));
    const fs = firings[i].items.slice(-50).reverse();
    out.push(fs.length ? el("table", {}, el("tbody", {}, fs.map((f) => el("tr", {}, el("td", { text: new Date(f.time).toISOString().replace("T", " ").slice(0, 19) }),
      el("td", { text: f.rule }), el("td", { text: f.event }), el("td", { text: f.text }))))) : el("p", { class: "muted", text: "no firings" }));
  });
  show(...out);
}

// timeline draws each policy's firings over the last 24 hours: a row per
// policy, a mark per event (filled: fired, hollow: reverted or expired).
function timeline(firings, names) {
  const W = 900, rowH = 22, H = 30 + rowH * Math.max(1, names.length);
  const now = Date.now(), from = now - 24 * 3600e3;
  const ns = "http://www.w3.org/2000/svg";
  const svg = document.createElementNS(ns, "svg");
  svg.setAttribute("width", W); svg.setAttribute("height", H); svg.setAttribute("class", "timeline"); svg.setAttribute("role", "img");
  svg.setAttribute("aria-label", "Policy firings over the last 24 hours");
  const txt = (x, y, s) => { const t = document.createElementNS(ns, "text"); t.setAttribute("x", x); t.setAttribute("y", y); t.setAttribute("font-size", "11"); t.textContent = s; svg.append(t); };
  names.forEach((n, i) => txt(4, 22 + i * rowH, n));
  for (let h = 0; h <= 24; h += 6) txt(150 + (W - 160) * h / 24 - 8, H - 4, "-" + (24 - h) + "h");
  for (const f of firings) {
    const t = new Date(f.time).getTime();
    if (t < from) continue;
    const c = document.createElementNS(ns, "circle");
    c.setAttribute("cx", 150 + (W - 160) * (t - from) / (now - from));
    c.setAttribute("cy", 18 + names.indexOf(f.policy) * rowH);
    c.setAttribute("r", 5);
    c.setAttribute("fill", f.event === "fired" ? "#d55e00" : "#ffffff");
    c.setAttribute("stroke", "#d55e00");
    const title = document.createElementNS(ns, "title"); title.textContent = f.text; c.append(title);
    svg.append(c);
  }
  return svg;
}

async function viewAlerts() {
  if (!state.who.admin) return show(el("h2", { text: "Alerts" }), el("p", { text: "Alerts are the admin's." }));
  const as = await get("/v1/alerts");
  show(el("h2", { text: "Alerts" }),
    el("table", {}, el("thead", {}, el("tr", {}, ["rule", "metric", "condition", "severity", "state", "value", "fired"].map((h) => el("th", { text: h })))),
      el("tbody", {}, as.items.map((a) => el("tr", {}, el("td", { text: a.name }), el("td", { text: a.metric + (a.of ? " of " + a.of : "") }),
        el("td", { text: a.aggregation + " " + a.operator + " " + a.threshold }), el("td", { text: "Sev" + a.severity }), el("td", { text: a.state }),
        el("td", { class: "num", text: a.last_value ?? "-" }), el("td", { text: a.fired_at ? ago(a.fired_at) + " ago" : "" }))))));
}

// ---- charts ----

async function viewCharts() {
  const s = await get("/v1/ui/series");
  const charts = s.series.map((x) => lineChart(x, s.times));
  show(el("h2", { text: "Charts (a point a minute, last 6 hours)" }), charts.length ? charts : el("p", { class: "muted", text: "no samples yet" }));
}

function lineChart(serie, times) {
  const W = 900, H = 160, L = 60, B = 20;
  const ns = "http://www.w3.org/2000/svg";
  const svg = document.createElementNS(ns, "svg");
  svg.setAttribute("width", W); svg.setAttribute("height", H); svg.setAttribute("class", "chart"); svg.setAttribute("role", "img");
  const vals = serie.values.filter((v) => v !== null);
  const max = Math.max(serie.unit === "ratio" ? 1 : 0, ...vals, 1e-9);
  const fmt = (v) => serie.unit === "ratio" ? (100 * v).toFixed(0) + "%" : serie.unit === "seconds" ? (1000 * v).toFixed(0) + " ms" : v.toFixed(1);
  const last = vals.length ? fmt(vals[vals.length - 1]) : "no data";
  svg.setAttribute("aria-label", serie.name + ": latest " + last);
  const t = document.createElementNS(ns, "text"); t.setAttribute("x", 8); t.setAttribute("y", 14); t.setAttribute("font-size", "12");
  t.textContent = serie.name + " — latest " + last + ", max " + fmt(max); svg.append(t);
  let d = "";
  serie.values.forEach((v, i) => {
    if (v === null) return;
    const x = L + (W - L - 10) * (times.length > 1 ? i / (times.length - 1) : 1);
    const y = H - B - (H - B - 24) * v / max;
    d += (d && serie.values[i - 1] !== null ? "L" : "M") + x.toFixed(1) + " " + y.toFixed(1);
  });
  const p = document.createElementNS(ns, "path"); p.setAttribute("d", d || "M0 0"); p.setAttribute("fill", "none"); p.setAttribute("stroke", "#0072b2"); p.setAttribute("stroke-width", "2");
  svg.append(p);
  // Each point as a dot too, so that a single sample shows.
  serie.values.forEach((v, i) => {
    if (v === null) return;
    const c = document.createElementNS(ns, "circle");
    c.setAttribute("cx", (L + (W - L - 10) * (times.length > 1 ? i / (times.length - 1) : 1)).toFixed(1));
    c.setAttribute("cy", (H - B - (H - B - 24) * v / max).toFixed(1));
    c.setAttribute("r", times.length > 120 ? 1 : 2.5);
    c.setAttribute("fill", "#0072b2");
    svg.append(c);
  });
  const axis = (y, label) => {
    const t = document.createElementNS(ns, "text"); t.setAttribute("x", 4); t.setAttribute("y", y); t.setAttribute("font-size", "10"); t.textContent = label; svg.append(t);
  };
  axis(28, fmt(max)); axis(H - B, fmt(0));
  if (times.length) {
    const t0 = document.createElementNS(ns, "text"); t0.setAttribute("x", L); t0.setAttribute("y", H - 4); t0.setAttribute("font-size", "10");
    t0.textContent = new Date(times[0]).toISOString().slice(11, 16) + " UTC"; svg.append(t0);
  }
  return svg;
}

document.addEventListener("DOMContentLoaded", () => {
  start();
});
