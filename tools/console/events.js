// A run's event history: every raw event with seq, type, time, actor and hash, and its payload
// as pretty-printed JSON (collapsed until opened). A seq travels the run to that event.

import { el, idNode, link, runHref, timeNode } from "./util.js";

export function renderEvents(t, page, focus) {
  const wrap = el("div"); wrap.id = "events";
  if (!page) return wrap;
  const table = el("table"); table.id = "event-history";
  const head = el("tr");
  for (const h of ["seq", "type", "time", "actor", "hash", "payload"]) head.append(el("th", h));
  table.append(el("thead"), el("tbody")); table.tHead.append(head);
  for (const e of page.events) {
    const tr = el("tr"); tr.dataset.seq = String(e.seq);
    if (e.seq === t.at && !t.live) tr.classList.add("here");
    const seq = el("td", null, "nowrap");
    const travel = link(runHref(t.run_id, e.seq) + "#events", String(e.seq)); travel.title = `travel to seq ${e.seq}`;
    seq.append(travel);
    const payload = el("td");
    const details = el("details");
    details.open = focus === e.seq;
    details.append(el("summary", `${e.stream} v${e.version}`), el("pre", JSON.stringify({ data: e.data, meta: e.meta, event_id: e.event_id }, null, 2), "payload"));
    payload.append(details);
    const hash = el("td"); hash.append(idNode(e.hash));
    tr.append(seq, el("td", e.type, "nowrap"), el("td"), el("td", e.actor || "—"), hash, payload);
    tr.children[2].append(timeNode(e.at));
    if (focus === e.seq) tr.classList.add("focus");
    table.tBodies[0].append(tr);
  }
  wrap.append(el("p", `${page.total} event(s)${page.total > page.events.length ? `, the first ${page.events.length} shown` : ""}`, "meta"), table);
  return wrap;
}
