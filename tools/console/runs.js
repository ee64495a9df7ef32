// The runs list: search (id, title, text, and the text of every event's payload), filters
// (status, kind, time range, actor), sorting and server-side pages; the search and filters live
// in the address bar. Clicking a run opens its page.

import { $, api, el, idNode, runHref, timeNode } from "./util.js";
import { FILTERS, navigate, setFilters } from "./router.js";

const PAGE = 25;
const query = { q: "", status: "", kind: "", actor: "", since: "", until: "", sort: "last_activity", order: "desc", offset: 0 };
let selected = null;
let built = false;
let generation = 0; // the latest query wins: an answer to an older one is dropped

function field(label, input) {
  const wrap = el("label", null, "field");
  wrap.append(el("span", label), input);
  return wrap;
}

function select(name, options) {
  const s = el("select");
  s.name = name; s.id = `runs-${name}`;
  for (const [value, text] of options) { const o = el("option", text); o.value = value; s.append(o); }
  return s;
}

function build(panel) {
  const form = el("form"); form.id = "runs-search"; form.className = "filters";
  const q = el("input"); q.type = "search"; q.id = "runs-q"; q.name = "q"; q.placeholder = "search id, title, payloads";
  const actor = el("input"); actor.id = "runs-actor"; actor.name = "actor"; actor.placeholder = "actor";
  const since = el("input"); since.type = "datetime-local"; since.id = "runs-since"; since.name = "since"; since.step = "1";
  const until = el("input"); until.type = "datetime-local"; until.id = "runs-until"; until.name = "until"; until.step = "1";
  const status = select("status", [["", "any status"]]);
  const kind = select("kind", [["", "any kind"], ["agent", "agent"], ["broker", "broker"]]);
  const sort = select("sort", [["last_activity", "last activity"], ["started", "started"], ["title", "title"], ["status", "status"], ["kind", "kind"]]);
  const order = select("order", [["desc", "newest first / Z–A"], ["asc", "oldest first / A–Z"]]);
  form.append(field("Search", q), field("Status", status), field("Kind", kind), field("Actor", actor),
    field("Active since", since), field("Started before", until), field("Sort", sort), field("Order", order));
  // The address bar's filters first: a copied link restores the list it showed.
  const params = new URLSearchParams(window.location.search);
  for (const k of FILTERS) if (params.get(k)) query[k] = params.get(k);
  q.value = query.q; actor.value = query.actor; kind.value = query.kind; sort.value = query.sort; order.value = query.order;
  if (query.status) { const o = el("option", query.status); o.value = query.status; status.append(o); status.value = query.status; }
  const local = (iso) => { const d = new Date(iso); return isNaN(d) ? "" : new Date(d - d.getTimezoneOffset() * 60000).toISOString().slice(0, 19); };
  if (query.since) since.value = local(query.since);
  if (query.until) until.value = local(query.until);
  const apply = () => {
    Object.assign(query, {
      q: q.value.trim(), status: status.value, kind: kind.value, actor: actor.value.trim(),
      since: since.value ? new Date(since.value).toISOString() : "", until: until.value ? new Date(until.value).toISOString() : "",
      sort: sort.value, order: order.value, offset: 0,
    });
    setFilters({ ...query, sort: query.sort === "last_activity" ? "" : query.sort, order: query.order === "desc" ? "" : query.order });
    load().catch(() => {});
  };
  form.addEventListener("submit", (e) => { e.preventDefault(); apply(); });
  for (const input of [status, kind, sort, order, since, until]) input.addEventListener("change", apply);
  let typing = null;
  for (const input of [q, actor]) input.addEventListener("input", () => { clearTimeout(typing); typing = setTimeout(apply, 200); });

  const table = el("table"); table.id = "runs";
  const head = el("tr");
  for (const h of ["run", "kind", "status", "last activity"]) head.append(el("th", h));
  table.append(el("thead"), el("tbody"));
  table.tHead.append(head);
  const pager = el("div", null, "pager"); pager.id = "runs-pager";
  panel.replaceChildren(el("h2", "Runs"), form, table, pager);
  built = true;
}

function renderPage(page) {
  const body = $("runs").tBodies[0];
  body.replaceChildren(...page.runs.map((run) => {
    const tr = el("tr");
    tr.dataset.runId = run.run_id;
    if (run.run_id === selected) tr.classList.add("selected");
    const title = el("td", null, "title-cell");
    title.append(el("div", run.title || run.run_id, "title"));
    const sub = el("div", null, "meta");
    sub.append(idNode(run.run_id));
    if (run.forked_from) sub.append(el("span", ` fork @${run.fork_seq}`));
    title.append(sub);
    tr.append(title, el("td", run.kind), el("td", run.status, "nowrap status-" + run.status), el("td"));
    tr.lastChild.append(timeNode(run.last_activity));
    tr.addEventListener("click", () => navigate(runHref(run.run_id)));
    return tr;
  }));
  const status = $("runs-status");
  const current = status.value;
  status.replaceChildren(...[["", "any status"], ...page.statuses.map((s) => [s, s])].map(([v, t]) => {
    const o = el("option", t); o.value = v; return o;
  }));
  status.value = current;
  const pager = $("runs-pager");
  const last = Math.min(page.offset + page.runs.length, page.total);
  const prev = el("button", "‹ previous"); prev.type = "button"; prev.disabled = page.offset === 0;
  const next = el("button", "next ›"); next.type = "button"; next.disabled = last >= page.total;
  prev.addEventListener("click", () => { query.offset = Math.max(0, query.offset - PAGE); load().catch(() => {}); });
  next.addEventListener("click", () => { query.offset += PAGE; load().catch(() => {}); });
  const count = el("span", page.total ? `${page.offset + 1}–${last} of ${page.total}` : "no runs match", "meta");
  count.id = "runs-count";
  pager.replaceChildren(prev, count, next);
}

export async function load() {
  if (!built) build($("runs-panel"));
  const params = new URLSearchParams({ limit: String(PAGE) });
  for (const [k, v] of Object.entries(query)) if (v !== "" && v !== null) params.set(k, String(v));
  const mine = ++generation;
  const page = await api(`/api/v1/console/runs?${params}`);
  if (mine === generation && built) renderPage(page);
}

export function select_(runId) {
  selected = runId;
  for (const tr of document.querySelectorAll("#runs tbody tr")) tr.classList.toggle("selected", tr.dataset.runId === runId);
}

export function clear() {
  built = false; selected = null;
  Object.assign(query, { q: "", status: "", kind: "", actor: "", since: "", until: "", offset: 0 });
  $("runs-panel").replaceChildren();
}
