"""`flightlog fork … --at-approval ID`: on a database file and through `--server URL`."""

from __future__ import annotations

import getpass
import hashlib
import shlex
import sys
import textwrap
from pathlib import Path

import orjson
import pytest

from actors import System
from actors.operators import VIEWER
from eventlog import ManualClock, open_log
from tests.controller.forks import approval_in_file as approval_of
from tests.controller.forks import broker_origin, record_origin
from tests.tools.helpers import TOKEN, TOKEN_ENV, run
from tools.demo.background import BackgroundServer
from tools.http.app import create_app

# A JSON-lines agent that says where it was told to resume, then ends its turn.
RESUMING_AGENT = textwrap.dedent(
    """
    import json, sys
    for line in sys.stdin:
        op = json.loads(line)
        if op.get("op") != "prompt":
            continue
        r = op.get("resume")
        text = f"resumed after {r['tool_call_id']} ({r['decision']})" if r else "started over"
        said = {"type": "assistant.message", "id": "live-1", "data": {"content": text}}
        print(json.dumps(said), flush=True)
        print(json.dumps({"type": "session.idle", "id": "live-2", "data": {}}), flush=True)
    """
)


@pytest.fixture
def db(tmp_path: Path) -> Path:
    """A log holding an agent run whose request alice approved, and a broker run whose request bob
    refused."""
    path = tmp_path / "forks.db"
    with System.open(path, clock=ManualClock(), scheduler=False) as system:
        record_origin(system)
        broker_origin(system)
    return path


def agent_run(db: Path) -> str:
    log = open_log(db, readonly=True)
    try:
        with System.open(log, scheduler=False) as system:
            return next(r.run_id for r in system.views.agent_runs())
    finally:
        log.close()


def head(db: Path) -> int:
    log = open_log(db, readonly=True)
    try:
        return log.head().seq
    finally:
        log.close()


def test_a_broker_fork_prints_its_token_once_and_records_the_os_user_as_decider(db):
    approval = approval_of(db, "lg-1")
    result = run("fork", str(db), "lg-1", "--at-approval", approval[:8], "--reason", "ship it")
    assert result.exit_code == 0, result.output
    token = result.stdout.strip()
    assert len(token) == 32  # alone on stdout; the words go to stderr
    assert "Its token below is shown only now" in result.stderr
    as_json = orjson.loads(run("fork", str(db), "lg-1", "--at-approval", approval, "--json").stdout)
    f = as_json["fork"]
    assert (f["kind"], f["decision"], f["recorded"], f["decided_by"]) == (
        "broker", "approve", "reject", f"local:{getpass.getuser()}"
    )  # fmt: skip
    log = open_log(db, readonly=True)
    try:
        with System.open(log, scheduler=False) as system:
            row = system.views.approval(f["fork_approval_id"])
            assert row is not None
            assert (row.status, row.identity) == ("approve", f"os-user:{getpass.getuser()}")
            assert system.broker.authenticate(f["run_id"], as_json["token"])
    finally:
        log.close()


def test_an_agent_fork_redriven_with_a_command_goes_on_live_after_the_changed_decision(db, tmp_path):
    run_id = agent_run(db)
    script = tmp_path / "agent.py"
    script.write_text(RESUMING_AGENT)
    command = shlex.join([sys.executable, str(script)])
    result = run(
        "fork", str(db), run_id, "--at-approval", approval_of(db, run_id), "--redrive", "--command", command,
        "--json",
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    out = orjson.loads(result.stdout)
    redriven = out["redrive"]
    assert (redriven["status"], redriven["decisions"], redriven["handed_over"]) == (
        "succeeded",
        ["reject"],
        True,
    )
    timeline = orjson.loads(run("timeline", str(db), out["fork"]["run_id"], "--json").stdout)
    texts = [e["text"] for e in timeline["entries"]]
    assert "resumed after c1 (reject)" in texts  # the program was told where it resumes


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--at-approval", "no-such-approval"], "is not one of run"),
        (["--at-approval", "APPROVAL", "--actor", "mallory"], "never as a name given"),
        (["--at-approval", "APPROVAL", "--at", "3"], "give one of --at"),
        (["--decision", "approve", "--at", "3"], "--decision needs --at-approval"),
        (["--at-approval", "APPROVAL", "--redrive"], "a live agent goes on: give it with --command"),
        (
            ["--at-approval", "APPROVAL", "--prompt", "x", "--redrive", "--command", "true"],
            "resumes the origin",
        ),
    ],
)
def test_what_cannot_be_forked_at_an_approval_exits_2_and_records_nothing(db, args, message):
    run_id = agent_run(db)
    args = [approval_of(db, run_id) if a == "APPROVAL" else a for a in args]
    before = head(db)
    result = run("fork", str(db), run_id, *args)
    assert result.exit_code == 2, result.output
    assert message in result.output
    assert "Traceback" not in result.output
    assert head(db) == before


def test_a_pending_approval_and_a_broker_redrive_are_refused(db):
    with System.open(db, scheduler=False) as system:  # the wall clock: the command reads it too
        system.broker.create_run("waiting")
        pending = system.broker.permission_request("waiting", "r-1", "deploy", "Deploy", "{}")
    before = head(db)
    refused = run("fork", str(db), "waiting", "--at-approval", pending)
    assert refused.exit_code == 2
    assert "still pending" in refused.output
    redrive = run("fork", str(db), "lg-1", "--at-approval", approval_of(db, "lg-1"), "--redrive")
    assert redrive.exit_code == 2
    assert "a broker run's fork is not re-driven" in redrive.output
    assert head(db) == before


@pytest.fixture
def server(db):
    system = System.open(db, scheduler=False)
    app = create_app(system, operator_token_sha256=hashlib.sha256(TOKEN.encode()).hexdigest())
    try:
        with BackgroundServer(app) as background:
            yield background.url
    finally:
        system.close()


def test_through_a_server_the_decision_is_the_tokens_operator_and_a_viewer_may_not_fork(db, server):
    approval = approval_of(db, "lg-1")
    viewer = hashlib.sha256(b"cli-fork-viewer").hexdigest()
    with System.open(db, scheduler=False) as system:
        system.operators.enrol("vera", VIEWER, by="tests", token=viewer)
    refused = run("fork", "--server", server, "lg-1", "--at-approval", approval, env={TOKEN_ENV: viewer})
    assert refused.exit_code == 2
    assert "the server refused the fork (403)" in refused.output

    done = run(
        "fork", "--server", server, "lg-1", "--at-approval", approval, "--json", env={TOKEN_ENV: TOKEN}
    )
    assert done.exit_code == 0, done.output
    out = orjson.loads(done.stdout)
    assert (out["fork"]["kind"], out["fork"]["decided_by"], out["fork"]["decision"]) == (
        "broker", "bootstrap", "approve"
    )  # fmt: skip
    assert out["token"]
    pending = run("fork", "--server", server, "lg-1", "--at-approval", "nope", env={TOKEN_ENV: TOKEN})
    assert pending.exit_code == 2
    assert "(404)" in pending.output
    live = run(
        "fork", "--server", server, "lg-1", "--at-approval", approval, "--redrive", "--command", "true"
    )
    assert live.exit_code == 2
    assert "not through --server" in live.output
