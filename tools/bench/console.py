"""`flightlog bench console`: the console's runs page and search with 10,000 runs, p95 ms per request.

A log of N runs (half broker runs that register, report and finish, half agent runs that
start and end, every tenth with an approval) is served by the real app in process; each
request is timed from the ASGI call to its answer. "first render" is the page the console
asks for on login (newest activity first, 25 rows); "cold" is the same request right after
the log grew (the runs index is rebuilt once per head); "search" is a text search, and
"filtered" a status + kind + actor filter sorted by title. Target: p95 ≤ 300 ms each.
"""

from __future__ import annotations

import os
import tempfile
import time
from datetime import UTC, datetime, timedelta
from typing import Any

import click

from actors import System, make_token, token_digest
from eventlog import ANY, EventLog, ManualClock, open_log
from eventlog.events import (
    AgentRunStarted,
    AgentRunStatusChanged,
    ApprovalRequested,
    RunFinished,
    RunRegistered,
    RunReported,
)

from .._output import console, emit_json
from .agent_run import agent_report_lines, measure_agent_long
from .long_run import TARGETS as LONG_TARGETS
from .long_run import measure_long, report_lines

TARGET_MS = 300.0
T0 = datetime(2026, 1, 1, tzinfo=UTC)


def generate(log: EventLog, clock: ManualClock, runs: int) -> None:
    """Append `runs` runs to an empty log (see the module docstring)."""
    for n in range(runs):
        clock.set(T0 + timedelta(seconds=n))
        at = clock.now()
        run_id = f"run-{n:05d}"
        if n % 2 == 0:
            events: list[Any] = [
                RunRegistered(run_id, "0" * 64, at, at),
                RunReported(run_id, "working", f'{{"note": "step {n}"}}', at),
                RunFinished(run_id, "done" if n % 3 else "failed", f"summary of {run_id}", (), None, at),
            ]
            log.append(f"run-{run_id}", events, expect=ANY)
        else:
            title = f"Deploy service {n % 97} to stage {n % 7}"
            events = [
                AgentRunStarted(run_id, f"ctl-{n}", f"s-{n}", title, title, at),
                AgentRunStatusChanged(run_id, "succeeded" if n % 3 else "failed", "", at),
            ]
            log.append(f"controller-ctl-{n}", events, expect=ANY)
        if n % 10 == 0:
            request = ApprovalRequested(
                f"ap-{n}", run_id, "", "shell", f"Run step {n}", "make", "low", "0" * 64, False, 1,
                at, at + timedelta(hours=1), f"op-{n % 13}",
            )  # fmt: skip
            log.append(f"approval-ap-{n}", [request], expect=ANY)


def p95(samples: list[float]) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]


def measure(runs: int, samples: int) -> dict[str, Any]:
    import asyncio

    import httpx

    from tools.http import create_app

    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "console-bench.db")
        clock = ManualClock(T0)
        log = open_log(path, clock=clock, synchronous="NORMAL")
        started = time.perf_counter()
        generate(log, clock, runs)
        events = log.head().seq
        log.close()
        generated = time.perf_counter() - started
        token = make_token()
        with System.open(path, scheduler=False) as system:
            app = create_app(system, operator_token_sha256=token_digest(token))
            # The app called in process (no socket): what is timed is the server's own work.
            client = httpx.AsyncClient(
                transport=httpx.ASGITransport(app=app),
                base_url="http://flightlog.bench",
                headers={"Authorization": f"Bearer {token}"},
            )
            loop = asyncio.new_event_loop()

            def timed(url: str) -> float:
                t = time.perf_counter()
                response = loop.run_until_complete(client.get(url))
                elapsed = (time.perf_counter() - t) * 1000.0
                if response.status_code != 200:
                    failed = f"{url} answered {response.status_code}: {response.text[:200]}"
                    raise click.ClickException(failed)
                return elapsed

            first = "/api/v1/console/runs?limit=25"
            queries = {
                "first render": first,
                "search": "/api/v1/console/runs?limit=25&q=service%2042",
                "filtered": "/api/v1/console/runs?limit=25&status=failed&kind=agent&actor=ctl"
                "&sort=title&order=asc",
            }
            timed(first)  # the index's first build is the "cold" figure below
            figures = {name: p95([timed(url) for _ in range(samples)]) for name, url in queries.items()}
            cold = []
            for _ in range(max(3, samples // 10)):  # each append moves the head: the next read rebuilds
                system.log.append("bench-tick", [RunReported("tick", "working", None, T0)], expect=ANY)
                cold.append(timed(first))
            figures["cold (after the log grew)"] = p95(cold)
            total = loop.run_until_complete(client.get(first)).json()["total"]
            loop.run_until_complete(client.aclose())
            loop.close()
    return {"runs": runs, "listed": total, "events": events, "generate_s": generated, "samples": samples,
            "p95_ms": figures, "target_ms": TARGET_MS}  # fmt: skip


@click.command("console")
@click.option("--quick", is_flag=True, help="Fewer samples per request (the log still has 10,000 runs).")
@click.option("--runs", type=click.IntRange(10), default=10_000, show_default=True, help="Runs in the log.")
@click.option(
    "--long-events", type=click.IntRange(100), help="Events in the long run (default 100,000; --quick 5,000)."
)
@click.option("--approvals", type=click.IntRange(0), help="Pending approvals (default 5,000; --quick 500).")
@click.option("--json", "as_json", is_flag=True, help="Print the figures as one JSON object.")
def bench_console(
    quick: bool, runs: int, long_events: int | None, approvals: int | None, as_json: bool
) -> None:
    """The console's runs page and search with 10,000 runs: p95 ms per request, server-side;
    then one run of 100,000 events (the run as of step k beside a plain fold and LangGraph's
    SqliteSaver, its console page live and travelled, its detail in the operator API) and the
    overview with 5,000 approvals; then one controller run of as many events (as of step k, and
    its console page).

    \b
    Example:
      flightlog bench console --quick
      flightlog bench console --json
    """
    result = measure(runs, 20 if quick else 100)
    events = long_events or (5_000 if quick else 100_000)
    pending = approvals if approvals is not None else (500 if quick else 5_000)
    result["long_run"] = measure_long(events, pending, 100 if quick else 1_000)
    result["agent_long_run"] = measure_agent_long(events, 100 if quick else 1_000)
    if as_json:
        emit_json(result)
        return
    console.print(
        f"console runs list: {result['listed']:,} runs ({result['events']:,} events), "
        f"{result['samples']} samples per request"
    )
    for name, ms in result["p95_ms"].items():
        ratio = ms / TARGET_MS
        verdict = "[green]ok[/]" if ms <= TARGET_MS else "[red]over target[/]"
        console.print(f"  {name:<28} p95 {ms:8.1f} ms  {ratio:5.2f}x the {TARGET_MS:.0f} ms target {verdict}")
    for line in report_lines(result["long_run"]):
        console.print(line)
    for line in agent_report_lines(result["agent_long_run"], LONG_TARGETS):
        console.print(line)
