"""`flightlog bench log` runs end to end and reports every figure and ratio (never timing)."""

from __future__ import annotations

import sqlite3

import orjson
import pytest
from click.testing import CliRunner

from tests.conftest import pg_unavailable, pg_url, require_or_skip

# `bench log` measures flightlog next to the eventsourcing library (the bench extra).
pytest.importorskip("eventsourcing", reason="eventsourcing is not installed: pip install -e '.[bench]'")
from tools.bench import log as _bench_log
from tools.bench import log_ceilings, log_workloads
from tools.cli import cli


def test_quick_json_reports_every_figure_and_ratio(tmp_path):
    result = CliRunner().invoke(
        cli,
        [
            "bench",
            "log",
            "--quick",
            "--json",
            "--rounds",
            "1",
            "--events",
            "300",
            "--seconds",
            "0.05",
            "--dir",
            str(tmp_path),
        ],
    )
    assert result.exit_code == 0, result.output
    report = orjson.loads(result.stdout)

    expected = {f"{key}.{side}" for key, _ in _bench_log.WORKLOADS for side in _bench_log.SIDES}
    expected -= {"read_all_loads.flightlog", "read_all_loads.eventsourcing"}  # a raw baseline only
    # eventsourcing's table and the first row format are written by raw sqlite3 only
    expected -= {"batch100_es_table.flightlog", "batch100_es_table.eventsourcing"}
    expected -= {"batch100_first_row.flightlog", "batch100_first_row.eventsourcing"}
    expected -= {"threads16_grouped.flightlog", "threads16_grouped.eventsourcing"}
    assert set(report["figures"]) == expected
    for name, rate in report["figures"].items():
        assert isinstance(rate, float), name
        assert rate > 0, name

    assert set(report["ratios"]) == {*_bench_log.RATIOS, _bench_log.BYTES_RATIO}
    written = report["bytes_per_event"]
    assert {"batch100.raw", "batch100.flightlog", "batch100_first_row.raw"} <= set(written)
    bytes_ratio = report["ratios"].pop(_bench_log.BYTES_RATIO)
    assert bytes_ratio["value"] == pytest.approx(
        written["batch100.flightlog"] / written["batch100_first_row.raw"], rel=0.01
    )
    assert bytes_ratio["pass"] == (bytes_ratio["value"] <= bytes_ratio["target"])
    for name, ratio in report["ratios"].items():
        # Only the shape is checked: whether a target passes depends on the machine.
        assert isinstance(ratio["value"], float), name
        assert ratio["value"] > 0, name
        assert ratio["target"] > 0, name
        assert isinstance(ratio["pass"], bool), name
        if name in _bench_log.CEILINGS:
            # what raw sqlite3 reaches on the same ratio, from the figures of this run
            numerators = [report["figures"][f] for f in _bench_log.CEILINGS[name]]
            denominator = report["figures"][_bench_log.RATIOS[name][2]]
            assert ratio["raw_reaches"] == pytest.approx(max(numerators) / denominator, rel=0.01)
            assert ratio["beyond_raw"] == (ratio["raw_reaches"] < ratio["target"])
        else:
            assert "raw_reaches" not in ratio, name

    assert report["settings"]["synchronous"]["flightlog"] == "FULL"
    assert report["settings"]["read_events"] == 300
    assert list(tmp_path.iterdir()) == []  # every temporary database is removed


def test_table_output_marks_each_ratio(tmp_path):
    result = CliRunner().invoke(
        cli, ["bench", "log", "--quick", "--events", "200", "--seconds", "0.05", "--dir", str(tmp_path)]
    )
    assert result.exit_code == 0, result.output
    assert "flightlog bench log" in result.stdout
    assert result.stdout.count("PASS") + result.stdout.count("MISS") == len(_bench_log.RATIOS) + 1  # bytes


def test_db_runs_the_flightlog_workloads_on_postgresql_too(tmp_path):
    if reason := pg_unavailable():
        require_or_skip(reason)
    import psycopg

    url = pg_url() or ""
    bench_schemas = "SELECT count(*) FROM pg_namespace WHERE nspname LIKE 'flightlog_bench_%'"
    with psycopg.connect(url, autocommit=True) as conn:
        before = conn.execute(bench_schemas).fetchone()
    small = ["--quick", "--json", "--rounds", "1", "--events", "300", "--seconds", "0.05"]
    result = CliRunner().invoke(cli, ["bench", "log", *small, "--dir", str(tmp_path), "--db", url])
    assert result.exit_code == 0, result.output
    report = orjson.loads(result.stdout)
    on_pg = {name for name in report["figures"] if name.endswith(f".{_bench_log.PG_SIDE}")}
    assert on_pg == {f"{key}.{_bench_log.PG_SIDE}" for key in _bench_log.PG_LABELS}
    assert all(report["figures"][name] > 0 for name in on_pg)
    ratios = report["postgres"]["ratios"]
    assert set(ratios) == set(_bench_log.PG_LABELS)
    for key, ratio in ratios.items():
        expected = report["figures"][f"{key}.postgres"] / report["figures"][f"{key}.flightlog"]
        assert ratio["value"] == pytest.approx(expected, rel=0.01)
    assert report["postgres"]["settings"]["synchronous_commit"]
    assert report["postgres"]["url"].startswith("postgresql://")
    with psycopg.connect(url, autocommit=True) as conn:
        assert conn.execute(bench_schemas).fetchone() == before  # every temporary schema is dropped


def test_db_takes_only_a_postgresql_url(tmp_path):
    result = CliRunner().invoke(cli, ["bench", "log", "--quick", "--db", str(tmp_path / "x.db")])
    assert result.exit_code == 2
    assert "postgresql://" in result.output


def test_the_raw_group_commit_writes_every_threads_rows_once_and_in_order(tmp_path):
    path = str(tmp_path / "raw.db")
    written, _seconds = log_ceilings.raw_threads(path, 16 * 40, 30.0)
    conn = sqlite3.connect(path)
    try:
        rows = conn.execute("SELECT seq, stream, version FROM events ORDER BY seq").fetchall()
    finally:
        conn.close()
    assert written == len(rows) == 16 * 40
    assert [r[0] for r in rows] == list(range(1, len(rows) + 1))  # one seq each, no gap
    by_stream: dict[str, list[int]] = {}
    for _seq, stream, version in rows:
        by_stream.setdefault(stream, []).append(version)
    assert len(by_stream) == log_workloads.THREADS
    assert all(v == list(range(1, 41)) for v in by_stream.values())
