"""`flightlog bench soak`: a real server under steady traffic, its memory and threads over time.

`flightlog serve` runs in its own process on a temporary file; agents drive it over loopback
with the traffic a long-lived server sees — reports, heartbeats, permission requests and
their answers, control pushes and the polls that take them, finishes, and the operator
reading `/api/v1/runs` — until the log holds the stated number of events. It does so twice,
each time on a fresh server: once over the fixed set of runs registered at the start (the
slope target's case), once with a new run registered now and then as well (mixed: each new
run's actor stays up for the idle period, so the live work itself grows with the rate of
new runs). The server's RSS and thread count are read from `/proc` at intervals; the RSS
slope per 10k events is fitted by least squares after the warm-up. Then, on the mixed
server, two checks of what must not grow: strangers' requests (a thread per refused run id
would show) and a thousand long polls at once (each must be answered within its timeout
plus 0.2 s). Then, on a fresh server with every quota at its default, the hostile mix
(`soak_hostile`): a few attacking runs among normal ones. Last, the capacity levels of
`broker_capacity`: thousands of agents long-polling at once, each level on a fresh server.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import secrets
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from typing import Any

import click
from rich.table import Table

from .._output import console, emit_json, targets_table, temp_dir_option, with_status
from . import log_workloads as w
from .broker_capacity import capacity, capacity_figures, capacity_options, capacity_table, capacity_targets
from .broker_client import Agent, Connection, ServerProcess
from .soak_hostile import NORMAL_RUNS, ROUNDS, hostile, hostile_targets
from .soak_polls import long_polls, server_stats, strangers
from .soak_traffic import FIXED, MIX, MIXED, MIXES, Traffic, log_events, schedule

HOSTILE_REPORTS = 150  # each normal run's reports in each phase of the hostile mix (within a burst)
SLOPE_TARGET = 0.2  # MiB of RSS per 10k events after the warm-up, at most
RSS_TARGET = 150.0  # MiB of RSS after the full run's events, at most
RSS_TARGET_EVENTS = 200_000  # ... the run the RSS target is stated for
MIB = 1024 * 1024
# A shorter soak is still filling what a server holds for a while (actors and run states for
# their idle period, the time-travel checkpoints of the last 20,000 seqs): its slope is mostly that.
SHORT_SLOPE = f"; the target is for {RSS_TARGET_EVENTS:,} events, a short run fits the warm-up's fills"


@dataclass(frozen=True)
class Sizes:
    """How much the soak does."""

    events: int  # the log's size at which the traffic stops
    runs: int  # the fixed set of runs the agents share
    agents: int  # concurrent agents, a connection each
    samples: int  # RSS and thread readings over the run
    warm_up: float  # share of the events before the slope is fitted
    polls: int  # long polls held at once in the poll check
    strangers: int  # requests naming unknown runs in the strangers' check
    capacity: tuple[int, ...] = (1000, 5000, 10_000)  # agents long-polling, one level per fresh server
    window: float = 6.0  # seconds each capacity level is measured idle, then loaded


QUICK = Sizes(events=20_000, runs=40, agents=8, samples=10, warm_up=0.3, polls=1000, strangers=2000,
              capacity=(1000,))  # fmt: skip
FULL_RUN = Sizes(events=200_000, runs=40, agents=8, samples=20, warm_up=0.2, polls=1000, strangers=2000)


@contextlib.contextmanager
def served(parent: str | None, sizes: Sizes) -> Iterator[tuple[ServerProcess, str, Traffic, list[Agent]]]:
    """A fresh server, its database path, the traffic over it, and one agent per connection."""
    operator_token = secrets.token_hex(16)
    with w.fresh_path(parent, "flightlog.db") as path:
        # The agents drive each run faster than a run's default write rate: unbounded here (the
        # hostile mix below runs with the defaults).
        server = ServerProcess(path, operator_token, ("--events-per-second", "0"))
        opened: list[Connection] = []
        try:
            runs: list[Agent] = []
            setup = Connection(server.port)
            opened.append(setup)
            for i in range(sizes.runs):
                run_id = f"soak-run-{i:03d}"
                runs.append(Agent(run_id, setup.call("/register", {"run_id": run_id})["token"], setup))
            traffic = Traffic(server.port, {"Authorization": f"Bearer {operator_token}"}, runs)
            agents = []
            for i in range(sizes.agents):
                conn = Connection(server.port)
                opened.append(conn)
                agents.append(Agent(f"agent-{i}", "", conn))
            yield server, path, traffic, agents
        finally:
            for conn in opened:
                conn.close()
            server.close()


def soak(
    server: ServerProcess, path: str, traffic: Traffic, agents: list[Agent], sizes: Sizes,
    advance: Callable[[str], object], mix: str = MIXED,
) -> list[dict[str, float]]:  # fmt: skip
    """Drive the traffic of `mix` until the log holds `sizes.events`; return the readings taken."""
    stop = threading.Event()
    errors: list[BaseException] = []
    steps = [0] * len(agents)

    def agent(k: int, me: Agent) -> None:
        mine = [r for i, r in enumerate(traffic.runs) if i % len(agents) == k]
        try:
            for n, name in enumerate(schedule(k, MIXES[mix])):
                if stop.is_set():
                    return
                run = mine[n % len(mine)]
                getattr(traffic, name)(Agent(run.run_id, run.token, me.conn), n)
                steps[k] += 1
        except BaseException as e:  # noqa: BLE001 - re-raised in the main thread below
            errors.append(e)
            stop.set()

    threads = [threading.Thread(target=agent, args=(k, a), daemon=True) for k, a in enumerate(agents)]
    readings: list[dict[str, float]] = []
    started = time.perf_counter()
    every = max(1, sizes.events // sizes.samples)
    next_at = every
    for thread in threads:
        thread.start()
    try:
        while not stop.is_set():
            events = log_events(path)
            if events >= next_at or events >= sizes.events:
                rss, count = server_stats(server.proc.pid)
                readings.append(
                    {"events": events, "rss_mib": round(rss, 2), "threads": count,
                     "seconds": round(time.perf_counter() - started, 2), "requests": sum(steps)}
                )  # fmt: skip
                advance(
                    f"soak ({mix}): {events:,} of {sizes.events:,} events, RSS {rss:.1f} MiB, {count} threads"
                )
                next_at = (events // every + 1) * every
            if events >= sizes.events:
                break
            stop.wait(0.05)
    finally:
        stop.set()
        for thread in threads:
            thread.join(60)
    if errors:
        raise errors[0]
    return readings


def slope_per_10k(readings: list[dict[str, float]], warm_up: float, events: int) -> float:
    """Least-squares RSS slope (MiB per 10k events) over the readings taken after the warm-up."""
    points = [(r["events"], r["rss_mib"]) for r in readings if r["events"] >= warm_up * events]
    if len(points) < 2:
        return 0.0
    mx = sum(x for x, _ in points) / len(points)
    my = sum(y for _, y in points) / len(points)
    sxx = sum((x - mx) ** 2 for x, _ in points)
    sxy = sum((x - mx) * (y - my) for x, y in points)
    return sxy / sxx * 10_000 if sxx else 0.0


def _phase(readings: list[dict[str, float]], sizes: Sizes, start: tuple[float, int]) -> dict[str, Any]:
    """One soak's figures: RSS and threads at the start and the end, the slope, the counts."""
    last = readings[-1]
    return {
        "rss.start_mib": round(start[0], 2),
        "rss.end_mib": last["rss_mib"],
        "rss.slope_mib_per_10k": round(slope_per_10k(readings, sizes.warm_up, sizes.events), 4),
        "threads.start": start[1],
        "threads.end": last["threads"],
        "events": last["events"],
        "requests": last["requests"],
        "seconds": last["seconds"],
    }


def run(sizes: Sizes, parent: str | None, advance: Callable[[str], object]) -> dict[str, Any]:
    """Both soaks, then the strangers' and the long polls' checks; figures and targets as one dict."""
    figures: dict[str, Any] = {}
    readings: dict[str, list[dict[str, float]]] = {}
    for mix in (FIXED, MIXED):
        with served(parent, sizes) as (server, path, traffic, agents):
            pid = server.proc.pid
            start = server_stats(pid)
            readings[mix] = soak(server, path, traffic, agents, sizes, advance, mix)
            if mix == MIXED:
                advance("strangers")
                ghosts = strangers(server.port, pid, sizes.strangers)
                advance("long polls")
                polls = long_polls(server.port, sizes.polls)
        figures.update({f"{mix}.{k}": v for k, v in _phase(readings[mix], sizes, start).items()})
        figures[f"{mix}.new_runs"] = traffic.created
    advance("hostile mix")
    with w.fresh_path(parent, "hostile.db") as path:
        operator_token = secrets.token_hex(16)
        server = ServerProcess(path, operator_token)  # every quota at its default
        try:
            attacked = hostile(server, operator_token, HOSTILE_REPORTS, advance)
        finally:
            server.close()
    figures.update({f"hostile.{k}": v for k, v in attacked.items() if k != "answers"})
    levels = capacity(parent, sizes.capacity, sizes.window, advance)
    figures.update(capacity_figures(levels))
    figures.update(
        {
            "strangers.threads_added": ghosts["threads_added"],
            "polls.within_deadline": polls["within"],
            "polls.answered": polls["answered"],
            "polls.p50_s": polls["p50_s"],
            "polls.max_s": polls["max_s"],
        }
    )
    return {
        "figures": figures,
        "readings": readings,
        "targets": {
            **_targets(figures, sizes, polls["timeout_s"]),
            **hostile_targets({k.removeprefix("hostile."): v for k, v in figures.items()}, RSS_TARGET),
            **capacity_targets(levels),
        },
        "hostile_answers": attacked["answers"],
        "settings": {
            **{
                k: getattr(sizes, k)
                for k in ("events", "runs", "agents", "samples", "warm_up", "polls", "strangers", "window")
            },
            "capacity": list(sizes.capacity),
            "mix": {name: weight for weight, name in MIX},
            "fixed_leaves_out": sorted({n for _, n in MIXES[MIXED]} - {n for _, n in MIXES[FIXED]}),
            "synchronous": w.SYNC,
            "cpus": os.cpu_count(),
            "load_average": [round(x, 2) for x in os.getloadavg()],
        },
    }


def _targets(figures: dict[str, Any], sizes: Sizes, poll_timeout: float) -> dict[str, dict[str, Any]]:
    slope = figures[f"{FIXED}.rss.slope_mib_per_10k"]
    events = min(figures[f"{FIXED}.events"], figures[f"{MIXED}.events"])
    rss = max(figures[f"{FIXED}.rss.end_mib"], figures[f"{MIXED}.rss.end_mib"])
    within = figures["polls.within_deadline"]
    return {
        "slope": {
            "label": f"RSS slope after warm-up (MiB per 10k events), the fixed {sizes.runs} runs"
            + ("" if events >= RSS_TARGET_EVENTS else SHORT_SLOPE),
            "value": round(slope, 3),
            "target": SLOPE_TARGET,
            "at_most": True,
            "pass": slope <= SLOPE_TARGET,
        },
        "rss": {
            "label": f"RSS after {events:,} events (MiB), the larger of the two soaks"
            + ("" if events >= RSS_TARGET_EVENTS else f"; the target is for {RSS_TARGET_EVENTS:,}"),
            "value": rss,
            "target": RSS_TARGET,
            "at_most": True,
            "pass": rss <= RSS_TARGET,
        },
        "polls": {
            "label": f"of {sizes.polls:,} concurrent long polls, answered within {poll_timeout:g} s + 0.2 s",
            "value": within,
            "target": sizes.polls,
            "at_most": False,
            "pass": within == sizes.polls,
        },
        "strangers": {
            "label": f"threads added by {sizes.strangers:,} requests naming unknown runs",
            "value": figures["strangers.threads_added"],
            "target": 10,
            "at_most": True,
            "pass": figures["strangers.threads_added"] <= 10,
        },
    }


def _cells(reading: dict[str, float] | None) -> tuple[str, str, str]:
    """One soak's RSS, threads and seconds in a row of the table (blank past its last reading)."""
    if reading is None:
        return "", "", ""
    return f"{reading['rss_mib']:.1f}", str(reading["threads"]), f"{reading['seconds']:.1f}"


def _report(result: dict[str, Any]) -> None:
    fig, st = result["figures"], result["settings"]
    table = Table(
        title=f"flightlog bench soak ({st['events']:,} events, {st['runs']} runs, {st['agents']} agents)"
    )
    for name in ("events", "fixed: RSS (MiB)", "threads", "s", "mixed: RSS (MiB)", "threads", "s"):
        table.add_column(name, justify="right")
    for f, m in itertools.zip_longest(result["readings"][FIXED], result["readings"][MIXED]):
        events = max(r["events"] for r in (f, m) if r is not None)
        table.add_row(f"{events:,}", *_cells(f), *_cells(m))
    console.print(table)
    for mix, what in (
        (FIXED, "the fixed runs only"),
        (MIXED, f"{fig['mixed.new_runs']} new runs on the way"),
    ):
        console.print(
            f"{mix} ({what}): RSS {fig[f'{mix}.rss.start_mib']:.1f} MiB at start (runs registered), "
            f"{fig[f'{mix}.rss.end_mib']:.1f} MiB at the end; slope after the first {st['warm_up']:.0%} "
            f"of events: {fig[f'{mix}.rss.slope_mib_per_10k']:.3f} MiB per 10k events.",
            soft_wrap=True,
        )
    console.print(
        f"Long polls: p50 {fig['polls.p50_s']:.3f} s, max {fig['polls.max_s']:.3f} s, "
        f"{fig['polls.answered']} answered.",
        soft_wrap=True,
    )
    console.print(
        f"Hostile mix ({ROUNDS} rounds of {NORMAL_RUNS} normal runs, {HOSTILE_REPORTS} reports each, "
        f"quiet then under attack): report p99 {fig['hostile.report_p99_quiet_ms']:.1f} ms quiet, "
        f"{fig['hostile.report_p99_hostile_ms']:.1f} ms under attack (by round: "
        + ", ".join(f"{r:.2f}x" for r in fig["hostile.report_p99_ratio_by_round"])
        + f"); the operator's stop p50 "
        f"{fig['hostile.stop_p50_ms']:.1f} ms, p99 {fig['hostile.stop_p99_ms']:.1f} ms "
        f"({fig['hostile.stops']} stops, {fig['hostile.stops_refused']} refused); RSS "
        f"{fig['hostile.rss_start_mib']:.1f} -> {fig['hostile.rss_end_mib']:.1f} MiB; attacks answered "
        + "; ".join(
            f"{name} " + ", ".join(f"{n}x{status}" for status, n in got.items())
            for name, got in result["hostile_answers"].items()
        ),
        soft_wrap=True,
    )
    console.print(capacity_table(fig, st["capacity"]))
    console.print(targets_table(result["targets"].values()))
    console.print(
        f"synchronous={st['synchronous']}; {st['cpus']} CPUs shared by the server and the agents, "
        f"load average {st['load_average'][0]}; mix by weight: "
        + ", ".join(f"{k} {v}" for k, v in st["mix"].items())
        + f" (the fixed soak leaves out {', '.join(st['fixed_leaves_out'])})",
        soft_wrap=True,
    )


@click.command("soak")
@click.option("--quick", is_flag=True, help="A smaller run (20k events) for CI.")
@click.option(
    "--json", "as_json", is_flag=True, help="Print the figures, readings and targets as one JSON object."
)
@click.option("--events", type=click.IntRange(1000), help="Stop once the log holds this many events.")
@click.option("--runs", type=click.IntRange(1, 10_000), help="The fixed set of runs the agents share.")
@click.option("--agents", type=click.IntRange(1, 256), help="Concurrent agents (connections).")
@click.option("--polls", type=click.IntRange(1, 5000), help="Long polls held at once in the poll check.")
@click.option("--strangers", type=click.IntRange(1), help="Requests naming unknown runs in that check.")
@capacity_options("1000,5000,10000; --quick 1000")
@temp_dir_option
def bench_soak(
    quick: bool,
    as_json: bool,
    events: int | None,
    runs: int | None,
    agents: int | None,
    polls: int | None,
    strangers: int | None,
    levels: tuple[int, ...] | None,
    window: float | None,
    parent: str | None,
) -> None:
    """A server under steady traffic: RSS and threads as the log grows, the RSS slope per 10k events.

    Starts `flightlog serve` on a temporary database in a child process, registers a fixed
    set of runs, and drives reports, heartbeats, permissions, pushes and polls, finishes and
    operator reads until the log holds the stated number of events; then does it again on a
    fresh server with new runs registered on the way too (mixed). The slope target is for
    the fixed set of runs; the mixed soak's slope is reported beside it. Then checks that
    strangers' requests start no threads and that a thousand concurrent long polls are
    answered on time, then the hostile mix, then thousands of agents long-polling at each
    --capacity level on a fresh server (RSS with them all connected, polls on time, push →
    poll beside reports). Each figure is checked against its target (PASS/MISS).

    \b
    Example:
      flightlog bench soak --quick
      flightlog bench soak --json > soak.json
    """
    sizes = QUICK if quick else FULL_RUN
    sizes = replace(
        sizes,
        events=events or sizes.events,
        runs=runs or sizes.runs,
        agents=agents or sizes.agents,
        polls=polls or sizes.polls,
        strangers=strangers or sizes.strangers,
        capacity=levels or sizes.capacity,
        window=window or sizes.window,
    )
    result = with_status("bench soak", lambda update: run(sizes, parent, update))
    if as_json:
        emit_json(result)
    else:
        _report(result)
