"""A crafted export: records off the event catalogue with the hash chain recomputed around them.

The attack: a `RunRegistered` with data of the wrong types, a record at schema 99, a type that
is not in the catalogue in an approval's stream, each with a correct prev_hash and hash, so
that the chain verifies. `flightlog import` refuses it naming the first bad seq and writes
nothing. The same records written straight into the SQLite file (past import) are named by
`verify`, left out by every view (`runs`, `approvals` and `timeline` answer, and say how many
records they skipped), and `serve` refuses the log in one line unless --allow-tampered.
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
import uuid
from contextlib import closing
from datetime import timedelta

import orjson
import pytest

from eventlog import Record, from_micros, open_log, to_micros
from eventlog._chain import canonical_bytes, make_hasher
from eventlog._record import NotJSON
from tools.cli.export import record_line
from tools.http import TAMPER_HEADER

from ..http.server import ServerProcess
from .helpers import json_of, run

OPERATOR_TOKEN = "crafted-import-operator-token-0123"
EXIT_TAMPERED = 3
AT = "2026-01-01T12:00:00+00:00"
SORTED = orjson.OPT_SORT_KEYS
LEAN_ROW = "seq, stream, version, type, schema, data, meta, event_id, recorded_at, hash"  # SQLite's row


def crafted(db: str, broker_run: str, kinds: list[str]) -> list[Record]:
    """Records of `kinds` continuing `db`'s chain exactly where it ends, hashes recomputed."""
    with open_log(db, readonly=True) as log:
        head = log.head()
        last = next(log.read_all(after_seq=head.seq - 1))
        versions = {s: log.stream_version(s) for s in ("run-evil", "approval-evil", f"run-{broker_run}")}
    versions["deploy-42"] = 0
    made = {
        # Every field of the wrong kind: a list for a string (unhashable: it killed every view),
        # a number for a string, a number for a time, and a time that is no time.
        "wrong-types": ("run-evil", "RunRegistered", 1,
                        {"run_id": ["x"], "token_sha256": 5, "registered_at": 7, "at": "not a time"}),
        "newer-schema": ("run-evil", "RunReported", 99,
                         {"run_id": "evil", "state": "working", "payload": None, "at": AT}),
        "unknown-type": ("approval-evil", "ApprovalHijacked", 1,
                         {"approval_id": "a1", "decision": "approve"}),
        # Inside a real run's stream: its timeline must still read, without it.
        "wrong-type-in-a-run": (f"run-{broker_run}", "RunReported", 1,
                                {"run_id": broker_run, "state": 42, "payload": None, "at": AT}),
        "users-own": ("deploy-42", "DeployRequested", 1, {"service": "web"}),
        # Not JSON at all (only a hand edit stores that; an export line cannot carry it).
        "not-json": (f"run-{broker_run}", "RunReported", 1, NotJSON(b'{"run_id": ')),
    }  # fmt: skip
    hasher = make_hasher()
    prev, seq, when = head.hash, head.seq, from_micros(last.recorded_us)
    out = []
    for kind in kinds:
        stream, type_name, schema, data = made[kind]
        seq += 1
        versions[stream] += 1
        when += timedelta(seconds=1)
        meta = orjson.dumps({"actor": "mallory"})
        event_id = str(uuid.uuid4())
        version, at = versions[stream], to_micros(when)
        body = canonical_bytes(seq, stream, version, type_name, schema, stored_data(data), meta, event_id, at)
        digest = hasher(prev, body)
        out.append(Record(seq, stream, version, type_name, schema, data, meta, event_id, at, prev, digest))
        prev = digest
    return out


def stored_data(data: object) -> bytes:
    """The bytes a record's data is stored (and hashed) as."""
    return bytes(data) if isinstance(data, NotJSON) else orjson.dumps(data, option=SORTED)


def write_export(path, lines: list[bytes]) -> str:
    path.write_bytes(b"".join(lines))
    return str(path)


def stored(db: str) -> tuple[object, list[tuple]]:
    with open_log(db, readonly=True) as log:
        return log.head(), [tuple(r) for r in log.read_all()]


ATTACK = ["wrong-types", "newer-schema", "unknown-type"]
REASONS = {
    "wrong-types": "RunRegistered: run_id must be a string, got a list",
    "newer-schema": "RunReported schema 99 is newer than this flightlog knows (schema 1): "
    "a newer flightlog wrote it",
    "unknown-type": "type 'ApprovalHijacked' is not in the event catalogue, and approval-<id> streams hold "
    "flightlog's events only",
    "wrong-type-in-a-run": "RunReported: state must be a string, got an integer",
    "not-json": "its data must be a JSON object, got bytes that are not JSON",
}


# -- import -------------------------------------------------------------------------------------


def test_import_refuses_the_crafted_export_naming_the_first_bad_seq(db, seeded, tmp_path):
    lines = run("export", db).stdout_bytes.splitlines(keepends=True)
    attack = crafted(db, seeded.broker_run, ATTACK)
    source = write_export(tmp_path / "crafted.jsonl", [*lines, *map(record_line, attack)])

    # Each record's link and hash are checked before its content: the refusal names the
    # content, so the crafted chain itself holds (as it did when import took it whole).
    target = tmp_path / "imported.db"
    result = run("import", str(target), source)
    assert result.exit_code == 1
    assert result.stdout == ""
    assert result.stderr.splitlines() == [
        f"refused: import refused at seq {seeded.head + 1}: {REASONS['wrong-types']}; nothing was imported"
    ]
    assert not target.exists()  # the file it would have created is not left behind


@pytest.mark.parametrize("kind", ATTACK)
def test_each_crafted_record_is_refused_and_the_database_is_unchanged(db, seeded, tmp_path, kind):
    before = stored(db)
    source = write_export(
        tmp_path / f"{kind}.jsonl", [record_line(r) for r in crafted(db, seeded.broker_run, [kind])]
    )

    result = run("import", db, source)
    assert result.exit_code == 1
    assert f"import refused at seq {seeded.head + 1}: {REASONS[kind]}" in result.stderr
    refusal = json_of(run("import", db, source, "--json"))
    assert (refusal["ok"], refusal["seq"], refusal["imported"], refusal["head"]) == (
        False, seeded.head + 1, 0, seeded.head,
    )  # fmt: skip
    assert REASONS[kind] in refusal["message"]
    assert stored(db) == before


def test_a_users_own_event_in_a_users_own_stream_is_imported(db, seeded, tmp_path):
    [record] = crafted(db, seeded.broker_run, ["users-own"])
    result = run("import", db, write_export(tmp_path / "deploy.jsonl", [record_line(record)]))
    assert result.exit_code == 0, result.output
    assert run("verify", db).exit_code == 0


# -- the same records written into the file, past import ----------------------------------------


@pytest.fixture
def tampered(db, seeded) -> tuple[str, list[Record]]:
    """`db` with the attack, a bad record inside a real run's stream, a user's own event and a
    record whose data is not JSON inserted straight into its SQLite file, every hash recomputed."""
    records = crafted(db, seeded.broker_run, [*ATTACK, "wrong-type-in-a-run", "users-own", "not-json"])
    rows = [
        (r.seq, r.stream, r.version, r.type, r.schema, stored_data(r.data).decode(),
         r.meta_json.decode(), uuid.UUID(r.event_id).bytes, r.recorded_us, bytes.fromhex(r.hash))
        for r in records
    ]  # fmt: skip
    with closing(sqlite3.connect(db)) as conn, conn:
        conn.executemany(
            f"INSERT INTO events ({LEAN_ROW}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            rows,
        )
    return db, records


def test_verify_names_the_records_off_the_catalogue_and_the_chain_still_holds(tampered, seeded):
    db, records = tampered
    result = run("verify", db)
    assert result.exit_code == 1
    lines = result.stdout.splitlines()
    assert lines[0] == f"ok: chain verified over {seeded.head + len(records)} events"
    first = seeded.head + 1
    assert lines[1] == (
        f"OFF CATALOGUE: 5 record(s) do not fit the event catalogue: seq {first}: {REASONS['wrong-types']}; "
        f"seq {first + 1}: {REASONS['newer-schema']}; seq {first + 2}: {REASONS['unknown-type']}; "
        f"seq {first + 3}: {REASONS['wrong-type-in-a-run']}; seq {first + 5}: {REASONS['not-json']}"
    )
    verdict = json_of(run("verify", db, "--json"))
    assert (verdict["ok"], verdict["chain_ok"], verdict["first_bad_seq"]) == (False, True, None)
    assert verdict["catalogue"]["off_catalogue"] == 5
    assert [f["seq"] for f in verdict["catalogue"]["first"]] == [
        first,
        first + 1,
        first + 2,
        first + 3,
        first + 5,
    ]
    assert run("verify", db, "--chain-only").exit_code == 0  # the chain alone cannot tell


def test_the_readers_answer_without_the_records_and_say_how_many_they_left_out(tampered, seeded, workload):
    db, _ = tampered
    pristine = str(workload[0])  # the same log before the records were written into it
    commands = {
        "runs": ["runs", "DB"],
        "pending approvals": ["approvals", "DB"],
        "approval history": ["approvals", "DB", "--all"],
        "a broker run's timeline (with a bad record in its stream)": ["timeline", "DB", seeded.broker_run],
        "an agent run's timeline": ["timeline", "DB", seeded.run],
    }
    for name, args in commands.items():
        result = run(*[db if a == "DB" else a for a in args], "--json")  # a traceback would raise here
        assert result.exit_code == 0, (name, result.output)
        # One line on stderr: the four records the views route (the unknown type is in no view).
        assert result.stderr.startswith("flightlog: 4 record(s) could not be read and were left out: "), name
        assert len(result.stderr.splitlines()) == 1, name
        assert f"seq {seeded.head + 1}: {REASONS['wrong-types']}" in result.stderr
        # Every view reads as if the records were not there.
        expected = json.loads(run(*[pristine if a == "DB" else a for a in args], "--json").stdout)
        got = json.loads(result.stdout)
        if name == "pending approvals":  # expires_in_s counts down between the two runs
            got, expected = [a["id"] for a in got], [a["id"] for a in expected]
        else:
            got.pop("seq", None) if isinstance(got, dict) else None
            expected.pop("seq", None) if isinstance(expected, dict) else None
        assert got == expected, name
    table = run("timeline", db, seeded.broker_run)
    assert table.exit_code == 0
    assert "could not be read" in table.stderr


def test_events_and_export_show_data_that_is_not_json_as_its_text(tampered):
    db, records = tampered
    events = run("events", db, "--json")
    assert events.exit_code == 0
    assert json.loads(events.stdout.splitlines()[-1])["data"] == '{"run_id": '
    assert run("events", db).exit_code == 0
    exported = run("export", db)
    assert exported.exit_code == 0
    assert len(exported.stdout.splitlines()) == records[-1].seq


def test_serve_refuses_the_log_in_one_line(tampered, seeded):
    db, _ = tampered
    argv = [sys.executable, "-c", "from tools.cli import main; main()", "serve", "--db", db, "--port", "0"]
    env = {"FLIGHTLOG_OPERATOR_TOKEN": OPERATOR_TOKEN, "PATH": "/usr/bin:/bin"}
    done = subprocess.run(argv, capture_output=True, text=True, timeout=60, env=env)
    assert done.returncode == EXIT_TAMPERED, done.stderr
    assert done.stdout == ""
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith(
        f"flightlog: refusing to serve {db}: 5 record(s) do not fit the event catalogue"
    )
    assert f"seq {seeded.head + 1}: {REASONS['wrong-types']}" in lines[0]
    assert lines[0].endswith("(--allow-tampered serves it with a banner)")
    assert "Traceback" not in done.stderr


@pytest.mark.slow
def test_serve_allow_tampered_serves_it_and_says_so_on_every_answer(tampered, seeded):
    db, _ = tampered
    server = ServerProcess(db, OPERATOR_TOKEN, ("--allow-tampered",))
    try:
        operator = {"Authorization": f"Bearer {OPERATOR_TOKEN}"}
        for path in ("/health", "/api/v1/runs", "/api/v1/approvals"):
            response = server.client.get(path, headers=operator)
            assert response.status_code == 200, (path, response.text)
            assert "do not fit the event catalogue" in response.headers[TAMPER_HEADER], path
        runs = server.client.get("/api/v1/runs", headers=operator).json()
        assert seeded.broker_run in json.dumps(runs)
        assert server.stop() == 0
        assert "TAMPERED: 5 record(s) do not fit the event catalogue" in server.output()
        assert "Traceback" not in server.output()
    finally:
        server.close()
