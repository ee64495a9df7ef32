"""Many agents long-polling one server at once: what a waiting poll costs, and whether polls stay on time.

One level of `capacity` is `agents` runs, each holding a `/poll-control` on its own keep-alive
connection and polling again as soon as it is answered (their first polls spread over one
poll timeout, as agents that started at different moments). Then two windows, each measured
on the server (CPU from `/proc`, every thread) and counted by the client:

- **idle**: nothing but the polls, all on empty queues: the server's CPU per answered poll is
  the empty long poll's cost (every one of them waited its whole timeout).
- **loaded**: the same polls while `REPORTERS` more runs post `/report` at the most a run may
  write by default (`REPORT_RATE` a second each, as soon as answered if the server is slower
  than that), and an operator pushes a message to one poller after another
  (`/push-control`, one in flight at a time), timing push → the poll's answer holding it. The
  CPU per report is the window's CPU less what its polls cost at the idle rate.

A poll is on time if it is answered within the server's poll timeout plus `SLACK` of its
request being written (a poll carrying a message is answered early). Any answer but a 200, or
a connection the server closed, is an error. The server's RSS is read with every connection
open, and again once they are all closed. Every client connection is a plain asyncio protocol
of one loop in this process, which reads an answer by its Content-Length and nothing else; the
client's own CPU is reported beside the server's.
"""

from __future__ import annotations

import asyncio
import gc
import itertools
import random
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

import click
import orjson
from rich.table import Table

from actors import Quotas

from . import log_workloads as w
from .approvals import percentile
from .broker_client import WAIT, ServerProcess
from .soak_polls import POLL_TIMEOUT, register_runs, room_for, server_stats

SLACK = 0.5  # seconds an empty poll may be answered after the server's poll timeout
REPORTERS = 16  # runs reporting in the loaded window, each ...
REPORT_RATE = Quotas().events_per_second  # ... at most this often a second: a run's default write rate
PUSH_EVERY = 0.02  # seconds between the end of one push and the next
CONNECT_BATCH = 256  # connections opened at once (the server's accept backlog is larger)
POLLS_TARGET = 0.99  # share of polls on time, at least
PUSH_P99_TARGET_MS = 100.0  # push → poll answer p99 under load, at most
RSS_TARGET_MIB = 300.0  # server RSS with every agent connected, at most
EMPTY_POLL_TARGET_US = 80.0  # server CPU per empty long poll, at most
REPORT_CPU_TARGET_US = 100.0  # server CPU per durable report beside the polls, at most


def request_bytes(path: str, body: bytes, headers: str = "") -> bytes:
    """An HTTP/1.1 POST of a JSON `body` (with extra header lines `headers`, each ending CRLF)."""
    head = f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n{headers}"
    return f"{head}Content-Length: {len(body)}\r\n\r\n".encode() + body


class Wire(asyncio.Protocol):
    """One keep-alive connection: one request at a time, `answered(status, body, seconds)` per answer."""

    def __init__(
        self, answered: Callable[[Wire, int, bytes, float], object], lost: Callable[[], object]
    ) -> None:
        self.answered = answered
        self.lost = lost
        self.transport: asyncio.Transport | None = None
        self.buffer = b""
        self.request = b""  # what this connection sends again and again
        self.due = 0.0  # when it sends that next (the loop's time), for a paced sender
        self.sent = 0.0
        self.closing = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def send(self, request: bytes | None = None) -> None:
        """Write `request` (None: this connection's own)."""
        assert self.transport is not None
        self.sent = time.perf_counter()
        self.transport.write(self.request if request is None else request)

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        while (end := self.buffer.find(b"\r\n\r\n")) >= 0:
            head = self.buffer[:end].lower()
            length = 0
            at = head.find(b"\r\ncontent-length:")
            if at >= 0:
                stop = head.find(b"\r\n", at + 2)
                length = int(head[at + 17 : stop if stop >= 0 else end])
            if len(self.buffer) < end + 4 + length:
                return
            body = self.buffer[end + 4 : end + 4 + length]
            self.buffer = self.buffer[end + 4 + length :]
            self.answered(self, int(head[9:12]), body, time.perf_counter() - self.sent)

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.closing:
            self.lost()

    def close(self) -> None:
        self.closing = True
        if self.transport is not None:
            self.transport.close()


@dataclass
class Counts:
    """What the client saw in one window."""

    polls: int = 0
    on_time: int = 0
    reports: int = 0
    errors: list[str] = field(default_factory=list)
    deliveries: list[float] = field(default_factory=list)  # push → poll answer, seconds


class Agents:
    """The pollers, reporters and pusher of one level, on this process's event loop."""

    def __init__(
        self, port: int, polls: dict[str, str], reports: dict[str, str], operator_token: str
    ) -> None:
        self.port = port
        self.counts = Counts()
        self.polling = True
        self.reporting = False
        self.pushed: dict[str, float] = {}  # message id -> when its push was written
        self.polls = {rid: request_bytes("/poll-control", orjson.dumps({"run_id": rid, "token": t}))
                      for rid, t in polls.items()}  # fmt: skip
        body = {"state": "working", "payload": {"tool": "shell"}}
        self.reports = [request_bytes("/report", orjson.dumps({"run_id": rid, "token": t, **body}))
                        for rid, t in reports.items()]  # fmt: skip
        self.operator = f"Authorization: Bearer {operator_token}\r\n"
        self.wires: list[Wire] = []

    async def connect(self, count: int, answered: Callable[[Wire, int, bytes, float], object]) -> list[Wire]:
        loop = asyncio.get_running_loop()
        made: list[Wire] = []
        for start in range(0, count, CONNECT_BATCH):
            batch = [
                loop.create_connection(lambda: Wire(answered, self._lost), "127.0.0.1", self.port)
                for _ in range(min(CONNECT_BATCH, count - start))
            ]
            made += [wire for _, wire in await asyncio.gather(*batch)]
        self.wires += made
        return made

    def _lost(self) -> None:
        self.counts.errors.append("the server closed a connection")

    def _polled(self, wire: Wire, status: int, body: bytes, took: float) -> None:
        counts = self.counts
        counts.polls += 1
        if status != 200:
            counts.errors.append(f"/poll-control answered {status}: {body[:200]!r}")
        elif body != b"null\n":
            now = time.perf_counter()
            for message in orjson.loads(body):
                sent = self.pushed.pop(message["id"], None)
                if sent is not None:
                    counts.deliveries.append(now - sent)
            counts.on_time += 1
        elif took <= POLL_TIMEOUT + SLACK:
            counts.on_time += 1
        if self.polling:
            wire.send()

    def _reported(self, wire: Wire, status: int, body: bytes, took: float) -> None:
        if status != 200:
            self.counts.errors.append(f"/report answered {status}: {body[:200]!r}")
        self.counts.reports += 1
        if self.reporting:
            # The next report at the run's pace, or at once if this answer came later than that.
            loop = asyncio.get_running_loop()
            wire.due = max(loop.time(), wire.due + 1 / REPORT_RATE)
            loop.call_at(wire.due, self._report_again, wire)

    def _report_again(self, wire: Wire) -> None:
        if self.reporting:
            wire.send()

    async def start_polls(self) -> None:
        """Connect every poller, then send their first polls spread over one poll timeout."""
        wires = await self.connect(len(self.polls), self._polled)
        loop = asyncio.get_running_loop()
        for k, (wire, request) in enumerate(zip(wires, self.polls.values(), strict=True)):
            wire.request = request
            loop.call_later(POLL_TIMEOUT * k / len(wires), wire.send)

    async def load(self, seconds: float) -> None:
        """Reports from every reporter and pushes one after another, for `seconds`."""
        wires = await self.connect(len(self.reports), self._reported)
        self.reporting = True
        now = asyncio.get_running_loop().time()
        for wire, request in zip(wires, self.reports, strict=True):
            wire.request = request
            wire.due = now
            wire.send()
        try:
            await self._push(seconds)
        finally:
            self.reporting = False

    async def _push(self, seconds: float) -> None:
        loop = asyncio.get_running_loop()
        answers: asyncio.Queue[tuple[int, bytes]] = asyncio.Queue()
        _, pusher = await loop.create_connection(
            lambda: Wire(lambda w, s, b, t: answers.put_nowait((s, b)), self._lost), "127.0.0.1", self.port
        )
        self.wires.append(pusher)
        order = list(self.polls)
        random.Random(7).shuffle(order)
        end = time.perf_counter() + seconds
        for n, run_id in enumerate(itertools.cycle(order)):
            if time.perf_counter() >= end:
                break
            message_id = f"capacity-{n}"
            body = orjson.dumps({"id": message_id, "type": "steer", "run_id": run_id, "payload": {"n": n}})
            self.pushed[message_id] = time.perf_counter()
            pusher.send(request_bytes("/push-control", body, self.operator))
            status, answer = await asyncio.wait_for(answers.get(), WAIT)
            if status != 200:
                self.counts.errors.append(f"/push-control answered {status}: {answer[:200]!r}")
            await asyncio.sleep(PUSH_EVERY)

    def close(self) -> None:
        self.polling = self.reporting = False
        for wire in self.wires:
            wire.close()


@dataclass(frozen=True)
class Window:
    """A window's counts with the server's and this process's CPU seconds over it."""

    counts: Counts
    seconds: float
    server_cpu: float
    client_cpu: float


async def _window(server: ServerProcess, agents: Agents, seconds: float, load: bool) -> Window:
    agents.counts = Counts()
    cpu, mine, started = server.cpu_seconds(), time.process_time(), time.perf_counter()
    if load:
        await agents.load(seconds)
    else:
        await asyncio.sleep(seconds)
    counts = agents.counts
    return Window(
        counts, time.perf_counter() - started, server.cpu_seconds() - cpu, time.process_time() - mine
    )


def level(parent: str | None, agents: int, seconds: float) -> dict[str, Any]:
    """One level on a fresh server: `agents` pollers idle, then loaded, for `seconds` each; its figures.

    The server runs with no per-run write rate, so that the reporters are answered as fast as
    they can be (the default would refuse them after a burst).
    """
    operator_token = secrets.token_hex(16)
    with w.fresh_path(parent, "capacity.db") as path:
        server = ServerProcess(path, operator_token, ("--events-per-second", "0"))
        try:
            return _level(server, operator_token, agents, seconds)
        finally:
            server.close()


def _level(server: ServerProcess, operator_token: str, agents: int, seconds: float) -> dict[str, Any]:
    tokens = register_runs(server.port, [f"poller-{i:05d}" for i in range(agents)])
    reporters = register_runs(server.port, [f"reporter-{i:02d}" for i in range(REPORTERS)])
    room_for(agents + REPORTERS + 100)
    rss_before = server_stats(server.proc.pid)[0]

    async def main() -> tuple[Window, Window, float]:
        crowd = Agents(server.port, tokens, reporters, operator_token)
        try:
            await crowd.start_polls()
            await asyncio.sleep(POLL_TIMEOUT + SLACK)  # every poller has polled once
            idle = await _window(server, crowd, seconds, load=False)
            loaded = await _window(server, crowd, seconds, load=True)
            return idle, loaded, server_stats(server.proc.pid)[0]
        finally:
            crowd.close()

    # This process's collector pausing its loop with thousands of connections open would be
    # counted as the server's lateness: it waits until the end.
    gc.disable()
    try:
        idle, loaded, rss_open = asyncio.run(main())
    finally:
        gc.enable()
    server.health()  # the server has taken in the closes before its RSS is read again
    return _figures(agents, idle, loaded, (rss_before, rss_open, server_stats(server.proc.pid)[0]))


def _figures(agents: int, idle: Window, loaded: Window, rss: tuple[float, float, float]) -> dict[str, Any]:
    poll_us = idle.server_cpu * 1e6 / max(idle.counts.polls, 1)
    # (Never below nothing: a server starved of CPU answers fewer polls loaded than idle.)
    report_cpu = max(0.0, loaded.server_cpu - poll_us * 1e-6 * loaded.counts.polls)
    polls = idle.counts.polls + loaded.counts.polls
    on_time = idle.counts.on_time + loaded.counts.on_time
    deliveries = loaded.counts.deliveries
    errors = idle.counts.errors + loaded.counts.errors
    if not deliveries or errors:
        # The bench's own figures would mean nothing: say what went wrong instead.
        what = errors[0] if errors else "no push reached a poll"
        raise click.ClickException(f"{agents:,} agents long-polling: {what} ({len(errors)} errors)")
    return {
        "agents": agents,
        "polls": polls,
        "polls_per_s": round(idle.counts.polls / idle.seconds, 1),
        "polls_on_time": round(on_time / max(polls, 1), 4),
        "empty_poll_cpu_us": round(poll_us, 1),
        "reports_per_s": round(loaded.counts.reports / loaded.seconds, 1),
        "report_cpu_us": round(report_cpu * 1e6 / max(loaded.counts.reports, 1), 1),
        "push_p50_ms": round(percentile(deliveries, 50) * 1000, 2),
        "push_p99_ms": round(percentile(deliveries, 99) * 1000, 2),
        "pushes": len(deliveries),
        "errors": len(errors),
        "rss_before_mib": round(rss[0], 1),
        "rss_open_mib": round(rss[1], 1),
        "rss_closed_mib": round(rss[2], 1),
        "server_cpu_idle": round(idle.server_cpu / idle.seconds, 3),  # cores
        "client_cpu_idle": round(idle.client_cpu / idle.seconds, 3),
        "client_cpu_loaded": round(loaded.client_cpu / loaded.seconds, 3),
    }


def capacity(
    parent: str | None, levels: tuple[int, ...], seconds: float, advance: Callable[[str], object]
) -> list[dict[str, Any]]:
    """Every level in turn, each on a fresh server; the figures of each."""
    results = []
    for agents in levels:
        advance(f"capacity: {agents:,} agents long-polling")
        results.append(level(parent, agents, seconds))
    return results


def capacity_targets(results: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Each level's targets: polls on time, push → poll p99, RSS, no error; empty poll and report CPU."""
    targets: dict[str, dict[str, Any]] = {}
    for r in results:
        n = r["agents"]

        def target(name: str, label: str, value: float, goal: float, at_most: bool, n: int = n) -> None:
            met = value <= goal if at_most else value >= goal
            targets[f"capacity_{n}_{name}"] = {"label": f"{n:,} agents: {label}", "value": value,
                                               "target": goal, "at_most": at_most, "pass": met}  # fmt: skip

        target("on_time", f"share of polls answered within {POLL_TIMEOUT:g} + {SLACK:g} s",
               r["polls_on_time"], POLLS_TARGET, False)  # fmt: skip
        target(
            "push_p99",
            "push → poll answer p99 under reports (ms)",
            r["push_p99_ms"],
            PUSH_P99_TARGET_MS,
            True,
        )
        target("rss", "server RSS with every agent connected (MiB)", r["rss_open_mib"], RSS_TARGET_MIB, True)
        target(
            "poll_cpu",
            "server CPU per empty long poll (µs)",
            r["empty_poll_cpu_us"],
            EMPTY_POLL_TARGET_US,
            True,
        )
        target("report_cpu", "server CPU per durable report beside the polls (µs)", r["report_cpu_us"],
               REPORT_CPU_TARGET_US, True)  # fmt: skip
    return targets


F = TypeVar("F", bound=Callable[..., Any])


def capacity_options(defaults: str) -> Callable[[F], F]:
    """A bench command's --capacity (as `levels`) and --window options; `defaults` says its default levels."""

    def add(fn: F) -> F:
        fn = click.option(
            "--window",
            type=click.FloatRange(1.0),
            help="Seconds each capacity level is measured idle, then loaded.",
        )(fn)
        return click.option(
            "--capacity",
            "levels",
            metavar="N,N,…",
            callback=lambda ctx, param, value: None if value is None else parse_levels(value),
            help=f"Agents long-polling at each capacity level (default {defaults}).",
        )(fn)

    return add


def parse_levels(text: str) -> tuple[int, ...]:
    """`1000,5000,10000` as a tuple of agent counts (a click callback's work)."""
    try:
        levels = tuple(int(part) for part in text.split(",") if part.strip())
    except ValueError:
        raise click.BadParameter("agent counts separated by commas, e.g. 1000,5000,10000") from None
    if not levels or any(n < 1 or n > 15_000 for n in levels):
        raise click.BadParameter("each level is 1 to 15,000 agents")
    return levels


# The figures of a level, in the order they are shown, with their rows' labels.
ROWS = (
    ("polls_per_s", "long polls answered per second, idle", "{:,.0f}"),
    ("empty_poll_cpu_us", "server CPU per empty long poll (µs)", "{:,.1f}"),
    ("polls_on_time", f"share of polls answered within {POLL_TIMEOUT:g} + {SLACK:g} s", "{:.4f}"),
    ("reports_per_s", f"durable reports/s from {REPORTERS} runs (at most {REPORT_RATE:g}/s each)", "{:,.0f}"),
    ("report_cpu_us", "server CPU per durable report beside the polls (µs)", "{:,.1f}"),
    ("push_p50_ms", "push → poll answer p50 (ms)", "{:,.2f}"),
    ("push_p99_ms", "push → poll answer p99 (ms)", "{:,.2f}"),
    ("rss_before_mib", "server RSS before connecting (MiB)", "{:,.1f}"),
    ("rss_open_mib", "server RSS with every agent connected (MiB)", "{:,.1f}"),
    ("rss_closed_mib", "server RSS once they closed (MiB)", "{:,.1f}"),
    ("server_cpu_idle", "server CPU while the polls idle (cores)", "{:.3f}"),
    ("client_cpu_idle", "this bench's own CPU meanwhile (cores)", "{:.3f}"),
)


def capacity_figures(results: list[dict[str, Any]]) -> dict[str, float]:
    """The levels' figures, flat: `capacity.<agents>.<figure>`."""
    return {f"capacity.{r['agents']}.{key}": r[key] for r in results for key, _, _ in ROWS}


def capacity_table(figures: dict[str, Any], levels: list[int]) -> Table:
    """The levels' figures (`capacity_figures`) side by side, a column each."""
    table = Table(title="many agents long-polling, each level on a fresh server")
    table.add_column("figure")
    for agents in levels:
        table.add_column(f"{agents:,} agents", justify="right")
    for key, label, shown in ROWS:
        table.add_row(label, *(shown.format(figures[f"capacity.{n}.{key}"]) for n in levels))
    return table
