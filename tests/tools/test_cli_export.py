"""`flightlog export` and `flightlog import`: JSON lines that come back as the same chain, refusals
that write nothing, and `export --views` tables that sqlite-utils (and so Datasette) can read."""

from __future__ import annotations

import json
import sqlite3
import uuid

import sqlite_utils

from eventlog import open_log
from projections import Views
from tests.conftest import drop_pg_schema, pg_unavailable, pg_url, require_or_skip
from tools.cli.export import FIELDS

from .helpers import json_of, run


def records(target: str) -> list[tuple]:
    with open_log(target) as log:
        return [tuple(r) for r in log.read_all()]


def verified_head(target: str):
    with open_log(target) as log:
        result = log.verify()
    assert result.ok, result
    return result.head


def export_lines(db: str, *args: str) -> list[str]:
    result = run("export", db, *args)
    assert result.exit_code == 0, result.output
    return result.stdout.splitlines()


def test_every_record_round_trips_into_an_empty_log(db, tmp_path, seeded):
    out = tmp_path / "run.jsonl"
    result = run("export", db, "-o", str(out))
    assert result.exit_code == 0, result.output
    assert f"exported {seeded.head} record(s) (seq 1 to {seeded.head})" in result.stdout
    lines = out.read_text().splitlines()
    assert len(lines) == seeded.head
    first = json.loads(lines[0])
    assert tuple(first) == FIELDS
    assert first["recorded_at"].endswith("+00:00")

    copy = str(tmp_path / "copy.db")
    imported = json_of(run("import", copy, str(out), "--json", "--batch", "64"))
    assert imported["ok"] is True
    assert imported["imported"] == seeded.head
    assert imported["head"]["seq"] == seeded.head
    assert records(copy) == records(db)  # seq, versions, ids, times, data, meta and hashes
    assert verified_head(copy) == verified_head(db)
    assert run("anchor", copy).stdout == run("anchor", db).stdout


def test_stdout_into_stdin(db, tmp_path):
    copy = str(tmp_path / "copy.db")
    exported = run("export", db).stdout_bytes
    result = run("import", copy, "-", input=exported)
    assert result.exit_code == 0, result.output
    assert "imported 200 record(s), seq 1 to 200" in result.stdout
    assert verified_head(copy) == verified_head(db)


def test_a_round_trip_into_postgresql(db, tmp_path):
    if reason := pg_unavailable():
        require_or_skip(reason)
    schema = f"t_{uuid.uuid4().hex[:12]}"
    base = pg_url() or ""
    url = f"{base}{'&' if '?' in base else '?'}options=-csearch_path%3D{schema}"
    try:
        out = tmp_path / "run.jsonl"
        assert run("export", db, "-o", str(out)).exit_code == 0
        result = run("import", url, str(out), "--batch", "50")
        assert result.exit_code == 0, result.output
        assert records(url) == records(db)
        assert verified_head(url) == verified_head(db)
        # ... and back out of PostgreSQL, line for line.
        assert run("export", url).stdout == out.read_text()
    finally:
        drop_pg_schema(schema)


def test_a_tampered_export_is_refused_and_nothing_is_written(db, tmp_path):
    lines = export_lines(db)
    record = json.loads(lines[149])
    record["data"]["tampered"] = True
    lines[149] = json.dumps(record)
    out = tmp_path / "tampered.jsonl"
    out.write_text("\n".join(lines) + "\n")

    copy = str(tmp_path / "copy.db")
    result = run("import", copy, str(out), "--batch", "10")
    assert result.exit_code == 1
    assert "import refused at seq 150: hash does not match the record's content" in result.stderr
    assert "nothing was imported" in result.stderr
    # Every record is checked before the first batch is written: not even seqs 1-140 are.
    assert records(copy) == []

    refusal = json_of(run("import", copy, str(out), "--json"))
    assert (refusal["ok"], refusal["seq"], refusal["imported"], refusal["head"]) == (False, 150, 0, 0)


def test_a_line_that_is_not_a_record_is_refused_by_its_number(db, tmp_path):
    lines = export_lines(db)
    out = tmp_path / "bad.jsonl"
    for bad, reason in (("{not json", "line 3: not JSON"), ('{"seq": 3}', "line 3: missing stream")):
        out.write_text("\n".join([*lines[:2], bad, *lines[3:]]) + "\n")
        result = run("import", str(tmp_path / "copy.db"), str(out))
        assert result.exit_code == 1
        assert reason in result.stderr
    record = json.loads(lines[2])
    record["recorded_at"] = "yesterday"
    out.write_text("\n".join([*lines[:2], json.dumps(record)]) + "\n")
    result = run("import", str(tmp_path / "copy.db"), str(out))
    assert "line 3: recorded_at must be an ISO time" in result.stderr
    assert records(str(tmp_path / "copy.db")) == []


def test_an_export_after_a_seq_continues_a_copy_that_ends_there(db, tmp_path):
    copy = str(tmp_path / "copy.db")
    head = tmp_path / "head.jsonl"
    head.write_text("\n".join(export_lines(db)[:120]) + "\n")
    assert run("import", copy, str(head)).exit_code == 0

    tail = run("export", db, "--after", "120").stdout_bytes
    assert run("import", copy, input=tail).exit_code == 0
    assert records(copy) == records(db)

    again = run("import", copy, input=tail)
    assert again.exit_code == 1
    assert "the log ends at seq 200 but the records start at seq 121" in again.stderr


def test_export_narrows_to_a_stream_or_a_seq(db, seeded):
    stream = f"run-{seeded.broker_run}"
    lines = [json.loads(line) for line in export_lines(db, "--stream", stream)]
    assert lines
    assert {r["stream"] for r in lines} == {stream}
    later = [json.loads(line) for line in export_lines(db, "--stream", stream, "--after", "150")]
    assert later == [r for r in lines if r["seq"] > 150]
    assert export_lines(db, "--after", str(seeded.head)) == []


def test_export_and_import_usage_errors(db, tmp_path, seeded):
    missing = str(tmp_path / "nowhere.db")
    for args in (("export", missing), ("export", missing, "--views", str(tmp_path / "v.db"))):
        result = run(*args)
        assert result.exit_code == 2
        assert f"no database at {missing!r}" in result.stderr

    result = run("export", db, "--stream", "run-nobody")
    assert result.exit_code == 2
    assert "no stream 'run-nobody'" in result.stderr
    result = run("export", db, "--after", str(seeded.head + 1))
    assert result.exit_code == 2
    assert f"past the log's head (seq {seeded.head})" in result.stderr
    result = run("export", db, "--after", "-1")
    assert result.exit_code == 2
    result = run("export", db, "-o", db)
    assert result.exit_code == 2
    assert "the database being exported" in result.stderr

    result = run("import", str(tmp_path / "copy.db"), str(tmp_path / "nothing.jsonl"))
    assert result.exit_code == 2
    assert "no file at" in result.stderr
    result = run("import", str(tmp_path / "no" / "folder" / "copy.db"), input=b"")
    assert result.exit_code == 2
    assert "folder does not exist" in result.stderr
    result = run("import", str(tmp_path / "copy.db"), "--batch", "0", input=b"")
    assert result.exit_code == 2
    assert "nothing to import" in run("import", str(tmp_path / "copy.db"), input=b"\n").stdout


# -- export --views ------------------------------------------------------------------------------


def test_views_become_plain_tables_with_a_meta_row(db, tmp_path, seeded):
    out = str(tmp_path / "views.db")
    summary = json_of(run("export", db, "--views", out, "--json"))
    assert summary["views"]["seq"] == seeded.head
    assert summary["views"]["chain"]["ok"] is True
    assert "records" not in summary  # without -o, --views writes no lines

    tables = sqlite_utils.Database(out)
    expected = {"pending_approvals", "approval_history", "run_registry", "finish_status", "agent_runs",
                "sessions", "agent_activity", "projects", "timeline", "open_asks", "peers",
                "approval_actors", "_meta"}  # fmt: skip
    assert set(tables.table_names()) == expected
    with open_log(db, readonly=True) as log:
        views = Views(log, snapshots=None)
        history = views.approval_history()
        runs = views.runs()
        timeline = views.timeline(seeded.run)
        head = log.verify().head

    rows = {r["id"]: r for r in tables["approval_history"].rows}
    assert set(rows) == {a.id for a in history}
    one = rows[history[0].id]
    assert one["status"] == history[0].status
    assert json.loads(one["votes"]) == list(history[0].votes)  # nested fields are JSON text
    assert one["requested_at"] == history[0].requested_at.isoformat()
    assert [r["run_id"] for r in tables["run_registry"].rows] == [r.run_id for r in runs]
    entries = list(tables["timeline"].rows_where("run_id = ?", [seeded.run], order_by="position"))
    assert [e["id"] for e in entries] == [e.id for e in timeline]
    assert tables["timeline"].pks == ["run_id", "position"]
    assert "session_id" in tables["sessions"].columns_dict  # an empty view still has its columns
    who = {(a.run_id, name) for a in history for name in (*a.votes, a.actor) if name}
    assert {(r["run_id"], r["actor"]) for r in tables["approval_actors"].rows} == who
    assert tables["approval_actors"].pks == ["run_id", "actor"]
    (meta,) = tables["_meta"].rows
    assert (meta["seq"], meta["hash"], meta["chain_verified"]) == (head.seq, head.hash, 1)
    assert meta["exported_at"]
    assert meta["source"] == db

    # Again into the same file: the tables are replaced, not appended to.
    assert run("export", db, "--views", out).exit_code == 0
    assert tables["approval_history"].count == len(history)


def test_views_with_lines_too(db, tmp_path):
    out, lines = tmp_path / "views.db", tmp_path / "run.jsonl"
    result = run("export", db, "--views", str(out), "-o", str(lines))
    assert result.exit_code == 0, result.output
    assert "exported 200 record(s)" in result.stdout
    assert "wrote the views at seq 200" in result.stdout
    assert len(lines.read_text().splitlines()) == 200


def test_views_refuse_to_overwrite_an_event_log(db, tmp_path):
    other = tmp_path / "other.db"
    open_log(other).close()
    result = run("export", db, "--views", str(other))
    assert result.exit_code == 2
    assert "holds an event log" in result.stderr
    result = run("export", db, "--views", db)
    assert result.exit_code == 2
    assert "the database being exported" in result.stderr


def test_views_of_a_tampered_log_exit_1(db, tmp_path):
    with sqlite3.connect(db) as conn:
        conn.execute("UPDATE events SET hash = ? WHERE seq = 120", ("f" * 64,))
    out = tmp_path / "views.db"
    result = run("export", db, "--views", str(out))
    assert result.exit_code == 1
    assert "BROKEN at seq 120" in result.stdout
    (meta,) = sqlite_utils.Database(out)["_meta"].rows
    assert (meta["chain_verified"], meta["chain_first_bad_seq"]) == (0, 120)


def test_a_refused_import_leaves_no_new_database_behind(tmp_path):
    target = tmp_path / "copy.db"
    result = run("import", str(target), input=b'{"bad": 1}\n')
    assert result.exit_code == 1
    assert "refused" in result.output
    assert sorted(p.name for p in tmp_path.iterdir()) == []  # not even an empty log
