"""`flightlog bench broker`: the HTTP broker under 16 agents, next to raw SQLite's commit rate.

A real server — `flightlog serve` on a temporary file at `synchronous=FULL` in WAL mode —
runs in its own process, so the load below never shares its interpreter lock. Agents talk
to it over loopback, one keep-alive connection each:

- **reports**: every agent posts `/report` as fast as its answers come back; each answer
  comes only after the report's commit, so reports/s is a durable rate. The runs' report
  counts are checked against the acknowledgements afterwards.
- **delivery**: every agent long-polls `/poll-control`; one pusher sends a message to each
  agent in turn over `/push-control` (operator Bearer token) and times push → the poll's
  answer holding it, one message in flight at a time.
- **asks**: one agent asks another (`/send` with `expects_reply`) and waits in `/wait_reply`;
  the other long-polls, and answers each ask with a reply (`/send` with `reply_to`). Timed
  from the ask to the wait's answer, one ask in flight at a time.
- **raw**: raw sqlite3 inserting one row per transaction into the same schema, in the same
  run: the durable-commit rate the server is measured against.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import sqlite3
import statistics
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from typing import Any

import click
import orjson
from rich.table import Table

from .._output import console, emit_json, targets_table, temp_dir_option, with_status
from . import log_workloads as w
from .approvals import percentile
from .broker_client import WAIT, Agent, Connection, ServerProcess

REPORTS_TARGET = 2000.0  # durable reports per second with 16 agents, at least
DELIVERY_P99_TARGET = 50.0  # push → poll answer p99 in ms, at most


@dataclass(frozen=True)
class Sizes:
    """How much each workload does."""

    agents: int  # concurrent agents, one run and one connection each
    reports: int  # reports per round at most (all agents together)
    seconds: float  # time box of a report round and of the raw commit phase
    pushes: int  # delivery samples
    rounds: int  # report and raw rounds, interleaved; the best counts


QUICK = Sizes(agents=16, reports=3000, seconds=1.5, pushes=80, rounds=1)
FULL_RUN = Sizes(agents=16, reports=30_000, seconds=4.0, pushes=500, rounds=3)


# -- the server --------------------------------------------------------------------------------


@contextlib.contextmanager
def served(parent: str | None, agents: int) -> Iterator[tuple[ServerProcess, list[Agent], Connection]]:
    """A fresh server, `agents` registered runs with a connection each, and the operator's connection."""
    operator_token = secrets.token_hex(16)
    with w.fresh_path(parent, "flightlog.db") as path:
        server = ServerProcess(path, operator_token)
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
            yield server, team, operator
        finally:
            for conn in opened:
                conn.close()
            server.close()


# -- reports -----------------------------------------------------------------------------------


def report_round(team: list[Agent], operator: Connection, total: int, seconds: float) -> float:
    """Durable reports per second: every agent reports until `total` together, or time is up."""
    share = max(1, total // len(team))
    gate = threading.Barrier(len(team) + 1)
    deadline = [0.0]
    acked = [0] * len(team)
    errors: list[BaseException] = []

    def agent(k: int, a: Agent) -> None:
        body = orjson.dumps(
            {"run_id": a.run_id, "token": a.token, "state": "working", "payload": {"tool": "shell", "n": k}}
        )
        try:
            gate.wait(WAIT)
            end = deadline[0]
            for _ in range(share):
                status, answer = a.conn.post("/report", body)
                if status != 200:
                    raise click.ClickException(f"/report answered {status}: {answer[:200]!r}")
                acked[k] += 1
                if time.perf_counter() >= end:
                    break
        except BaseException as e:  # noqa: BLE001 - re-raised in the main thread below
            errors.append(e)

    before = _report_counts(operator)
    threads = [threading.Thread(target=agent, args=(k, a), daemon=True) for k, a in enumerate(team)]
    for thread in threads:
        thread.start()
    start = time.perf_counter()
    deadline[0] = start + seconds
    gate.wait(WAIT)
    for thread in threads:
        thread.join(WAIT + seconds)
    elapsed = time.perf_counter() - start
    if errors:
        raise errors[0]
    if any(t.is_alive() for t in threads):
        raise click.ClickException("some agents never finished reporting")
    # Each acknowledgement came after a commit: the log must hold every one of them.
    after = _report_counts(operator)
    recorded = sum(after.get(a.run_id, 0) - before.get(a.run_id, 0) for a in team)
    if recorded != sum(acked):
        raise click.ClickException(f"{sum(acked)} reports acknowledged but {recorded} recorded")
    return sum(acked) / max(elapsed, 1e-9)


def _report_counts(operator: Connection) -> dict[str, int]:
    status, body = operator.request("GET", "/api/v1/runs")
    if status != 200:
        raise click.ClickException(f"/api/v1/runs answered {status}")
    return {r["run_id"]: int(r.get("report_count", 0)) for r in orjson.loads(body)["runs"]}


# -- delivery ----------------------------------------------------------------------------------


def delivery(team: list[Agent], operator: Connection, pushes: int) -> list[float]:
    """Seconds from each push's send to the answer of the poll that carries it."""
    arrived: dict[str, float] = {}
    landed = threading.Condition()
    stop = threading.Event()
    errors: list[BaseException] = []

    def poller(a: Agent) -> None:
        body = orjson.dumps({"run_id": a.run_id, "token": a.token})
        try:
            while not stop.is_set():
                status, answer = a.conn.post("/poll-control", body)
                now = time.perf_counter()
                if status != 200:
                    raise click.ClickException(f"/poll-control answered {status}")
                messages = orjson.loads(answer) or []
                if messages:
                    with landed:
                        for m in messages:
                            arrived[m["id"]] = now
                        landed.notify_all()
        except BaseException as e:  # noqa: BLE001 - re-raised in the main thread below
            errors.append(e)
            with landed:
                landed.notify_all()

    def push(i: int) -> float:
        a = team[i % len(team)]
        message_id = f"m{i}"
        message = {"id": message_id, "type": "steer", "run_id": a.run_id, "payload": {"n": i}}
        sent = time.perf_counter()
        operator.call("/push-control", message)
        with landed:
            if not landed.wait_for(lambda: message_id in arrived or bool(errors), WAIT):
                raise click.ClickException(f"message {message_id} was never delivered")
        if errors:
            raise errors[0]
        return arrived[message_id] - sent

    threads = [threading.Thread(target=poller, args=(a,), daemon=True) for a in team]
    for thread in threads:
        thread.start()
    try:
        for i in range(len(team)):  # warm-up: each agent's first delivery is not counted
            push(-1 - i)
        return [push(i) for i in range(pushes)]
    finally:
        stop.set()
        # Each poll still waiting ends with a last message (or its own timeout).
        for k, a in enumerate(team):
            with contextlib.suppress(click.ClickException):
                operator.call("/push-control", {"id": f"stop{k}", "type": "stop", "run_id": a.run_id})
        for thread in threads:
            thread.join(WAIT)


def asks(team: list[Agent], count: int) -> list[float]:
    """Seconds from each ask to its reply in /wait_reply, between two agents of `team`."""
    asker, answerer = team[0], team[1]
    stop = threading.Event()
    errors: list[BaseException] = []

    def answer() -> None:
        creds: dict[str, Any] = {"run_id": answerer.run_id, "token": answerer.token}
        try:
            while not stop.is_set():
                status, body = answerer.conn.post("/poll-control", orjson.dumps(creds))
                if status != 200:
                    raise click.ClickException(f"/poll-control answered {status}")
                for m in orjson.loads(body) or []:
                    question = m.get("payload") or {}
                    if m["type"] != "agent_message" or not question.get("expects_reply"):
                        continue
                    reply = {"reply_to": question["id"], "message": "yes"}
                    sent = {**creds, "from_run_id": answerer.run_id, "to_run_id": asker.run_id}
                    sent |= {"type": "agent_message", "payload": reply}
                    status, _ = answerer.conn.post("/send", orjson.dumps(sent))
                    if status != 200:
                        raise click.ClickException(f"/send (reply) answered {status}")
        except BaseException as e:  # noqa: BLE001 - re-raised in the main thread below
            errors.append(e)

    thread = threading.Thread(target=answer, name="bench-answerer", daemon=True)
    thread.start()
    creds: dict[str, Any] = {"run_id": asker.run_id, "token": asker.token}
    samples = []
    try:
        for i in range(count):
            question = {"id": f"ask-{i}", "message": "ready?", "expects_reply": True}
            body = {**creds, "from_run_id": asker.run_id, "to_run_id": answerer.run_id}
            body |= {"type": "agent_message", "payload": question}
            start = time.perf_counter()
            status, _ = asker.conn.post("/send", orjson.dumps(body))
            if status != 200:
                raise click.ClickException(f"/send (ask) answered {status}")
            status, _ = asker.conn.post("/wait_reply", orjson.dumps({**creds, "waiting_for": f"ask-{i}"}))
            if status != 200:
                raise click.ClickException(str(errors[0]) if errors else f"/wait_reply answered {status}")
            samples.append(time.perf_counter() - start)
    finally:
        stop.set()
        thread.join(WAIT)
    if errors:
        raise errors[0]
    return samples


# -- the run -----------------------------------------------------------------------------------


def run(sizes: Sizes, parent: str | None, advance: Callable[[str], object]) -> dict[str, Any]:
    """Run every workload; return figures, ratios, targets and settings as one JSON-able dict."""
    rates: list[float] = []
    raw_rates: list[float] = []
    latencies: list[float] = []
    with served(parent, sizes.agents) as (_, team, operator):
        advance("warm-up")
        report_round(team, operator, sizes.agents * 10, sizes.seconds)
        for r in range(sizes.rounds):
            # Interleaved, so both sides see the same moments of a noisy machine.
            advance(f"raw sqlite3: round {r + 1}/{sizes.rounds}")
            with w.fresh_path(parent, "raw.db") as path:
                count, elapsed = w.raw_append(path, sizes.reports, 1, sizes.seconds)
            raw_rates.append(count / max(elapsed, 1e-9))
            advance(f"reports: round {r + 1}/{sizes.rounds}")
            rates.append(report_round(team, operator, sizes.reports, sizes.seconds))
        advance("delivery")
        latencies = delivery(team, operator, sizes.pushes)
        advance("asks")
        round_trips = asks(team, sizes.pushes)
    ms = 1000.0
    figures = {
        "reports.durable_per_s": round(max(rates), 1),
        "reports.durable_per_s_median": round(statistics.median(rates), 1),
        "raw.commits_per_s": round(max(raw_rates), 1),
        "delivery.p50_ms": round(percentile(latencies, 50) * ms, 3),
        "delivery.p99_ms": round(percentile(latencies, 99) * ms, 3),
        "delivery.max_ms": round(max(latencies) * ms, 3),
        "ask.p50_ms": round(percentile(round_trips, 50) * ms, 3),
        "ask.p99_ms": round(percentile(round_trips, 99) * ms, 3),
    }
    rate, p99 = figures["reports.durable_per_s"], figures["delivery.p99_ms"]
    return {
        "figures": figures,
        "ratios": {
            "reports_vs_raw_commits": {
                "label": "durable reports/s over HTTP / raw single-row commits/s",
                "value": round(rate / figures["raw.commits_per_s"], 3),
            },
        },
        "targets": {
            "reports_per_s": {
                "label": f"durable reports/s, {sizes.agents} agents",
                "value": rate,
                "target": REPORTS_TARGET,
                "at_most": False,
                "pass": rate >= REPORTS_TARGET,
            },
            "delivery_p99_ms": {
                "label": "push → poll answer p99 (ms)",
                "value": p99,
                "target": DELIVERY_P99_TARGET,
                "at_most": True,
                "pass": p99 <= DELIVERY_P99_TARGET,
            },
        },
        "settings": {
            "journal_mode": "WAL",
            "synchronous": w.SYNC,
            "agents": sizes.agents,
            "reports": sizes.reports,
            "seconds": sizes.seconds,
            "pushes": sizes.pushes,
            "rounds": sizes.rounds,
            "sqlite": sqlite3.sqlite_version,
            "cpus": os.cpu_count(),
            "load_average": [round(x, 2) for x in os.getloadavg()],
        },
    }


def _report(result: dict[str, Any]) -> None:
    fig, st = result["figures"], result["settings"]
    table = Table(title=f"flightlog bench broker ({st['agents']} agents, best of {st['rounds']})")
    table.add_column("figure")
    table.add_column("value", justify="right")
    table.add_row("durable reports/s over HTTP", f"{fig['reports.durable_per_s']:,.0f}")
    table.add_row("  median of the rounds", f"{fig['reports.durable_per_s_median']:,.0f}")
    table.add_row("raw sqlite3: single-row commits/s", f"{fig['raw.commits_per_s']:,.0f}")
    table.add_row("push → poll answer p50 (ms)", f"{fig['delivery.p50_ms']:.2f}")
    table.add_row("push → poll answer p99 (ms)", f"{fig['delivery.p99_ms']:.2f}")
    table.add_row("push → poll answer max (ms)", f"{fig['delivery.max_ms']:.2f}")
    table.add_row("ask → reply round trip p50 (ms)", f"{fig['ask.p50_ms']:.2f}")
    table.add_row("ask → reply round trip p99 (ms)", f"{fig['ask.p99_ms']:.2f}")
    console.print(table)
    for r in result["ratios"].values():
        console.print(f"{r['label']}: {r['value']:.2f}x", soft_wrap=True)
    console.print(targets_table(result["targets"].values()))
    console.print(
        f"WAL, synchronous={st['synchronous']} on both sides; SQLite {st['sqlite']}, {st['cpus']} CPUs "
        f"(server, agents and raw sqlite3 share them), load average {st['load_average'][0]}; "
        f"report rounds stop after {st['reports']:,} reports or {st['seconds']:g} s; "
        f"{st['pushes']} deliveries and {st['pushes']} asks, one in flight at a time.",
        soft_wrap=True,
    )


@click.command("broker")
@click.option("--quick", is_flag=True, help="A smaller run (a few seconds) for CI.")
@click.option("--json", "as_json", is_flag=True, help="Print the figures and targets as one JSON object.")
@click.option("--agents", type=click.IntRange(2, 256), help="Concurrent agents (runs and connections).")
@click.option("--reports", type=click.IntRange(1), help="Reports per round at most, all agents together.")
@click.option("--seconds", type=click.FloatRange(0.01), help="Time box of a report round.")
@click.option("--pushes", type=click.IntRange(1), help="Deliveries to time.")
@click.option("--rounds", type=click.IntRange(1), help="Report rounds (the best counts).")
@temp_dir_option
def bench_broker(
    quick: bool,
    as_json: bool,
    agents: int | None,
    reports: int | None,
    seconds: float | None,
    pushes: int | None,
    rounds: int | None,
    parent: str | None,
) -> None:
    """The HTTP broker: durable reports/s, push → poll and ask → reply latency, next to raw commits/s.

    Starts `flightlog serve` on a temporary database in a child process, registers a run per
    agent, and drives it over loopback: reports from every agent at once, then pushes to
    agents waiting in long polls, then asks from one agent answered by another. Raw sqlite3
    single-row commits are measured in the same run. Each figure is checked against its target
    (PASS/MISS).

    \b
    Example:
      flightlog bench broker --quick
      flightlog bench broker --json > broker.json
    """
    sizes = QUICK if quick else FULL_RUN
    sizes = replace(
        sizes,
        agents=agents or sizes.agents,
        reports=reports or sizes.reports,
        seconds=seconds or sizes.seconds,
        pushes=pushes or sizes.pushes,
        rounds=rounds or sizes.rounds,
    )
    result = with_status("bench broker", lambda update: run(sizes, parent, update))
    if as_json:
        emit_json(result)
    else:
        _report(result)
