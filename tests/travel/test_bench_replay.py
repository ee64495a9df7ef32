"""`flightlog bench replay` runs end to end on a small log and reports every figure and target."""

from __future__ import annotations

import orjson
from click.testing import CliRunner

from tools.cli import cli


def test_bench_replay_reports_figures_and_targets(tmp_path):
    path = tmp_path / "bench.db"
    result = CliRunner().invoke(
        cli, ["bench", "replay", "--quick", "--runs", "10", "--json", "--log", str(path)]
    )
    assert result.exit_code == 0, result.output
    report = orjson.loads(result.output)
    assert report["workload"]["events"] == 1_000
    assert not report["workload"]["generated"]["reused"]
    figures = report["figures"]
    assert figures["events"] == 1_000
    assert figures["raw_read_events_per_s"] > 0
    assert figures["rebuild_events_per_s"] > 0
    for key in ("travel_global_ms", "travel_global_cold_ms", "timeline_ms", "offline_timeline_ms"):
        assert 0 <= figures[key]["p50"] <= figures[key]["p99"] <= figures[key]["max"]
    assert set(report["targets"]) == {
        "rebuild_vs_raw", "travel_global_p99_ms", "timeline_p99_ms", "offline_timeline_p99_ms",
        "rebuild_peak_rss_mb",
    }  # fmt: skip
    for target in report["targets"].values():
        assert isinstance(target["pass"], bool)
        assert target["label"]

    again = CliRunner().invoke(cli, ["bench", "replay", "--quick", "--runs", "10", "--log", str(path)])
    assert again.exit_code == 0, again.output
    assert "targets" in again.output
    assert "PASS" in again.output or "MISS" in again.output
