"""`flightlog bench approvals` runs end to end and reports every figure (timings are never asserted)."""

from __future__ import annotations

import json

from click.testing import CliRunner

from tools.cli import cli


def test_quick_json_reports_every_figure(tmp_path):
    args = ["bench", "approvals", "--quick", "--json", "--dir", str(tmp_path)]
    args += ["--samples", "3", "--requests", "5", "--operators", "2", "--rounds", "1"]
    result = CliRunner().invoke(cli, args, catch_exceptions=False)
    assert result.exit_code == 0, result.output
    out = json.loads(result.output)

    figures = out["figures"]
    assert set(figures) == {
        "latency.cycle_p50_ms",
        "latency.cycle_p99_ms",
        "latency.decide_p50_ms",
        "latency.decide_p99_ms",
        "latency.raw_two_commits_p50_ms",
        "latency.raw_two_commits_p99_ms",
        "concurrent.decisions_per_s",
        "concurrent.decisions_per_s_median",
    }
    for name, value in figures.items():
        assert value > 0, name
    assert set(out["ratios"]) == {"cycle_p99_vs_raw_two_commits_p99", "concurrent_decisions_per_s"}
    for ratio in out["ratios"].values():
        assert ratio["value"] > 0
        assert isinstance(ratio["pass"], bool)
    assert out["settings"]["synchronous"] == "FULL"
    assert (out["settings"]["samples"], out["settings"]["requests"]) == (3, 5)
    assert list(tmp_path.iterdir()) == []  # every temporary database is gone


def test_the_table_names_both_targets(tmp_path):
    args = ["bench", "approvals", "--quick", "--dir", str(tmp_path)]
    args += ["--samples", "2", "--requests", "3", "--operators", "1", "--rounds", "1"]
    result = CliRunner().invoke(cli, args, catch_exceptions=False, env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    assert "raw sqlite3: two single-row commits" in result.output
    assert "decisions/s" in result.output
    assert "PASS" in result.output or "MISS" in result.output
