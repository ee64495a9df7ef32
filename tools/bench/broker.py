"""`flightlog bench broker`: the HTTP broker under 16 agents, next to the HTTP stack's own ceiling.

A real server — `flightlog serve` on a temporary file at `synchronous=FULL` in WAL mode —
runs in its own process, so the load below never shares its interpreter lock. Agents talk
to it over loopback, one keep-alive connection each:

- **reports**: every agent posts `/report` as fast as its answers come back; each answer
  comes only after the report's commit, so reports/s is a durable rate. The runs' report
  counts are checked against the acknowledgements afterwards. The server's CPU time
  (`/proc/<pid>/stat`, every thread) over the round, divided by the reports, is its CPU
  per durable report. The same reports are also sent to `/rep%6Frt`: the same route through
  the server's ASGI app, which its lean front leaves such a path to — side by side, what the
  lean front saves.
- **ceiling**: the same agents post the same bodies to the HTTP stack alone — the same
  uvicorn settings and Starlette, an endpoint that parses the JSON and answers without
  storing (`broker_ceiling`), in its own process: what reports/s could be at most here.
- **delivery**: every agent long-polls `/poll-control`; one pusher sends a message to each
  agent in turn over `/push-control` (operator Bearer token) and times push → the poll's
  answer holding it, one message in flight at a time.
- **asks**: one agent asks another (`/send` with `expects_reply`) and waits in `/wait_reply`;
  the other long-polls, and answers each ask with a reply (`/send` with `reply_to`). Timed
  from the ask to the wait's answer, one ask in flight at a time.
- **raw**: raw sqlite3 inserting one row per transaction into the same schema, in the same
  run: the durable-commit rate of the disk.
- **PostgreSQL** (with `--db postgresql://…`): the same reports on one server on a PostgreSQL
  schema, and on two servers sharing another schema, the agents split between them
  (`broker_backends`).

Rounds of raw, ceiling and reports (and PostgreSQL's) are interleaved, so each sees the same
moments of a noisy machine.
"""

from __future__ import annotations

import contextlib
import secrets
from collections.abc import Callable, Iterator
from dataclasses import replace
from typing import Any

import click

from .._output import emit_json, require_extra, temp_dir_option, with_status
from . import broker_backends as pg
from . import log_workloads as w
from .broker_capacity import capacity, capacity_figures, capacity_options, capacity_targets
from .broker_client import Agent, Connection, ServerProcess
from .broker_figures import Round, Sizes, figures_of, print_report
from .broker_latency import asks, delivery
from .broker_load import post_all, report_bodies, report_counts
from .soak_polls import long_polls, register_runs, server_stats

NO_QUOTA = ("--events-per-second", "0")  # serve's options for a benchmark server
# The report route written %-escaped: the same handler, reached through the ASGI app, which the
# lean front (`tools.http.lean`) leaves such paths to. Its rounds measure what the front saves.
ASGI_REPORT = "/rep%6Frt"


QUICK = Sizes(agents=16, reports=3000, seconds=1.5, pushes=80, rounds=1, capacity=(500,), window=3.0)
FULL_RUN = Sizes(agents=16, reports=30_000, seconds=4.0, pushes=500, rounds=3)


# -- the server --------------------------------------------------------------------------------


@contextlib.contextmanager
def served(parent: str | None, agents: int) -> Iterator[tuple[ServerProcess, list[Agent], Connection]]:
    """A fresh server, `agents` registered runs with a connection each, and the operator's connection."""
    operator_token = secrets.token_hex(16)
    with w.fresh_path(parent, "flightlog.db") as path:
        # No per-run write quota: the reports measure the log, not the limit (as bench soak).
        server = ServerProcess(path, operator_token, NO_QUOTA)
        with team_on(server, operator_token, agents) as (team, operator):
            yield server, team, operator


@contextlib.contextmanager
def team_on(
    server: ServerProcess, operator_token: str, agents: int
) -> Iterator[tuple[list[Agent], Connection]]:
    """`agents` runs registered on `server` with a connection each, and the operator's connection;
    the server is closed at the end."""
    opened: list[Connection] = []
    try:
        operator = Connection(server.port, {"Authorization": f"Bearer {operator_token}"})
        opened.append(operator)
        team: list[Agent] = []
        for i in range(agents):
            conn = Connection(server.port)
            opened.append(conn)
            run_id = f"bench-agent-{i:02d}"
            token = conn.call("/register", {"run_id": run_id})["token"]
            team.append(Agent(run_id, token, conn))
        yield team, operator
    finally:
        for conn in opened:
            conn.close()
        server.close()


@contextlib.contextmanager
def ceiling_served(agents: int) -> Iterator[tuple[ServerProcess, list[Agent]]]:
    """The HTTP stack's ceiling server and `agents` connections to it (their runs exist nowhere)."""
    server = ServerProcess("", "", ceiling=True)
    team: list[Agent] = []
    try:
        for i in range(agents):
            team.append(Agent(f"bench-agent-{i:02d}", secrets.token_hex(16), Connection(server.port)))
        yield server, team
    finally:
        for a in team:
            a.conn.close()
        server.close()


# -- reports -----------------------------------------------------------------------------------


def report_round(
    server: ServerProcess,
    team: list[Agent],
    operator: Connection | None,
    total: int,
    seconds: float,
    path: str = "/report",
) -> Round:
    """Reports per second: every agent reports until `total` together, or time is up.

    With `operator`, every acknowledged report must be in the log afterwards (a durable rate);
    without, the server is the ceiling, which keeps nothing. `path` may be ASGI_REPORT: the
    same route through the server's ASGI app rather than its lean front.
    """
    share = max(1, total // len(team))
    bodies = report_bodies(team)
    before = report_counts(operator) if operator is not None else {}
    cpu = server.cpu_seconds()
    acked, elapsed = post_all(server.port, path, bodies, share, seconds)
    cpu = server.cpu_seconds() - cpu
    done = sum(acked)
    if operator is not None:
        # Each acknowledgement came after a commit: the log must hold every one of them.
        after = report_counts(operator)
        recorded = sum(after.get(a.run_id, 0) - before.get(a.run_id, 0) for a in team)
        if recorded != done:
            raise click.ClickException(f"{done} reports acknowledged but {recorded} recorded")
    return Round(done / max(elapsed, 1e-9), cpu * 1e6 / max(done, 1))


# -- the run -----------------------------------------------------------------------------------


def run(
    sizes: Sizes, parent: str | None, advance: Callable[[str], object], pg_url: str | None = None
) -> dict[str, Any]:
    """Run every workload; return figures, ratios, targets and settings as one JSON-able dict.

    With `pg_url`, every round also reports to one and to two servers on PostgreSQL.
    """
    rounds: list[Round] = []
    asgi_rounds: list[Round] = []
    ceilings: list[Round] = []
    raw_rates: list[float] = []
    latencies: list[float] = []
    on_pg: tuple[list[pg.Round], list[pg.Round]] = ([], [])
    with contextlib.ExitStack() as stack:
        server, team, operator = stack.enter_context(served(parent, sizes.agents))
        ceiling, ceiling_team = stack.enter_context(ceiling_served(sizes.agents))
        fleets = [stack.enter_context(pg.served(pg_url, n, sizes.agents)) for n in (1, 2) if pg_url]
        advance("warm-up")
        report_round(server, team, operator, sizes.agents * 10, sizes.seconds)
        report_round(ceiling, ceiling_team, None, sizes.agents * 10, sizes.seconds)
        for fleet in fleets:
            pg.fleet_round(fleet, sizes.agents * 10, sizes.seconds)
        for r in range(sizes.rounds):
            # Interleaved, so every side sees the same moments of a noisy machine.
            advance(f"raw sqlite3: round {r + 1}/{sizes.rounds}")
            with w.fresh_path(parent, "raw.db") as path:
                count, elapsed = w.raw_append(path, sizes.reports, 1, sizes.seconds)
            raw_rates.append(count / max(elapsed, 1e-9))
            advance(f"HTTP stack ceiling: round {r + 1}/{sizes.rounds}")
            ceilings.append(report_round(ceiling, ceiling_team, None, sizes.reports, sizes.seconds))
            advance(f"reports: round {r + 1}/{sizes.rounds}")
            rounds.append(report_round(server, team, operator, sizes.reports, sizes.seconds))
            advance(f"reports through the ASGI app: round {r + 1}/{sizes.rounds}")
            asgi_rounds.append(
                report_round(server, team, operator, sizes.reports, sizes.seconds, ASGI_REPORT)
            )
            for n, fleet in enumerate(fleets):
                advance(f"reports on PostgreSQL, {n + 1} server(s): round {r + 1}/{sizes.rounds}")
                on_pg[n].append(pg.fleet_round(fleet, sizes.reports, sizes.seconds))
        advance("delivery")
        latencies = delivery(team, operator, sizes.pushes)
        advance("asks")
        round_trips = asks(team, sizes.pushes)
        advance(f"registering {sizes.polls:,} runs")
        registered = registration(server, sizes.polls)
        advance(f"{sizes.polls:,} idle long polls")
        polls = long_polls(server.port, sizes.polls, registered.pop("tokens"))
    levels = capacity(parent, sizes.capacity, sizes.window, advance)
    samples = (latencies, round_trips)
    result = figures_of(sizes, (rounds, asgi_rounds, ceilings), raw_rates, samples, registered, polls)
    result["figures"].update(capacity_figures(levels))
    result["targets"].update(capacity_targets(levels))
    result["settings"].update(capacity=list(sizes.capacity), window=sizes.window)
    if pg_url:
        on = pg.figures([r.per_s for r in rounds], *on_pg)
        result["figures"].update(on["figures"])
        result["ratios"].update(on["ratios"])
        result["targets"].update(pg.targets(on["ratios"]))
        result["settings"]["postgres"] = w.pg_settings(pg_url)
    return result


def registration(server: ServerProcess, count: int) -> dict[str, Any]:
    """Register `count` runs; the appends and the server threads each cost, and their tokens."""
    head, threads = server.head(), server_stats(server.proc.pid)[1]
    tokens = register_runs(server.port, [f"bench-poller-{i:05d}" for i in range(count)])
    return {
        "runs": count,
        "appends_per_run": round((server.head() - head) / count, 3),
        "threads_added": server_stats(server.proc.pid)[1] - threads,
        "tokens": tokens,
    }


@click.command("broker")
@click.option("--quick", is_flag=True, help="A smaller run (a few seconds) for CI.")
@click.option("--json", "as_json", is_flag=True, help="Print the figures and targets as one JSON object.")
@click.option("--agents", type=click.IntRange(2, 256), help="Concurrent agents (runs and connections).")
@click.option("--reports", type=click.IntRange(1), help="Reports per round at most, all agents together.")
@click.option("--seconds", type=click.FloatRange(0.01), help="Time box of a report round.")
@click.option("--pushes", type=click.IntRange(1), help="Deliveries to time.")
@click.option("--rounds", type=click.IntRange(1), help="Report rounds (the best counts).")
@click.option("--polls", type=click.IntRange(1), help="Idle long polls held at once (one run each).")
@capacity_options("1000,5000,10000; --quick 500")
@temp_dir_option
@click.option(
    "--db",
    "pg_url",
    metavar="postgresql://…",
    help="Also report to one and to two servers on this PostgreSQL database, each in a temporary schema.",
)
def bench_broker(
    quick: bool,
    as_json: bool,
    agents: int | None,
    reports: int | None,
    seconds: float | None,
    pushes: int | None,
    rounds: int | None,
    polls: int | None,
    levels: tuple[int, ...] | None,
    window: float | None,
    parent: str | None,
    pg_url: str | None,
) -> None:
    """The HTTP broker: reports/s, CPU per report, push → poll and ask → reply, next to the stack's ceiling.

    Starts `flightlog serve` on a temporary database in a child process, registers a run per
    agent, and drives it over loopback: reports from every agent at once, then pushes to
    agents waiting in long polls, then asks from one agent answered by another, then registers
    a thousand runs (appends and threads counted) and holds one idle long poll for each. Then,
    on a fresh server per level, thousands of agents long-poll at once (--capacity): the empty
    poll's CPU, then reports and pushes beside the polls (polls on time, push → poll). The same
    uvicorn and Starlette answering the same bodies without storing them (the ceiling), and
    raw sqlite3 single-row commits, are measured in the same run. Each figure is checked
    against its target (PASS/MISS). With --db postgresql://…, every round also reports to one
    server on PostgreSQL and to two sharing it (the agents split between them), and the
    PostgreSQL/SQLite and two-servers/one ratios are taken round by round.

    \b
    Example:
      flightlog bench broker --quick
      flightlog bench broker --json > broker.json
      flightlog bench broker --db postgresql://localhost/flightlog
    """
    sizes = QUICK if quick else FULL_RUN
    sizes = replace(
        sizes,
        agents=agents or sizes.agents,
        reports=reports or sizes.reports,
        seconds=seconds or sizes.seconds,
        pushes=pushes or sizes.pushes,
        rounds=rounds or sizes.rounds,
        polls=polls or sizes.polls,
        capacity=levels or sizes.capacity,
        window=window or sizes.window,
    )
    if pg_url:
        require_extra("psycopg", "postgres", "flightlog bench broker --db postgresql://…")
        shown_url = w.check_pg(pg_url)
    result = with_status("bench broker", lambda update: run(sizes, parent, update, pg_url))
    if pg_url:
        result["settings"]["postgres"]["url"] = shown_url
    if as_json:
        emit_json(result)
    else:
        print_report(result)
