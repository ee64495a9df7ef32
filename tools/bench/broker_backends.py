"""`flightlog bench broker --db postgresql://…`: the report load on PostgreSQL, one server and two.

Next to the SQLite server of every round, the same agents report to `flightlog serve` on a
PostgreSQL schema (one server), and to two servers on another schema of the same database,
the agents split between them: what a second server adds. Each round runs SQLite, one
PostgreSQL server and two back to back, so each ratio is taken within a round (the moments
of a noisy machine they share) and the rounds give its range. Every acknowledged report is
checked in the log afterwards; the servers' CPU is every server process's (`/proc`), not the
PostgreSQL backends'.
"""

from __future__ import annotations

import contextlib
import secrets
import statistics
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import click

from . import log_workloads as w
from .broker_client import Agent, Connection, ServerProcess
from .broker_load import post_all, report_bodies, report_counts

PG_VS_SQLITE_TARGET = 0.7  # reports/s on one PostgreSQL server over SQLite's, at least
TWO_SERVERS_TARGET = 1.6  # reports/s on two PostgreSQL servers over one's, at least


@dataclass
class Fleet:
    """Servers on one database, each with its share of the agents and an operator connection."""

    servers: list[ServerProcess]
    teams: list[list[Agent]]
    operators: list[Connection]


@contextlib.contextmanager
def served(url: str, servers: int, agents: int) -> Iterator[Fleet]:
    """`servers` servers on a fresh schema of the database at `url`; agent i registers on server
    i mod `servers` (so both halves are alike); the schema is dropped afterwards."""
    token = secrets.token_hex(16)
    with w.fresh_schema(url) as db:
        fleet = Fleet([], [[] for _ in range(servers)], [])
        opened: list[Connection] = []
        try:
            for _ in range(servers):  # one after the other: the first one migrates the schema
                fleet.servers.append(ServerProcess(db, token, ("--events-per-second", "0")))
            for server in fleet.servers:
                fleet.operators.append(Connection(server.port, {"Authorization": f"Bearer {token}"}))
            opened.extend(fleet.operators)
            for i in range(agents):
                n = i % servers
                conn = Connection(fleet.servers[n].port)
                opened.append(conn)
                run_id = f"bench-agent-{i:02d}"
                token = conn.call("/register", {"run_id": run_id})["token"]
                fleet.teams[n].append(Agent(run_id, token, conn))
            yield fleet
        finally:
            for conn in opened:
                conn.close()
            for server in fleet.servers:
                server.close()


@dataclass(frozen=True)
class Round:
    """One report round of a fleet: answers per second, and the servers' CPU per answer."""

    per_s: float
    cpu_us: float


def fleet_round(fleet: Fleet, total: int, seconds: float) -> Round:
    """Every agent of every server reports until `total` together, or time is up; every
    acknowledged report must then be in the log, as each server reads its own runs."""
    agents = [(n, a) for n, team in enumerate(fleet.teams) for a in team]
    share = max(1, total // len(agents))
    bodies = report_bodies([a for _, a in agents])
    ports = [fleet.servers[n].port for n, _ in agents]
    before = [report_counts(op) for op in fleet.operators]
    cpu = sum(s.cpu_seconds() for s in fleet.servers)
    acked, elapsed = post_all(ports[0], "/report", bodies, share, seconds, ports=ports)
    cpu = sum(s.cpu_seconds() for s in fleet.servers) - cpu
    after = [report_counts(op) for op in fleet.operators]
    recorded = sum(
        after[n].get(a.run_id, 0) - before[n].get(a.run_id, 0)
        for n, team in enumerate(fleet.teams)
        for a in team
    )
    done = sum(acked)
    if recorded != done:
        raise click.ClickException(f"{done} reports acknowledged but {recorded} recorded")
    return Round(done / max(elapsed, 1e-9), cpu * 1e6 / max(done, 1))


def figures(sqlite: list[float], one: list[Round], two: list[Round]) -> dict[str, Any]:
    """The PostgreSQL figures and ratios of the rounds (SQLite's reports/s of the same rounds)."""

    def per_round(num: list[float], den: list[float]) -> list[float]:
        return [n / max(d, 1e-9) for n, d in zip(num, den, strict=True)]

    one_rates, two_rates = [r.per_s for r in one], [r.per_s for r in two]
    return {
        "figures": {
            "postgres.reports_per_s": round(max(one_rates), 1),
            "postgres.reports_per_s_median": round(statistics.median(one_rates), 1),
            "postgres.server_cpu_us": round(statistics.median(r.cpu_us for r in one), 1),
            "postgres2.reports_per_s": round(max(two_rates), 1),
            "postgres2.reports_per_s_median": round(statistics.median(two_rates), 1),
            "postgres2.server_cpu_us": round(statistics.median(r.cpu_us for r in two), 1),
        },
        "ratios": {
            "postgres_vs_sqlite": _ratio(
                "durable reports/s: one PostgreSQL server / the SQLite server", per_round(one_rates, sqlite)
            ),
            "two_servers_vs_one": _ratio(
                "durable reports/s: two PostgreSQL servers / one", per_round(two_rates, one_rates)
            ),
        },
    }


def _ratio(label: str, rounds: list[float]) -> dict[str, Any]:
    """A ratio taken within each round: its median is the value, and its range is shown."""
    return {
        "label": label,
        "value": round(statistics.median(rounds), 3),
        "rounds": [round(x, 3) for x in rounds],
    }


def targets(ratios: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The issue's targets for PostgreSQL, as `targets_table` shows them."""
    out = {}
    for key, label, target in (
        ("postgres_vs_sqlite", "PostgreSQL / SQLite reports/s (median of rounds)", PG_VS_SQLITE_TARGET),
        ("two_servers_vs_one", "two PostgreSQL servers / one, reports/s (median)", TWO_SERVERS_TARGET),
    ):
        value = ratios[key]["value"]
        out[key] = {"label": label, "value": value, "target": target, "at_most": False, "digits": 2}
        out[key]["pass"] = value >= target
    return out
