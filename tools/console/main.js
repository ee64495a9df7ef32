// flightlog console: plain ES modules, no build step. Every value from the server is set with
// textContent (never parsed as HTML); every API request carries the session's CSRF secret, which
// lives in this origin's storage (port-specific, unlike the cookie). Nothing of the dashboard
// exists in the DOM before login, and logout empties it again.

import { $, api, csrfHeaders, el, endSession, link, setCsrf, setUnauthorizedHandler } from "./util.js";
import { PAGES, navigate, route, startRouter } from "./router.js";
import * as runs from "./runs.js";
import * as run from "./run.js";
import { followApproval, loadApproval, renderPending, setMe, tickCountdowns } from "./approvals.js";
import { renderLoneEvent } from "./events.js";
import { loadAudit } from "./audit.js";

let source = null;
let signedIn = false;
let overviewHead = null; // the head the pending approvals on screen were read at

function clearDashboard() {
  signedIn = false;
  overviewHead = null;
  endSession();
  if (source) { source.close(); source = null; }
  runs.clear(); run.clear();
  for (const id of ["page-panel", "approvals-panel", "audit-panel"]) $(id).replaceChildren();
  $("badge").hidden = true; $("badge").textContent = "";
  $("who").textContent = "";
}

function showLogin() {
  clearDashboard();
  $("app").hidden = true; $("logout").hidden = true; $("login").hidden = false;
}

async function login(event) {
  event.preventDefault();
  $("login-error").textContent = "";
  try {
    const res = await fetch("/ui/login", {
      method: "POST", credentials: "same-origin",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify({ token: $("login-token").value }),
    });
    if (!res.ok) {
      const body = await res.json().catch(() => ({}));
      $("login-error").textContent = res.status === 401 ? "That token is not an operator's token."
        : (body.error || "Login failed.");
      return;
    }
    const session = await res.json();
    setCsrf(session.csrf);
    $("login-token").value = "";
    await start();
  } catch (e) { $("login-error").textContent = String(e.message || e); }
}

async function logout() {
  await fetch("/ui/logout", { method: "POST", credentials: "same-origin", headers: csrfHeaders() });
  setCsrf(null);
  showLogin();
}

function home() {
  $("page-panel").replaceChildren(el("h2", "Select a run"),
    el("p", "Pick a run on the left to see its timeline, events and approvals, and to travel in it.", "meta"));
}

// The console's own 404: the address names no page of the console, or nothing that exists.
function notFound(what, detail) {
  const title = el("h2", "Not found"); title.id = "not-found";
  const home = el("p"); home.append(el("span", "Back to "), link("/ui/", "the runs"), el("span", "."));
  $("page-panel").replaceChildren(title, el("p", `${what}${detail ? `: ${detail}` : ""}`, "error"), home);
  document.title = "Not found · flightlog console";
}

async function show(r) {
  if (!signedIn) return;
  document.title = "flightlog console";
  if (!PAGES.includes(r.page) || (r.page !== "home" && !r.id)) {
    notFound(`There is no page at ${window.location.pathname}`);
    return;
  }
  try {
    if (r.page === "runs") {
      runs.select_(r.id);
      const focus = r.at !== null && /^\d+$/.test(r.at) ? Number(r.at) : null;
      await run.load(r.id, r.at, r.tab, focus);
    } else if (r.page === "approvals") {
      await loadApproval(r.id);
    } else if (r.page === "events") {
      const e = await api(`/api/v1/console/events/${encodeURIComponent(r.id)}`);
      if (e.run_id) await navigate(`/ui/runs/${encodeURIComponent(e.run_id)}?at=${e.seq}#events`, { replace: true });
      else renderLoneEvent(e);
    } else {
      home();
    }
  } catch (e) {
    if (e.status === 401) return;
    if (e.status === 400) {
      const title = el("h2", "That address does not name a moment"); title.id = "bad-address";
      const back = el("p"); back.append(link(window.location.pathname, "Show it live"));
      $("page-panel").replaceChildren(title, el("p", e.message, "error"), back);
      return;
    }
    notFound(r.page === "runs" ? "No such run" : r.page === "approvals" ? "No such approval" : "No event there", e.message);
  }
}

async function refresh() {
  if (!signedIn) return;
  // The overview says "unchanged" when no approval record came since the head it was last read
  // at: then neither the pending approvals nor the audit trail are fetched again.
  const overview = await api(`/api/v1/console/overview${overviewHead === null ? "" : `?since=${overviewHead}`}`);
  const approvalsChanged = !overview.unchanged;
  overviewHead = overview.head;
  if (approvalsChanged) renderPending(overview, refresh);
  await runs.load();
  await run.followLive();
  await followApproval();
  if (approvalsChanged) await loadAudit();
}

function listen() {
  source = new EventSource("/api/v1/console/stream");
  let pending = null;
  source.addEventListener("open", () => { document.body.dataset.stream = "open"; });
  source.addEventListener("error", () => { document.body.dataset.stream = "closed"; });
  source.addEventListener("change", () => {
    if (pending) return;
    pending = setTimeout(() => { pending = null; refresh().catch(() => {}); }, 150);
  });
}

async function start() {
  const me = await api("/api/v1/console/me");
  signedIn = true;
  setMe(me.name);
  $("who").textContent = `signed in as ${me.name} (${me.role})`;
  document.body.dataset.role = me.role;
  $("login").hidden = true; $("app").hidden = false; $("logout").hidden = false;
  await runs.load();
  await show(route());
  await refresh();
  listen();
}

document.addEventListener("DOMContentLoaded", () => {
  setUnauthorizedHandler(showLogin);
  $("login-form").addEventListener("submit", login);
  $("logout").addEventListener("click", () => logout().catch(() => showLogin()));
  startRouter(show);
  setInterval(tickCountdowns, 1000);
  start().catch(() => showLogin());
});
