"""The long-run half of `flightlog bench console`: one run of 100,000 events, and 5,000 pending approvals.

Side by side in one process: the run as of a random step k (its status, entry count and
newest entries, `Views.run_page`) warm from per-run checkpoints, a plain fold of the run up to
k, and LangGraph's `SqliteSaver` answering `get_state` at a random checkpoint of a thread of
as many steps (skipped when langgraph is not installed); then the console's page of the run
(live and travelled) through the real app, timed from the ASGI call to its answer, with the
peak RSS it added; the console overview with 5,000 pending approvals; and the run's detail in
the operator API (`GET /api/v1/runs/{id}`, a page of its reports once its stream is folded).
"""

from __future__ import annotations

import contextlib
import itertools
import os
import random
import sqlite3
import tempfile
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from functools import partial
from typing import Any

from eventlog import ANY, EventLog, ManualClock, open_log
from eventlog.events import ApprovalPublished, ApprovalRequested, RunRegistered, RunReported
from projections import Views
from projections.broker_timeline import broker_timeline

T0 = datetime(2026, 1, 1, tzinfo=UTC)
RUN = "long-run"
BATCH = 1_000
TARGETS = {
    "run_p50_ms": 1.0,
    "run_p99_ms": 10.0,
    "page_p99_ms": 300.0,
    "page_rss_mb": 50.0,
    "overview_ms": 100.0,
}


def generate(log: EventLog, clock: ManualClock, events: int, approvals: int) -> None:
    """One broker run of `events` records (a registration, then small reports), `approvals` pending."""
    log.append(f"run-{RUN}", [RunRegistered(RUN, "0" * 64, T0, T0)], expect=ANY)
    n = 1
    while n < events:
        size = min(BATCH, events - n)
        batch = [RunReported(RUN, "working", f'{{"note": "step {n + i}"}}', T0 + timedelta(seconds=n + i))
                 for i in range(size)]  # fmt: skip
        log.append(f"run-{RUN}", batch, expect=ANY)
        n += size
    for a in range(approvals):
        request = ApprovalRequested(
            f"ap-{a:05d}", RUN, "", "shell", f"Run step {a}", "make", "low", "0" * 64, False, 1,
            T0, T0 + timedelta(days=365), "op",
        )  # fmt: skip
        log.append(f"approval-ap-{a:05d}", [request, ApprovalPublished(f"ap-{a:05d}", T0)], expect=ANY)
    clock.set(T0 + timedelta(seconds=events + 1))


def percentiles(samples: list[float]) -> dict[str, float]:
    ordered = sorted(samples)

    def at(q: float) -> float:
        return ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000.0

    return {"p50": round(at(0.50), 3), "p99": round(at(0.99), 3)}


def _timed(fn: Callable[[], object]) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


@contextlib.contextmanager
def peak_rss() -> Iterator[dict[str, float]]:
    """The peak RSS the block added, in MiB (Linux: the high-water mark is reset first)."""
    out: dict[str, float] = {}

    def status(key: str) -> float:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith(key):
                    return int(line.split()[1]) / 1024.0
        return 0.0

    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        before = status("VmRSS")
    except OSError:
        before = -1.0
    yield out
    out["added_mb"] = round(status("VmHWM") - before, 1) if before >= 0 else -1.0


def langgraph_get_state(steps: int, samples: int, rng: random.Random, folder: str) -> dict[str, Any] | None:
    """LangGraph's SqliteSaver: `get_state` at a random checkpoint of a thread of `steps` steps."""
    try:
        from typing import TypedDict

        from langgraph.checkpoint.base.id import uuid6
        from langgraph.checkpoint.sqlite import SqliteSaver
        from langgraph.graph import END, START, StateGraph
    except ImportError:
        return None

    class State(TypedDict):
        step: int
        status: str
        last: str

    def report(s: State) -> dict[str, Any]:
        return {"step": s["step"] + 1, "status": "working", "last": f'{{"note": "step {s["step"]}"}}'}

    path = os.path.join(folder, "langgraph.db")
    conn = sqlite3.connect(path, check_same_thread=False)
    saver = SqliteSaver(conn)
    graph = StateGraph(State)
    graph.add_node("report", report)  # type: ignore[call-overload]
    graph.add_edge(START, "report")
    graph.add_edge("report", END)
    app = graph.compile(checkpointer=saver)
    config: Any = {"configurable": {"thread_id": "t"}}
    app.invoke({"step": 0, "status": "registered", "last": ""}, config)
    # The rest of the thread is written straight through the saver (the graph's own invoke
    # writes three checkpoints a step and would take minutes): each step one checkpoint whose
    # values are the run's status and newest report, as a graph step would leave them.
    latest = saver.get_tuple(config)
    assert latest is not None
    base, cfg = latest.checkpoint, latest.config
    started = time.perf_counter()
    ids: list[str] = []
    for step in range(1, steps):
        checkpoint: dict[str, Any] = dict(base)
        checkpoint_id = str(uuid6(clock_seq=step))
        checkpoint["id"] = checkpoint_id
        checkpoint["channel_values"] = {
            "step": step,
            "status": "working",
            "last": f'{{"note": "step {step}"}}',
        }
        versions = {k: f"{step + 10:032}.0" for k in base["channel_versions"]}
        checkpoint["channel_versions"] = versions
        cfg = saver.put(cfg, checkpoint, {"source": "loop", "step": step, "parents": {}}, versions)  # type: ignore[arg-type]
        ids.append(checkpoint_id)
    write_s = time.perf_counter() - started
    conn.commit()

    def state(cid: str) -> None:
        app.get_state({"configurable": {"thread_id": "t", "checkpoint_id": cid}})

    for cid in rng.sample(ids, min(50, len(ids))):
        state(cid)  # warm
    trips = [_timed(partial(state, rng.choice(ids))) for _ in range(samples)]
    size = os.path.getsize(path)
    conn.close()
    return {
        "get_state_ms": percentiles(trips),
        "bytes_per_step": round(size / steps),
        "write_s": round(write_s, 1),
    }


@contextlib.contextmanager
def timed_gets(path: str, clock: ManualClock) -> Iterator[Callable[[str], float]]:
    """The operator API over the log at `path`, in this process (no network): a function that
    GETs a URL as the bootstrap operator and returns the seconds its answer took (non-200 raises)."""
    import asyncio

    import httpx

    from actors import System, make_token, token_digest
    from tools.http import create_app

    token = make_token()
    with System.open(path, clock=clock, scheduler=False) as system:
        app = create_app(system, operator_token_sha256=token_digest(token))
        client = httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://flightlog.bench",
                                   headers={"Authorization": f"Bearer {token}"})  # fmt: skip
        loop = asyncio.new_event_loop()

        def get(url: str) -> float:
            t = time.perf_counter()
            response = loop.run_until_complete(client.get(url))
            elapsed = time.perf_counter() - t
            if response.status_code != 200:
                raise RuntimeError(f"{url} answered {response.status_code}: {response.text[:200]}")
            return elapsed

        try:
            yield get
        finally:
            loop.run_until_complete(client.aclose())
            loop.close()


def measure_long(events: int, approvals: int, samples: int) -> dict[str, Any]:
    rng = random.Random(7)
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "long-run.db")
        clock = ManualClock(T0)
        log = open_log(path, clock=clock, synchronous="NORMAL")
        generate(log, clock, events, approvals)
        log.close()
        log_bytes = os.path.getsize(path)
        out: dict[str, Any] = {"events": events, "approvals": approvals, "samples": samples}
        log = open_log(path)
        views = Views(log)
        seqs = [r.seq for r in log.read(f"run-{RUN}")]
        out["first_read_s"] = round(_timed(lambda: views.run_page(RUN, limit=20)), 3)  # makes the checkpoints
        with contextlib.closing(sqlite3.connect(path)) as db:
            sizes = "coalesce(sum(length(data) + length(hash) + length(stream)), 0)"
            stored = db.execute(f"SELECT count(*), {sizes} FROM run_checkpoints").fetchone()
        out["checkpoints"] = stored[0]
        out["checkpoint_bytes"] = stored[1]
        out["bytes_per_step"] = round(log_bytes / events)
        out["bytes_per_step_with_checkpoints"] = round((log_bytes + stored[1]) / events, 1)
        picks = [rng.choice(seqs) for _ in range(samples)]
        out["run_at_step_ms"] = percentiles(
            [_timed(partial(views.run_page, RUN, k, None, 20)) for k in picks]
        )
        plain = [rng.choice(seqs) for _ in range(max(3, samples // 50))]

        def fold(k: int) -> None:
            broker_timeline(itertools.takewhile(lambda r: r.seq <= k, log.read(f"run-{RUN}")))

        out["plain_fold_ms"] = percentiles([_timed(partial(fold, k)) for k in plain])
        log.close()
        out["langgraph"] = langgraph_get_state(events, samples, rng, folder)

        with timed_gets(path, clock) as get:
            page = f"/api/v1/console/runs/{RUN}/travel"
            get(page)
            get("/api/v1/console/overview")
            with peak_rss() as rss:
                live = [get(page) for _ in range(samples // 4)]
                travelled = [get(f"{page}?at={rng.choice(seqs)}") for _ in range(samples // 4)]
            out["page_live_ms"] = percentiles(live)
            out["page_travelled_ms"] = percentiles(travelled)
            out["page_rss_added_mb"] = rss["added_mb"]
            out["overview_ms"] = percentiles(
                [get("/api/v1/console/overview") for _ in range(max(5, samples // 20))]
            )
            detail = f"/api/v1/runs/{RUN}"
            out["detail_first_s"] = round(get(detail), 3)  # folds the run once
            out["detail_ms"] = percentiles([get(detail) for _ in range(max(5, samples // 20))])
    return out


def report_lines(r: dict[str, Any]) -> list[str]:
    """The figures beside their targets, one line each (rich markup)."""

    def verdict(value: float, target: float) -> str:
        return "[green]ok[/]" if 0 <= value <= target else "[red]over target[/]"

    lines = [
        f"one run of {r['events']:,} events, {r['approvals']:,} pending approvals, {r['samples']} samples"
    ]
    run = r["run_at_step_ms"]
    p50, p99 = TARGETS["run_p50_ms"], TARGETS["run_p99_ms"]
    lines.append(f"  run as of step k (run_page, warm)    p50 {run['p50']:7.3f} ms (target ≤ {p50:g}) "
                 f"{verdict(run['p50'], p50)}  p99 {run['p99']:7.3f} ms (target ≤ {p99:g}) "
                 f"{verdict(run['p99'], p99)}")  # fmt: skip
    fold = r["plain_fold_ms"]
    ratio = fold["p50"] / max(run["p50"], 1e-9)
    lines.append(
        f"  plain fold of the run up to k        p50 {fold['p50']:9.1f} ms  ({ratio:,.0f}x run_page)"
    )
    lg = r["langgraph"]
    if lg is None:
        lines.append(
            "  LangGraph SqliteSaver get_state      langgraph not installed (pip install 'flightlog[bench]')"
        )
    else:
        g = lg["get_state_ms"]
        ratio = run["p50"] / max(g["p50"], 1e-9)
        lines.append(f"  LangGraph SqliteSaver get_state      p50 {g['p50']:7.3f} ms  p99 {g['p99']:7.3f} ms "
                     f"(flightlog / LangGraph p50: {ratio:.2f}x)")  # fmt: skip
    lines.append(f"  bytes per step: log {r['bytes_per_step']} B, with per-run checkpoints "
                 f"{r['bytes_per_step_with_checkpoints']} B ({r['checkpoints']:,} checkpoints; target ≤ 2x)"
                 + (f"; LangGraph {lg['bytes_per_step']} B" if lg else ""))  # fmt: skip
    lines.append(f"  first read of the run (makes its checkpoints) {r['first_read_s']:.2f} s")
    for name, key in (
        ("console page, live", "page_live_ms"),
        ("console page, travelled", "page_travelled_ms"),
    ):
        p = r[key]
        lines.append(f"  {name:<35} p99 {p['p99']:7.1f} ms (target ≤ {TARGETS['page_p99_ms']:g}) "
                     f"{verdict(p['p99'], TARGETS['page_p99_ms'])}")  # fmt: skip
    mb = r["page_rss_added_mb"]
    top = TARGETS["page_rss_mb"]
    lines.append(
        f"  peak RSS added by those pages        {mb:7.1f} MiB (target ≤ {top:g}) {verdict(mb, top)}"
    )
    d = r["detail_ms"]
    lines.append(f"  run detail (GET /api/v1/runs/{{id}})   p99 {d['p99']:7.1f} ms (target ≤ "
                 f"{TARGETS['page_p99_ms']:g}) {verdict(d['p99'], TARGETS['page_p99_ms'])}; "
                 f"the first, which folds the run, {r['detail_first_s']:.2f} s")  # fmt: skip
    o = r["overview_ms"]
    lines.append(f"  overview, {r['approvals']:,} pending approvals   p99 {o['p99']:7.1f} ms (target ≤ "
                 f"{TARGETS['overview_ms']:g}) {verdict(o['p99'], TARGETS['overview_ms'])}")  # fmt: skip
    return lines
