// A run's event history: every raw event with seq, type, time and actor, and an inspector under
// each (opened with ▶) that spans the table: the event's payload as pretty-printed JSON, its hash
// chain links, and a button that copies the JSON. A seq travels the run to that event; the
// focused event (/ui/events/<seq>) is opened and scrolled into view.

import { $, copyButton, el, idNode, link, runHref, timeNode } from "./util.js";

const COLUMNS = ["", "seq", "type", "time", "actor", "stream"];

// The inspector of one event: full width, pretty JSON, copyable.
export function inspectorNode(e) {
  const box = el("div", null, "inspector");
  box.dataset.seq = String(e.seq);
  const json = JSON.stringify({ data: e.data, meta: e.meta, event_id: e.event_id }, null, 2);
  const facts = el("div", null, "meta inspector-facts");
  facts.append(el("span", `seq ${e.seq} · ${e.type} · ${e.stream} v${e.version} · event `), idNode(e.event_id),
    el("span", " · hash "), idNode(e.hash), el("span", " · previous "), idNode(e.prev_hash));
  const copy = copyButton(json, "copy JSON"); copy.classList.add("copy-json");
  const pre = el("pre", json, "payload json"); pre.tabIndex = 0;
  box.append(facts, copy, pre);
  return box;
}

export function renderEvents(t, page, focus) {
  const wrap = el("div"); wrap.id = "events";
  if (!page) return wrap;
  const table = el("table"); table.id = "event-history";
  const head = el("tr");
  for (const h of COLUMNS) head.append(el("th", h));
  table.append(el("thead"), el("tbody")); table.tHead.append(head);
  for (const e of page.events) {
    const tr = el("tr", null, "event"); tr.dataset.seq = String(e.seq);
    if (e.seq === t.at && !t.live) tr.classList.add("here");
    const detail = el("tr", null, "inspector-row"); detail.dataset.seq = String(e.seq);
    const cell = el("td"); cell.colSpan = COLUMNS.length; detail.append(cell);
    const open = focus === e.seq;
    detail.hidden = !open;
    if (open) cell.append(inspectorNode(e));
    const toggle = el("button", open ? "▼" : "▶", "toggle"); toggle.type = "button";
    toggle.setAttribute("aria-label", `payload of seq ${e.seq}`);
    toggle.setAttribute("aria-expanded", String(open));
    toggle.addEventListener("click", () => {
      const opening = detail.hidden;
      if (opening && !cell.firstChild) cell.append(inspectorNode(e));
      detail.hidden = !opening;
      toggle.textContent = opening ? "▼" : "▶";
      toggle.setAttribute("aria-expanded", String(opening));
    });
    const seq = el("td", null, "nowrap");
    const travel = link(runHref(t.run_id, e.seq) + "#events", String(e.seq)); travel.title = `travel to seq ${e.seq}`;
    seq.append(travel);
    const when = el("td"); when.append(timeNode(e.at));
    const toggleCell = el("td"); toggleCell.append(toggle);
    tr.append(toggleCell, seq, el("td", e.type, "nowrap"), when, el("td", e.actor || "—"), el("td", `${e.stream} v${e.version}`, "stream"));
    if (open) tr.classList.add("focus");
    table.tBodies[0].append(tr, detail);
  }
  wrap.append(el("p", `${page.total} event(s)${page.total > page.events.length ? `, the first ${page.events.length} shown` : ""}`, "meta"), table);
  return wrap;
}

// Scroll the focused event's row and inspector into view (after it is on the page).
export function revealEvent(seq) {
  const row = document.querySelector(`#event-history tr.event[data-seq="${seq}"]`);
  if (row) row.scrollIntoView({ block: "start" });
}

// An event outside any run (an operator's enrolment, say): its inspector alone.
export function renderLoneEvent(e) {
  const title = el("h2", `Event ${e.seq}: ${e.type}`); title.id = "event-title";
  const when = el("p", null, "meta"); when.append(timeNode(e.at), el("span", ` · by ${e.actor || "—"}`));
  $("page-panel").replaceChildren(title, when, inspectorNode(e));
}
