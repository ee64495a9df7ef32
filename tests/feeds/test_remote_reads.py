"""Remote and partial reads: `events --server` (long-polled with --follow), `export --run` keeping
one run's whole streams, and `export --server` giving the lines the file gives."""

from __future__ import annotations

import hashlib
import json
import threading

import httpx
import pytest

from actors import System
from tools._integrity import check_log
from tools.cli.log import remote_records
from tools.cli.remote import OperatorClient
from tools.demo.background import BackgroundServer
from tools.http.app import create_app

from ..tools.helpers import TOKEN, TOKEN_ENV, run, seed_approval

AUTH = {TOKEN_ENV: TOKEN}


@pytest.fixture
def served(demo_db, tmp_path):
    db = tmp_path / "served.db"
    db.write_bytes(demo_db.read_bytes())
    system = System.open(db, scheduler=False)
    digest = hashlib.sha256(TOKEN.encode()).hexdigest()
    app = create_app(system, operator_token_sha256=digest, integrity=check_log(system.log))
    try:
        with BackgroundServer(app) as background:
            yield db, background.url
    finally:
        system.close()


def lines(result) -> list[dict]:
    assert result.exit_code == 0, result.output
    return [json.loads(line) for line in result.stdout.splitlines()]


def test_export_of_a_run_keeps_its_whole_streams(demo_db):
    records = lines(run("export", str(demo_db), "--run", "deployer"))
    streams = {r["stream"] for r in records}
    assert "run-deployer" in streams
    assert {s.split("-")[0] for s in streams} == {"run", "approval"}  # its stream and its approval's
    assert [r["seq"] for r in records] == sorted(r["seq"] for r in records)
    for stream in streams:  # whole streams: versions 1..n, no gap
        assert [r["version"] for r in records if r["stream"] == stream] == list(
            range(1, 1 + sum(r["stream"] == stream for r in records))
        )
    assert run("export", str(demo_db), "--run", "nobody").exit_code == 2


def test_export_and_events_through_a_server_print_what_the_file_gives(served):
    db, url = served
    assert lines(run("export", "--server", url, env=AUTH)) == lines(run("export", str(db)))
    assert lines(run("export", "--server", url, "--run", "reviewer", env=AUTH)) == lines(
        run("export", str(db), "--run", "reviewer")
    )
    assert lines(run("events", "--server", url, "--json", "--after", "50", env=AUTH)) == lines(
        run("events", str(db), "--json", "--after", "50")
    )
    assert (
        run("events", "--server", url, "--json", env={TOKEN_ENV: "wrong-token-0123456789abcdef"}).exit_code
        == 2
    )


def test_a_follow_waits_for_the_next_record(served, monkeypatch):
    db, url = served
    head = lines(run("export", str(db)))[-1]["seq"]
    answers: list[dict] = []

    def long_poll() -> None:
        with httpx.Client(timeout=30) as client:
            params = {"after": head, "wait": 20}
            headers = {"Authorization": f"Bearer {TOKEN}"}
            answers.append(client.get(f"{url}/api/v1/events", params=params, headers=headers).json())

    poller = threading.Thread(target=long_poll)
    poller.start()
    approval = seed_approval(db)  # whether the poll is already waiting or not, it answers with it
    poller.join(30)
    assert [r["data"]["approval_id"] for r in answers[0]["records"]] == [approval, approval]
    monkeypatch.setenv(TOKEN_ENV, TOKEN)
    followed = remote_records(OperatorClient(url), head, follow=True)
    assert next(followed)["type"] == "ApprovalRequested"  # then it would wait for more, forever
