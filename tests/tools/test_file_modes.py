"""Files the CLI writes are its user's alone, and `import` makes no other database a log.

Exports (`export -o`, `export --views`), golden dumps and the logs `import` creates are 0600
whatever the umask; a file that was there keeps its mode. `import` into another application's
SQLite file is refused like every other command that writes: same bytes, same journal mode.
"""

from __future__ import annotations

import hashlib
import os
import sqlite3
import stat
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path

import pytest

from tools._output import EXIT_STORAGE

from .helpers import run
from .test_cli_bad_files import READERS


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.fixture(params=[0o000, 0o022], ids=lambda m: f"umask {m:03o}")
def umask(request: pytest.FixtureRequest) -> Iterator[int]:
    old = os.umask(request.param)
    yield request.param
    os.umask(old)


def test_export_lines_are_0600(db, tmp_path, umask):
    out = tmp_path / "run.jsonl"
    assert run("export", db, "-o", str(out)).exit_code == 0
    assert mode(out) == 0o600
    assert out.stat().st_size > 0


def test_export_views_are_0600(db, tmp_path, umask):
    out = tmp_path / "views.db"
    result = run("export", db, "--views", str(out))
    assert result.exit_code == 0, result.output
    assert mode(out) == 0o600
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith("views")) == ["views.db"]


def test_a_file_the_user_made_keeps_its_mode(db, tmp_path, umask):
    lines, views = tmp_path / "run.jsonl", tmp_path / "views.db"
    for path in (lines, views):
        path.touch()
        path.chmod(0o640)
    assert run("export", db, "-o", str(lines), "--views", str(views)).exit_code == 0
    assert (mode(lines), mode(views)) == (0o640, 0o640)
    assert lines.stat().st_size > 0


def test_a_log_import_creates_is_0600(db, tmp_path, umask):
    out = tmp_path / "run.jsonl"
    assert run("export", db, "-o", str(out)).exit_code == 0
    copy = tmp_path / "copy.db"
    result = run("import", str(copy), str(out))
    assert result.exit_code == 0, result.output
    assert {p.name: mode(p) for p in tmp_path.iterdir() if p.name.startswith("copy")} == {"copy.db": 0o600}


def test_golden_dumps_are_0600(db, tmp_path, umask):
    folder = tmp_path / "golden"
    result = run("replay-check", db, "--golden", str(folder), "--update-golden")
    assert result.exit_code == 0, result.output
    written = [p for p in folder.rglob("*") if p.is_file()]
    assert written
    assert {mode(p) for p in written} == {0o600}


# -- import into another application's database -----------------------------------------------


def state_of(path: Path) -> tuple[str, bytes, list[tuple[str, str]], list[str]]:
    """What must not change: the bytes, the journal mode (the header's versions), the schema and
    the files beside it."""
    data = path.read_bytes()
    with closing(sqlite3.connect(f"file:{path}?mode=ro&immutable=1", uri=True)) as conn:
        tables = conn.execute("SELECT name, sql FROM sqlite_master ORDER BY name").fetchall()
    beside = sorted(p.name for p in path.parent.iterdir())
    return hashlib.sha256(data).hexdigest(), data[18:20], tables, beside


@pytest.mark.parametrize("journal", ["delete", "wal"])
def test_import_refuses_another_applications_database_unchanged(db, tmp_path, journal):
    out = tmp_path / "run.jsonl"
    assert run("export", db, "-o", str(out)).exit_code == 0
    folder = tmp_path / "other"
    folder.mkdir()
    other = folder / "other.db"
    with closing(sqlite3.connect(other)) as conn:
        conn.execute(f"PRAGMA journal_mode = {journal}")
        conn.execute("CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT)")
        conn.execute("INSERT INTO notes (body) VALUES ('keep me')")
        conn.commit()
    before = state_of(other)
    assert before[1] == (b"\x02\x02" if journal == "wal" else b"\x01\x01")
    for source in (str(out), "-"):
        result = run("import", str(other), source, input=out.read_bytes() if source == "-" else None)
        assert result.exit_code == EXIT_STORAGE, result.output
        assert result.stderr.strip() == f"Error: not a flightlog log: {other}"
        assert state_of(other) == before


def test_import_into_an_empty_file_makes_it_a_log(db, tmp_path):
    out = tmp_path / "run.jsonl"
    assert run("export", db, "-o", str(out)).exit_code == 0
    empty = tmp_path / "empty.db"
    empty.touch()
    empty.chmod(0o600)
    result = run("import", str(empty), str(out))
    assert result.exit_code == 0, result.output
    assert run("verify", str(empty), "--chain-only").exit_code == 0


def test_an_output_that_cannot_be_created_is_a_usage_error_without_a_traceback(db, tmp_path):
    missing = tmp_path / "no-such-folder"
    lines = run("export", db, "-o", str(missing / "run.jsonl"))
    assert lines.exit_code == 2
    assert lines.stderr.strip() == f"Error: cannot write {missing / 'run.jsonl'}: No such file or directory"
    views = run("export", db, "--views", str(missing / "views.db"))
    assert views.exit_code == 2
    assert f"cannot write {missing / 'views.db'}: No such file or directory" in views.stderr
    assert not missing.exists()


@pytest.mark.parametrize("journal", ["wal", "delete"])
def test_readers_refuse_another_applications_database_unchanged(tmp_path, journal):
    # test_cli_bad_files runs each reader and writer on a rollback-journal file; this adds a WAL
    # file, with no -wal beside it, as its application left it.
    other = tmp_path / "other.db"
    with closing(sqlite3.connect(other)) as conn:
        conn.execute(f"PRAGMA journal_mode = {journal}")
        conn.execute("CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT)")
        conn.commit()
    before = state_of(other)
    for args in READERS:
        result = run(args[0], str(other), *args[1:])
        assert result.exit_code == EXIT_STORAGE, (args, result.output)
        assert result.stderr.strip() == f"Error: not a flightlog log: {other}"
        assert state_of(other) == before, args
