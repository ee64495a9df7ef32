"""Payloads given as JSON values from Python are stored as JSON text, as the wire stores them."""

from __future__ import annotations

import json

from click.testing import CliRunner

from actors import Finish, Reply, Report, System
from eventlog.events import RunReported
from tools.cli import cli


def test_a_json_value_is_stored_as_its_json_text_and_every_reader_shows_it(tmp_path):
    db = tmp_path / "p.db"
    with System.open(db) as system:
        system.broker.create_run("p1")
        system.broker.report(Report("p1", "tool.start", {"tool": "ls", "args": ["-l"]}))
        system.broker.report(Report("p1", "raw", '{"tool":"ls"}'))  # JSON text, as before
        system.broker.finish(Finish("p1", "done", "ok", payload=[1, 2]))
        reports = system.broker.get_run("p1").reports
        entries = system.views.timeline("p1")
    assert [r.payload for r in reports] == ['{"tool":"ls","args":["-l"]}', '{"tool":"ls"}']
    assert [e.detail for e in entries if e.kind == "report"] == [
        '{"tool":"ls","args":["-l"]}',
        '{"tool":"ls"}',
    ]
    assert Reply("p1", "op", {"a": 1}).to_json()["payload"] is not None
    shown = CliRunner().invoke(cli, ["timeline", str(db), "p1", "--json"])
    assert shown.exit_code == 0, shown.output
    texts = [e["text"] for e in json.loads(shown.output)["entries"] if e["kind"] == "report"]
    assert texts == ['{"tool":"ls","args":["-l"]}', '{"tool":"ls"}']


def test_a_value_stored_before_payloads_were_text_still_reads(tmp_path):
    db = tmp_path / "old.db"
    with System.open(db) as system:
        system.broker.create_run("p1")
        at = system.clock.now()
        # What `Report("p1", "tool.start", {"tool": "ls"})` stored before: the dict itself.
        system.log.append("run-p1", [RunReported("p1", "tool.start", {"tool": "ls"}, at)])  # type: ignore[arg-type]
    # Shown as its JSON text, or left out as a record that does not fit the catalogue: never a crash.
    shown = CliRunner().invoke(cli, ["timeline", str(db), "p1"])
    assert shown.exit_code == 0, shown.output
    assert "Traceback" not in shown.output
