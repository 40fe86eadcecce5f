// The runs dashboard: polls the status API once a second (GET /runs with
// the filters, GET /usage, and GET /invocations/{id} for the open detail)
// and renders with textContent only, so adapter output stays inert. A run's
// detail opens in a side panel; ?run=ID in the address opens it too (the
// bridge UI's receipts link there), and threads link to the bridge's UI.

const $ = (id) => document.getElementById(id);
const POLL_MS = 1000;

let selected = null; // the invocation id whose detail is open
let serverSkew = 0; // server clock minus browser clock, in ms
let bridgeURL = ""; // the bridge the coordinator follows, for thread links

function el(tag, cls, text) {
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  if (text !== undefined && text !== null) e.textContent = String(text);
  return e;
}

async function getJSON(path) {
  const res = await fetch(path, { cache: "no-store" });
  const body = await res.json().catch(() => ({}));
  if (!res.ok) {
    const err = new Error((body.error && body.error.message) || `${res.status} ${res.statusText}`);
    err.status = res.status;
    throw err;
  }
  return body;
}

// login exchanges the token for the HttpOnly login cookie (the page keeps
// no copy), then polls again.
async function login(e) {
  e.preventDefault();
  const token = $("login-token").value.trim();
  $("login-token").value = "";
  const res = await fetch("/auth/login", {
    method: "POST",
    headers: { "Content-Type": "application/json" },
    body: JSON.stringify({ token }),
  });
  if (!res.ok) {
    const body = await res.json().catch(() => ({}));
    $("login-error").textContent = (body.error && body.error.message) || `${res.status}`;
    return;
  }
  $("login-error").textContent = "";
  $("login").hidden = true;
  await poll();
}

function fmtDuration(ms) {
  if (!(ms >= 0)) return "";
  const s = Math.round(ms / 1000);
  if (s < 60) return `${s} s`;
  const m = Math.floor(s / 60);
  if (m < 60) return `${m} min ${s % 60} s`;
  return `${Math.floor(m / 60)} h ${m % 60} min`;
}

function fmtTime(ts) {
  if (!ts) return "";
  const d = new Date(ts);
  return isNaN(d) ? ts : d.toLocaleTimeString();
}

function fmtTokens(i, o) {
  return i || o ? `${i} in / ${o} out` : "";
}

// fmtCost words a cost; "-" when the CLI reported none (codex reports
// tokens only), as the CLI's invocations table says it: "$0" would claim
// the run was free.
function fmtCost(c) {
  return c > 0 ? "$" + c.toFixed(4) : "-";
}

// exitText says how a run's process ended, in words: a negative code is
// the runner's mark for a process it stopped (cancel, timeout, shutdown).
function exitText(r) {
  const c = r.exit_code;
  if (c === null || c === undefined) return "";
  if (c === 0) return "0 · ok";
  if (c > 0) return `${c} · error`;
  switch (r.status) {
    case "cancelled":
      return "stopped: cancelled";
    case "timeout":
      return "stopped: timed out";
    case "interrupted":
      return "stopped: coordinator shut down";
    default:
      return "killed by a signal";
  }
}

function threadURL(id) {
  return /^https?:\/\//.test(bridgeURL) ? `${bridgeURL.replace(/\/+$/, "")}/ui/threads/${encodeURIComponent(id)}` : "";
}

// threadCell is a link to the run's thread in the bridge's UI, by name.
function threadCell(r) {
  const td = el("td", "thread");
  const url = threadURL(r.thread);
  const a = el(url ? "a" : "span", null, r.thread_name || r.thread);
  if (url) {
    a.href = url;
    a.target = "_blank";
    a.rel = "noopener";
    a.addEventListener("click", (e) => e.stopPropagation());
  }
  a.title = r.thread;
  td.append(a);
  return td;
}

function durationOf(r) {
  if (r.status === "running" && r.started_at) return Date.now() + serverSkew - Date.parse(r.started_at);
  return r.duration_ms || (r.started_at && r.finished_at ? Date.parse(r.finished_at) - Date.parse(r.started_at) : NaN);
}

// threadIDs maps the thread names the runs carried to their ids, so that
// the Thread filter takes a name as people know it, as well as an id.
const threadIDs = new Map();

function filterQuery() {
  const q = new URLSearchParams();
  for (const [k, id] of [["thread", "f-thread"], ["participant", "f-participant"], ["status", "f-status"]]) {
    const v = $(id).value.trim();
    if (v) q.set(k, k === "thread" && threadIDs.has(v) ? threadIDs.get(v) : v);
  }
  q.set("limit", "200");
  return q.toString();
}

const LABELS = ["id", "participant", "thread", "trigger", "status", "started", "duration", "tokens", "cost", "exit", ""];

function renderRuns(res) {
  if (res.now) serverSkew = Date.parse(res.now) - Date.now();
  if (typeof res.bridge_url === "string") bridgeURL = res.bridge_url;
  const rows = [];
  for (const r of res.runs || []) {
    if (r.thread_name && r.thread) threadIDs.set(r.thread_name, r.thread);
    const tr = el("tr", "run");
    tr.dataset.id = r.id;
    tr.dataset.status = r.status;
    if (r.id === selected) tr.classList.add("selected");
    const trigger = el("td", "trigger", r.trigger_excerpt || r.trigger_id);
    trigger.title = r.trigger_excerpt || "";
    const exit = el("td", "exit " + (r.exit_code === 0 ? "exit-ok" : r.exit_code > 0 ? "exit-bad" : ""), exitText(r));
    if (r.error) exit.title = r.error;
    // The id is a button too, so that a keyboard opens the detail.
    const idCell = el("td", "id");
    const open = el("button", "open", `#${r.id}`);
    open.type = "button";
    open.setAttribute("aria-label", `Show run ${r.id}`);
    idCell.append(open);
    tr.append(
      idCell,
      el("td", "participant", r.participant),
      threadCell(r),
      trigger,
      el("td", "status st-" + r.status, r.status),
      el("td", "started", fmtTime(r.started_at)),
      el("td", "duration", fmtDuration(durationOf(r))),
      el("td", "tokens", fmtTokens(r.input_tokens, r.output_tokens)),
      el("td", "cost", fmtCost(r.cost_usd)),
      exit,
    );
    const act = el("td", "actions");
    if (r.status === "running" || r.status === "queued") {
      const b = el("button", "cancel", "Cancel");
      b.type = "button";
      b.addEventListener("click", (e) => {
        e.stopPropagation();
        cancel(r.id);
      });
      act.append(b);
    }
    tr.append(act);
    Array.from(tr.children).forEach((td, i) => (td.dataset.label = LABELS[i]));
    tr.addEventListener("click", () => openDetail(r.id));
    rows.push(tr);
  }
  if (rows.length === 0) {
    // An empty table with only its headers reads as broken or still
    // loading; say why there is nothing.
    const filtered = ["f-thread", "f-participant", "f-status"].some((id) => $(id).value.trim());
    const td = el("td", "empty", filtered ? "No runs match these filters." : "No runs yet: a run appears here when a message wakes an agent.");
    td.colSpan = LABELS.length;
    const tr = el("tr", "empty");
    tr.append(td);
    rows.push(tr);
  }
  $("runs-body").replaceChildren(...rows);
}

const USAGE_LABELS = ["participant", "runs today", "tokens today", "cost today", "runs 7 days", "tokens 7 days", "cost 7 days"];

function renderUsage(res) {
  const by = new Map();
  const row = (p) => {
    if (!by.has(p)) by.set(p, { today: null, week: null });
    return by.get(p);
  };
  for (const u of res.today || []) row(u.participant).today = u;
  for (const u of res.last_7_days || []) row(u.participant).week = u;
  const rows = [];
  const cells = (u) => (u ? [u.runs, u.input_tokens + u.output_tokens, fmtCost(u.cost_usd)] : [0, 0, fmtCost(0)]);
  for (const p of Array.from(by.keys()).sort()) {
    const tr = el("tr", "usage");
    tr.dataset.participant = p;
    tr.append(el("td", "participant", p));
    for (const v of [...cells(by.get(p).today), ...cells(by.get(p).week)]) tr.append(el("td", null, v));
    Array.from(tr.children).forEach((td, i) => (td.dataset.label = USAGE_LABELS[i]));
    rows.push(tr);
  }
  $("usage-body").replaceChildren(...rows);
}

async function openDetail(id) {
  selected = id;
  $("detail").hidden = false;
  history.replaceState(null, "", "?run=" + encodeURIComponent(id));
  for (const tr of document.querySelectorAll("#runs-body tr.run")) tr.classList.toggle("selected", tr.dataset.id === String(id));
  await refreshDetail();
}

function closeDetail() {
  selected = null;
  $("detail").hidden = true;
  history.replaceState(null, "", location.pathname);
  for (const tr of document.querySelectorAll("#runs-body tr.selected")) tr.classList.remove("selected");
}

async function refreshDetail() {
  if (selected === null) return;
  const id = selected;
  let inv;
  try {
    inv = await getJSON(`/invocations/${id}`);
  } catch (err) {
    $("detail-error").textContent = err.message;
    $("detail-error").hidden = false;
    return;
  }
  if (id !== selected) return;
  $("detail-title").textContent = `#${inv.id} ${inv.participant} · ${inv.status}`;
  $("detail").dataset.status = inv.status;
  $("detail-meta").textContent = [
    inv.started_at ? `started ${fmtTime(inv.started_at)}` : "not started",
    fmtDuration(durationOf(inv)),
    fmtTokens(inv.input_tokens, inv.output_tokens),
    inv.cost_usd > 0 ? fmtCost(inv.cost_usd) : "",
    exitText(inv) ? `exit ${exitText(inv)}` : "",
    inv.error || "",
  ].filter(Boolean).join(" · ");
  const row = document.querySelector(`#runs-body tr.run[data-id="${CSS.escape(String(inv.id))}"]`);
  const link = $("detail-thread-link");
  const url = threadURL(inv.thread);
  const name = row ? row.querySelector(".thread").textContent : inv.thread;
  link.textContent = "thread " + name;
  if (url) link.href = url;
  else link.removeAttribute("href");
  $("detail-trigger").textContent = "trigger: " + (row ? row.querySelector(".trigger").title || inv.trigger_id : inv.trigger_id);
  $("detail-cancel").hidden = !(inv.status === "running" || inv.status === "queued");
  const items = (inv.progress || []).map((p) => {
    const li = el("li", "progress");
    li.textContent = `${fmtTime(p.ts)}  ${p.kind || ""}  ${p.status || ""}`;
    return li;
  });
  $("detail-progress").replaceChildren(...items);
  $("detail-stderr").textContent = inv.stderr_tail || "";
}

async function cancel(id) {
  $("detail-error").hidden = true;
  try {
    const res = await fetch(`/invocations/${id}/cancel`, { method: "POST" });
    if (!res.ok) {
      const body = await res.json().catch(() => ({}));
      throw new Error((body.error && body.error.message) || `${res.status}`);
    }
  } catch (err) {
    $("detail-error").textContent = "Cancel failed: " + err.message;
    $("detail-error").hidden = false;
  }
  await poll();
}

async function poll() {
  try {
    const [runs, usage] = await Promise.all([getJSON("/runs?" + filterQuery()), getJSON("/usage?tz_offset_min=" + -new Date().getTimezoneOffset())]);
    renderRuns(runs);
    renderUsage(usage);
    await refreshDetail();
    $("status").textContent = "live · updated " + new Date().toLocaleTimeString();
  } catch (err) {
    if (err.status === 401) {
      $("status").textContent = "log in to see the runs";
      if ($("login").hidden) {
        $("login").hidden = false;
        $("login-token").focus();
      }
      return;
    }
    $("status").textContent = "cannot reach the coordinator: " + err.message;
  }
}

function wire() {
  for (const id of ["f-thread", "f-participant", "f-status"]) $(id).addEventListener("input", () => poll());
  $("filters").addEventListener("submit", (e) => e.preventDefault());
  $("login").addEventListener("submit", login);
  $("detail-close").addEventListener("click", closeDetail);
  document.addEventListener("keydown", (e) => e.key === "Escape" && selected !== null && closeDetail());
  $("detail-cancel").addEventListener("click", () => selected !== null && cancel(selected));
}

async function main() {
  wire();
  const run = new URLSearchParams(location.search).get("run");
  if (run && /^\d+$/.test(run)) openDetail(Number(run));
  for (;;) {
    await poll();
    await new Promise((r) => setTimeout(r, POLL_MS));
  }
}

main();
