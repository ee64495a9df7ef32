// Routing with the history API: /ui/, /ui/runs/<id>[?at=<seq>][#events], /ui/approvals/<id>,
// /ui/events/<seq>. Links marked data-link navigate without a reload; back/forward re-route.

let handler = () => {};

export function route() {
  const url = new URL(window.location.href);
  const parts = url.pathname.replace(/^\/ui\/?/, "").split("/").filter(Boolean).map(decodeURIComponent);
  const at = url.searchParams.get("at");
  return {
    page: parts[0] || "home",
    id: parts.slice(1).join("/"),
    at: at !== null && /^\d+$/.test(at) ? Number(at) : null,
    tab: url.hash === "#events" ? "events" : "timeline",
    params: url.searchParams,
  };
}

export function navigate(path, { replace = false } = {}) {
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
