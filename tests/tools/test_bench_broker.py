"""`flightlog bench broker` runs end to end and reports every figure (timings are never asserted)."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from tests.conftest import pg_unavailable, pg_url, require_or_skip
from tools.bench.broker_capacity import ROWS
from tools.cli import cli


def test_quick_json_reports_every_figure(tmp_path):
    args = ["bench", "broker", "--quick", "--json", "--dir", str(tmp_path)]
    args += ["--agents", "2", "--reports", "20", "--seconds", "0.5", "--pushes", "3", "--rounds", "1"]
    args += ["--polls", "5", "--capacity", "20", "--window", "1"]
    result = CliRunner().invoke(cli, args, catch_exceptions=False)
    assert result.exit_code == 0, result.output
    out = json.loads(result.output)

    figures = out["figures"]
    capacity = {name for name in figures if name.startswith("capacity.20.")}
    assert {name.removeprefix("capacity.20.") for name in capacity} == {key for key, _, _ in ROWS}
    assert figures["capacity.20.polls_on_time"] <= 1
    assert figures["capacity.20.push_p99_ms"] >= figures["capacity.20.push_p50_ms"]
    assert set(figures) - capacity == {
        "reports.durable_per_s",
        "reports.durable_per_s_median",
        "reports.server_cpu_us",
        "reports.asgi_server_cpu_us",
        "ceiling.per_s",
        "ceiling.server_cpu_us",
        "raw.commits_per_s",
        "delivery.p50_ms",
        "delivery.p99_ms",
        "delivery.max_ms",
        "ask.p50_ms",
        "ask.p99_ms",
        "register.appends_per_run",
        "register.threads_added",
        "polls.within_timeout",
        "polls.p50_s",
        "polls.max_s",
    }
    for name, value in figures.items():
        # CPU is counted in clock ticks: a tiny round may take less than one.
        zero_allowed = name == "register.threads_added" or name.endswith(("cpu_us", "cpu_idle"))
        assert value > 0 or (zero_allowed and value == 0), name
    assert figures["register.appends_per_run"] == 1  # one append per registration
    assert figures["polls.within_timeout"] <= 5
    assert out["ratios"]["reports_vs_raw_commits"]["value"] > 0
    assert out["ratios"]["reports_vs_ceiling"]["value"] > 0
    assert out["ratios"]["lean_vs_asgi"]["value"] >= 0  # CPU in clock ticks: a tiny round may take none
    assert {name for name in out["targets"] if name.startswith("capacity_20_")} == {
        f"capacity_20_{name}" for name in ("on_time", "push_p99", "rss", "poll_cpu", "report_cpu")
    }
    assert {name for name in out["targets"] if not name.startswith("capacity_")} == {
        "reports_per_s",
        "reports_vs_ceiling",
        "server_cpu_us",
        "delivery_p50_ms",
        "delivery_p99_ms",
        "idle_polls_within",
        "register_appends",
        "register_threads",
    }
    for name, target in out["targets"].items():
        assert target["value"] > 0 or name in {"register_threads", "server_cpu_us"} or name.endswith("cpu")
        assert isinstance(target["pass"], bool)
    settings = out["settings"]
    assert (settings["synchronous"], settings["agents"], settings["pushes"]) == ("FULL", 2, 3)
    assert list(tmp_path.iterdir()) == []  # every temporary database is gone


def test_the_table_names_both_targets(tmp_path):
    args = ["bench", "broker", "--quick", "--dir", str(tmp_path)]
    args += ["--agents", "2", "--reports", "10", "--seconds", "0.5", "--pushes", "2", "--rounds", "1"]
    args += ["--polls", "3", "--capacity", "10", "--window", "1"]
    result = CliRunner().invoke(cli, args, catch_exceptions=False, env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    assert "raw sqlite3: single-row commits/s" in result.output
    assert "durable reports/s" in result.output
    assert "PASS" in result.output or "MISS" in result.output


@pytest.mark.postgres
@pytest.mark.slow
def test_db_reports_per_backend_and_two_servers_beside_one(tmp_path):
    if reason := pg_unavailable():
        require_or_skip(reason)
    import psycopg

    url = pg_url() or ""
    bench_schemas = "SELECT count(*) FROM pg_namespace WHERE nspname LIKE 'flightlog_bench_%'"
    with psycopg.connect(url, autocommit=True) as conn:
        before = conn.execute(bench_schemas).fetchone()
    args = ["bench", "broker", "--quick", "--json", "--dir", str(tmp_path), "--db", url]
    args += ["--agents", "4", "--reports", "40", "--seconds", "0.5", "--pushes", "2", "--rounds", "2"]
    args += ["--polls", "3", "--capacity", "10", "--window", "1"]
    result = CliRunner().invoke(cli, args, catch_exceptions=False)
    assert result.exit_code == 0, result.output
    out = json.loads(result.output)
    figures = out["figures"]
    for name in ("postgres", "postgres2"):
        assert figures[f"{name}.reports_per_s"] > 0
        assert figures[f"{name}.reports_per_s_median"] <= figures[f"{name}.reports_per_s"]
        assert figures[f"{name}.server_cpu_us"] >= 0  # counted in clock ticks: may round to 0
    for key in ("postgres_vs_sqlite", "two_servers_vs_one"):
        ratio = out["ratios"][key]
        assert len(ratio["rounds"]) == 2  # one per round, taken within the round
        assert min(ratio["rounds"]) <= ratio["value"] <= max(ratio["rounds"])
        assert isinstance(out["targets"][key]["pass"], bool)
    assert out["settings"]["postgres"]["url"].startswith("postgresql://")
    assert out["settings"]["postgres"]["synchronous_commit"]
    with psycopg.connect(url, autocommit=True) as conn:
        assert conn.execute(bench_schemas).fetchone() == before  # every temporary schema is dropped
    assert list(tmp_path.iterdir()) == []


def test_db_takes_only_a_postgresql_url(tmp_path):
    result = CliRunner().invoke(cli, ["bench", "broker", "--quick", "--db", str(tmp_path / "x.db")])
    assert result.exit_code == 2
    assert "postgresql://" in result.output
