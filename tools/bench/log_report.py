"""What `flightlog bench log` measures against what, its targets, and how it prints them."""

from __future__ import annotations

from typing import Any

from rich.table import Table

from .._output import console
from . import log_workloads as w

# key: (label, numerator, denominator, target); each ratio passes at or above its target.
RATIOS: dict[str, tuple[str, str, str, float]] = {
    "batch100_vs_eventsourcing": (
        "flightlog / eventsourcing, batches of 100", "batch100.flightlog", "batch100.eventsourcing", 1.3
    ),
    "batch100_vs_raw_batch100": (
        "flightlog / raw executemany, batches of 100", "batch100.flightlog", "batch100.raw", 0.8
    ),
    "single_vs_raw_single": (
        "flightlog / raw one per transaction, single durable events", "single.flightlog", "single.raw", 0.9
    ),
    "threads16_vs_raw_threads16": (
        "flightlog 16 threads / raw one appender, 16 rows a transaction",
        "threads16.flightlog",
        "threads16.raw",
        0.6,
    ),
    "threads16_vs_eventsourcing": (
        "flightlog / eventsourcing, 16 threads", "threads16.flightlog", "threads16.eventsourcing", 6.0
    ),
    "read_all_vs_raw_loads": (
        "full read decoded / raw select + orjson.loads (as the target was set)",
        "read_all.flightlog",
        "read_all_loads.raw",
        0.7,
    ),
    "read_all_vs_raw_select": (
        "full read decoded / raw select + decode into the same dataclass",
        "read_all.flightlog",
        "read_all.raw",
        0.7,
    ),
    "read_all_vs_eventsourcing": (
        "flightlog / eventsourcing, full read", "read_all.flightlog", "read_all.eventsourcing", 2.0
    ),
    "stream_load_vs_eventsourcing": (
        "flightlog / eventsourcing, 1,000-event stream load",
        "stream_load.flightlog",
        "stream_load.eventsourcing",
        2.0,
    ),
}  # fmt: skip
# Bytes written per event (lower is better): flightlog's lean row next to the first row format.
BYTES_RATIO = "bytes_vs_first_row"
BYTES_LABEL = "bytes written per event, batches of 100: flightlog / first row format"
BYTES_TARGET = 0.5

# The raw sqlite3 figures that stand in for flightlog's numerator to say what raw SQLite
# itself reaches on a ratio (the best of them counts); a target above that is beyond it here.
CEILINGS: dict[str, tuple[str, ...]] = {
    "read_all_vs_eventsourcing": ("read_all.raw",),
    "batch100_vs_eventsourcing": ("batch100.raw", "batch100_es_table.raw"),
    "stream_load_vs_eventsourcing": ("stream_load.raw",),
    "threads16_vs_raw_threads16": ("threads16_grouped.raw",),
    "threads16_vs_eventsourcing": ("threads16.raw", "threads16_grouped.raw"),
    "read_all_vs_raw_loads": ("read_all.raw",),
}

WORKLOADS = [
    ("single", "single events, one appender, 1 per transaction"),
    ("batch100", f"batches of {w.BATCH}, one appender"),
    ("batch100_es_table", f"batches of {w.BATCH} into eventsourcing's table"),
    ("batch100_first_row", f"batches of {w.BATCH}, the first row format"),
    ("threads16", f"{w.THREADS} threads, single events, own streams"),
    ("threads16_grouped", f"{w.THREADS} threads, group-committed by raw sqlite3"),
    ("read_all", "full read, decoded"),
    ("read_all_loads", "full read, orjson.loads only (raw)"),
    ("stream_load", f"load one {w.STREAM_LEN:,}-event stream, decoded"),
]
SIDES = ("raw", "flightlog", "eventsourcing")
PG_SIDE = "postgres"  # flightlog on PostgreSQL, with --db
PG_LABELS = {
    "single": "single events",
    "batch100": "batch-100",
    "threads16": "16 threads",
    "read_all": "full read",
    "stream_load": "stream load",
}

NOTES = [
    "raw sqlite3 inserts rows of the same schema with the same data (from the same event "
    "objects) and event ids, but no hash "
    "chain (placeholder hashes): it is the floor, not a competitor",
    "flightlog appends catalogue events with an exact expected version, hashing every record",
    "eventsourcing: SQLiteApplicationRecorder (rowid = global order), state = the same orjson "
    "bytes; reads page by 1,000 and decode state with orjson into the same dataclass",
    "raw read: one SELECT of every column in seq order, each data value loaded (orjson) into "
    "the same dataclass flightlog and eventsourcing decode to: every side does the same work",
    f"raw sqlite3 on {w.THREADS} threads: one appender writes the {w.THREADS} streams' events, "
    f"{w.THREADS} rows to a transaction (a perfect group commit with no threads)",
    f"raw sqlite3 group-committed on {w.THREADS} threads: each thread queues its raw row and "
    "waits; the first finding no writer writes the queue in one transaction (gathering up to "
    "1 ms for every thread to queue), then wakes its group one caller after another and hands "
    "the lead on: what 16 Python threads reach with no hash chain and no records back",
    f"raw sqlite3 into eventsourcing's table: executemany of {w.BATCH} rows into the table the "
    "library creates (4 columns, one index)",
    "the first row format: raw executemany into the table flightlog wrote before the lean row "
    "(hex TEXT hashes and event id, BLOB JSON, a prev_hash column), for its bytes written",
    "bytes written per event: what the process passed to write(2) (/proc/self/io wchar) from "
    "opening the database to closing it, checkpoints included, over the events written",
    "'raw reaches': the same ratio with raw sqlite3's figure in flightlog's place; a target "
    "above it is beyond raw SQLite on this machine",
]


def report(result: dict[str, Any]) -> None:
    """Print the figures and ratios as tables."""
    fig = result["figures"]
    pg = result.get("postgres")
    table = Table(title=f"flightlog bench log ({result['unit']}, best of {result['settings']['rounds']})")
    table.add_column("workload")
    for side in ("raw sqlite3", "flightlog", "eventsourcing", *(["flightlog on PostgreSQL"] if pg else [])):
        table.add_column(side, justify="right")
    for key, label in WORKLOADS:
        cells = [fig.get(f"{key}.{side}") for side in (*SIDES, *([PG_SIDE] if pg else []))]
        table.add_row(label, *("-" if c is None else f"{c:,.0f}" for c in cells))
    console.print(table)
    ratios = Table(title="ratios")
    ratios.add_column("ratio")
    ratios.add_column("value", justify="right")
    ratios.add_column("target", justify="right")
    ratios.add_column("raw reaches", justify="right")
    ratios.add_column("")
    for r in result["ratios"].values():
        verdict = "[green]PASS[/]" if r["pass"] else "[red]MISS[/]"
        if not r["pass"] and r.get("beyond_raw"):
            verdict += " (beyond raw sqlite3)"
        raw = f"{r['raw_reaches']:.2f}x" if "raw_reaches" in r else "-"
        bound = "<=" if r.get("lower_is_better") else ">="
        ratios.add_row(r["label"], f"{r['value']:.2f}x", f"{bound} {r['target']}x", raw, verdict)
    console.print(ratios)
    if written := result["bytes_per_event"]:
        shown = ", ".join(f"{name} {n:,.0f}" for name, n in written.items() if name.startswith("batch100"))
        console.print(f"bytes written per event (/proc/self/io, checkpoints included): {shown}")
    st = result["settings"]
    sync = st["synchronous"]
    console.print(
        f"WAL; synchronous: raw {sync['raw']}, flightlog {sync['flightlog']}, eventsourcing "
        f"{sync['eventsourcing']} (the library leaves SQLite's default). SQLite {st['sqlite']}, "
        f"{st['cpus']} CPUs, load average {st['load_average'][0]}; write phases stop after "
        f"{st['time_box_seconds']:g} s; full read of {st['read_events']:,} events.",
        soft_wrap=True,
    )
    if pg:
        pst = pg["settings"]
        shown = ", ".join(f"{PG_LABELS[k]} {r['value']:.2f}x" for k, r in pg["ratios"].items())
        console.print(
            f"PostgreSQL / SQLite, flightlog on each: {shown}. PostgreSQL {pst['server_version']} at "
            f"{pg['url']}, fsync {pst['fsync']}, synchronous_commit {pst['synchronous_commit']}; "
            "each workload in a temporary schema, dropped afterwards.",
            soft_wrap=True,
        )
    if "warning" in result:
        console.print(f"[red]warning[/]: {result['warning']}")
