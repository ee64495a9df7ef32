"""`serve --workers N` and its console sessions, as a hostile operator or a careless admin meets them.

Each attack runs against a real `flightlog serve --workers 2` (each worker reached on its own,
`Worker`): a session made with a bootstrap token that has since changed, one operator's logins
crowding everyone else's sessions out of the table, a revocation or an expiry seen by the other
worker, a killed or crash-looping supervisor, workers on a log no other process can see, and
the read-only commands, export and import of a log that holds the sessions' table.
"""

from __future__ import annotations

import hashlib
import json
import os
import select
import signal
import socket
import sqlite3
import time
from pathlib import Path

import httpx
import pytest
from click.testing import CliRunner

from tests.identity_helpers import CSRF_HEADER, bearer, create_run, enrol, flightlog, new_db, strong_token
from tools.cli import cli
from tools.cli import workers as workers_module
from tools.http.console_auth import SESSIONS_PER_CREDENTIAL

from .server import ServerProcess, Worker

pytestmark = pytest.mark.slow

TIMEOUT = 30.0


def login(worker: Worker, token: str) -> dict[str, str]:
    """Log in through `worker`: the headers a console page sends (its cookie and CSRF secret)."""
    response = worker.client.post("/ui/login", json={"token": token})
    assert response.status_code == 200, response.text
    [(name, value)] = response.cookies.items()
    return {"Cookie": f"{name}={value}", CSRF_HEADER: response.json()["csrf"]}


def me(worker: Worker, session: dict[str, str]) -> int:
    return worker.client.get("/api/v1/console/me", headers=session).status_code


def on_port(session: dict[str, str], url: str) -> dict[str, str]:
    """The same session for a server on another port (a cookie's name says its port; its value is
    what a thief would carry over)."""
    value = session["Cookie"].split("=", 1)[1]
    return {"Cookie": f"flightlog_session_{url.rsplit(':', 1)[1]}={value}", CSRF_HEADER: session[CSRF_HEADER]}


def two_workers(db: str, bootstrap: str, *args: str) -> tuple[Worker, Worker]:
    process = ServerProcess(db, bootstrap, ("--workers", "2", *args))
    return Worker(process, 0), Worker(process, 1)


def close(*workers: Worker) -> None:
    for worker in workers:
        worker.close()


def children(parent: int) -> list[int]:
    """The live child processes of `parent` (Linux's /proc)."""
    try:
        with open(f"/proc/{parent}/task/{parent}/children") as found:
            return [int(p) for p in found.read().split()]
    except FileNotFoundError:
        return []


def wait_gone(pids: list[int], timeout: float = TIMEOUT) -> bool:
    """Whether every process of `pids` has ended within `timeout` (a pidfd is readable once it has)."""
    deadline = time.monotonic() + timeout
    for pid in pids:
        try:
            fd = os.pidfd_open(pid)
        except ProcessLookupError:
            continue  # ended (and reaped) already
        try:
            readable, _, _ = select.select([fd], [], [], max(0.0, deadline - time.monotonic()))
        finally:
            os.close(fd)
        if not readable:
            return False
    return True


def test_a_bootstrap_session_ends_once_the_bootstrap_token_changes(tmp_path):
    # The table keeps sessions across restarts, and the bootstrap credential is `bootstrap`
    # whatever its token: a session made with a leaked token must not outlive its replacement.
    db = new_db(tmp_path / "x.db")
    alice = enrol(db, "alice", "approver")
    old = strong_token()
    first, second = two_workers(db, old)
    try:
        leaked = login(first, old)
        kept = login(second, alice)
        assert me(second, leaked) == 200
        assert first.stop() == 0
    finally:
        close(first, second)
    new = strong_token()
    first, second = two_workers(db, new)
    try:
        for worker in (first, second):
            assert me(worker, on_port(leaked, first.url)) == 401
            assert me(worker, on_port(kept, first.url)) == 200  # an enrolled operator's survives
        assert me(second, login(first, new)) == 200
        assert first.client.get("/api/v1/me", headers=bearer(old)).status_code == 401
    finally:
        close(first, second)


def test_one_operators_logins_never_push_another_operators_session_out(tmp_path):
    db = new_db(tmp_path / "x.db")
    viewer = enrol(db, "vic", "viewer")
    bootstrap = strong_token()
    first, second = two_workers(db, bootstrap)
    try:
        admin = login(first, bootstrap)
        sessions = [login((first, second)[i % 2], viewer) for i in range(SESSIONS_PER_CREDENTIAL + 1)]
        assert me(second, admin) == 200
        assert me(first, sessions[0]) == 401  # the viewer's least recently used went
        assert me(second, sessions[-1]) == 200
        assert first.stop() == 0
    finally:
        close(first, second)
    with sqlite3.connect(db) as conn:
        rows = conn.execute("SELECT credential_id, count(*) FROM console_sessions GROUP BY 1").fetchall()
    held = dict(rows)
    assert sorted(held.values()) == [1, SESSIONS_PER_CREDENTIAL]


def test_a_revocation_through_either_worker_or_beside_the_server_ends_the_session_on_every_worker(tmp_path):
    db = new_db(tmp_path / "x.db")
    tokens = {name: enrol(db, name, "approver") for name in ("alice", "bob")}
    bootstrap = strong_token()
    first, second = two_workers(db, bootstrap)
    try:
        alice, bob = login(first, tokens["alice"]), login(second, tokens["bob"])
        revoked = second.client.post("/api/v1/operators/alice/revoke", json={}, headers=bearer(bootstrap))
        assert revoked.status_code == 200, revoked.text
        assert flightlog("operators", "revoke", db, "bob").exit_code == 0  # on the file, not the server
        for worker in (first, second):
            assert me(worker, alice) == 401
            assert me(worker, bob) == 401
    finally:
        close(first, second)


def test_an_expired_session_is_refused_by_every_worker_and_forgotten(tmp_path):
    db = new_db(tmp_path / "x.db")
    token = enrol(db, "alice", "approver")
    first, second = two_workers(db, strong_token(), "--session-idle", "60")
    try:
        session = login(first, token)
        with sqlite3.connect(db) as conn:  # its last use an idle period and a second ago
            conn.execute("UPDATE console_sessions SET last_used = last_used - 61")
        assert me(second, session) == 401
        assert me(first, session) == 401
        with sqlite3.connect(db) as conn:
            assert conn.execute("SELECT count(*) FROM console_sessions").fetchone() == (0,)
    finally:
        close(first, second)


def test_a_killed_supervisor_leaves_no_worker_serving(tmp_path):
    db = new_db(tmp_path / "x.db")
    first, second = two_workers(db, strong_token())
    process = first.process
    try:
        pids = children(process.proc.pid)
        assert len(pids) == 2
        process.kill()  # SIGKILL: the parent's own shutdown never runs
        assert wait_gone(pids), "a worker outlived its killed parent"
        with pytest.raises(httpx.ConnectError):
            httpx.get(f"{first.url}/health", timeout=TIMEOUT)
    finally:
        close(first, second)


def test_a_replaced_worker_is_not_announced_again_and_a_crash_loop_stops_with_exit_9(tmp_path):
    db = new_db(tmp_path / "x.db")
    first, second = two_workers(db, strong_token())
    process = first.process
    parent = process.proc.pid
    try:
        [victim, _] = children(parent)
        os.kill(victim, signal.SIGKILL)
        deadline = time.monotonic() + TIMEOUT
        while victim in children(parent) or len(children(parent)) < 2:  # each check a round trip
            assert time.monotonic() < deadline, process.output()
            assert httpx.get(f"{first.url}/health", timeout=TIMEOUT).status_code == 200
        for worker in (first, second):  # both serve again, the replacement too
            assert worker.client.get("/health").status_code == 200
        # Killing each worker as soon as it is there: the sixth death within a minute stops it all.
        killed = 1
        supervisor = os.pidfd_open(parent)
        try:
            while process.proc.poll() is None:
                assert time.monotonic() < deadline + TIMEOUT, process.output()
                alive = [pid for pid in children(parent) if pid != victim]
                if alive:
                    victim = alive[0]
                    try:
                        os.kill(victim, signal.SIGKILL)
                    except ProcessLookupError:
                        continue  # it ended between the listing and the kill: not one of ours
                    killed += 1
                else:  # while it forks the next one: woken at once if it stops instead
                    select.select([supervisor], [], [], 0.05)
        finally:
            os.close(supervisor)
        assert process.proc.wait(TIMEOUT) == workers_module.EXIT_WORKERS
        assert killed >= workers_module.RESTARTS_PER_MINUTE + 1
    finally:
        close(first, second)
    output = process.output()
    assert output.count("flightlog: listening on") == 1, output
    assert output.count(" workers\n") == 1, output
    assert "workers keep ending: stopping" in output
    assert "Traceback" not in output
    assert children(parent) == []


def test_workers_on_a_busy_port_get_one_line_and_exit_2(tmp_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = str(taken.getsockname()[1])
        db = str(tmp_path / "x.db")
        result = CliRunner().invoke(cli, ["serve", "--db", db, "--port", port, "--workers", "2"])
    assert result.exit_code == 2
    assert "in use" in result.output
    assert "--port" in result.output
    assert "Traceback" not in result.output
    assert not Path(db).exists()


@pytest.mark.parametrize("given", ["2", "auto"])
def test_workers_on_an_in_memory_log_are_refused_before_anything_serves(given, monkeypatch):
    # Each worker would open an in-memory log of its own: a run registered through one would
    # not exist on the other.
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(4)))
    result = CliRunner().invoke(cli, ["serve", "--db", ":memory:", "--port", "0", "--workers", given])
    assert result.exit_code == 2
    assert "in-memory log" in result.output
    assert "listening" not in result.output


def test_workers_auto_is_bounded_as_a_count_is(monkeypatch):
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(500)))
    assert workers_module.worker_count("auto", "x.db") == workers_module.MAX_WORKERS


def test_read_only_commands_export_and_import_of_a_log_holding_sessions(tmp_path):
    db = new_db(tmp_path / "x.db")
    token = create_run(db, "r1")
    bootstrap = strong_token()
    first, second = two_workers(db, bootstrap)
    try:
        login(first, bootstrap)
        reported = second.client.post("/report", json={"run_id": "r1", "token": token, "state": "busy"})
        assert reported.status_code == 200, reported.text
        assert first.stop() == 0
    finally:
        close(first, second)
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as conn:
        [(session_key,)] = conn.execute("SELECT key FROM console_sessions").fetchall()
    files = sorted(tmp_path.glob("x.db*"))

    def contents() -> dict[str, str]:
        return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(tmp_path.glob("x.db*"))}

    before = contents()
    out = tmp_path / "export.jsonl"
    for args in (
        ["verify", db], ["audit", db], ["runs", db], ["timeline", db, "r1"], ["events", db],
        ["anchor", db], ["approvals", db], ["operators", "list", db], ["export", db, "-o", str(out)],
    ):  # fmt: skip
        result = flightlog(*args)
        assert result.exit_code == 0, (args, result.output)
        assert contents() == before, f"{args[0]} wrote to the log"
    assert sorted(tmp_path.glob("x.db*")) == files
    exported = out.read_text()
    assert session_key not in exported
    assert "console_sessions" not in exported
    assert [json.loads(line)["type"] for line in exported.splitlines()][-1] == "RunReported"
    copy = str(tmp_path / "copy.db")
    assert flightlog("import", copy, str(out)).exit_code == 0
    verified = flightlog("verify", copy)
    assert verified.exit_code == 0, verified.output
