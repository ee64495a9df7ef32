"""`flightlog bench soak` runs end to end and reports every figure (timings are never asserted)."""

from __future__ import annotations

import json

from click.testing import CliRunner

from tools.bench.soak import slope_per_10k
from tools.cli import cli


def test_a_small_soak_reports_every_figure_and_target(tmp_path):
    args = ["bench", "soak", "--json", "--dir", str(tmp_path), "--events", "1000", "--runs", "4"]
    args += ["--agents", "2", "--polls", "20", "--strangers", "40", "--capacity", "20", "--window", "1"]
    result = CliRunner().invoke(cli, args, catch_exceptions=False)
    assert result.exit_code == 0, result.output
    out = json.loads(result.output)
    figures = out["figures"]
    for mix in ("fixed", "mixed"):  # two soaks, each on its own server
        assert figures[f"{mix}.events"] >= 1000
        assert figures[f"{mix}.rss.end_mib"] > 0
        assert figures[f"{mix}.threads.end"] > 0
        readings = [r["events"] for r in out["readings"][mix]]
        assert readings == sorted(readings)
    assert figures["fixed.new_runs"] == 0  # the slope target's soak keeps its set of runs
    assert figures["polls.answered"] == 20  # every poll was answered (how fast is the bench's to say)
    capacity = {f"capacity_20_{name}" for name in ("on_time", "push_p99", "rss", "poll_cpu", "report_cpu")}
    assert set(out["targets"]) == {
        "slope", "rss", "polls", "strangers", "hostile_stop", "hostile_reports", "hostile_rss", *capacity,
    }  # fmt: skip
    assert figures["capacity.20.rss_open_mib"] > 0  # the level's server, with its agents connected
    # The hostile mix: every attack was answered, the big payloads and peer fields refused.
    assert figures["hostile.stops"] > 0
    assert figures["hostile.stops_refused"] == 0
    answers = out["hostile_answers"]
    assert set(answers["peer_fields"]) == {"413"}
    assert "413" in answers["big_reports"]
    assert all(isinstance(t["pass"], bool) for t in out["targets"].values())
    for name in ("slope", "rss"):  # both targets are stated for 200,000 events: a short run says so
        assert "the target is for 200,000" in out["targets"][name]["label"]
    assert list(tmp_path.iterdir()) == []  # the temporary database is gone


def test_the_slope_is_fitted_after_the_warm_up_only():
    readings = [
        {"events": e, "rss_mib": r} for e, r in [(0, 10.0), (10_000, 50.0), (20_000, 51.0), (30_000, 52.0)]
    ]
    assert round(slope_per_10k(readings, 0.3, 30_000), 6) == 1.0  # the warm-up's jump is left out
    assert slope_per_10k(readings[:1], 0.0, 30_000) == 0.0  # one reading fits no line
