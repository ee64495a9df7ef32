"""`flightlog bench log`: appends and reads, flightlog next to raw sqlite3 and eventsourcing.

Every figure is events per second, measured in this one run, each workload in a fresh
temporary folder, all three sides at `synchronous=FULL` in WAL mode. Write phases stop at a
fixed count or after a few seconds, whichever comes first. Each phase runs `--rounds` times,
the three sides interleaved, and the best round counts: noise on a shared machine only ever
slows a run down.

With `--db postgresql://…` the flightlog workloads also run on that PostgreSQL database, each
in a temporary schema, interleaved with the others; the closing note gives PostgreSQL/SQLite.
"""

from __future__ import annotations

import contextlib
import functools
import os
import sqlite3
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import click
import orjson

from eventlog import open_log

from .._output import emit_json, err_console, progress, require_extra, temp_dir_option
from . import log_ceilings as ceilings
from . import log_workloads as w
from .log_report import (
    BYTES_LABEL,
    BYTES_RATIO,
    BYTES_TARGET,
    CEILINGS,
    NOTES,
    PG_LABELS,
    PG_SIDE,
    RATIOS,
    SIDES,
    WORKLOADS,
    report,
)

__all__ = ["CEILINGS", "RATIOS", "SIDES", "WORKLOADS", "bench_log", "run"]


@dataclass(frozen=True)
class Sizes:
    """How much each phase does at most: event counts, and the time box of a write phase."""

    single: int
    batch: int
    threads: int
    read: int
    seconds: float
    loads: int
    rounds: int


FULL_RUN = Sizes(
    single=5000, batch=300_000, threads=100_000, read=1_000_000, seconds=3.0, loads=200, rounds=3
)
QUICK = Sizes(single=1000, batch=20_000, threads=10_000, read=50_000, seconds=1.0, loads=50, rounds=2)

Advance = Callable[[str, int, int], object]


def run(sizes: Sizes, parent: str | None, advance: Advance, pg_url: str | None = None) -> dict[str, Any]:
    """Run every phase and return the figures, ratios and settings as one JSON-able dict.

    With `pg_url`, the flightlog workloads also run on PostgreSQL (figures `<workload>.postgres`).
    """
    best: dict[str, float] = {}
    written: dict[str, float] = {}  # bytes per event, the least of the rounds

    def record(name: str, measured: w.Measured) -> None:
        count, elapsed = measured
        best[name] = max(best.get(name, 0.0), count / max(elapsed, 1e-9))

    def record_bytes(name: str, run_it: Callable[[], w.Measured]) -> None:
        before = ceilings.io_written()
        measured = run_it()
        after = ceilings.io_written()
        record(name, measured)
        if before is not None and after is not None:
            per = (after - before) / (measured[0] + w.BATCH)  # and the untimed first batch
            written[name] = min(written.get(name, per), per)

    total_phases = sizes.rounds * 19 + 2 + (sizes.rounds * 5 + 1 if pg_url else 0)
    steps = iter(range(1, total_phases + 1))

    def phase(name: str) -> None:
        advance(name, next(steps), total_phases)

    s = sizes.seconds
    for _ in range(sizes.rounds):
        for key, per, total in (("single", 1, sizes.single), ("batch100", w.BATCH, sizes.batch)):
            phase(f"{key}: raw sqlite3")
            with w.fresh_path(parent, "raw.db") as path:
                record_bytes(f"{key}.raw", functools.partial(w.raw_append, path, total, per, s))
            phase(f"{key}: flightlog")
            with w.fresh_path(parent, "flightlog.db") as path:
                record_bytes(f"{key}.flightlog", functools.partial(w.log_append, path, total, per, s))
            if pg_url:
                phase(f"{key}: flightlog on PostgreSQL")
                with w.fresh_schema(pg_url) as url:
                    record(f"{key}.{PG_SIDE}", w.log_append(url, total, per, s))
            phase(f"{key}: eventsourcing")
            with w.fresh_path(parent, "es.db") as path:
                record(f"{key}.eventsourcing", w.peer_append(path, total, per, s))
        phase("batch100: raw sqlite3, the first row format")
        with w.fresh_path(parent, "raw-first-row.db") as path:
            first_row = functools.partial(ceilings.raw_append_v1, path, sizes.batch, s)
            record_bytes("batch100_first_row.raw", first_row)
        phase("batch100: raw sqlite3 into eventsourcing's table")
        with w.fresh_path(parent, "raw-es.db") as path:
            record("batch100_es_table.raw", ceilings.raw_peer_table(path, sizes.batch, s))
        phase("16 threads: flightlog")
        with w.fresh_path(parent, "flightlog.db") as path:
            record("threads16.flightlog", w.log_threads(path, sizes.threads, s))
        if pg_url:
            phase("16 threads: flightlog on PostgreSQL")
            with w.fresh_schema(pg_url) as url:
                record(f"threads16.{PG_SIDE}", w.log_threads(url, sizes.threads, s))
        phase("16 threads: eventsourcing")
        with w.fresh_path(parent, "es.db") as path:
            record("threads16.eventsourcing", w.peer_threads(path, sizes.threads, s))
        phase("16 threads: raw sqlite3, one appender, 16 rows to a transaction")
        with w.fresh_path(parent, "raw.db") as path:
            record("threads16.raw", ceilings.raw_interleaved(path, sizes.threads, s))
        phase("16 threads: raw sqlite3 on 16 threads, group-committed")
        with w.fresh_path(parent, "raw.db") as path:
            record("threads16_grouped.raw", ceilings.raw_threads(path, sizes.threads, s))

    with (
        w.fresh_path(parent, "flightlog.db") as log_path,
        w.fresh_path(parent, "es.db") as peer_path,
        w.fresh_schema(pg_url) if pg_url else contextlib.nullcontext("") as pg_target,
    ):
        log = open_log(log_path, synchronous=w.SYNC)
        peer = w.Peer(peer_path)
        pg_log = open_log(pg_target) if pg_target else None
        try:
            peer_sync = peer.synchronous()
            phase(f"filling flightlog with {sizes.read:,} events")
            w.fill_log(log, sizes.read, lambda n: advance("", n, sizes.read))
            phase(f"filling eventsourcing with {sizes.read:,} events")
            originators = w.fill_peer(peer, sizes.read, lambda n: advance("", n, sizes.read))
            if pg_log is not None:
                phase(f"filling flightlog on PostgreSQL with {sizes.read:,} events")
                w.fill_log(pg_log, sizes.read, lambda n: advance("", n, sizes.read))
            middle = len(originators) // 2
            stream, originator = w.stream_name(middle * w.STREAM_LEN + 1), originators[middle]
            for _ in range(sizes.rounds):
                # Small logs are read several times, for a measurable time; a million once.
                phase("full read: raw select + decode")
                record("read_all.raw", w.repeat(lambda: w.raw_read_all(log_path), 50, s / 2, warm=False))
                phase("full read: raw select + orjson.loads")
                loads_only = functools.partial(w.raw_read_all, log_path, orjson.loads)
                record("read_all_loads.raw", w.repeat(loads_only, 50, s / 2, warm=False))
                phase("full read: flightlog read_all + decode")
                record("read_all.flightlog", w.repeat(lambda: w.log_read_all(log), 50, s / 2, warm=False))
                phase("full read: eventsourcing select_notifications + decode")
                record(
                    "read_all.eventsourcing", w.repeat(lambda: w.peer_read_all(peer), 50, s / 2, warm=False)
                )
                phase("stream load: flightlog read + decode")
                record("stream_load.flightlog", w.repeat(lambda: w.log_load(log, stream), sizes.loads, s))
                phase("stream load: raw select + decode")
                record(
                    "stream_load.raw", w.repeat(lambda: ceilings.raw_load(log_path, stream), sizes.loads, s)
                )
                phase("stream load: eventsourcing select_events + decode")
                record(
                    "stream_load.eventsourcing",
                    w.repeat(lambda: w.peer_load(peer, originator), sizes.loads, s),
                )
                if pg_log is not None:
                    phase("full read: flightlog on PostgreSQL read_all + decode")
                    pg_read = functools.partial(w.log_read_all, pg_log)
                    record(f"read_all.{PG_SIDE}", w.repeat(pg_read, 50, s / 2, warm=False))
                    phase("stream load: flightlog on PostgreSQL read + decode")
                    pg_load = functools.partial(w.log_load, pg_log, stream)
                    record(f"stream_load.{PG_SIDE}", w.repeat(pg_load, sizes.loads, s))
        finally:
            log.close()
            peer.close()
            if pg_log is not None:
                pg_log.close()

    ratios = {}
    for key, (label, num, den, target) in RATIOS.items():
        value = best[num] / best[den]
        ratios[key] = {"label": label, "value": round(value, 3), "target": target, "pass": value >= target}
        if key in CEILINGS:
            raw_reaches = max(best[name] for name in CEILINGS[key]) / best[den]
            ratios[key]["raw_reaches"] = round(raw_reaches, 3)
            ratios[key]["beyond_raw"] = raw_reaches < target
    bytes_ratio = _bytes_ratio(written)
    if bytes_ratio is not None:
        ratios[BYTES_RATIO] = bytes_ratio
    result: dict[str, Any] = {
        "unit": "events/s",
        "figures": {name: round(rate, 1) for name, rate in sorted(best.items())},
        "bytes_per_event": {name: round(n, 1) for name, n in sorted(written.items())},
        "ratios": ratios,
        "settings": {
            "journal_mode": "WAL",
            "synchronous": {"raw": w.SYNC, "flightlog": w.SYNC, "eventsourcing": peer_sync},
            "rounds": sizes.rounds,
            "time_box_seconds": sizes.seconds,
            "max_events": {"single": sizes.single, "batch100": sizes.batch, "threads16": sizes.threads},
            "read_events": sizes.read,
            "stream_events": min(w.STREAM_LEN, sizes.read),
            "sqlite": sqlite3.sqlite_version,
            "cpus": os.cpu_count(),
            "load_average": [round(x, 2) for x in os.getloadavg()],
        },
        "notes": NOTES,
    }
    if pg_url:
        result["postgres"] = {
            "ratios": {
                key: {
                    "label": f"PostgreSQL / SQLite, {label}",
                    "value": round(best[f"{key}.{PG_SIDE}"] / best[f"{key}.flightlog"], 3),
                }
                for key, label in PG_LABELS.items()
            },
            "settings": w.pg_settings(pg_url),
        }
    return result


def _bytes_ratio(written: dict[str, float]) -> dict[str, Any] | None:
    """flightlog's bytes per event over the first row format's (lower is better), if measured."""
    base = written.get("batch100_first_row.raw")
    if not base or "batch100.flightlog" not in written:
        return None
    value = written["batch100.flightlog"] / base
    raw_reaches = written["batch100.raw"] / base
    return {
        "label": BYTES_LABEL,
        "value": round(value, 3),
        "target": BYTES_TARGET,
        "lower_is_better": True,
        "pass": value <= BYTES_TARGET,
        "raw_reaches": round(raw_reaches, 3),
        "beyond_raw": raw_reaches > BYTES_TARGET,
    }


@click.command("log")
@click.option("--quick", is_flag=True, help="A smaller run (well under a minute), for CI.")
@click.option("--json", "as_json", is_flag=True, help="Print the figures and ratios as one JSON object.")
@click.option("--rounds", type=click.IntRange(1), help="Runs of every phase; the best counts.")
@temp_dir_option
@click.option(
    "--db",
    "pg_url",
    metavar="postgresql://…",
    help="Also run the flightlog workloads on this PostgreSQL database, each in a temporary schema.",
)
@click.option("--events", type=click.IntRange(1), hidden=True, help="Cap every phase at N events.")
@click.option("--seconds", type=click.FloatRange(0.01), hidden=True, help="Time box of a write phase.")
def bench_log(
    quick: bool,
    as_json: bool,
    rounds: int | None,
    parent: str | None,
    pg_url: str | None,
    events: int | None,
    seconds: float | None,
) -> None:
    """Append and read throughput: flightlog next to raw sqlite3 and eventsourcing.

    Prints events/s for each workload, and the ratios flightlog is meant to reach, each
    marked PASS or MISS. A full run takes a few minutes. With --db postgresql://…, flightlog
    on PostgreSQL runs the same workloads in the same run, and the PostgreSQL/SQLite ratios
    close the report.

    \b
    Example:
      flightlog bench log --quick
      flightlog bench log --json > bench.json
      flightlog bench log --db postgresql://localhost/flightlog
    """
    require_extra(
        "eventsourcing", "bench", "flightlog bench log (it compares with the eventsourcing library)"
    )
    if pg_url:
        require_extra("psycopg", "postgres", "flightlog bench log --db postgresql://…")
    shown_url = w.check_pg(pg_url) if pg_url else ""
    sizes = QUICK if quick else FULL_RUN
    if events is not None:
        sizes = replace(
            sizes,
            single=min(sizes.single, events),
            batch=min(sizes.batch, max(events // w.BATCH, 1) * w.BATCH),
            threads=min(sizes.threads, max(events, w.THREADS)),
            read=events,
            loads=min(sizes.loads, 5),
        )
    sizes = replace(sizes, rounds=rounds or sizes.rounds, seconds=seconds or sizes.seconds)
    with progress(disable=not err_console.is_terminal) as bar:
        phases = bar.add_task("bench log", total=None)
        fill = bar.add_task("events", total=sizes.read, visible=False)

        def advance(name: str, done: int, total: int) -> None:
            if name:
                bar.update(phases, description=name, completed=done, total=total)
                bar.update(fill, visible=name.startswith("filling"), completed=0)
            else:
                bar.update(fill, advance=done)

        result = run(sizes, parent, advance, pg_url)
    if pg_url:
        result["postgres"]["url"] = shown_url
    if result["settings"]["synchronous"]["eventsourcing"] != w.SYNC:
        result["warning"] = "eventsourcing did not run at synchronous=FULL: its figures are not comparable"
    if as_json:
        emit_json(result)
    else:
        report(result)
