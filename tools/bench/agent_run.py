"""The controller half of `flightlog bench console`'s long run: one agent run of many events.

A controller run of N records (tool calls started and completed, after a first run of its
session) is read as of a random step k: its page from per-run checkpoints (`Views.run_page`)
beside a plain fold of its stream up to k (`Views.timeline` on a reader without checkpoints),
then its console page live and travelled through the real app, timed from the ASGI call.
"""

from __future__ import annotations

import os
import random
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from functools import partial
from typing import Any

from eventlog import ANY, EventLog, ManualClock, open_log
from eventlog.events import AgentRunStarted, AgentRunStatusChanged, HarnessEventRecorded
from projections import Views

from .long_run import percentiles, timed_gets

T0 = datetime(2026, 1, 1, tzinfo=UTC)
RUN = "agent-long-run"
STREAM = "controller-bench"
BATCH = 1_000


def generate(log: EventLog, events: int) -> None:
    """A first run of the session, then run RUN: `events` records of tool calls."""
    log.append(STREAM, [AgentRunStarted("before", "bench", "s", "Before", "hi", T0),
                        AgentRunStatusChanged("before", "succeeded", "", T0)], expect=ANY)  # fmt: skip
    log.append(STREAM, [AgentRunStarted(RUN, "bench", "s", "Long agent run", "go", T0)], expect=ANY)
    n = 1
    while n < events:
        batch = []
        for i in range(n, min(n + BATCH, events)):
            at = T0 + timedelta(seconds=i)
            call = f"t{(i - 1) // 2}"  # started at an odd step, completed at the next
            if i % 2:
                data: dict[str, Any] = {"tool_call_id": call, "tool_name": "bash", "arguments": {"n": i}}
                batch.append(HarnessEventRecorded(RUN, "tool.start", f"e{i}", data, at))
            else:
                batch.append(HarnessEventRecorded(RUN, "tool.complete", f"e{i}", {"tool_call_id": call}, at))
        log.append(STREAM, batch, expect=ANY)
        n += len(batch)


def _timed(fn: Callable[[], object]) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def measure_agent_long(events: int, samples: int) -> dict[str, Any]:
    rng = random.Random(11)
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "agent-long-run.db")
        log = open_log(path, synchronous="NORMAL")
        generate(log, events)
        log.close()
        out: dict[str, Any] = {"events": events, "samples": samples}
        log = open_log(path)
        views = Views(log)
        seqs = [r.seq for r in log.read(STREAM) if r.data.get("run_id") == RUN]
        out["first_read_s"] = round(_timed(lambda: views.run_page(RUN, limit=20)), 3)  # makes the checkpoints
        picks = [rng.choice(seqs) for _ in range(samples)]
        out["run_at_step_ms"] = percentiles(
            [_timed(partial(views.run_page, RUN, k, None, 20)) for k in picks]
        )
        plain = Views(log, snapshots=None)
        folds = [rng.choice(seqs) for _ in range(max(3, samples // 50))]
        out["plain_fold_ms"] = percentiles([_timed(partial(plain.timeline, RUN, k)) for k in folds])
        log.close()
        with timed_gets(path, ManualClock(T0 + timedelta(days=1))) as get:
            page = f"/api/v1/console/runs/{RUN}/travel"
            get(page)
            out["page_live_ms"] = percentiles([get(page) for _ in range(max(5, samples // 4))])
            out["page_travelled_ms"] = percentiles(
                [get(f"{page}?at={rng.choice(seqs)}") for _ in range(max(5, samples // 4))]
            )
    return out


def agent_report_lines(r: dict[str, Any], targets: dict[str, float]) -> list[str]:
    """The controller run's figures (rich markup): as of step k beside a plain fold (a controller
    record costs more to fold than a broker report, so the broker run's targets are not its
    own), and its console pages beside the console's page target."""

    def verdict(value: float, target: float) -> str:
        return "[green]ok[/]" if 0 <= value <= target else "[red]over target[/]"

    run, fold = r["run_at_step_ms"], r["plain_fold_ms"]
    ratio = fold["p50"] / max(run["p50"], 1e-9)
    lines = [
        f"one controller run of {r['events']:,} events, {r['samples']} samples",
        f"  run as of step k (run_page, warm)    p50 {run['p50']:7.3f} ms  p99 {run['p99']:7.3f} ms",
        f"  plain fold of the run up to k        p50 {fold['p50']:9.1f} ms  ({ratio:,.0f}x run_page)",
        f"  first read of the run (makes its checkpoints) {r['first_read_s']:.2f} s",
    ]
    pages = (("console page, live", "page_live_ms"), ("console page, travelled", "page_travelled_ms"))
    for name, key in pages:
        p = r[key]
        top = targets["page_p99_ms"]
        lines.append(f"  {name:<35} p99 {p['p99']:7.1f} ms (target ≤ {top:g}) {verdict(p['p99'], top)}")
    return lines
