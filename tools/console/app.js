// flightlog console: plain JS, no build step. Every value from the server is set with
// textContent (never parsed as HTML), and state-changing requests carry the CSRF header.
"use strict";

const state = { runId: null, travel: null, follow: true, overview: null, name: "" };
const $ = (id) => document.getElementById(id);

async function api(path, options = {}) {
  const init = { credentials: "same-origin", headers: { "Accept": "application/json" }, ...options };
  if (init.method && init.method !== "GET") {
    init.headers = { ...init.headers, "Content-Type": "application/json", "X-Flightlog-Request": "1" };
  }
  const response = await fetch(path, init);
  if (response.status === 401) { showLogin(); throw new Error("unauthorized"); }
  const body = await response.json().catch(() => ({}));
  if (!response.ok && response.status !== 202) { throw new Error(body.error || response.statusText); }
  return body;
}

function el(tag, text, cls) {
  const node = document.createElement(tag);
  if (text !== undefined && text !== null) node.textContent = String(text);
  if (cls) node.className = cls;
  return node;
}

function when(value) {
  if (!value) return "";
  const d = new Date(value);
  return d.toLocaleTimeString();
}

function showLogin() {
  $("app").hidden = true; $("logout").hidden = true; $("login").hidden = false; $("who").textContent = "";
}

async function login(event) {
  event.preventDefault();
  $("login-error").textContent = "";
  try {
    const res = await fetch("/ui/login", {
      method: "POST", credentials: "same-origin",
      headers: { "Content-Type": "application/json", "X-Flightlog-Request": "1" },
      body: JSON.stringify({ name: $("login-name").value, token: $("login-token").value }),
    });
    if (!res.ok) { $("login-error").textContent = res.status === 401 ? "That token is not the operator token." : "Login failed."; return; }
    $("login-token").value = "";
    await start();
  } catch (e) { $("login-error").textContent = String(e.message || e); }
}

async function logout() {
  await fetch("/ui/logout", { method: "POST", credentials: "same-origin", headers: { "X-Flightlog-Request": "1" } });
  showLogin();
}

function renderRuns(runs) {
  const body = $("runs").tBodies[0];
  body.replaceChildren();
  for (const run of runs) {
    const tr = el("tr");
    tr.dataset.runId = run.run_id;
    if (run.run_id === state.runId) tr.classList.add("selected");
    tr.append(el("td", run.title || run.run_id), el("td", run.kind), el("td", run.status), el("td", when(run.last_activity)));
    tr.addEventListener("click", () => selectRun(run.run_id));
    body.append(tr);
  }
}

function renderApprovals(approvals) {
  const list = $("approvals");
  list.replaceChildren();
  $("no-approvals").hidden = approvals.length > 0;
  for (const a of approvals) {
    const li = el("li");
    li.dataset.approvalId = a.id;
    li.append(el("strong", a.title));
    const meta = el("div", null, "meta");
    meta.append(el("span", a.risk, "risk-" + a.risk), el("span", " · run " + (a.run_id || "–")),
      el("span", " · requested by " + (a.requested_by || "–")));
    li.append(meta, el("div", a.detail, "detail"), el("div", "digest " + a.payload_sha256, "detail"));
    if (a.quorum > 1) li.append(el("div", `quorum: ${a.votes.length} of ${a.quorum} approvals`, "meta"));
    const countdown = el("div", "", "countdown meta");
    countdown.dataset.expires = a.expires_at;
    li.append(countdown);
    const approve = el("button", "Approve", "approve");
    const reject = el("button", "Reject", "reject");
    approve.addEventListener("click", () => decide(a, "approve"));
    reject.addEventListener("click", () => decide(a, "reject"));
    li.append(approve, document.createTextNode(" "), reject);
    list.append(li);
  }
  tickCountdowns();
}

function tickCountdowns() {
  for (const node of document.querySelectorAll(".countdown")) {
    const left = Math.max(0, Math.round((new Date(node.dataset.expires) - Date.now()) / 1000));
    node.textContent = left > 0 ? `expires in ${Math.floor(left / 60)}m ${left % 60}s` : "expired";
  }
}

function confirmDialog(text) {
  return new Promise((resolve) => {
    const dialog = $("confirm");
    $("confirm-text").textContent = text;
    dialog.addEventListener("close", () => resolve(dialog.returnValue === "ok"), { once: true });
    dialog.showModal();
  });
}

async function decide(approval, decision) {
  const ok = await confirmDialog(`${decision === "approve" ? "Approve" : "Reject"} “${approval.title}” as ${state.name}?`);
  if (!ok) return;
  try {
    await api(`/api/v1/approvals/${encodeURIComponent(approval.id)}/${decision}`, {
      method: "POST", body: JSON.stringify({ actor: state.name }),
    });
  } catch (e) { alert(`Could not ${decision}: ${e.message}`); }
  await refresh();
}

function entryNode(e) {
  const li = el("li");
  li.dataset.status = e.status || "";
  li.dataset.kind = e.kind;
  const head = el("div", null, "meta");
  head.append(el("span", `${when(e.at)} · ${e.kind}${e.name ? " · " + e.name : ""}${e.status ? " · " + e.status : ""}`));
  li.append(head);
  if (e.text) li.append(el("div", e.text));
  if (e.detail && e.kind !== "permission") li.append(el("div", e.detail, "detail"));
  return li;
}

function renderTravel(t) {
  state.travel = t;
  $("run-title").textContent = `${t.kind === "agent" ? "Controller run" : "Run"} ${t.run_id}`;
  $("travel").hidden = false;
  const slider = $("slider");
  slider.max = String(t.seqs.length - 1);
  slider.value = String(t.seqs.indexOf(t.at) >= 0 ? t.seqs.indexOf(t.at) : t.seqs.length - 1);
  $("travel-where").textContent = t.live ? `live · seq ${t.at}` : `seq ${t.at} of ${t.seqs[t.seqs.length - 1]} · ${when(t.moment)}`;
  $("run-status").textContent = `status: ${t.status}`;
  $("timeline").replaceChildren(...t.entries.map(entryNode));
  const since = t.since.added;
  $("since").hidden = t.live || (since.length === 0 && t.since.changed.length === 0);
  const changedNodes = t.since.changed.map((c) => {
    const node = entryNode(c.after);
    node.prepend(el("div", `now (${c.fields.join(", ")} changed):`, "meta"));
    return node;
  });
  $("since-list").replaceChildren(...changedNodes, ...since.map(entryNode));
  $("run-approvals-when").textContent = t.live ? "" : "(as they were then)";
  const body = $("run-approvals").tBodies[0];
  body.replaceChildren(...t.approvals.map((a) => {
    const tr = el("tr");
    tr.dataset.status = a.status;
    tr.append(el("td", a.title), el("td", a.risk), el("td", a.status), el("td", a.identity || a.actor));
    return tr;
  }));
}

async function selectRun(runId) {
  state.runId = runId;
  state.follow = true;
  await loadRun();
  if (state.overview) renderRuns(state.overview.runs);
}

async function loadRun(at) {
  if (!state.runId) return;
  const q = at === undefined ? "" : `?at=${encodeURIComponent(at)}`;
  renderTravel(await api(`/api/v1/console/runs/${encodeURIComponent(state.runId)}/travel${q}`));
}

async function renderAudit() {
  const audit = await api("/api/v1/console/audit");
  const v = audit.verify;
  const badge = $("badge");
  badge.className = "badge " + (v.ok ? "ok" : "bad");
  badge.textContent = v.ok ? `chain verified up to seq ${v.head}` : `chain BROKEN at seq ${v.first_bad_seq}`;
  $("audit-verify").textContent = v.ok ? `Verified ${v.checked} events: every record matches its hash.`
    : `Tampering detected at seq ${v.first_bad_seq}: ${v.reason}`;
  const body = $("audit").tBodies[0];
  body.replaceChildren(...audit.approvals.map((a) => {
    const tr = el("tr");
    tr.append(el("td", when(a.requested_at)), el("td", a.title), el("td", a.run_id), el("td", a.risk),
      el("td", a.payload_sha256.slice(0, 16)), el("td", a.decision || a.status),
      el("td", a.identity ? `${a.actor} (${a.identity})` : a.actor),
      el("td", a.latency_ms === null ? "" : `${Math.round(a.latency_ms)} ms`), el("td", a.refused));
    return tr;
  }));
}

async function refresh() {
  const overview = await api("/api/v1/console/overview");
  state.overview = overview;
  renderRuns(overview.runs);
  renderApprovals(overview.approvals);
  if (state.runId && state.follow) await loadRun();
  await renderAudit();
}

function listen() {
  const source = new EventSource("/api/v1/console/stream");
  let pending = null;
  source.addEventListener("change", () => {
    if (pending) return;
    pending = setTimeout(() => { pending = null; refresh().catch(() => {}); }, 100);
  });
  source.onerror = () => { /* EventSource reconnects by itself */ };
}

async function start() {
  const me = await api("/api/v1/console/me");
  state.name = me.name;
  $("who").textContent = `signed in as ${me.name}`;
  $("login").hidden = true; $("app").hidden = false; $("logout").hidden = false;
  await refresh();
  listen();
}

document.addEventListener("DOMContentLoaded", () => {
  $("login-form").addEventListener("submit", login);
  $("logout").addEventListener("click", logout);
  $("slider").addEventListener("input", (event) => {
    const t = state.travel;
    if (!t) return;
    const seq = t.seqs[Number(event.target.value)];
    state.follow = seq === t.seqs[t.seqs.length - 1];
    loadRun(seq).catch(() => {});
  });
  $("travel-live").addEventListener("click", () => { state.follow = true; loadRun().catch(() => {}); });
  setInterval(tickCountdowns, 1000);
  start().catch(() => showLogin());
});
