// The audit trail: every approval with its outcome and voters (a page at a time), and the chain's verdict.

import { $, api, duration, el, idNode, link, moreButton, runHref, showTamper, timeNode } from "./util.js";

export async function loadAudit() {
  const audit = await api("/api/v1/console/audit");
  const v = audit.verify;
  const badge = $("badge");
  badge.hidden = false;
  badge.className = "badge " + (v.ok ? "ok" : "bad");
  const forged = v.snapshots && !v.snapshots.ok;
  badge.textContent = v.ok ? `chain verified up to seq ${v.head}`
    : forged && !v.first_bad_seq ? "snapshots FORGED" : `chain BROKEN at seq ${v.first_bad_seq}`;
  const verdict = el("p", v.ok ? `Verified ${v.checked} events: every record matches its hash.`
    : forged && !v.first_bad_seq ? `Tampering detected: ${v.tamper}`
    : `Tampering detected at seq ${v.first_bad_seq}: ${v.reason}`);
  showTamper(v.tamper);
  verdict.id = "audit-verify";
  const table = el("table"); table.id = "audit";
  const head = el("tr");
  for (const h of ["requested", "title", "run", "risk", "digest", "outcome", "by", "latency", "refused"]) head.append(el("th", h));
  table.append(el("thead"), el("tbody")); table.tHead.append(head);
  appendRows(table, audit.approvals);
  const panel = $("audit-panel");
  panel.replaceChildren(el("h2", "Audit trail"), verdict, table);
  // The trail comes a page at a time, in request order: "more" follows the cursor.
  moreButton(panel, "audit-more", audit.next, async (after) => {
    const page = await api(`/api/v1/console/audit?after=${encodeURIComponent(after)}`);
    appendRows(table, page.approvals);
    return page.next;
  });
}

function appendRows(table, approvals) {
  for (const a of approvals) {
    const tr = el("tr");
    const title = el("td"); title.append(link(`/ui/approvals/${encodeURIComponent(a.id)}`, a.title));
    const run = el("td"); if (a.run_id) run.append(idNode(a.run_id, runHref(a.run_id)));
    const digest = el("td"); digest.append(idNode(a.payload_sha256));
    const by = a.votes.length > 1 ? a.votes.join(", ") : (a.identity ? `${a.actor} (${a.identity})` : a.actor);
    tr.append(el("td"), title, run, el("td", a.risk), digest, el("td", a.decision || a.status), el("td", by),
      el("td", duration(a.latency_ms), "nowrap"), el("td", a.refused));
    tr.firstChild.append(timeNode(a.requested_at));
    table.tBodies[0].append(tr);
  }
}
