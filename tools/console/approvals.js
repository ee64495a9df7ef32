// Pending approvals (tool, risk, deadline countdown, quorum progress with voters, whether you
// voted), approve / reject (with a reason) with an inline message when a vote is refused, and one
// approval's page, which decides too and stays where it is.

import { $, api, confirmDialog, el, idNode, link, moreButton, runHref, timeNode } from "./util.js";
import { route } from "./router.js";

let me = "";
export function setMe(name) { me = name; }

export function votersNode(voters) {
  const list = el("ul", null, "voters");
  for (const v of voters) {
    const li = el("li");
    li.dataset.decision = v.decision;
    li.append(el("strong", v.actor), el("span", ` (${v.identity}) `, "meta"), el("span", v.decision, "decision-" + v.decision),
      el("span", " at ", "meta"), timeNode(v.at));
    if (v.reason) li.append(el("div", `reason: ${v.reason}`, "reason"));
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
  if (a.voters.some((v) => v.actor === me)) li.classList.add("voted");
  li.append(decisionNode(a, refresh));
  return li;
}

// Approve / Reject for an approval still pending (or a note that you voted), and a line for a
// refused vote that stays on screen.
function decisionNode(a, refresh) {
  const box = el("div", null, "decide");
  const voted = a.voters.some((v) => v.actor === me);
  const message = el("p", "", "error inline"); message.setAttribute("role", "alert");
  if (a.status !== "pending") {
    box.append(el("p", `Decided: ${a.decision || a.status}.`, "meta"));
  } else if (voted) {
    box.classList.add("voted");
    box.append(el("p", `You (${me}) voted on this one. ${a.quorum > 1 ? "Another operator casts the next vote, with their own token." : ""}`, "note you-voted"));
  } else {
    const approve = el("button", "Approve", "approve"); approve.type = "button";
    const reject = el("button", "Reject…", "reject"); reject.type = "button";
    approve.addEventListener("click", () => decide(a, "approve", message, refresh));
    reject.addEventListener("click", () => decide(a, "reject", message, refresh));
    box.append(approve, document.createTextNode(" "), reject);
  }
  box.append(message);
  return box;
}

async function decide(a, decision, message, refresh) {
  let reason = null;
  let extra = null;
  if (decision === "reject") {
    extra = el("label", "Reason (kept in the log with your decision) ", "reason-field");
    reason = el("textarea"); reason.id = "decision-reason"; reason.maxLength = 500; reason.rows = 3; reason.required = true;
    extra.append(reason);
  }
  const ok = await confirmDialog(
    `${decision === "approve" ? "Approve" : "Reject"} “${a.title}” (tool ${a.tool || a.kind}, ${a.risk} risk) as ${me}?`,
    extra, { okLabel: decision === "approve" ? "Approve" : "Reject", danger: decision === "reject" });
  if (!ok) return;
  message.textContent = "";
  const body = reason && reason.value.trim() ? { reason: reason.value.trim() } : {};
  try {
    const res = await api(`/api/v1/approvals/${encodeURIComponent(a.id)}/${decision}`, { method: "POST", body: JSON.stringify(body) });
    if (res.status === "pending") message.textContent = `Your vote counts: ${res.votes.length} of ${res.needed}. Another operator casts the next one.`;
  } catch (e) {
    message.textContent = `Your ${decision} was refused: ${e.message}`;
    return; // keep the message on screen: the card is not re-rendered
  }
  await refresh();
}

// The overview's first page of pending approvals (oldest first); "more" follows its cursor.
export function renderPending(overview, refresh) {
  const panel = $("approvals-panel");
  const approvals = overview.approvals;
  const list = el("ul"); list.id = "approvals";
  list.append(...approvals.map((a) => approvalCard(a, refresh)));
  const none = el("p", "Nothing is waiting for a decision.", "meta"); none.id = "no-approvals"; none.hidden = approvals.length > 0;
  panel.replaceChildren(el("h2", `Pending approvals${overview.total > approvals.length ? ` (${overview.total})` : ""}`), none, list);
  moreButton(panel, "approvals-more", overview.next, async (after) => {
    const page = await api(`/api/v1/console/overview?after=${encodeURIComponent(after)}`);
    list.append(...page.approvals.map((a) => approvalCard(a, refresh)));
    tickCountdowns();
    return page.next;
  });
  tickCountdowns();
}

export function tickCountdowns() {
  for (const node of document.querySelectorAll(".countdown")) {
    const left = Math.max(0, Math.round((new Date(node.dataset.expires) - Date.now()) / 1000));
    node.textContent = left > 0 ? `deadline in ${Math.floor(left / 60)}m ${String(left % 60).padStart(2, "0")}s` : "expired";
  }
}

// One approval's page: its facts, the payload's digest, every vote, and Approve / Reject while
// it is pending. Deciding here re-draws this page: the address and the pane stay on the approval.
export async function loadApproval(id) {
  const a = await api(`/api/v1/console/approvals/${encodeURIComponent(id)}`);
  const r = route();
  if (r.page !== "approvals" || r.id !== id) return; // navigated elsewhere meanwhile
  const panel = $("page-panel");
  const dl = el("dl", null, "facts"); dl.id = "approval-facts";
  const add = (k, v) => { const dd = el("dd"); if (v instanceof Node) dd.append(v); else dd.textContent = v ?? ""; dl.append(el("dt", k), dd); };
  add("id", idNode(a.id));
  add("run", a.run_id ? link(runHref(a.run_id), a.run_id) : "—");
  add("tool", a.tool || a.kind); add("risk", a.risk); add("status", a.decision || a.status);
  add("requested", timeNode(a.requested_at)); add("deadline", timeNode(a.expires_at));
  if (a.decided_at) add("decided", timeNode(a.decided_at));
  add("quorum", a.quorum > 1 ? `${a.voters.filter((v) => v.decision === "approve").length} of ${a.quorum}` : "one decision");
  add("digest", idNode(a.payload_sha256));
  add("refused attempts", String(a.refused));
  const title = el("h2", `Approval: ${a.title}`); title.id = "approval-title";
  const votes = votersNode(a.voters); votes.id = "approval-voters";
  const decide = decisionNode(a, () => loadApproval(id)); decide.id = "approval-decide";
  panel.replaceChildren(title, dl, el("div", a.detail, "detail"), decide, el("h3", "Votes"), votes);
}

// Re-draw the approval page on screen (if one is): another operator's vote shows up at once.
export function followApproval() {
  const r = route();
  return r.page === "approvals" && r.id ? loadApproval(r.id) : Promise.resolve();
}
