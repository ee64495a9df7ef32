"""`flightlog bench replay`: rebuilding views and travelling in time, next to the raw read rate.

One run: generate a log (a seeded mix of broker runs, approvals and controller
conversations, 100 events per run), then, in a fresh child process, measure side by side
the raw read (SELECT + orjson.loads of every row), a rebuild of every view from seq 0
(snapshots written as the runner writes them), time travel of the global views to random
seqs (warm: with the log open; cold: a new Views per trip, from stored snapshots), and one
run's timeline at random events of its own. The child's peak RSS is read after the rebuild.

The raw read and the rebuild are compared on the CPU time of the measuring process (every
thread of it: the snapshot writer's work counts too), so that other work on a shared
machine does not tilt the ratio; their wall-clock rates are printed beside. Latencies are
wall-clock. Each round runs the raw read, then the rebuild; the best round of each counts.
"""

from __future__ import annotations

import os
import random
import resource
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

import click
import orjson
from rich.table import Table

from eventlog import open_log, snapshot_store
from projections import GLOBAL_VIEWS, Views

from .._output import console, emit_json, err_console, progress
from .workload import EVENTS_PER_RUN, fill_parallel

COLUMNS = "seq, stream, version, type, schema, data, meta, event_id, recorded_at, hash"  # the lean row
SEED = 7

# (key, label, figure, comparison, target)
TARGETS = [
    ("rebuild_vs_raw", "rebuild all views / raw SELECT + orjson.loads (CPU)", "ratio", ">=", 0.35),
    ("travel_global_p99_ms", "travel to a random seq, global views, p99", "ms", "<=", 100.0),
    ("timeline_p99_ms", "one run's timeline at one of its events, p99", "ms", "<=", 10.0),
    ("offline_timeline_p99_ms", "the same from a new Views that has not caught up, p99", "ms", "<=", 10.0),
    ("rebuild_peak_rss_mb", "peak RSS during the rebuild", "MB", "<=", 300.0),
]


@dataclass(frozen=True)
class Sizes:
    """How big a run is: runs (x100 events), rebuild rounds, trips measured."""

    runs: int
    rounds: int
    travels: int
    cold_travels: int
    timelines: int


QUICK = Sizes(runs=1_000, rounds=2, travels=200, cold_travels=20, timelines=300)
FULL_RUN = Sizes(runs=10_000, rounds=3, travels=500, cold_travels=30, timelines=2_000)


# -- the child: everything measured runs in one fresh process ------------------------------------


@dataclass(frozen=True)
class Rate:
    """Events per second over wall time and over the process's CPU time (every thread)."""

    wall: float
    cpu: float


def _rate(n: int, wall: float, cpu: float) -> Rate:
    return Rate(n / max(wall, 1e-9), n / max(cpu, 1e-9))


def raw_read(path: str) -> Rate:
    """Every row selected and its data decoded, nothing else."""
    conn = sqlite3.connect(path)
    try:
        wall, cpu = time.perf_counter(), time.process_time()
        n = 0
        loads = orjson.loads
        for row in conn.execute(f"SELECT {COLUMNS} FROM events ORDER BY seq"):
            loads(row[5])
            n += 1
        return _rate(n, time.perf_counter() - wall, time.process_time() - cpu)
    finally:
        conn.close()


def rebuild(path: str) -> tuple[Rate, Views, int]:
    """A rebuild of every view from seq 0, snapshots and checkpoints as usual (stored ones dropped first)."""
    log = open_log(path)
    snapshot_store(log).delete()
    views = Views(log)
    wall, cpu = time.perf_counter(), time.process_time()
    head = views.catch_up()
    return _rate(head, time.perf_counter() - wall, time.process_time() - cpu), views, head


def percentiles(samples: list[float]) -> dict[str, float]:
    ordered = sorted(samples)

    def at(q: float) -> float:
        return ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000.0

    return {"p50": round(at(0.50), 2), "p99": round(at(0.99), 2), "max": round(ordered[-1] * 1000.0, 2)}


def timed(fn: Callable[[], object]) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def child(path: str, sizes: Sizes) -> dict[str, Any]:
    rng = random.Random(SEED)
    raws: list[Rate] = []
    rebuilds: list[Rate] = []
    views: Views | None = None
    head = 0
    for _ in range(sizes.rounds):
        raws.append(raw_read(path))
        if views is not None:
            views.log.close()
        views = None  # the previous rebuild's states go before the next one starts
        rate, views, head = rebuild(path)
        rebuilds.append(rate)
    assert views is not None
    peak_rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
    stored = snapshot_store(views.log).list()
    global_views = list(GLOBAL_VIEWS)
    log = views.log

    def travel(seq: int, fresh: bool = False) -> tuple[float, float]:
        viewer = Views(log) if fresh else views
        cpu = time.thread_time()
        wall = timed(lambda: viewer.runner.fold_until(seq, global_views))
        return wall, time.thread_time() - cpu

    warm = [travel(rng.randint(1, head)) for _ in range(sizes.travels)]
    cold = [travel(rng.randint(1, head), fresh=True)[0] for _ in range(sizes.cold_travels)]
    reopen = timed(lambda: Views(log).catch_up())

    runs = views.agent_runs()

    def trip(run_id: str, stream: str, offline: bool = False) -> float:
        seq = rng.choice([r.seq for r in log.read(stream) if r.data.get("run_id") == run_id])
        if offline:  # a reader that has not caught up: it must find the run's stream by itself
            cpu = time.thread_time()
            wall = timed(lambda: Views(log).timeline(run_id, at=seq))
            offline_cpu.append(time.thread_time() - cpu)
            return wall
        return timed(lambda: views.timeline(run_id, at=seq))

    offline_cpu: list[float] = []
    trips = [trip(r.run_id, r.stream) for r in (rng.choice(runs) for _ in range(sizes.timelines))]
    offline = [trip(r.run_id, r.stream, True) for r in (rng.choice(runs) for _ in range(sizes.timelines))]
    views.log.close()
    raw_best = max(raws, key=lambda r: r.cpu)
    rebuild_best = max(rebuilds, key=lambda r: r.cpu)
    return {
        "events": head,
        "raw_read_events_per_s": round(raw_best.cpu),
        "rebuild_events_per_s": round(rebuild_best.cpu),
        "raw_read_wall_events_per_s": round(max(r.wall for r in raws)),
        "rebuild_wall_events_per_s": round(max(r.wall for r in rebuilds)),
        "rounds": {
            "raw_cpu": [round(r.cpu) for r in raws], "rebuild_cpu": [round(r.cpu) for r in rebuilds],
            "raw_wall": [round(r.wall) for r in raws], "rebuild_wall": [round(r.wall) for r in rebuilds],
        },
        "rebuild_peak_rss_mb": round(peak_rss_mb, 1),
        "travel_global_ms": percentiles([w for w, _ in warm]),
        "travel_global_cpu_ms": percentiles([c for _, c in warm]),
        "travel_global_cold_ms": percentiles(cold),
        "timeline_ms": percentiles(trips),
        "offline_timeline_ms": percentiles(offline),
        "offline_timeline_cpu_ms": percentiles(offline_cpu),
        "reopen_from_snapshots_s": round(reopen, 3),
        "snapshots_stored": len(stored),
        "snapshot_bytes": sum(s.size for s in stored),
    }  # fmt: skip


# -- the parent: generate, run the child, judge ----------------------------------------------------


def generate(path: str, runs: int, advance: Callable[[int], object]) -> tuple[int, float]:
    log = open_log(path, synchronous="NORMAL")
    try:
        start = time.perf_counter()
        total = fill_parallel(log, runs, SEED, progress=advance)
        return total, time.perf_counter() - start
    finally:
        log.close()


def existing_events(path: str) -> int:
    if not os.path.exists(path):
        return 0
    log = open_log(path, readonly=True)
    try:
        return log.head().seq
    finally:
        log.close()


def run(sizes: Sizes, path: str, advance: Callable[[str, int, int], object]) -> dict[str, Any]:
    """Generate (or reuse) the log at `path`, measure in a child process, return the result."""
    want = sizes.runs * EVENTS_PER_RUN
    generated: dict[str, Any] = {"reused": True}
    if existing_events(path) != want:
        for suffix in ("", "-wal", "-shm"):
            if os.path.exists(path + suffix):
                os.remove(path + suffix)
        done = 0

        def step(n: int) -> None:
            nonlocal done
            done += n
            if done % 10_000 < n:
                advance(f"generating {want:,} events across {sizes.runs:,} runs", done, want)

        total, seconds = generate(path, sizes.runs, step)
        generated = {"reused": False, "events_per_s": round(total / seconds)}
    advance("measuring in a fresh process (raw read, rebuild, travel, timelines)", 0, 0)
    proc = subprocess.run(
        [sys.executable, "-m", "tools.bench.replay", path, orjson.dumps(asdict(sizes)).decode()],
        capture_output=True,
        check=False,
        env={**os.environ, "PYTHONHASHSEED": "0"},
    )
    if proc.returncode != 0:
        raise click.ClickException(f"the measuring process failed:\n{proc.stderr.decode()[-2000:]}")
    figures = orjson.loads(proc.stdout)
    figures["rebuild_vs_raw"] = round(figures["rebuild_events_per_s"] / figures["raw_read_events_per_s"], 3)
    figures["travel_global_p99_ms"] = figures["travel_global_ms"]["p99"]
    figures["timeline_p99_ms"] = figures["timeline_ms"]["p99"]
    figures["offline_timeline_p99_ms"] = figures["offline_timeline_ms"]["p99"]
    targets = {}
    for key, label, unit, op, target in TARGETS:
        value = figures[key]
        ok = value >= target if op == ">=" else value <= target
        targets[key] = {
            "label": label,
            "value": value,
            "unit": unit,
            "target": f"{op} {target:g}",
            "pass": ok,
        }
    return {
        "figures": figures,
        "targets": targets,
        "workload": {
            "runs": sizes.runs,
            "events": sizes.runs * EVENTS_PER_RUN,
            "seed": SEED,
            "global_views": list(GLOBAL_VIEWS),
            "generated": generated,
        },
        "settings": {
            "rounds": sizes.rounds,
            "travels": sizes.travels,
            "cold_travels": sizes.cold_travels,
            "timelines": sizes.timelines,
            "sqlite": sqlite3.sqlite_version,
        },
    }


def _report(result: dict[str, Any]) -> None:
    fig, work = result["figures"], result["workload"]
    table = Table(title=f"flightlog bench replay ({work['events']:,} events across {work['runs']:,} runs)")
    table.add_column("figure")
    table.add_column("value", justify="right")
    rows = [
        (
            "raw SELECT + orjson.loads, per CPU s (per wall s)",
            f"{fig['raw_read_events_per_s']:,} ({fig['raw_read_wall_events_per_s']:,}) events/s",
        ),
        (
            "rebuild every view from seq 0, per CPU s (per wall s)",
            f"{fig['rebuild_events_per_s']:,} ({fig['rebuild_wall_events_per_s']:,}) events/s",
        ),
        ("travel, global views, warm p50 / p99 / max", _ms(fig["travel_global_ms"])),
        ("  the same in CPU time of the travelling thread", _ms(fig["travel_global_cpu_ms"])),
        ("travel, global views, cold (new Views) p50 / p99", _ms(fig["travel_global_cold_ms"])),
        ("one run's timeline at one of its events p50 / p99", _ms(fig["timeline_ms"])),
        ("  the same from a new Views, not caught up, p50 / p99", _ms(fig["offline_timeline_ms"])),
        ("  … in CPU time of the reading thread", _ms(fig["offline_timeline_cpu_ms"])),
        ("reopen: catch up from stored snapshots", f"{fig['reopen_from_snapshots_s']:.3f} s"),
        (
            "snapshots stored / their JSON size",
            f"{fig['snapshots_stored']} / {fig['snapshot_bytes'] / 1e6:.1f} MB",
        ),
        ("peak RSS of the rebuilding process", f"{fig['rebuild_peak_rss_mb']:.0f} MB"),
    ]
    gen = work["generated"]
    if not gen["reused"]:
        rows.append(("log generation (8 threads, synchronous=NORMAL)", f"{gen['events_per_s']:,} events/s"))
    for row in rows:
        table.add_row(*row)
    console.print(table)
    verdicts = Table(title="targets")
    for name, justify in (("target", "left"), ("value", "right"), ("goal", "right"), ("", "left")):
        verdicts.add_column(name, justify=justify)  # type: ignore[arg-type]
    for t in result["targets"].values():
        verdict = "[green]PASS[/]" if t["pass"] else "[red]MISS[/]"
        value = f"{t['value']:.2f}x" if t["unit"] == "ratio" else f"{t['value']:,.1f} {t['unit']}"
        verdicts.add_row(t["label"], value, t["target"], verdict)
    console.print(verdicts)


def _ms(p: dict[str, float]) -> str:
    tail = f" / {p['max']:.1f}" if "max" in p else ""
    return f"{p['p50']:.1f} / {p['p99']:.1f}{tail} ms"


@click.command("replay")
@click.option("--quick", is_flag=True, help="100,000 events across 1,000 runs (well under a minute).")
@click.option("--json", "as_json", is_flag=True, help="Print the figures and targets as one JSON object.")
@click.option("--runs", type=click.IntRange(10), help="Runs in the generated log (100 events each).")
@click.option(
    "--log",
    "log_path",
    type=click.Path(dir_okay=False),
    help="Keep the generated log here and reuse it next time (default: a temporary folder).",
)
def bench_replay(quick: bool, as_json: bool, runs: int | None, log_path: str | None) -> None:
    """Rebuild and time travel: every view rebuilt next to the raw read rate, travel and timeline latency.

    Targets: rebuild ≥ 0.35x raw SELECT + orjson.loads; travel of the global views to a
    random seq ≤ 100 ms p99; a run's timeline at one of its events ≤ 10 ms p99; peak RSS
    of the rebuild ≤ 300 MB.

    \b
    Example:
      flightlog bench replay --quick
      flightlog bench replay --json > replay.json
    """
    sizes = QUICK if quick else FULL_RUN
    if runs is not None:
        sizes = Sizes(runs, sizes.rounds, sizes.travels, sizes.cold_travels, sizes.timelines)
    with progress(disable=not err_console.is_terminal) as bar:
        task = bar.add_task("bench replay", total=None)

        def advance(name: str, done: int, total: int) -> None:
            bar.update(task, description=name, completed=done, total=total or None)

        if log_path is not None:
            result = run(sizes, log_path, advance)
        else:
            with tempfile.TemporaryDirectory(prefix="flightlog-bench-replay-") as folder:
                result = run(sizes, os.path.join(folder, "replay.db"), advance)
    if as_json:
        emit_json(result)
    else:
        _report(result)


if __name__ == "__main__":  # the measuring child: python -m tools.bench.replay DB SIZES_JSON
    sys.stdout.buffer.write(orjson.dumps(child(sys.argv[1], Sizes(**orjson.loads(sys.argv[2])))))
