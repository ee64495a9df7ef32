"""`flightlog bench log` runs end to end and reports every figure and ratio (never timing)."""

from __future__ import annotations

import orjson
from click.testing import CliRunner

from tools import _bench_log
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
    expected -= {"threads16.raw", "stream_load.raw"}  # raw sqlite3 has no such workload
    assert set(report["figures"]) == expected
    for name, rate in report["figures"].items():
        assert isinstance(rate, float), name
        assert rate > 0, name

    assert set(report["ratios"]) == set(_bench_log.RATIOS)
    for name, ratio in report["ratios"].items():
        # Only the shape is checked: whether a target passes depends on the machine.
        assert isinstance(ratio["value"], float), name
        assert ratio["value"] > 0, name
        assert ratio["target"] > 0, name
        assert isinstance(ratio["pass"], bool), name

    assert report["settings"]["synchronous"]["flightlog"] == "FULL"
    assert report["settings"]["read_events"] == 300
    assert list(tmp_path.iterdir()) == []  # every temporary database is removed


def test_table_output_marks_each_ratio(tmp_path):
    result = CliRunner().invoke(
        cli, ["bench", "log", "--quick", "--events", "200", "--seconds", "0.05", "--dir", str(tmp_path)]
    )
    assert result.exit_code == 0, result.output
    assert "flightlog bench log" in result.stdout
    assert result.stdout.count("PASS") + result.stdout.count("MISS") == len(_bench_log.RATIOS)
