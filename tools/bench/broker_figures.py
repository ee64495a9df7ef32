"""`flightlog bench broker`'s figures: its rounds and samples as figures, ratios and targets, and
the table printed from them."""

from __future__ import annotations

import os
import sqlite3
import statistics
from dataclasses import dataclass
from typing import Any

from rich.table import Table

from .._output import console, targets_table
from . import log_workloads as w
from .approvals import percentile
from .broker_capacity import capacity_table

REPORTS_TARGET = 2000.0  # durable reports per second with 16 agents, at least
CEILING_TARGET = 0.5  # durable reports/s over the HTTP stack's ceiling in the same run, at least
CPU_TARGET_US = 150.0  # server CPU per durable report in µs, at most
DELIVERY_P50_TARGET = 1.5  # push → poll answer p50 in ms, at most
DELIVERY_P99_TARGET = 50.0  # push → poll answer p99 in ms, at most


@dataclass(frozen=True)
class Sizes:
    """How much each workload does."""

    agents: int  # concurrent agents, one run and one connection each
    reports: int  # reports per round at most (all agents together)
    seconds: float  # time box of a report round and of the raw commit phase
    pushes: int  # delivery samples
    rounds: int  # report and raw rounds, interleaved; the best counts
    polls: int = 1000  # runs registered, then idle long polls held at once (one per run)
    capacity: tuple[int, ...] = (1000, 5000, 10_000)  # agents long-polling, one level per fresh server
    window: float = 6.0  # seconds each capacity level is measured idle, then loaded


@dataclass(frozen=True)
class Round:
    """One report round: answers per second, and the server's CPU per answer."""

    per_s: float
    cpu_us: float


def figures_of(
    sizes: Sizes,
    report_rounds: tuple[list[Round], list[Round], list[Round]],
    raw_rates: list[float],
    samples: tuple[list[float], list[float]],
    registered: dict[str, Any],
    polls: dict[str, Any],
) -> dict[str, Any]:
    """The run's figures, ratios, targets and settings as one JSON-able dict. `report_rounds`:
    the durable rounds, the same through the ASGI app, and the ceiling's."""
    rounds, asgi_rounds, ceilings = report_rounds
    latencies, round_trips = samples
    ms = 1000.0
    best = max(rounds, key=lambda r: r.per_s)
    best_ceiling = max(ceilings, key=lambda r: r.per_s)
    figures = {
        "reports.durable_per_s": round(best.per_s, 1),
        "reports.durable_per_s_median": round(statistics.median(r.per_s for r in rounds), 1),
        "reports.server_cpu_us": round(statistics.median(r.cpu_us for r in rounds), 1),
        "reports.asgi_server_cpu_us": round(statistics.median(r.cpu_us for r in asgi_rounds), 1),
        "ceiling.per_s": round(best_ceiling.per_s, 1),
        "ceiling.server_cpu_us": round(statistics.median(r.cpu_us for r in ceilings), 1),
        "raw.commits_per_s": round(max(raw_rates), 1),
        "delivery.p50_ms": round(percentile(latencies, 50) * ms, 3),
        "delivery.p99_ms": round(percentile(latencies, 99) * ms, 3),
        "delivery.max_ms": round(max(latencies) * ms, 3),
        "ask.p50_ms": round(percentile(round_trips, 50) * ms, 3),
        "ask.p99_ms": round(percentile(round_trips, 99) * ms, 3),
        "register.appends_per_run": registered["appends_per_run"],
        "register.threads_added": registered["threads_added"],
        "polls.within_timeout": polls["within"],
        "polls.p50_s": polls["p50_s"],
        "polls.max_s": polls["max_s"],
    }
    rate, cpu = figures["reports.durable_per_s"], figures["reports.server_cpu_us"]
    vs_ceiling = round(rate / figures["ceiling.per_s"], 3)
    p50, p99 = figures["delivery.p50_ms"], figures["delivery.p99_ms"]
    return {
        "figures": figures,
        "ratios": {
            "reports_vs_ceiling": {
                "label": "durable reports/s / the HTTP stack's ceiling (same run)",
                "value": vs_ceiling,
            },
            "reports_vs_raw_commits": {
                "label": "durable reports/s over HTTP / raw single-row commits/s",
                "value": round(rate / figures["raw.commits_per_s"], 3),
            },
            "lean_vs_asgi": {
                "label": "server CPU per durable report, lean front / the same server's ASGI app",
                "value": round(cpu / max(figures["reports.asgi_server_cpu_us"], 1e-9), 3),
            },
            "cpu_vs_ceiling": {
                "label": "server CPU per durable report / the ceiling's per request",
                "value": round(cpu / max(figures["ceiling.server_cpu_us"], 1e-9), 3),
            },
        },
        "targets": {
            "reports_vs_ceiling": _target(
                "durable reports/s / HTTP stack ceiling", vs_ceiling, CEILING_TARGET, at_most=False, digits=2
            ),
            "server_cpu_us": _target("server CPU per durable report (µs)", cpu, CPU_TARGET_US, at_most=True),
            "delivery_p50_ms": _target("push → poll answer p50 (ms)", p50, DELIVERY_P50_TARGET, at_most=True),
            "delivery_p99_ms": _target("push → poll answer p99 (ms)", p99, DELIVERY_P99_TARGET, at_most=True),
            "reports_per_s": _target(
                f"durable reports/s, {sizes.agents} agents", rate, REPORTS_TARGET, at_most=False
            ),
            "idle_polls_within": _target(
                f"idle long polls answered within {polls['timeout_s']:g} + 0.2 s (of {sizes.polls:,})",
                polls["within"],
                sizes.polls,
                at_most=False,
            ),
            "register_appends": _target(
                "appends per registered run", registered["appends_per_run"], 1, at_most=True, digits=2
            ),
            "register_threads": _target(
                f"server threads started by {sizes.polls:,} registrations",
                registered["threads_added"],
                0,
                at_most=True,
            ),
        },
        "settings": {
            "journal_mode": "WAL",
            "synchronous": w.SYNC,
            "agents": sizes.agents,
            "reports": sizes.reports,
            "seconds": sizes.seconds,
            "pushes": sizes.pushes,
            "polls": sizes.polls,
            "rounds": sizes.rounds,
            "sqlite": sqlite3.sqlite_version,
            "cpus": os.cpu_count(),
            "load_average": [round(x, 2) for x in os.getloadavg()],
        },
    }


def _target(
    label: str, value: float, target: float, *, at_most: bool, digits: int | None = None
) -> dict[str, Any]:
    met = value <= target if at_most else value >= target
    entry: dict[str, Any] = {"label": label, "value": value, "target": target, "at_most": at_most}
    entry["pass"] = met
    if digits is not None:
        entry["digits"] = digits
    return entry


def print_report(result: dict[str, Any]) -> None:
    fig, st = result["figures"], result["settings"]
    table = Table(title=f"flightlog bench broker ({st['agents']} agents, best of {st['rounds']})")
    table.add_column("figure")
    table.add_column("value", justify="right")
    table.add_row("durable reports/s over HTTP", f"{fig['reports.durable_per_s']:,.0f}")
    table.add_row("  median of the rounds", f"{fig['reports.durable_per_s_median']:,.0f}")
    table.add_row("server CPU per durable report (µs)", f"{fig['reports.server_cpu_us']:,.0f}")
    table.add_row(
        "  the same through the ASGI app, not the lean front", f"{fig['reports.asgi_server_cpu_us']:,.0f}"
    )
    table.add_row("HTTP stack ceiling: answers/s, nothing stored", f"{fig['ceiling.per_s']:,.0f}")
    table.add_row("  its server CPU per answer (µs)", f"{fig['ceiling.server_cpu_us']:,.0f}")
    table.add_row("raw sqlite3: single-row commits/s", f"{fig['raw.commits_per_s']:,.0f}")
    table.add_row("push → poll answer p50 (ms)", f"{fig['delivery.p50_ms']:.2f}")
    table.add_row("push → poll answer p99 (ms)", f"{fig['delivery.p99_ms']:.2f}")
    table.add_row("push → poll answer max (ms)", f"{fig['delivery.max_ms']:.2f}")
    table.add_row("ask → reply round trip p50 (ms)", f"{fig['ask.p50_ms']:.2f}")
    table.add_row("ask → reply round trip p99 (ms)", f"{fig['ask.p99_ms']:.2f}")
    table.add_row(
        f"idle long polls answered in time (of {st['polls']:,})", f"{fig['polls.within_timeout']:,}"
    )
    table.add_row("  their answer p50 / max (s)", f"{fig['polls.p50_s']:.3f} / {fig['polls.max_s']:.3f}")
    table.add_row("appends per registered run", f"{fig['register.appends_per_run']:.2f}")
    table.add_row("server threads started by the registrations", f"{fig['register.threads_added']}")
    if "postgres.reports_per_s" in fig:
        table.add_row("PostgreSQL, one server: durable reports/s", f"{fig['postgres.reports_per_s']:,.0f}")
        table.add_row("  its server CPU per durable report (µs)", f"{fig['postgres.server_cpu_us']:,.0f}")
        table.add_row("PostgreSQL, two servers: durable reports/s", f"{fig['postgres2.reports_per_s']:,.0f}")
        table.add_row("  their server CPU per durable report (µs)", f"{fig['postgres2.server_cpu_us']:,.0f}")
    console.print(table)
    console.print(capacity_table(result["figures"], st["capacity"]))
    for r in result["ratios"].values():
        spread = f" (rounds {min(r['rounds']):.2f} to {max(r['rounds']):.2f})" if "rounds" in r else ""
        console.print(f"{r['label']}: {r['value']:.2f}x{spread}", soft_wrap=True)
    console.print(targets_table(result["targets"].values()))
    console.print(
        f"WAL, synchronous={st['synchronous']} on both sides; SQLite {st['sqlite']}, {st['cpus']} CPUs "
        f"(server, ceiling, agents and raw sqlite3 share them), load average {st['load_average'][0]}; "
        f"report rounds stop after {st['reports']:,} reports or {st['seconds']:g} s; "
        f"{st['pushes']} deliveries and {st['pushes']} asks, one in flight at a time.",
        soft_wrap=True,
    )
