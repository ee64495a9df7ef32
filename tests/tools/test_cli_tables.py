"""Tables fit an 80-column terminal with their identifying columns readable; piped, nothing is cut."""

from __future__ import annotations

import fcntl
import os
import pathlib
import pty
import re
import struct
import subprocess
import sys
import termios

import pytest

from eventlog import open_log

from .helpers import run, seed_approval

ROOT = pathlib.Path(__file__).resolve().parents[2]
ANSI = re.compile(r"\x1b\[[0-9;]*m")


def on_a_terminal(*args: str, columns: int = 80) -> str:
    """`flightlog ARGS` with its stdout on a pseudo-terminal `columns` wide; what it showed."""
    leader, follower = pty.openpty()
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 40, columns, 0, 0))
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT), "COLUMNS": str(columns), "TERM": "xterm"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "tools.cli", *args], stdout=follower, stderr=follower, env=env
    )
    os.close(follower)
    chunks = []
    while True:
        try:
            chunk = os.read(leader, 65536)
        except OSError:  # the terminal closed: the process has ended
            break
        if not chunk:
            break
        chunks.append(chunk)
    os.close(leader)
    assert proc.wait(timeout=60) == 0
    return ANSI.sub("", b"".join(chunks).decode())


@pytest.fixture
def decided(db: str) -> tuple[str, list[str]]:
    ids = [seed_approval(db, run_id=f"run-{n}") for n in range(2)]
    run("approve", db, ids[0], "--as", "alice")
    return db, ids


@pytest.mark.parametrize("command", [["approvals", "--all"], ["audit"]])
def test_at_80_columns_ids_runs_and_titles_are_readable(decided, command):
    db, ids = decided
    shown = on_a_terminal(command[0], db, *command[1:])
    lines = shown.splitlines()
    assert all(len(line) <= 80 for line in lines), shown
    for id in ids:
        assert id[:8] in shown  # a prefix that `approve` accepts
    assert "run-0" in shown
    assert "run-1" in shown
    assert "rm -rf build" in shown  # the title, whole (wrapped at worst, never cut to …)
    assert "…" not in shown
    assert "--wide or --json shows all" in shown


def test_at_80_columns_runs_keep_their_ids_whole_or_as_a_prefix(db, workload):
    _, seeded = workload
    shown = on_a_terminal("runs", db)
    assert all(len(line) <= 80 for line in shown.splitlines()), shown
    assert seeded.run[:8] in shown
    assert seeded.broker_run[:8] in shown


@pytest.mark.parametrize("command", [["approvals", "--all"], ["audit"], ["runs"]])
def test_piped_every_cell_is_whole(decided, command):
    db, ids = decided
    out = run(command[0], db, *command[1:], env={"COLUMNS": "80"}).stdout
    assert "…" not in out
    if command[0] != "runs":
        for id in ids:
            assert id in out
        rows = [line.split("\t") for line in out.splitlines() if line.startswith(tuple(ids))]
        assert len(rows) == 2
        assert all("rm -rf build" in row for row in rows)
    else:
        with open_log(db, readonly=True) as log:
            assert log.head().seq > 0
        assert "# broker runs at" in out
