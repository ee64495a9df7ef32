// Pending approvals (tool, risk, deadline countdown, quorum progress with voters, whether you
// voted), approve / reject with an inline message when a vote is refused, and one approval's page.

import { $, api, confirmDialog, el, idNode, link, runHref, timeNode } from "./util.js";

let me = "";
export function setMe(name) { me = name; }

export function votersNode(voters) {
  const list = el("ul", null, "voters");
  for (const v of voters) {
    const li = el("li");
    li.append(el("strong", v.actor), el("span", ` (${v.identity}) ${v.decision} `, "meta"), timeNode(v.at));
    list.append(li);
  }
  if (!voters.length) list.append(el("li", "no votes yet", "meta"));
  return list;
}

function approvalCard(a, refresh) {
  const li = el("li");
  li.dataset.approvalId = a.id;
  const title = link(`/ui/approvals/${encodeURIComponent(a.id)}`, a.title);
  li.append(el("strong")); li.firstChild.append(title);
  const meta = el("div", null, "meta");
  meta.append(el("span", `tool ${a.tool || a.kind} · `), el("span", `${a.risk} risk`, "risk-" + a.risk), el("span", " · run "));
  if (a.run_id) meta.append(link(runHref(a.run_id), a.run_id.length > 12 ? a.run_id.slice(0, 8) + "…" : a.run_id));
  meta.append(el("span", ` · requested by ${a.requested_by || "–"}`));
  li.append(meta, el("div", a.detail, "detail"));
  const digest = el("div", "digest ", "detail"); digest.append(idNode(a.payload_sha256)); li.append(digest);
  const approvals = a.voters.filter((v) => v.decision === "approve");
  if (a.quorum > 1) {
    const q = el("div", `quorum: ${approvals.length} of ${a.quorum} approvals`, "meta quorum");
    const bar = el("progress"); bar.max = a.quorum; bar.value = approvals.length;
    q.prepend(bar);
    li.append(q, votersNode(a.voters));
  }
  const countdown = el("div", "", "countdown meta"); countdown.dataset.expires = a.expires_at;
  li.append(countdown);
  const voted = a.voters.some((v) => v.actor === me);
  const message = el("p", "", "error inline"); message.setAttribute("role", "alert");
  if (voted) {
    li.classList.add("voted");
    li.append(el("p", `You (${me}) voted on this one. ${a.quorum > 1 ? "Another operator casts the next vote, with their own token." : ""}`, "note you-voted"));
  } else {
    const approve = el("button", "Approve", "approve"); approve.type = "button";
    const reject = el("button", "Reject", "reject"); reject.type = "button";
    approve.addEventListener("click", () => decide(a, "approve", message, refresh));
    reject.addEventListener("click", () => decide(a, "reject", message, refresh));
    li.append(approve, document.createTextNode(" "), reject);
  }
  li.append(message);
  return li;
}

async function decide(a, decision, message, refresh) {
  const ok = await confirmDialog(`${decision === "approve" ? "Approve" : "Reject"} “${a.title}” (tool ${a.tool || a.kind}, ${a.risk} risk) as ${me}?`);
  if (!ok) return;
  message.textContent = "";
  try {
    const res = await api(`/api/v1/approvals/${encodeURIComponent(a.id)}/${decision}`, { method: "POST", body: "{}" });
    if (res.status === "pending") message.textContent = `Your vote counts: ${res.votes.length} of ${res.needed}. Another operator casts the next one.`;
  } catch (e) {
    message.textContent = `Your ${decision} was refused: ${e.message}`;
    return; // keep the message on screen: the card is not re-rendered
  }
  await refresh();
}

export function renderPending(approvals, refresh) {
  const panel = $("approvals-panel");
  const list = el("ul"); list.id = "approvals";
  list.append(...approvals.map((a) => approvalCard(a, refresh)));
  const none = el("p", "Nothing is waiting for a decision.", "meta"); none.id = "no-approvals"; none.hidden = approvals.length > 0;
  panel.replaceChildren(el("h2", "Pending approvals"), none, list);
  tickCountdowns();
}

export function tickCountdowns() {
  for (const node of document.querySelectorAll(".countdown")) {
    const left = Math.max(0, Math.round((new Date(node.dataset.expires) - Date.now()) / 1000));
    node.textContent = left > 0 ? `deadline in ${Math.floor(left / 60)}m ${String(left % 60).padStart(2, "0")}s` : "expired";
  }
}

export async function loadApproval(id) {
  const a = await api(`/api/v1/console/approvals/${encodeURIComponent(id)}`);
  const panel = $("page-panel");
  const dl = el("dl", null, "facts"); dl.id = "approval-facts";
  const add = (k, v) => { const dd = el("dd"); if (v instanceof Node) dd.append(v); else dd.textContent = v ?? ""; dl.append(el("dt", k), dd); };
  add("id", idNode(a.id));
  add("run", a.run_id ? link(runHref(a.run_id), a.run_id) : "—");
  add("tool", a.tool || a.kind); add("risk", a.risk); add("status", a.status);
  add("requested", timeNode(a.requested_at)); add("deadline", timeNode(a.expires_at));
  add("quorum", a.quorum > 1 ? `${a.voters.filter((v) => v.decision === "approve").length} of ${a.quorum}` : "one decision");
  add("digest", idNode(a.payload_sha256));
  add("refused attempts", String(a.refused));
  const title = el("h2", `Approval: ${a.title}`); title.id = "approval-title";
  panel.replaceChildren(title, dl, el("div", a.detail, "detail"), el("h3", "Votes"), votersNode(a.voters));
}
