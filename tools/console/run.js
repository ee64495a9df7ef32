// A run's page: header (kind, status, times, actors, provenance), time travel (slider, "as of"
// time, a banner while not live), the timeline and what changed since, the run's approvals
// with every voter, the event history tab, and fork / re-drive for agent runs.

import { $, api, confirmDialog, el, idNode, link, runHref, timeNode, when } from "./util.js";
import { navigate, route } from "./router.js";
import { renderEvents, revealEvent } from "./events.js";
import { votersNode } from "./approvals.js";

let current = null; // { runId, at, tab, focus, travel }
// The latest navigation wins. A live refresh (quiet) is shown only if nothing was navigated
// since the load on screen began, not even a navigation still on its way.
let generation = 0; // navigations started
let shown = 0; // the generation of the load on screen
let settled = 0; // loads answered (rendered or dropped), on document.body.dataset.runLoads

function entryNode(e) {
  const li = el("li");
  li.dataset.status = e.status || "";
  li.dataset.kind = e.kind;
  li.dataset.seq = String(e.seq);
  const head = el("div", null, "meta");
  head.append(timeNode(e.at), el("span", ` · ${e.kind}${e.name ? " · " + e.name : ""}${e.status ? " · " + e.status : ""} · `),
    link(`/ui/events/${e.seq}`, `seq ${e.seq}`));
  li.append(head);
  if (e.text) li.append(el("div", e.text, "text"));
  if (e.detail && e.kind !== "permission") li.append(el("div", e.detail, "detail"));
  return li;
}

function fact(list, label, value) {
  const dt = el("dt", label);
  const dd = el("dd");
  if (value instanceof Node) dd.append(value); else dd.textContent = value ?? "";
  list.append(dt, dd);
}

function headerNode(t) {
  const h = t.header;
  const dl = el("dl", null, "facts"); dl.id = "run-header";
  fact(dl, "id", idNode(t.run_id));
  fact(dl, "kind", h.kind === "agent" ? "agent run (controller)" : "broker run");
  fact(dl, "status", t.status);
  fact(dl, "started", timeNode(h.started_at));
  fact(dl, "last activity", timeNode(h.last_activity));
  fact(dl, "actors", h.actors.length ? h.actors.join(", ") : "—");
  if (h.forked_from) {
    const f = h.forked_from;
    const p = el("span", null, "provenance"); p.id = "forked-from";
    p.append(el("span", "forked from "), link(runHref(f.run_id, f.fork_seq), f.title || f.run_id), el("span", ` at seq ${f.fork_seq}`));
    if (f.approval_id) {
      const changed = el("span", null, "changed-decision"); changed.id = "forked-decision";
      changed.append(el("span", ", at approval "), link(`/ui/approvals/${encodeURIComponent(f.approval_id)}`, f.approval_id.slice(0, 8)),
        el("span", `: ${f.decision} by ${f.decided_by} here (${f.recorded || "?"} there)`));
      p.append(changed);
    }
    fact(dl, "provenance", p);
  }
  if (h.forks.length) {
    const p = el("span", null, "provenance"); p.id = "forks";
    h.forks.forEach((f, i) => {
      if (i) p.append(el("span", ", "));
      p.append(link(runHref(f.run_id), `fork ${f.run_id.slice(0, 8)}`), el("span", ` @${f.fork_seq}`));
    });
    fact(dl, "forks", p);
  }
  return dl;
}

function travelNode(t) {
  const bar = el("div", null, "travel"); bar.id = "travel";
  const slider = el("input"); slider.type = "range"; slider.id = "slider"; slider.min = "0"; slider.step = "1";
  // A broker run's answer names its records by step (1 to t.steps), not by a list of every seq:
  // a long run's page stays the size of what it shows.
  const steps = t.seqs ? t.seqs.length : t.steps;
  slider.max = String(steps - 1);
  let index = steps - 1;
  if (t.seqs) { for (let i = 0; i < t.seqs.length; i++) if (t.seqs[i] <= t.at) index = i; } else index = Math.max(t.step - 1, 0);
  slider.value = String(index);
  slider.setAttribute("aria-label", "time travel over the run's events");
  const stepName = (i) => (t.seqs ? `seq ${t.seqs[i]}` : `step ${i + 1} of ${steps}`); // "label" names the <label> below
  slider.addEventListener("input", () => { $("travel-where").textContent = `${stepName(Number(slider.value))} (release to travel)`; });
  slider.addEventListener("change", () => (t.seqs ? travelTo(t.seqs[Number(slider.value)]) : travelToStep(t.run_id, Number(slider.value) + 1)));
  // "As of" to the millisecond, in local time; it shows the moment on screen.
  const asOf = el("input"); asOf.type = "datetime-local"; asOf.id = "as-of"; asOf.step = "any"; // "any": 0.001 rounds some milliseconds down
  asOf.setAttribute("aria-label", "as of");
  if (t.moment) asOf.value = localInput(t.moment);
  asOf.addEventListener("change", () => { const at = fromLocalInput(asOf.value); if (at) travelTo(at); });
  const where = el("span", t.before_start ? `before this run started · seq ${t.at}`
    : t.live ? `live · seq ${t.at}` : `seq ${t.at} · ${when(t.moment)}`, "meta nowrap");
  where.id = "travel-where";
  const live = el("button", "Live"); live.type = "button"; live.id = "travel-live";
  live.addEventListener("click", () => navigate(runHref(t.run_id) + (current.tab === "events" ? "#events" : "")));
  const label = el("label", "Time travel"); label.htmlFor = "slider";
  const asLabel = el("label", "as of"); asLabel.htmlFor = "as-of";
  bar.append(label, slider, asLabel, asOf, where, live);
  return bar;
}

// An ISO time as a datetime-local input's value (local time, to the millisecond).
function localInput(iso) {
  const d = new Date(iso);
  return new Date(d.getTime() - d.getTimezoneOffset() * 60000).toISOString().slice(0, 23);
}

// A datetime-local input's value (local time) as an ISO time in UTC, its milliseconds kept exactly.
function fromLocalInput(value) {
  const m = /^(\d+)-(\d+)-(\d+)T(\d+):(\d+)(?::(\d+)(?:\.(\d+))?)?$/.exec(value || "");
  if (!m) return null;
  const ms = Number(((m[7] || "") + "000").slice(0, 3));
  return new Date(+m[1], +m[2] - 1, +m[3], +m[4], +m[5], +(m[6] || 0), ms).toISOString();
}

async function travelToStep(runId, step) {
  const t = await api(`/api/v1/console/runs/${encodeURIComponent(runId)}/travel?step=${step}&limit=1`);
  travelTo(t.at);
}

// The page before the one on screen (a long run's timeline comes a page at a time), prepended.
function earlierNode(t, list) {
  const more = el("button", `Earlier entries (${t.before} more)`); more.type = "button"; more.id = "earlier";
  more.hidden = t.before === null || t.before === undefined;
  let before = t.before;
  more.addEventListener("click", async () => {
    const q = `?limit=200&before=${before}${t.live ? "" : `&at=${t.at}`}`;
    const page = await api(`/api/v1/console/runs/${encodeURIComponent(t.run_id)}/travel${q}`);
    list.prepend(...page.entries.map(entryNode));
    before = page.before;
    more.hidden = before === null;
    more.textContent = `Earlier entries (${before} more)`;
  });
  return more;
}

function travelTo(at) {
  navigate(runHref(current.runId, at) + (current.tab === "events" ? "#events" : ""));
}

function sinceNode(t) {
  const box = el("div"); box.id = "since";
  const s = t.since;
  if (t.live || (!s.added.length && !s.changed.length && !s.removed.length)) { box.hidden = true; return box; }
  box.append(el("h3", `Changed since seq ${t.at}`));
  const list = el("ol"); list.id = "since-list";
  for (const e of s.added) { const n = entryNode(e); n.dataset.change = "added"; n.prepend(el("div", "added", "meta")); list.append(n); }
  for (const c of s.changed) {
    const n = entryNode(c.after); n.dataset.change = "changed";
    n.prepend(el("div", `changed: ${c.fields.join(", ")} (was ${c.fields.map((f) => String(c.before[f] ?? "")).join(", ")})`, "meta"));
    list.append(n);
  }
  for (const e of s.removed) { const n = entryNode(e); n.dataset.change = "removed"; n.prepend(el("div", "gone", "meta")); list.append(n); }
  box.append(list);
  return box;
}

function approvalsNode(t) {
  const wrap = el("div");
  const h = el("h3", `Approvals of this run${t.live ? ": pending and decided, with every vote" : " (as they were then)"}`);
  h.id = "run-approvals-title";
  wrap.append(h);
  const table = el("table"); table.id = "run-approvals";
  const head = el("tr");
  for (const h of ["approval", "tool", "risk", "status", "votes"]) head.append(el("th", h));
  table.append(el("thead"), el("tbody")); table.tHead.append(head);
  for (const a of t.approvals) {
    const tr = el("tr"); tr.dataset.status = a.status; tr.dataset.approvalId = a.id;
    const title = el("td"); title.append(link(`/ui/approvals/${encodeURIComponent(a.id)}`, a.title));
    const quorum = a.quorum > 1 ? ` (${a.voters.filter((v) => v.decision === "approve").length} of ${a.quorum})` : "";
    const votes = el("td"); votes.append(votersNode(a.voters));
    tr.append(title, el("td", a.tool || a.kind), el("td", a.risk, "risk-" + a.risk), el("td", a.status + quorum, "nowrap"), votes);
    table.tBodies[0].append(tr);
  }
  if (!t.approvals.length) {
    const none = el("p", t.live ? "None yet." : "None then.", "meta"); none.id = "run-approvals-none"; wrap.append(none);
  } else wrap.append(table);
  return wrap;
}

const DECIDED = ["approve", "reject", "expired", "withdrawn"]; // approvals that have a decision to change
const OTHER = { approve: "reject", reject: "approve" };

function forkButton(t) {
  const decided = t.approvals.filter((a) => DECIDED.includes(a.status));
  if (t.kind !== "agent" && !decided.length) return el("span");
  const label = t.kind === "agent" ? `Fork at seq ${t.at}…` : "Fork at an approval…";
  const button = el("button", label, "fork"); button.type = "button"; button.id = "fork";
  button.addEventListener("click", () => fork(t, decided).catch(() => {}));
  return button;
}

// The fork dialog: where (this moment, for an agent run, or one of the run's decided approvals),
// and at an approval the decision the fork takes there (the other one by default).
async function fork(t, decided) {
  const extra = el("div", null, "fork-options");
  const at = el("select"); at.id = "fork-at";
  if (t.kind === "agent") at.append(new Option(`this moment: seq ${t.at}`, ""));
  for (const a of decided) at.append(new Option(`approval “${a.title}” (${a.status})`, a.id));
  const decision = el("select"); decision.id = "fork-decision";
  decision.append(new Option("approve", "approve"), new Option("reject", "reject"));
  const decisionLabel = el("label", "Decision there "); decisionLabel.append(decision);
  const reason = el("input"); reason.id = "fork-reason"; reason.placeholder = "why (kept in the log)"; reason.maxLength = 500;
  const redrive = el("input"); redrive.type = "checkbox"; redrive.id = "fork-redrive";
  const chosen = () => decided.find((a) => a.id === at.value);
  const sync = () => {
    const a = chosen();
    decisionLabel.hidden = !a;
    if (a) decision.value = OTHER[a.status] || "approve";
  };
  at.addEventListener("change", sync);
  sync();
  const r0 = el("label", "Fork at "); r0.append(at);
  const r1 = el("label", "Reason "); r1.append(reason);
  const r2 = el("label"); r2.append(redrive, el("span", " re-drive it now from the recording (its approvals wait for you in Pending approvals)"));
  extra.append(r0, decisionLabel, r1);
  if (t.kind === "agent") extra.append(r2);
  const ok = await confirmDialog(
    `Fork “${t.header.title}”${t.kind === "agent" ? ` at seq ${t.at} or at an approval` : " at an approval"}: a new run is ` +
    "recorded whose history is this run's up to there; at an approval the fork takes the decision chosen, as yours. " +
    "This run is not changed.", extra);
  if (!ok) return;
  const message = $("run-message");
  const a = chosen();
  const body = a ? { at_approval: a.id, decision: decision.value, reason: reason.value, redrive: redrive.checked }
    : { at: t.at, reason: reason.value, redrive: redrive.checked };
  try {
    const res = await api(`/api/v1/runs/${encodeURIComponent(t.run_id)}/fork`, { method: "POST", body: JSON.stringify(body) });
    if (res.token) await showToken(res);
    navigate(runHref(res.fork.run_id));
  } catch (e) { message.textContent = `Could not fork: ${e.message}`; }
}

// A broker run's fork goes on in its own agent: its token is shown here once, to hand over.
async function showToken(res) {
  const box = el("div", null, "fork-options");
  const token = el("input"); token.id = "fork-token"; token.readOnly = true; token.value = res.token;
  box.append(token, el("p", `Start the run's agent on run ${res.fork.run_id} with this token, resuming from before the approval ` +
    "(a LangGraph graph: resume_config of the fork's approval). It is shown only now.", "meta"));
  await confirmDialog(`Forked: ${res.fork.decision} by ${res.fork.decided_by} at the approval (it was ${res.fork.recorded}).`, box,
    { okLabel: "Open the fork" });
}

function tabsNode(t, tab) {
  const nav = el("nav", null, "tabs");
  const base = runHref(t.run_id, t.live ? null : t.at);
  const a = link(base, "Timeline"); const b = link(base + "#events", "Event history");
  a.id = "tab-timeline"; b.id = "tab-events";
  (tab === "events" ? b : a).classList.add("active");
  nav.append(a, b);
  return nav;
}

function render(t, tab, focus, events) {
  const panel = $("page-panel");
  const title = el("h2", `${t.kind === "agent" ? "Agent run" : "Broker run"}: ${t.header.title}`); title.id = "run-title";
  const banner = el("div", null, "banner"); banner.id = "not-live"; banner.hidden = t.live;
  if (!t.live) {
    const back = link(runHref(t.run_id) + (tab === "events" ? "#events" : ""), "back to live");
    banner.dataset.state = t.before_start ? "before" : "past";
    banner.append(el("span", t.before_start
      ? `Before this run started: at seq ${t.at}${t.moment ? ` (${when(t.moment)})` : ""} it did not exist yet; its first event is seq ${t.seqs ? t.seqs[0] : t.first_seq}. `
      : `Not live: this is the run as it was at seq ${t.at} (${when(t.moment)}). `), back);
  }
  const message = el("p", "", "error"); message.id = "run-message"; message.setAttribute("role", "alert");
  const body = el("div");
  if (tab === "events") body.append(renderEvents(t, events, focus));
  else {
    const list = el("ol"); list.id = "timeline";
    list.append(...t.entries.map(entryNode));
    body.append(earlierNode(t, list));
    body.append(el("p", t.live ? `status: ${t.status}` : `status then: ${t.status}`, "meta"), list, sinceNode(t));
  }
  const tools = el("div", null, "toolbar"); tools.append(forkButton(t));
  panel.replaceChildren(title, headerNode(t), banner, travelNode(t), tools, message, tabsNode(t, tab), body, approvalsNode(t));
}

export async function load(runId, at, tab = "timeline", focus = null, quiet = false) {
  const mine = quiet ? shown : ++generation;
  const q = at === null || at === undefined ? "" : `?at=${encodeURIComponent(at)}`;
  const t = await api(`/api/v1/console/runs/${encodeURIComponent(runId)}/travel${q}`);
  const events = tab === "events" ? await api(`/api/v1/console/runs/${encodeURIComponent(runId)}/events?limit=500`) : null;
  const r = route(); // the address still names this run (not an approval opened meanwhile)
  if (mine === generation && !(quiet && current && current.runId !== runId) && r.page === "runs" && r.id === runId) {
    shown = mine;
    current = { runId, at: t.live ? null : t.at, tab, focus, travel: t };
    render(t, tab, focus, events);
    if (tab === "events" && focus !== null) revealEvent(focus);
  }
  settled += 1; document.body.dataset.runLoads = String(settled); // shown or dropped: it is over
}

// Re-draw the live run page, only while it is on screen: deciding elsewhere (the approval page)
// refreshes the data but never swaps the pane under an address that names something else.
export function followLive() {
  const r = route();
  const here = r.page === "runs" && current && r.id === current.runId;
  return here && current.at === null ? load(current.runId, null, current.tab, current.focus, true) : Promise.resolve();
}

export function clear() { current = null; }
