// Shared helpers: DOM building (text only, never HTML), the API client, times and ids.

export const $ = (id) => document.getElementById(id);

export class ApiError extends Error {
  constructor(status, message, body) { super(message); this.status = status; this.body = body; }
}

let onUnauthorized = () => {};
export function setUnauthorizedHandler(fn) { onUnauthorized = fn; }

// Bumped at logout: an answer to a request sent before it is dropped, so nothing fetched in
// the session that ended is drawn after it (body[data-dropped] counts them).
let session = 0;
export function endSession() { session += 1; }

function dropped() {
  document.body.dataset.dropped = String(Number(document.body.dataset.dropped || 0) + 1);
  return new ApiError(401, "signed out", {});
}

// The session's CSRF secret: given once by the login answer, kept in this origin's storage
// (specific to this server's port, where a cookie is not), sent with every API request.
const CSRF_KEY = "flightlog-csrf";
export function setCsrf(value) {
  if (value) localStorage.setItem(CSRF_KEY, value); else localStorage.removeItem(CSRF_KEY);
}
export function csrfHeaders() {
  const value = localStorage.getItem(CSRF_KEY);
  return value ? { "X-Flightlog-CSRF": value } : {};
}

export async function api(path, options = {}) {
  const mine = session;
  const init = { credentials: "same-origin", ...options };
  init.headers = { "Accept": "application/json", ...csrfHeaders(), ...(options.headers || {}) };
  if (init.method && init.method !== "GET") init.headers["Content-Type"] = "application/json";
  const response = await fetch(path, init);
  if (mine !== session) throw dropped();
  showTamper(response.headers.get("Flightlog-Tamper"));
  if (response.status === 401) { onUnauthorized(); throw new ApiError(401, "unauthorized", {}); }
  const body = await response.json().catch(() => ({}));
  if (mine !== session) throw dropped();
  if (!response.ok) throw new ApiError(response.status, body.error || response.statusText, body);
  return body;
}

// The server sends this header on every answer when the log it serves failed verification.
export function showTamper(line) {
  if (!line) return;
  const banner = $("tamper");
  banner.textContent = `TAMPERED LOG: ${line}. What this console shows may not be what happened.`;
  banner.hidden = false;
}

export function el(tag, text, cls) {
  const node = document.createElement(tag);
  if (text !== undefined && text !== null) node.textContent = String(text);
  if (cls) node.className = cls;
  return node;
}

export function link(href, text, cls) {
  const a = el("a", text, cls);
  a.href = href;
  a.dataset.link = "";
  return a;
}

// A time people can read: today's as 14:03:07.123, another day's with its date; ISO on hover.
export function when(value) {
  if (!value) return "";
  const d = new Date(value);
  const today = new Date().toDateString() === d.toDateString();
  const time = d.toLocaleTimeString([], { hour: "2-digit", minute: "2-digit", second: "2-digit", hour12: false });
  const ms = `.${String(d.getMilliseconds()).padStart(3, "0")}`;
  return today ? time + ms : `${d.toLocaleDateString([], { year: "numeric", month: "short", day: "numeric" })} ${time}${ms}`;
}

// A duration people can read: 850 ms, 12.3 s, 3 min 32 s, 2 h 5 min.
export function duration(ms) {
  if (ms === null || ms === undefined) return "";
  if (ms < 1000) return `${Math.round(ms)} ms`;
  const s = ms / 1000;
  if (s < 60) return `${s.toFixed(1)} s`;
  const whole = Math.round(s);
  if (whole < 3600) return `${Math.floor(whole / 60)} min ${whole % 60} s`;
  return `${Math.floor(whole / 3600)} h ${Math.floor((whole % 3600) / 60)} min`;
}

export function timeNode(value) {
  const t = el("time", when(value), "nowrap");
  if (value) { t.dateTime = value; t.title = value; }
  return t;
}

// An id shortened to its first 8 characters, with a button that copies the whole of it.
export function idNode(id, href) {
  const wrap = el("span", null, "id");
  const text = id.length > 12 ? id.slice(0, 8) + "…" : id;
  const label = href ? link(href, text) : el("code", text);
  label.title = id;
  const copy = el("button", "copy", "copy");
  copy.type = "button";
  copy.title = `copy ${id}`;
  copy.addEventListener("click", (event) => {
    event.stopPropagation();
    navigator.clipboard?.writeText(id).then(() => { copy.textContent = "copied"; }, () => { copy.textContent = "select"; });
  });
  wrap.append(label, copy);
  return wrap;
}

// The styled confirm dialog: resolves true when confirmed. `okLabel` names the action.
export function confirmDialog(text, extra, { okLabel = "Confirm", danger = false } = {}) {
  return new Promise((resolve) => {
    const dialog = $("confirm");
    $("confirm-text").textContent = text;
    $("confirm-extra").replaceChildren(...(extra ? [extra] : []));
    const ok = $("confirm-ok");
    ok.textContent = okLabel;
    ok.className = danger ? "danger" : "primary";
    dialog.addEventListener("close", () => resolve(dialog.returnValue === "ok"), { once: true });
    dialog.returnValue = "";
    dialog.showModal();
  });
}

// A button that copies `text`, saying so.
export function copyButton(text, label = "copy") {
  const copy = el("button", label, "copy");
  copy.type = "button";
  copy.addEventListener("click", (event) => {
    event.stopPropagation();
    navigator.clipboard?.writeText(text).then(() => { copy.textContent = "copied"; }, () => { copy.textContent = "select it"; });
  });
  return copy;
}

export function runHref(runId, at) {
  const base = `/ui/runs/${encodeURIComponent(runId)}`;
  return at === undefined || at === null ? base : `${base}?at=${at}`;
}

// A "more" button after a paged list: each click fetches the page after `next` (`load` appends
// it and returns its own `next`); it goes away once a page says nothing follows.
export function moreButton(parent, id, next, load) {
  if (next === null || next === undefined) return;
  const button = el("button", "more"); button.type = "button"; button.id = id;
  let after = next;
  button.addEventListener("click", async () => {
    button.disabled = true;
    try { after = await load(after); } finally { button.disabled = false; }
    if (after === null || after === undefined) button.remove();
  });
  parent.append(button);
}
