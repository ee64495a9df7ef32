"""`flightlog bench approvals`: the approval gate's latency and throughput next to raw SQLite.

Two workloads, both on a temporary file at `synchronous=FULL` in WAL mode:

- **latency**: one requester thread blocks in `ApprovalQueue.request`; the main thread waits
  for the publication (`subscribe`), reads the pending id, resolves it, and the cycle ends
  when the requester returns. The cycle holds two durable commits (the request, the
  decision), so it is measured next to raw sqlite3 doing two single-row INSERT transactions,
  interleaved in the same run.
- **concurrent**: a hundred requester threads block in `request` at once; a few operator
  threads resolve them all. Decisions per second run from the operators' start to the last
  requester's return.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import statistics
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from typing import Any

import click
import orjson
from rich.table import Table

from actors import ApprovalRequest, System
from eventlog import NewEvent, open_log

from .._output import console, emit_json, targets_table, temp_dir_option, with_status

SYNC = "FULL"
WAIT = 60.0  # seconds any one step may take before the benchmark gives up
# The lean row flightlog's SQLite log stores: JSON TEXT, a 16-byte event id, a 32-byte hash.
COLUMNS = "seq, stream, version, type, schema, data, meta, event_id, recorded_at, hash"
_INSERT = f"INSERT INTO events ({COLUMNS}) VALUES (?,?,?,?,?,?,?,?,?,?)"
_NO_HASH = bytes(32)  # raw sqlite3 stores a placeholder: it is the floor, not a hash chain

REQUEST = ApprovalRequest(
    kind="shell",
    title="rm -rf build",
    detail="delete the build folder before a clean build",
    risk="high",
    run_id="bench-run",
    tool_call_id="call-1",
    payload={"command": "rm -rf build", "cwd": "/tmp/workspace"},
)


@dataclass(frozen=True)
class Sizes:
    """How much each workload does."""

    samples: int  # latency cycles (and raw commit pairs)
    warmup: int  # cycles run first and not counted
    requests: int  # concurrent waiting requests per round
    operators: int  # threads resolving them
    rounds: int  # concurrent rounds; the best counts


QUICK = Sizes(samples=60, warmup=5, requests=100, operators=4, rounds=2)
FULL_RUN = Sizes(samples=400, warmup=20, requests=100, operators=4, rounds=5)

LATENCY_TARGET = 3.0  # cycle p99 / raw two-commit p99, at most
THROUGHPUT_TARGET = 1000.0  # decisions per second with 100 waiting requests, at least


@contextlib.contextmanager
def _fresh(parent: str | None, name: str) -> Iterator[str]:
    with tempfile.TemporaryDirectory(prefix="flightlog-bench-", dir=parent) as folder:
        yield os.path.join(folder, name)


# -- raw sqlite3: the floor --------------------------------------------------------------------


class RawPair:
    """Two single-row INSERT transactions on the events table, as durable as flightlog's."""

    def __init__(self, path: str) -> None:
        open_log(path, synchronous=SYNC).close()  # the very same schema, by the same migration
        self.conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        self.conn.execute("PRAGMA journal_mode = WAL")
        self.conn.execute(f"PRAGMA synchronous = {SYNC}")
        self.seq = 0
        data = {"approval_id": "x" * 36, "decision": "approve", "actor": "operator"}
        self.data = orjson.dumps(data, option=orjson.OPT_SORT_KEYS).decode()

    def _commit(self, version: int) -> None:
        self.seq += 1
        row = (
            self.seq,
            f"approval-{self.seq // 2}",
            version,
            "ApprovalDecided",
            1,
            self.data,
            '{"actor":"operator"}',
            uuid.UUID(NewEvent("X").event_id).bytes,
            time.time_ns() // 1000,
            _NO_HASH,
        )
        self.conn.execute("BEGIN IMMEDIATE")
        self.conn.execute(_INSERT, row)
        self.conn.execute("COMMIT")

    def measure(self) -> float:
        start = time.perf_counter()
        self._commit(1)
        self._commit(2)
        return time.perf_counter() - start

    def close(self) -> None:
        self.conn.close()


# -- flightlog: one request at a time ----------------------------------------------------------


class Cycle:
    """Request → publication → decision → the requester unblocked, one approval at a time.

    The requester is one long-lived thread, as a harness's would be; the main thread plays
    the operator.
    """

    def __init__(self, system: System) -> None:
        self.system = system
        self.published = threading.Event()
        self.unsubscribe = system.approvals.subscribe(self.published.set)
        self.go = threading.Semaphore(0)
        self.done = threading.Semaphore(0)
        self.times: tuple[float, float] = (0.0, 0.0)
        self.error: BaseException | None = None
        self.closing = False
        self.thread = threading.Thread(target=self._requester, name="bench-requester", daemon=True)
        self.thread.start()

    def _requester(self) -> None:
        approvals = self.system.approvals
        while True:
            self.go.acquire()
            if self.closing:
                return
            try:
                start = time.perf_counter()
                approvals.request(REQUEST)
                self.times = (start, time.perf_counter())
            except BaseException as e:  # noqa: BLE001 - re-raised in the main thread
                self.error = e
                self.published.set()
            self.done.release()

    def measure(self) -> tuple[float, float]:
        """Seconds for the whole cycle, and for decision → requester unblocked."""
        approvals = self.system.approvals
        self.published.clear()
        self.go.release()
        if not self.published.wait(WAIT):
            raise click.ClickException("the request was never published")
        if self.error is not None:
            raise self.error
        pending = approvals.pending()
        decide = time.perf_counter()
        approvals.resolve(pending[0].id, "approve", "bench-operator")
        if not self.done.acquire(timeout=WAIT):
            raise click.ClickException("the requester was never unblocked")
        if self.error is not None:
            raise self.error
        start, returned = self.times
        return returned - start, returned - decide

    def close(self) -> None:
        self.unsubscribe()
        self.closing = True
        self.go.release()
        self.thread.join(WAIT)


def percentile(samples: list[float], p: float) -> float:
    """The p-th percentile (0-100) by the nearest-rank method."""
    ordered = sorted(samples)
    rank = max(1, min(len(ordered), round(p / 100 * len(ordered) + 0.5)))
    return ordered[rank - 1]


def run_latency(sizes: Sizes, parent: str | None, advance: Callable[[str], object]) -> dict[str, float]:
    cycles: list[float] = []
    decides: list[float] = []
    raws: list[float] = []
    with _fresh(parent, "flightlog.db") as path, _fresh(parent, "raw.db") as raw_path:
        raw = RawPair(raw_path)
        system = System.open(path, synchronous=SYNC)
        cycle = Cycle(system)
        try:
            for _ in range(sizes.warmup):
                cycle.measure()
                raw.measure()
            # Interleaved, so both sides see the same moments of a noisy machine.
            for i in range(sizes.samples):
                total, decided = cycle.measure()
                cycles.append(total)
                decides.append(decided)
                raws.append(raw.measure())
                if i % 20 == 0:
                    advance(f"latency: {i}/{sizes.samples}")
        finally:
            cycle.close()
            system.close()
            raw.close()
    ms = 1000.0
    return {
        "cycle_p50_ms": percentile(cycles, 50) * ms,
        "cycle_p99_ms": percentile(cycles, 99) * ms,
        "decide_p50_ms": percentile(decides, 50) * ms,
        "decide_p99_ms": percentile(decides, 99) * ms,
        "raw_two_commits_p50_ms": percentile(raws, 50) * ms,
        "raw_two_commits_p99_ms": percentile(raws, 99) * ms,
    }


# -- flightlog: many waiting requests, a few operators -----------------------------------------


def concurrent_round(system: System, requests: int, operators: int) -> float:
    """Decisions per second: `requests` blocked requesters, `operators` threads resolving."""
    approvals = system.approvals
    published = threading.Semaphore(0)
    unsubscribe = approvals.subscribe(published.release)
    errors: list[BaseException] = []

    def requester() -> None:
        try:
            approvals.request(REQUEST)
        except BaseException as e:  # noqa: BLE001 - re-raised in the main thread below
            errors.append(e)
            published.release()

    waiting = [threading.Thread(target=requester, daemon=True) for _ in range(requests)]
    try:
        for thread in waiting:
            thread.start()
        # No decision is made before every request is published, so each call is a publication.
        for _ in range(requests):
            if not published.acquire(timeout=WAIT):
                raise click.ClickException("the requests were never all published")
        if errors:
            raise errors[0]
    finally:
        unsubscribe()
    ids = [a.id for a in approvals.pending()]
    if len(ids) != requests:
        raise click.ClickException(f"expected {requests} pending approvals, found {len(ids)}")
    gate = threading.Barrier(operators + 1)

    def operator(share: list[str]) -> None:
        try:
            gate.wait()
            for id in share:
                approvals.resolve(id, "approve", "bench-operator")
        except BaseException as e:  # noqa: BLE001 - re-raised in the main thread below
            errors.append(e)

    resolving = [
        threading.Thread(target=operator, args=(ids[k::operators],), daemon=True) for k in range(operators)
    ]
    for thread in resolving:
        thread.start()
    gate.wait()
    start = time.perf_counter()
    for thread in waiting:
        thread.join(WAIT)
    elapsed = time.perf_counter() - start
    for thread in resolving:
        thread.join(WAIT)
    if errors:
        raise errors[0]
    if any(t.is_alive() for t in waiting):
        raise click.ClickException("some requesters were never unblocked")
    return requests / max(elapsed, 1e-9)


def run_concurrent(sizes: Sizes, parent: str | None, advance: Callable[[str], object]) -> dict[str, float]:
    rates: list[float] = []
    with _fresh(parent, "flightlog.db") as path:
        system = System.open(path, synchronous=SYNC)
        try:
            concurrent_round(system, min(sizes.requests, 10), sizes.operators)  # warm-up
            system.passivate()
            for r in range(sizes.rounds):
                advance(f"concurrent: round {r + 1}/{sizes.rounds}")
                rates.append(concurrent_round(system, sizes.requests, sizes.operators))
                system.passivate()  # decided approvals' actors stop, as an idle server's would
        finally:
            system.close()
    return {"decisions_per_s": max(rates), "decisions_per_s_median": statistics.median(rates)}


# -- the run -----------------------------------------------------------------------------------


def run(sizes: Sizes, parent: str | None, advance: Callable[[str], object]) -> dict[str, Any]:
    """Run both workloads; return figures, ratios and settings as one JSON-able dict."""
    latency = run_latency(sizes, parent, advance)
    concurrent = run_concurrent(sizes, parent, advance)
    ratio = latency["cycle_p99_ms"] / latency["raw_two_commits_p99_ms"]
    rate = concurrent["decisions_per_s"]
    figures = {f"latency.{k}": round(v, 3) for k, v in latency.items()}
    figures.update({f"concurrent.{k}": round(v, 1) for k, v in concurrent.items()})
    return {
        "figures": figures,
        "ratios": {
            "cycle_p99_vs_raw_two_commits_p99": {
                "label": "request → decide → unblocked p99 / raw two commits p99",
                "value": round(ratio, 3),
                "target": LATENCY_TARGET,
                "at_most": True,
                "pass": ratio <= LATENCY_TARGET,
            },
            "concurrent_decisions_per_s": {
                "label": f"decisions/s, {sizes.requests} waiting requests, {sizes.operators} operators",
                "value": round(rate, 1),
                "target": THROUGHPUT_TARGET,
                "at_most": False,
                "pass": rate >= THROUGHPUT_TARGET,
            },
        },
        "settings": {
            "journal_mode": "WAL",
            "synchronous": SYNC,
            "samples": sizes.samples,
            "warmup": sizes.warmup,
            "requests": sizes.requests,
            "operators": sizes.operators,
            "rounds": sizes.rounds,
            "sqlite": sqlite3.sqlite_version,
        },
    }


def _report(result: dict[str, Any]) -> None:
    fig = result["figures"]
    table = Table(title="flightlog bench approvals (ms)")
    for name in ("", "p50", "p99"):
        table.add_column(name, justify="right" if name else "left")
    for key, label in (
        ("cycle", "request → decide → requester unblocked"),
        ("decide", "  of which: decide → requester unblocked"),
        ("raw_two_commits", "raw sqlite3: two single-row commits"),
    ):
        table.add_row(label, f"{fig[f'latency.{key}_p50_ms']:.2f}", f"{fig[f'latency.{key}_p99_ms']:.2f}")
    console.print(table)
    st = result["settings"]
    console.print(
        f"concurrent: {fig['concurrent.decisions_per_s']:,.0f} decisions/s best of {st['rounds']} "
        f"(median {fig['concurrent.decisions_per_s_median']:,.0f}) with {st['requests']} requests "
        f"waiting and {st['operators']} operator threads",
        soft_wrap=True,
    )
    console.print(targets_table(result["ratios"].values(), at_most_unit="x"))
    console.print(
        f"WAL, synchronous={st['synchronous']} on both sides; SQLite {st['sqlite']}; "
        f"{st['samples']} latency samples after {st['warmup']} warm-up cycles.",
        soft_wrap=True,
    )


@click.command("approvals")
@click.option("--quick", is_flag=True, help="A smaller run (a few seconds) for CI.")
@click.option("--json", "as_json", is_flag=True, help="Print the figures and targets as one JSON object.")
@click.option("--samples", type=click.IntRange(1), help="Latency cycles to measure.")
@click.option("--requests", type=click.IntRange(1), help="Concurrent waiting requests per round.")
@click.option("--operators", type=click.IntRange(1, 64), help="Threads resolving them.")
@click.option("--rounds", type=click.IntRange(1), help="Concurrent rounds (the best counts).")
@temp_dir_option
def bench_approvals(
    quick: bool,
    as_json: bool,
    samples: int | None,
    requests: int | None,
    operators: int | None,
    rounds: int | None,
    parent: str | None,
) -> None:
    """The approval gate: decision latency next to raw SQLite, and decisions per second.

    Prints request → decide → unblocked latency (p50, p99) next to two raw durable SQLite
    commits measured in the same run, and how many decisions per second a few operators
    make while a hundred requests wait; each against its target (PASS/MISS).

    \b
    Example:
      flightlog bench approvals --quick
      flightlog bench approvals --json > approvals.json
    """
    sizes = QUICK if quick else FULL_RUN
    sizes = replace(
        sizes,
        samples=samples or sizes.samples,
        warmup=min(sizes.warmup, samples or sizes.warmup),
        requests=requests or sizes.requests,
        operators=operators or sizes.operators,
        rounds=rounds or sizes.rounds,
    )

    result = with_status("bench approvals", lambda update: run(sizes, parent, update))
    if as_json:
        emit_json(result)
    else:
        _report(result)
