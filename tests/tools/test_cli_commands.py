"""Every `flightlog` command, listed from the click group itself: its help shows an example, it runs
in process on a small seeded log, and its errors are exit 2 with a message, never a traceback:
a missing database, a wrong id, a bad moment (`--at`, `--from`, `--to`), a bad anchor."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path

import click
import pytest

from tools.cli import cli

from .conftest import Seeded
from .helpers import json_of, run, seed_approval


def commands(group: click.Group = cli, prefix: tuple[str, ...] = ()) -> Iterator[tuple[str, ...]]:
    for name, command in group.commands.items():
        yield (*prefix, name)
        if isinstance(command, click.Group):
            yield from commands(command, (*prefix, name))


def command(path: tuple[str, ...]) -> click.Command:
    found: click.Command = cli
    for name in path:
        assert isinstance(found, click.Group)
        found = found.commands[name]
    return found


ALL = sorted(commands())
# They start things or answer an agent's own protocol; everything else prints what it did.
NOT_READING = {("serve",), ("demo",), ("hook", "claude"), ("mcp",)}


@pytest.mark.parametrize("path", ALL, ids=" ".join)
def test_help_shows_an_example(path):
    result = run(*path, "--help")
    assert result.exit_code == 0, result.output
    assert "Example" in result.stdout
    assert f"flightlog {' '.join(path)}" in result.stdout.split("Example", 1)[1]


@pytest.mark.parametrize("path", ALL, ids=" ".join)
def test_every_read_command_has_json(path):
    cmd = command(path)
    if isinstance(cmd, click.Group) or path in NOT_READING:
        return
    assert any("--json" in p.opts for p in cmd.params), f"flightlog {' '.join(path)} has no --json"


# -- every command runs --------------------------------------------------------------------------

Invocation = Callable[[str, Seeded, Path], tuple[list[str], int]]


def flags(text: str, *more: str) -> list[str]:
    return [*text.split(), *more]


def _fork(db: str, s: Seeded) -> str:
    """A fork of the seeded agent run as of the head (so it is re-driven without waiting)."""
    result = run("fork", db, s.run, "--at", str(s.head), "--json")
    assert result.exit_code == 0, result.output
    return str(json.loads(result.stdout)["run_id"])


def _enrolled(db: str, name: str) -> str:
    """`name`, enrolled on `db` as an approver (for the commands that change an operator)."""
    assert run("operators", "add", db, name).exit_code == 0
    return name


def _export(db: str, tmp: Path) -> str:
    out = tmp / "run.jsonl"
    assert run("export", db, "-o", str(out)).exit_code == 0
    return str(out)


# Arguments and the expected exit code of one run of each command. A command missing here fails
# test_every_command_runs: a new command gets its line.
RUNS: dict[tuple[str, ...], Invocation] = {
    ("events",): lambda db, s, tmp: ([db, "--stream", f"run-{s.broker_run}", "--json"], 0),
    ("verify",): lambda db, s, tmp: ([db, "--json"], 0),
    ("anchor",): lambda db, s, tmp: ([db, "--json"], 0),
    ("approvals",): lambda db, s, tmp: ([db, "--all", "--json"], 0),
    ("approve",): lambda db, s, tmp: ([db, seed_approval(db), "--as", "alice", "--json"], 0),
    ("reject",): lambda db, s, tmp: ([db, seed_approval(db), "--as", "bob", "--json"], 0),
    ("audit",): lambda db, s, tmp: ([db, "--json"], 0),
    ("runs",): lambda db, s, tmp: ([db, "--at", "100", "--json"], 0),
    ("runs", "list"): lambda db, s, tmp: ([db, "--json"], 0),
    ("runs", "create"): lambda db, s, tmp: ([db, "a-new-run", "--json"], 0),
    ("runs", "revoke"): lambda db, s, tmp: ([db, s.broker_run, "--reason", "leaked", "--json"], 0),
    ("runs", "rekey"): lambda db, s, tmp: ([db, s.broker_run, "--json"], 0),
    ("timeline",): lambda db, s, tmp: ([db, s.run, "--json"], 0),
    ("travel",): lambda db, s, tmp: ([db, s.run, "--at", "150", "--json"], 0),
    ("diff",): lambda db, s, tmp: ([db, s.run, "--from", "0", "--to", str(s.head), "--json"], 1),
    ("fork",): lambda db, s, tmp: ([db, s.run, "--at", "150", "--json"], 0),
    ("redrive",): lambda db, s, tmp: ([db, _fork(db, s), "--apply-recorded", "--json"], 0),
    ("replay",): lambda db, s, tmp: ([db, "--json"], 0),
    ("replay-check",): lambda db, s, tmp: ([db, "--json"], 0),
    ("export",): lambda db, s, tmp: ([db, "-o", str(tmp / "out.jsonl"), "--json"], 0),
    ("import",): lambda db, s, tmp: ([str(tmp / "copy.db"), _export(db, tmp), "--json"], 0),
    ("serve",): lambda db, s, tmp: (["--help"], 0),  # a live server: tests/http/test_server_process.py
    ("demo",): lambda db, s, tmp: (["--help"], 0),  # the demo itself: tests/test_readme.py
    ("operators",): lambda db, s, tmp: (["--help"], 0),
    ("hook",): lambda db, s, tmp: (["--help"], 0),
    ("hook", "claude"): lambda db, s, tmp: (["--help"], 0),  # the hook itself: tests/sdk/
    ("mcp",): lambda db, s, tmp: (["--help"], 0),  # the MCP server itself: tests/sdk/
    ("operators", "add"): lambda db, s, tmp: ([db, "carol", "--role", "viewer", "--json"], 0),
    ("operators", "list"): lambda db, s, tmp: ([db, "--json"], 0),
    ("operators", "revoke"): lambda db, s, tmp: ([db, _enrolled(db, "dave"), "--reason", "left"], 0),
    ("operators", "role"): lambda db, s, tmp: ([db, _enrolled(db, "erin"), "admin"], 0),
    ("bench",): lambda db, s, tmp: (["--help"], 0),
    ("bench", "log"): lambda db, s, tmp: (
        flags("--quick --json --rounds 1 --events 300 --seconds 0.05 --dir", str(tmp)),
        0,
    ),
    ("bench", "approvals"): lambda db, s, tmp: (
        flags("--quick --json --samples 2 --requests 3 --operators 1 --rounds 1 --dir", str(tmp)),
        0,
    ),
    ("bench", "replay"): lambda db, s, tmp: (flags("--runs 10 --json --log", str(tmp / "replay.db")), 0),
    ("bench", "console"): lambda db, s, tmp: (flags("--quick --runs 10 --json"), 0),
    ("bench", "soak"): lambda db, s, tmp: (
        flags("--json --events 1000 --runs 3 --agents 2 --polls 10 --strangers 10 --dir", str(tmp))
        + flags("--capacity 10 --window 1"),
        0,
    ),
    ("bench", "broker"): lambda db, s, tmp: (
        flags("--quick --json --agents 2 --reports 20 --seconds 0.05 --pushes 3 --rounds 1 --dir", str(tmp))
        + flags("--capacity 10 --window 1"),
        0,
    ),
    ("bench", "workers"): lambda db, s, tmp: (
        flags("--quick --json --agents 2 --seconds 0.1 --rounds 1 --postgres", "", "--dir", str(tmp)),
        0,
    ),
}


@pytest.mark.parametrize("path", ALL, ids=" ".join)
def test_every_command_runs(path, db, seeded, tmp_path):
    assert path in RUNS, f"add `flightlog {' '.join(path)}` to RUNS"
    work = tmp_path / "work"
    work.mkdir()
    args, code = RUNS[path](db, seeded, work)
    result = run(*path, *args)
    assert result.exit_code == code, result.output
    if path == ("events",):  # one JSON object per line
        assert [json.loads(line)["seq"] for line in result.stdout.splitlines()]
    elif "--json" in args:
        assert json_of(result) is not None


# -- errors --------------------------------------------------------------------------------------

# What each command that reads a database needs besides DB, to get as far as opening it.
AFTER_DB: dict[str, list[str]] = {
    "approve": ["some-id", "--as", "alice"],
    "reject": ["some-id", "--as", "alice"],
    "timeline": ["some-run"],
    "travel": ["some-run", "--at", "1"],
    "diff": ["some-run", "--from", "1", "--to", "2"],
    "fork": ["some-run", "--at", "1"],
    "redrive": ["some-fork"],
}
CREATES = {"import"}  # import writes into a new database: a missing one is created


def takes_db(path: tuple[str, ...]) -> bool:
    params = command(path).params
    return bool(params) and isinstance(params[0], click.Argument) and params[0].name == "db"


@pytest.mark.parametrize("path", [p for p in ALL if takes_db(p) and p[0] not in CREATES], ids=" ".join)
def test_a_missing_database_is_a_usage_error_naming_it(path, tmp_path):
    missing = str(tmp_path / "no-such.db")
    result = run(*path, missing, *AFTER_DB.get(path[0], []))
    assert result.exit_code == 2, result.output
    assert f"no database at {missing!r}" in result.stderr
    assert not (tmp_path / "no-such.db").exists()


def test_wrong_ids(db, seeded):
    for name in ("approve", "reject"):
        result = run(name, db, "no-such-approval", "--as", "alice")
        assert result.exit_code == 3
        assert "no approval with id 'no-such-approval'" in result.stderr
    for name, *rest in (["timeline"], ["travel", "--at", "5"], ["diff", "--from", "1", "--to", "5"]):
        result = run(name, db, "no-such-run", *rest)
        assert result.exit_code == 2, name
        assert "no-such-run" in result.stderr
    result = run("fork", db, "no-such-run", "--at", "5")
    assert result.exit_code == 2
    assert "no agent run 'no-such-run'" in result.stderr
    result = run("replay", db, "--view", "no-such-view")
    assert result.exit_code == 2
    assert "no view no-such-view" in result.stderr
    assert "no approvals recorded for run no-such-run" in run("audit", db, "--run", "no-such-run").stdout


@pytest.mark.parametrize("moment", ["yesterday", "-1", "999999", "2026-13-01"])
def test_a_bad_moment_is_a_usage_error(db, seeded, moment):
    for args in (
        ["runs", db, "--at", moment],
        ["timeline", db, seeded.run, "--at", moment],
        ["travel", db, seeded.run, "--at", moment],
        ["fork", db, seeded.run, "--at", moment],
        ["diff", db, seeded.run, "--from", moment, "--to", "5"],
        ["diff", db, seeded.run, "--from", "5", "--to", moment],
    ):
        result = run(*args)
        assert result.exit_code == 2, args
        option = "--to" if args[-2] == "--to" and args[-1] == moment else args[args.index(moment) - 1]
        assert f"Invalid value for {option}" in result.stderr, result.stderr


def test_a_bad_anchor_is_a_usage_error(db, tmp_path):
    anchor = tmp_path / "anchor.txt"
    anchor.write_text("not an anchor")
    result = run("verify", db, "--anchor", str(anchor))
    assert result.exit_code == 2
    assert "not an anchor" in result.stderr
    result = run("verify", db, "--anchor", str(tmp_path / "missing.txt"))
    assert result.exit_code == 2


def test_a_check_that_fails_exits_1(db, tmp_path):
    import sqlite3

    anchor = tmp_path / "anchor.txt"
    anchor.write_text(run("anchor", db).stdout)
    with sqlite3.connect(db) as conn:
        conn.execute("DELETE FROM events WHERE seq = (SELECT MAX(seq) FROM events)")
    result = run("verify", db, "--anchor", str(anchor))
    assert result.exit_code == 1
    assert "before the anchor" in result.stdout
    assert run("audit", db).exit_code == 0  # a truncated tail still chains: only the anchor knows
