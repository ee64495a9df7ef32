"""Helpers for the CLI tests: a command run in process, a seeded log, a pending approval."""

from __future__ import annotations

import json
import os
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from click.testing import CliRunner, Result

from eventlog import ManualClock, open_log
from eventlog.events import ApprovalPublished, ApprovalRequested
from tools.bench.workload import fill
from tools.cli import cli

TOKEN = "cli-test-operator-token-0123456789abcdef"
TOKEN_ENV = "FLIGHTLOG_OPERATOR_TOKEN"


def run(*args: str, env: dict[str, str | None] | None = None, input: bytes | str | None = None) -> Result:
    """`flightlog ARGS` in process. Exceptions other than SystemExit propagate: a traceback
    fails the test instead of passing as a non-zero exit."""
    environment: dict[str, str | None] = {"COLUMNS": "250", TOKEN_ENV: None, **(env or {})}
    return CliRunner().invoke(cli, list(args), catch_exceptions=False, env=environment, input=input)


def json_of(result: Result) -> Any:
    assert result.stdout, result.output
    return json.loads(result.stdout)


def make_workload(path: str | os.PathLike[str], runs: int = 2, seed: int = 7) -> int:
    """A log of `runs` seeded runs (100 events each): broker runs, agent runs, approvals."""
    clock = ManualClock(datetime(2026, 1, 1, 10, 0, tzinfo=UTC))
    with open_log(path, clock=clock) as log:
        return fill(log, runs, seed, clock=clock)


def seed_approval(
    db: str | Path, *, quorum: int = 1, expires_in: float = 300.0, run_id: str = "run-1", id: str = ""
) -> str:
    """Record a published approval request, as a requester would, with nobody waiting; its id."""
    id = id or str(uuid.uuid4())
    now = datetime.now(UTC)
    requested = ApprovalRequested(
        id, run_id, "call-1", "shell", "rm -rf build", "delete the build folder", "high", "ab" * 32,
        quorum > 1, quorum, now, now + timedelta(seconds=expires_in), "agent",
    )  # fmt: skip
    with open_log(db) as log:
        log.append(f"approval-{id}", [requested, ApprovalPublished(id, now)], expect=0)
    return id
