"""Outputs never overwrite the log: `export -o`, `export --views` and `export --run -o` refuse the
log itself, its -wal/-shm and another name of the same file, and write through a temporary file."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from eventlog import open_log
from tools.cli import cli

from .conftest import Seeded


def invoke(*args: str) -> Result:
    # catch_exceptions=False: a traceback fails the test instead of becoming an exit code.
    return CliRunner().invoke(cli, list(args), catch_exceptions=False, env={"COLUMNS": "250"})


def digest(path: str) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def targets(db: str) -> dict[str, str]:
    """Names that all write the log at `db`."""
    folder = os.path.dirname(db)
    link = os.path.join(folder, "hard-link.jsonl")
    os.link(db, link)
    symlink = os.path.join(folder, "sym-link.jsonl")
    os.symlink(db, symlink)
    return {"the log": db, "its -wal": db + "-wal", "its -shm": db + "-shm", "a hard link": link,
            "a symlink": symlink}  # fmt: skip


@pytest.mark.parametrize("option", ["-o", "--views"])
def test_export_refuses_to_write_the_log_under_any_of_its_names(db: str, option: str) -> None:
    with open_log(db) as log:
        head = log.head()
    before = digest(db)
    for what, target in targets(db).items():
        result = invoke("export", db, option, target)
        assert result.exit_code == 2, (what, result.output)
        assert "that is the database being exported" in result.output, what
        assert "Traceback" not in result.output
    assert digest(db) == before
    with open_log(db) as log:
        assert log.head() == head
        assert log.verify().ok


def test_export_of_a_run_refuses_the_log_too(db: str, seeded: Seeded) -> None:
    before = digest(db)
    result = invoke("export", db, "--run", seeded.broker_run, "-o", db + "-wal")
    assert result.exit_code == 2, result.output
    assert digest(db) == before


def test_export_writes_through_a_temporary_file_and_keeps_the_mode_given(db: str, tmp_path: Path) -> None:
    out = tmp_path / "out.jsonl"
    out.write_text("old\n")
    out.chmod(0o640)
    result = invoke("export", db, "-o", str(out))
    assert result.exit_code == 0, result.output
    assert out.read_text().startswith('{"seq":1,')
    assert out.stat().st_mode & 0o777 == 0o640
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == []  # no temporary left


def test_export_views_into_a_file_that_is_not_sqlite_is_one_line_and_leaves_it(
    db: str, tmp_path: Path
) -> None:
    out = tmp_path / "notes.txt"
    out.write_text("my notes, not a database\n" * 100)
    result = invoke("export", db, "--views", str(out))
    assert result.exit_code == 2, result.output
    assert "cannot write the views to" in result.output
    assert out.read_text().startswith("my notes")
    assert sorted(p.name for p in tmp_path.iterdir() if p.name != "flightlog.db") == ["notes.txt"]
