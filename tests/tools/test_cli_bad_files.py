"""Files that are not usable logs: one line on stderr, a documented exit code, the file unchanged.

Read-only commands open the file read-only: a SQLite file that is not a flightlog log keeps
its bytes, its journal mode and its tables, and gets no -wal or -shm; commands that write
refuse it too, rather than making it a log.
"""

from __future__ import annotations

import hashlib
import os
import random
import shutil
import sqlite3
import subprocess
import sys
from contextlib import closing
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from tools._output import EXIT_FOUND, EXIT_STORAGE
from tools.cli import cli

from .conftest import Seeded

RUN = "run-x"
# Every command that only reads, as a user would type it after the file name.
READERS: list[list[str]] = [
    ["events"],
    ["events", "--json"],
    ["verify"],
    ["anchor"],
    ["runs"],
    ["runs", "--at", "1"],
    ["timeline", RUN],
    ["travel", RUN, "--at", "1"],
    ["diff", RUN, "--from", "1", "--to", "2"],
    ["approvals"],
    ["approvals", "--all"],
    ["audit"],
    ["replay", "--no-store"],
    ["replay-check"],
    ["export"],
]
# Commands that write to an existing log, and so refuse a file that is not one.
WRITERS: list[list[str]] = [
    ["replay"],
    ["approve", "0f8fad5b-d9cb-469f-a165-70867728950e", "--as", "ops"],
    ["reject", "0f8fad5b-d9cb-469f-a165-70867728950e", "--as", "ops"],
    ["fork", RUN, "--at", "1"],
    ["redrive", RUN],
]


def invoke(db: Path | str, args: list[str], tmp_path: Path) -> Result:
    """`flightlog CMD DB ARGS` in process; a traceback (any exception but an exit) fails the test."""
    argv = [args[0], str(db), *args[1:]]
    return CliRunner().invoke(cli, argv, catch_exceptions=False, env={"COLUMNS": "250"})


def state_of(path: Path) -> tuple[str, str, list[tuple[str, str]], list[str]]:
    """What must not change: the bytes, the journal mode, the schema, the files beside it."""
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    uri = f"file:{path}?mode=ro&immutable=1"
    with closing(sqlite3.connect(uri, uri=True)) as conn:
        (mode,) = conn.execute("PRAGMA journal_mode").fetchone()
        tables = conn.execute("SELECT name, sql FROM sqlite_master ORDER BY name").fetchall()
    return digest, mode, tables, sorted(p.name for p in path.parent.iterdir())


@pytest.fixture
def foreign(tmp_path: Path) -> Path:
    """A SQLite file of someone else's, in rollback-journal mode, with a table and a row."""
    folder = tmp_path / "foreign"
    folder.mkdir()
    path = folder / "other.db"
    with closing(sqlite3.connect(path)) as conn:
        conn.execute("CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT)")
        conn.execute("INSERT INTO notes (body) VALUES ('keep me')")
        conn.commit()
    return path


@pytest.mark.parametrize("args", READERS + WRITERS, ids=lambda a: " ".join(a))
def test_a_foreign_sqlite_file_is_refused_unchanged(foreign, tmp_path, args):
    before = state_of(foreign)
    result = invoke(foreign, args, tmp_path)
    assert result.exit_code == EXIT_STORAGE, result.output
    assert result.stderr.strip() == f"Error: not a flightlog log: {foreign}"
    assert state_of(foreign) == before
    assert state_of(foreign)[1] == "delete"


@pytest.mark.parametrize("args", READERS, ids=lambda a: " ".join(a))
def test_read_only_commands_leave_a_log_as_it_was(db, workload, tmp_path, args):
    seeded: Seeded = workload[1]
    args = [seeded.run if a == RUN else a for a in args]
    path = Path(db)
    before = state_of(path)
    assert before[3] == ["flightlog.db"]
    result = invoke(path, args, tmp_path)
    assert result.exit_code in (0, EXIT_FOUND), result.output  # diff/travel may find nothing at seq 1
    assert state_of(path) == before, "a read-only command changed the log or left files beside it"


def test_a_log_with_a_wal_beside_it_is_read_and_its_wal_kept(db, tmp_path):
    path = Path(db)
    with closing(sqlite3.connect(path)) as writer:  # a writer holds it open: the -wal holds commits
        writer.execute("PRAGMA journal_mode = WAL")
        writer.execute("CREATE TABLE IF NOT EXISTS side (x)")  # a commit only in the -wal
        writer.commit()
        assert (tmp_path / "flightlog.db-wal").stat().st_size > 0
        result = invoke(path, ["verify"], tmp_path)
        assert result.exit_code == 0, result.output
        assert sorted(p.name for p in tmp_path.iterdir()) == [
            "flightlog.db", "flightlog.db-shm", "flightlog.db-wal",
        ]  # fmt: skip


def test_a_missing_file_is_a_usage_error_and_is_not_created(tmp_path):
    path = tmp_path / "nothing.db"
    for args in READERS:
        result = invoke(path, args, tmp_path)
        assert result.exit_code == 2, (args, result.output)
        assert "no database at" in result.stderr
    assert not path.exists()


def random_bytes(tmp_path: Path) -> Path:
    path = tmp_path / "random.db"
    path.write_bytes(random.Random(5).randbytes(64 * 1024))
    return path


def damaged_copy(db: str, tmp_path: Path, pages: int = 20) -> Path:
    """A copy of the log with `pages` of the pages of its events table and that table's indexes
    (never page 1) overwritten; all of them when the log has fewer."""
    path = tmp_path / "damaged.db"
    shutil.copy(db, path)
    with closing(sqlite3.connect(path)) as conn:
        (size,) = conn.execute("PRAGMA page_size").fetchone()
        table = [
            n
            for (n,) in conn.execute(
                "SELECT pageno FROM dbstat WHERE name = 'events' OR name IN"
                " (SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'events')"
            )
        ]
    rng = random.Random(11)
    population = sorted(set(table) - {1})
    with path.open("r+b") as f:
        for page in rng.sample(population, min(pages, len(population))):
            f.seek((page - 1) * size)
            f.write(rng.randbytes(size))
    return path


BAD_FILES = {
    "random bytes": lambda db, tmp: random_bytes(tmp),
    "20 damaged pages": damaged_copy,
    "a directory": lambda db, tmp: tmp,
}


@pytest.mark.parametrize("kind", BAD_FILES)
@pytest.mark.parametrize("args", READERS, ids=lambda a: " ".join(a))
def test_a_bad_file_is_one_line_and_a_storage_exit(db, tmp_path, kind, args):
    path = BAD_FILES[kind](db, tmp_path)
    before = path.read_bytes() if path.is_file() else None
    result = invoke(path, args, tmp_path)
    assert result.exit_code == EXIT_STORAGE, result.output
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith("Error: ")
    assert str(path) in line
    if before is not None:
        assert path.read_bytes() == before


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads a file whatever its mode")
def test_an_unreadable_file(db, tmp_path):
    path = Path(db)
    path.chmod(0)
    try:
        result = invoke(path, ["verify"], tmp_path)
    finally:
        path.chmod(0o644)
    assert result.exit_code == EXIT_STORAGE, result.output


def flightlog(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "COLUMNS": "250"}
    argv = [sys.executable, "-c", "from tools.cli import main; main()", *args]
    return subprocess.run(argv, capture_output=True, text=True, env=env, timeout=120, check=False)


@pytest.mark.parametrize("kind", BAD_FILES)
def test_serve_on_a_bad_file_exits_with_one_line(db, tmp_path, kind):
    path = BAD_FILES[kind](db, tmp_path)
    done = flightlog("serve", "--db", str(path), "--port", "0")
    assert done.returncode == EXIT_STORAGE, done.stderr
    assert "Traceback" not in done.stderr
    assert done.stderr.strip().splitlines()[-1].startswith("Error: ")


@pytest.mark.parametrize("command", ["verify", "anchor", "events", "export", "runs", "approvals"])
def test_commands_on_a_damaged_log_exit_without_a_traceback(db, tmp_path, command):
    path = damaged_copy(db, tmp_path)
    done = flightlog(command, str(path))
    assert done.returncode == EXIT_STORAGE, (done.stdout[-500:], done.stderr)
    assert "Traceback" not in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr
    if command == "anchor":
        assert done.stdout == ""  # no head printed for a file that cannot be read
