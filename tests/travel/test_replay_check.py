"""Replay checks against stored digests and golden fixtures; and old records read through upcasters."""

from __future__ import annotations

import re
import sqlite3
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from eventlog import Event, ManualClock, NewEvent, Record, decode, open_log, upcast_record
from eventlog.events import event, upcaster
from projections import View, Views, compare_expected, default_views, replay_check
from projections.runs import RunRegistryView
from tools.cli import cli
from tools.cli.golden import import_lines, read_expected

GOLDEN = Path(__file__).resolve().parents[1] / "golden"
CASES = sorted(p.name for p in GOLDEN.iterdir() if (p / "events.jsonl").exists())


class DoubleCountingRegistry(RunRegistryView):
    """The registry as a careless change might fold it: every report counted twice, same version."""

    def apply(self, state, record):
        state = super().apply(state, record)
        if record.type == "RunReported" and record.data["run_id"] in state:
            state = super().apply(state, record)
        return state


def with_view(replacement: View) -> list[View]:
    return [replacement if v.name == replacement.name else v for v in default_views()]


def test_replay_check_agrees_with_the_digests_it_stored(db, open_db):
    log = open_db()
    Views(log, snapshot_every=400, snapshot_bytes_per_event=10**6).catch_up()  # every view at every mark
    report = replay_check(log, default_views())
    assert report.ok
    assert report.skipped == []
    assert report.compared["run_registry"] == 3  # seqs 400, 800 and 1200
    assert report.digests == Views(log, snapshots=None).digests()


def test_replay_check_shows_a_changed_fold_with_a_readable_diff(db, open_db):
    log = open_db()
    Views(log, snapshot_every=400, snapshot_bytes_per_event=10**6).catch_up()  # every view at every mark
    report = replay_check(log, with_view(DoubleCountingRegistry()))
    assert not report.ok
    assert {m.view for m in report.mismatches} == {"run_registry"}
    first = report.mismatches[0]
    assert first.seq == 400
    assert first.expected != first.actual
    assert first.diff.startswith("--- stored @400\n+++ rebuilt")
    assert '-    "reports": 3,' in first.diff
    assert '+    "reports": 6,' in first.diff


def test_snapshots_of_other_versions_are_skipped_not_compared(db, open_db):
    log = open_db()
    Views(log, snapshot_every=600).catch_up()
    bumped = RunRegistryView()
    stored = bumped.version
    bumped.version = stored + 1
    report = replay_check(log, with_view(bumped))
    assert report.ok
    assert report.compared["run_registry"] == 0
    [skipped] = report.skipped  # how many were stored depends on the rows' size
    assert re.fullmatch(
        rf"[1-9]\d* snapshot\(s\) of run_registry v{stored} \(the code has v{stored + 1}\)", skipped
    )


def test_the_cli_exits_1_on_a_difference_and_0_when_all_agree(db, open_db, monkeypatch):
    runner = CliRunner()
    stored = runner.invoke(cli, ["replay", str(db)])
    assert stored.exit_code == 0, stored.output
    same = runner.invoke(cli, ["replay-check", str(db)])
    assert same.exit_code == 0, same.output
    assert "no difference" in same.output
    monkeypatch.setattr("tools.cli.replay.default_views", lambda: with_view(DoubleCountingRegistry()))
    differs = runner.invoke(cli, ["replay-check", str(db), "--json"])
    assert differs.exit_code == 1
    assert '"view": "run_registry"' in differs.output


def test_nothing_to_compare_is_said_out_loud(tmp_path):
    path = tmp_path / "empty.db"
    open_log(path).close()
    result = CliRunner().invoke(cli, ["replay-check", str(path)])
    assert result.exit_code == 0
    assert "nothing was compared" in result.output


# -- golden fixtures ---------------------------------------------------------------------------


def golden_log(case: str, path: Path) -> Path:
    clock = ManualClock()
    log = open_log(path, clock=clock)
    with open(GOLDEN / case / "events.jsonl", "rb") as lines:
        import_lines(log, clock, lines)  # checks each record's hash against the fixture's
    log.close()
    return path


def test_the_golden_fixtures_are_there():
    # Without this, a fixture folder lost (say, to an ignore rule) would skip the test below.
    assert CASES == ["edges", "mixed"]


@pytest.mark.parametrize("case", CASES)
def test_golden_logs_rebuild_to_their_expected_views(case, tmp_path):
    path = golden_log(case, tmp_path / f"{case}.db")
    result = CliRunner().invoke(cli, ["replay-check", str(path), "--golden", str(GOLDEN / case)])
    assert result.exit_code == 0, result.output
    expected, _ = read_expected(str(GOLDEN / case))
    assert set(expected) == {v.name for v in default_views()}


def test_a_golden_difference_is_shown_as_a_diff(tmp_path):
    path = golden_log("edges", tmp_path / "edges.db")
    log = open_log(path)
    expected, _ = read_expected(str(GOLDEN / "edges"))
    report = compare_expected(log, with_view(DoubleCountingRegistry()), expected)
    log.close()
    assert [m.view for m in report.mismatches] == ["run_registry"]
    assert '-    "reports": 1,' in report.mismatches[0].diff
    assert '+    "reports": 2,' in report.mismatches[0].diff


def test_a_fixture_whose_record_was_edited_does_not_import(tmp_path):
    lines = (GOLDEN / "edges" / "events.jsonl").read_bytes().splitlines()
    lines[2] = lines[2].replace(b'"working"', b'"idle"')
    clock = ManualClock()
    log = open_log(tmp_path / "bad.db", clock=clock)
    with pytest.raises(ValueError, match="line 3: seq 3 hashes to"):
        import_lines(log, clock, lines)
    log.close()


# -- upcasting ---------------------------------------------------------------------------------


@event("TravelNoteAdded", schema=2)
@dataclass(frozen=True, slots=True)
class TravelNoteAdded(Event):
    """A note (schema 2: a tuple of tags; schema 1 had one optional `tag`)."""

    note_id: str
    text: str
    tags: tuple[str, ...]


@upcaster("TravelNoteAdded", 1)
def _note_v1_to_v2(data: dict[str, Any]) -> dict[str, Any]:
    tag = data.pop("tag", "")
    data["tags"] = [tag] if tag else []
    return data


class NotesView:
    """Tags per note, straight from record data (which the runner upcasts first)."""

    name, version, types = "notes", 1, frozenset({"TravelNoteAdded"})

    def initial(self):
        return {}

    def apply(self, state, record: Record):
        state[record.data["note_id"]] = list(record.data["tags"])
        return state

    def copy(self, state):
        return dict(state)

    def dump(self, state):
        return {k: state[k] for k in sorted(state)}

    def load(self, data):
        return dict(data)


def test_a_v1_record_in_an_old_database_reads_as_v2(tmp_path):
    path = tmp_path / "old.db"
    old = open_log(path)  # what the code of schema 1 wrote
    old.append("note-1", [NewEvent("TravelNoteAdded", {"note_id": "1", "text": "hi", "tag": "x"}, schema=1)])
    old.append("note-2", [NewEvent("TravelNoteAdded", {"note_id": "2", "text": "yo"}, schema=1)])
    old.close()
    stored = sqlite3.connect(path).execute("SELECT schema FROM events ORDER BY seq").fetchall()
    assert stored == [(1,), (1,)]  # the records stay as they were written

    log = open_log(path)
    records = list(log.read_all())
    assert decode(records[0]) == TravelNoteAdded("1", "hi", ("x",))
    assert decode(records[1]) == TravelNoteAdded("2", "yo", ())
    assert upcast_record(records[0]).schema == 2
    log.append("note-3", [TravelNoteAdded("3", "new", ("a", "b"))])  # today's code writes schema 2

    views = Views(log, views=[NotesView()], snapshots=None)
    assert views.state("notes") == {"1": ["x"], "2": [], "3": ["a", "b"]}
    assert views.state("notes", at=1) == {"1": ["x"]}  # time travel upcasts too
    assert replay_check(log, [NotesView()]).ok
    log.close()
