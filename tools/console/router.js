// Routing with the history API: /ui/, /ui/runs/<id>[?at=<seq or ISO time>][#events],
// /ui/approvals/<id>, /ui/events/<seq>; anything else is the console's 404 page. The runs
// list's search and filters ride along in the query string (q, status, kind, actor, since,
// until, sort, order) on every page, so a link copied from the address bar restores them.
// Links marked data-link navigate without a reload; back/forward re-route.

let handler = () => {};

export const FILTERS = ["q", "status", "kind", "actor", "since", "until", "sort", "order"];
export const PAGES = ["home", "runs", "approvals", "events"];

export function route() {
  const url = new URL(window.location.href);
  const parts = url.pathname.replace(/^\/ui\/?/, "").split("/").filter(Boolean).map(decodeURIComponent);
  const at = url.searchParams.get("at");
  return {
    page: parts[0] || "home",
    id: parts.slice(1).join("/"),
    at: at === null || at === "" ? null : at, // the server says whether it names a moment
    tab: url.hash === "#events" ? "events" : "timeline",
    params: url.searchParams,
  };
}

// The current filters, as a query string to carry to the next page ("" when none).
function filters() {
  const params = new URLSearchParams(window.location.search);
  const kept = new URLSearchParams();
  for (const k of FILTERS) if (params.get(k)) kept.set(k, params.get(k));
  return kept;
}

function withFilters(path) {
  const url = new URL(path, window.location.origin);
  if (FILTERS.some((k) => url.searchParams.has(k))) return path;
  for (const [k, v] of filters()) url.searchParams.set(k, v);
  return url.pathname + url.search + url.hash;
}

// Put the runs list's filters in the address bar, replacing the entry (no new history step).
export function setFilters(values) {
  const url = new URL(window.location.href);
  for (const k of FILTERS) {
    if (values[k]) url.searchParams.set(k, values[k]); else url.searchParams.delete(k);
  }
  window.history.replaceState(null, "", url.pathname + url.search + url.hash);
}

export function navigate(path, { replace = false } = {}) {
  path = withFilters(path);
  if (path === window.location.pathname + window.location.search + window.location.hash) return handler(route());
  if (replace) window.history.replaceState(null, "", path);
  else window.history.pushState(null, "", path);
  return handler(route());
}

export function startRouter(fn) {
  handler = fn;
  window.addEventListener("popstate", () => handler(route()));
  document.addEventListener("click", (event) => {
    const a = event.target.closest && event.target.closest("a[data-link]");
    if (!a || event.ctrlKey || event.metaKey || event.shiftKey || event.button !== 0) return;
    event.preventDefault();
    navigate(a.getAttribute("href"));
  });
}
