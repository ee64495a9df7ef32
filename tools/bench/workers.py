"""`flightlog bench workers`: durable reports/s of `serve --workers N` next to one worker, per backend.

For each backend (a temporary SQLite file; a temporary PostgreSQL database when `--postgres
URL` is given) a server with one worker and a server with N are started in turn on fresh
databases, the same agents register and report as fast as their answers come back (every
acknowledged report is checked in the log afterwards), and the best round of each counts.
The figures: reports/s, the server's CPU per report (every worker's, from /proc), the load
client's own CPU per report (it shares the machine's cores with the workers), and the ratio
of N workers to one, checked against its target.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import click
from rich.table import Table

from .._output import console, emit_json, targets_table, temp_dir_option, with_status
from . import log_workloads as w
from .broker import NO_QUOTA, report_round, team_on
from .broker_client import CLOCK_TICKS, Agent, Connection, ServerProcess

SPEEDUP_TARGET = 1.6  # N workers' reports/s over one worker's, at least (per backend)
PG_SPEEDUP_TARGET = 1.6


@dataclass(frozen=True)
class Sizes:
    agents: int
    seconds: float
    rounds: int
    workers: int


QUICK = Sizes(agents=8, seconds=1.0, rounds=1, workers=2)
FULL = Sizes(agents=16, seconds=3.0, rounds=3, workers=2)


class WorkersProcess(ServerProcess):
    """`flightlog serve --workers N`: its CPU is the parent's and every live worker's."""

    def cpu_seconds(self) -> float:
        return sum(_cpu(pid) for pid in [self.proc.pid, *_children(self.proc.pid)])


def _children(pid: int) -> list[int]:
    try:
        with open(f"/proc/{pid}/task/{pid}/children", encoding="ascii") as f:
            return [int(p) for p in f.read().split()]
    except FileNotFoundError:
        return []


def _cpu(pid: int) -> float:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
    except FileNotFoundError:
        return 0.0
    fields = stat[stat.rindex(b")") + 2 :].split()
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS


@contextlib.contextmanager
def _database(backend: str, parent: str | None, postgres: str | None) -> Iterator[str]:
    """A fresh database for one server: a SQLite file, or a new PostgreSQL database."""
    if backend == "sqlite":
        with w.fresh_path(parent, "flightlog.db") as path:
            yield path
        return
    assert postgres is not None
    import psycopg

    name = f"flightlog_bench_{secrets.token_hex(6)}"
    with psycopg.connect(postgres, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    try:
        yield _pg_url(postgres, name)
    finally:
        with psycopg.connect(postgres, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def _pg_url(base: str, name: str) -> str:
    """`base` (a postgresql:// URL) naming database `name` instead."""
    head, _, tail = base.partition("?")
    prefix = head.rsplit("/", 1)[0]
    return f"{prefix}/{name}" + (f"?{tail}" if tail else "")


@contextlib.contextmanager
def _served(db: str, workers: int, agents: int) -> Iterator[tuple[ServerProcess, list[Agent], Connection]]:
    operator_token = secrets.token_hex(16)
    server = WorkersProcess(db, operator_token, ("--workers", str(workers), *NO_QUOTA))
    with team_on(server, operator_token, agents) as (team, operator):
        yield server, team, operator


def measure(
    backend: str, workers: int, sizes: Sizes, parent: str | None, postgres: str | None
) -> dict[str, float]:
    """The best of `sizes.rounds` report rounds on a fresh server with `workers` workers."""
    with _database(backend, parent, postgres) as db, _served(db, workers, sizes.agents) as (server, team, op):
        report_round(server, team, op, sizes.agents * 10, sizes.seconds)  # warm-up
        best: dict[str, float] = {}
        for _ in range(sizes.rounds):
            client = time.process_time()
            r = report_round(server, team, op, 10**9, sizes.seconds)
            client = time.process_time() - client
            if r.per_s > best.get("reports_per_s", 0.0):
                count = r.per_s * sizes.seconds
                best = {
                    "reports_per_s": round(r.per_s),
                    "server_cpu_us": round(r.cpu_us, 1),
                    "client_cpu_us": round(client * 1e6 / max(count, 1), 1),
                }
        return best


def run(
    sizes: Sizes, parent: str | None, postgres: str | None, advance: Callable[[str], object]
) -> dict[str, Any]:
    backends = ["sqlite", *(["postgresql"] if postgres else [])]
    result: dict[str, Any] = {"workers": sizes.workers, "agents": sizes.agents, "cores": os.cpu_count()}
    for backend in backends:
        one = measure(backend, 1, sizes, parent, postgres)
        advance(f"{backend}: 1 worker")
        many = measure(backend, sizes.workers, sizes, parent, postgres)
        advance(f"{backend}: {sizes.workers} workers")
        result[backend] = {
            "one": one,
            "many": many,
            "ratio": round(many["reports_per_s"] / max(one["reports_per_s"], 1), 2),
            "bound": _bound(many, one, result["cores"]),
        }
    if "postgresql" in result:
        result["postgresql_over_sqlite"] = round(
            result["postgresql"]["one"]["reports_per_s"] / max(result["sqlite"]["one"]["reports_per_s"], 1), 2
        )
    return result


def _bound(many: dict[str, float], one: dict[str, float], cores: int | None) -> float:
    """The most N workers' reports/s could be on this machine, over one worker's: every core
    busy with the server's and the load client's CPU per report as measured with N workers."""
    per_report_us = many["server_cpu_us"] + many["client_cpu_us"]
    if not per_report_us or not one["reports_per_s"]:
        return 0.0
    return round((cores or 1) * 1e6 / per_report_us / one["reports_per_s"], 2)


def targets(result: dict[str, Any]) -> list[dict[str, Any]]:
    """The targets this bench checks, as `targets_table` shows them."""
    n = result["workers"]
    checks = [(f"sqlite: {n} workers / 1 worker, reports/s", result["sqlite"]["ratio"], SPEEDUP_TARGET)]
    if "postgresql" in result:
        checks.append(
            (
                f"postgresql: {n} workers / 1 worker, reports/s",
                result["postgresql"]["ratio"],
                PG_SPEEDUP_TARGET,
            )
        )
    return [
        {
            "label": name,
            "value": value,
            "target": target,
            "pass": value >= target,
            "at_most": False,
            "digits": 2,
        }
        for name, value, target in checks
    ]


def _report(result: dict[str, Any]) -> None:
    n = result["workers"]
    table = Table(title=f"flightlog bench workers ({result['agents']} agents reporting, best round)")
    for name, justify in (("server", "left"), ("reports/s", "right"), ("server CPU µs/report", "right")):
        table.add_column(name, justify=justify)  # type: ignore[arg-type]
    table.add_column("load client CPU µs/report", justify="right")
    for backend in ("sqlite", "postgresql"):
        if backend not in result:
            continue
        for label, key in (("1 worker", "one"), (f"{n} workers", "many")):
            f = result[backend][key]
            row = (f"{f['reports_per_s']:,}", f"{f['server_cpu_us']:,.1f}", f"{f['client_cpu_us']:,.1f}")
            table.add_row(f"{backend}, {label}", *row)
    console.print(table)
    if "postgresql_over_sqlite" in result:
        console.print(f"postgresql / sqlite, one worker each: {result['postgresql_over_sqlite']:.2f}x")
    console.print(targets_table(result["targets"]))
    for backend in ("sqlite", "postgresql"):
        if backend in result:
            console.print(
                f"{backend}: at most {result[backend]['bound']:.2f}x one worker on this machine, every "
                f"core busy at {n} workers' server and load-client CPU per report",
                soft_wrap=True,
            )
    console.print(
        f"{result['cores']} CPUs, shared by the workers and the load client (one process, "
        "asyncio); each server on a fresh database; every acknowledged report checked in the log.",
        soft_wrap=True,
    )


@click.command("workers")
@click.option("--quick", is_flag=True, help="A smaller run (a few seconds) for CI.")
@click.option("--json", "as_json", is_flag=True, help="Print the figures and targets as one JSON object.")
@click.option("--workers", type=click.IntRange(2, 64), default=2, show_default=True, help="N, beside one.")
@click.option("--agents", type=click.IntRange(2, 256), help="Concurrent reporting agents.")
@click.option("--seconds", type=click.FloatRange(0.1), help="Time box of a report round.")
@click.option("--rounds", type=click.IntRange(1), help="Report rounds per server (the best counts).")
@click.option(
    "--postgres",
    metavar="URL",
    default=lambda: os.environ.get("FLIGHTLOG_TEST_PG_URL"),
    help="A PostgreSQL server to measure too (a database is created and dropped per server; "
    "default: FLIGHTLOG_TEST_PG_URL).",
)
@temp_dir_option
def bench_workers(
    quick: bool,
    as_json: bool,
    workers: int,
    agents: int | None,
    seconds: float | None,
    rounds: int | None,
    postgres: str | None,
    parent: str | None,
) -> None:
    """Durable reports/s of `serve --workers N` next to one worker, on SQLite (and PostgreSQL).

    Starts each server on a fresh database in a child process and drives it over loopback with
    the agents of `bench broker`; every acknowledged report is checked in the log. Prints
    reports/s and CPU per report for each, and the ratio of N workers to one against its target.

    \b
    Example:
      flightlog bench workers --quick
      flightlog bench workers --postgres postgresql://localhost/postgres --json
    """
    base = QUICK if quick else FULL
    sizes = Sizes(
        agents=agents or base.agents,
        seconds=seconds or base.seconds,
        rounds=rounds or base.rounds,
        workers=workers,
    )
    result = with_status("bench workers", lambda update: run(sizes, parent, postgres, update))
    result["targets"] = targets(result)
    if as_json:
        emit_json(result)
    else:
        _report(result)
