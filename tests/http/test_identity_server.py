"""Named operators through a real `flightlog serve`: one vote per credential, roles, revocation,
throttled guessing, and two servers on one PostgreSQL database (console sessions' expiry:
test_console_session_expiry.py).

Operators are enrolled with `flightlog operators add` on the database file before the server
starts (or through the API by an admin); two-person approvals are seeded the same way, as a
controller's reconcile asks for one. Every request goes over loopback to the server process.
"""

from __future__ import annotations

import json
import secrets
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from tests.identity_helpers import (
    ConsoleSession,
    bearer,
    create_run,
    enrol,
    flightlog,
    history_row,
    new_db,
    pending_ids,
    seed_quorum_approvals,
    served,
    strong_token,
)
from tools.cli import decide as cli_decide

from .server import ServerProcess

BLOCK_LINE = "operator authentication blocked"
GUESSES = 20


@dataclass
class Fleet:
    """A database with enrolled operators and pending two-person approvals, and the tokens."""

    db: str
    bootstrap: str
    tokens: dict[str, str]
    approvals: list[str]


def fleet(tmp_path: Path, operators: dict[str, str], titles: tuple[str, ...] = ("Deploy web",)) -> Fleet:
    """`operators` (name -> role) enrolled on a new database, and one quorum approval per title."""
    db = new_db(tmp_path / "identity.db")
    tokens = {name: enrol(db, name, role) for name, role in operators.items()}
    return Fleet(db, strong_token(), tokens, seed_quorum_approvals(db, *titles))


def credential_ids(server: ServerProcess, admin: str) -> dict[str, str]:
    response = server.client.get("/api/v1/operators", headers=bearer(admin))
    assert response.status_code == 200, response.text
    return {o["name"]: o["credential_id"] for o in response.json()["operators"]}


def approve(server: ServerProcess, approval_id: str, token: str, body: object = None) -> httpx.Response:
    return server.client.post(
        f"/api/v1/approvals/{approval_id}/approve", json={} if body is None else body, headers=bearer(token)
    )


# -- 1. one credential, one vote ---------------------------------------------------------------


def test_one_token_cannot_cast_both_votes_of_a_two_person_approval(tmp_path):
    f = fleet(tmp_path, {"alice": "approver", "bob": "approver"}, ("Deploy web", "Deploy db"))
    first, second = f.approvals
    with served(f.db, f.bootstrap) as server:
        vote = approve(server, first, f.bootstrap)
        assert vote.status_code == 202, vote.text
        assert (vote.json()["status"], vote.json()["votes"], vote.json()["needed"]) == ("pending", 1, 2)
        again = approve(server, first, f.bootstrap)
        assert again.status_code == 409, again.text
        posing = approve(server, first, f.bootstrap, {"actor": "bob"})
        assert posing.status_code == 403, posing.text
        assert first in pending_ids(server, f.bootstrap)
        assert history_row(server, f.bootstrap, first)["votes"] == ["bootstrap"]

        ids = credential_ids(server, f.bootstrap)
        assert ids["alice"] != ids["bob"]
        assert approve(server, second, f.tokens["alice"]).status_code == 202
        assert approve(server, second, f.tokens["alice"]).status_code == 409  # her second vote
        decided = approve(server, second, f.tokens["bob"])
        assert decided.status_code == 200, decided.text
        assert (decided.json()["decision"], decided.json()["actor"]) == ("approve", "bob")
        assert decided.json()["identity"] == ids["bob"]

        # Each vote by its enrolled name and its own credential, as the console shows them.
        page = server.client.get(f"/api/v1/console/approvals/{second}", headers=bearer(f.bootstrap)).json()
        assert [(v["actor"], v["identity"]) for v in page["voters"]] == [
            ("alice", ids["alice"]),
            ("bob", ids["bob"]),
        ]
        row = history_row(server, f.bootstrap, second)
        assert (row["status"], row["votes"], row["identity"]) == ("approve", ["alice", "bob"], ids["bob"])


def test_the_approval_history_keeps_each_voters_credential(tmp_path):
    f = fleet(tmp_path, {"alice": "approver", "bob": "approver"})
    (approval,) = f.approvals
    with served(f.db, f.bootstrap) as server:
        ids = credential_ids(server, f.bootstrap)
        assert approve(server, approval, f.tokens["alice"]).status_code == 202
        assert approve(server, approval, f.tokens["bob"]).status_code == 200
        row = history_row(server, f.bootstrap, approval)
    assert (row["status"], row["votes"], row["refused"]) == ("approve", ["alice", "bob"], [])
    # A name may be enrolled again with a new credential: the audit trail must say which one voted.
    recorded = json.dumps(row)
    assert ids["bob"] in recorded
    assert ids["alice"] in recorded, f"the history keeps no trace of alice's credential: {row}"


def test_the_cli_audit_of_the_database_names_both_voters(tmp_path):
    f = fleet(tmp_path, {"alice": "approver", "bob": "approver"})
    (approval,) = f.approvals
    with served(f.db, f.bootstrap) as server:
        assert approve(server, approval, f.tokens["alice"]).status_code == 202
        assert approve(server, approval, f.tokens["bob"]).status_code == 200
    as_json = flightlog("approvals", f.db, "--all", "--json")
    assert json.loads(as_json.stdout)[0]["votes"] == ["alice", "bob"]
    for command in (("approvals", f.db, "--all"), ("audit", f.db)):
        result = flightlog(*command)
        assert result.exit_code == 0, result.output
        assert "bob" in result.stdout
        assert "alice" in result.stdout, f"`flightlog {command[0]}` does not name alice:\n{result.stdout}"


def test_each_operator_approves_through_the_cli_with_their_own_token(tmp_path):
    f = fleet(tmp_path, {"alice": "approver", "bob": "approver"})
    (approval,) = f.approvals
    with served(f.db, f.bootstrap) as server:
        # No --as: the server knows whose token it is.
        first = flightlog("approve", "--server", server.url, approval, token=f.tokens["alice"])
        assert first.exit_code == 0, first.output
        assert "vote recorded: 1 of 2" in first.stdout
        again = flightlog("approve", "--server", server.url, approval, token=f.tokens["alice"])
        assert again.exit_code == cli_decide.EXIT_DUPLICATE_VOTE, again.output
        second = flightlog("approve", "--server", server.url, approval, token=f.tokens["bob"])
        assert second.exit_code == 0, second.output
        assert "approved" in second.stdout
        assert "by bob" in second.stdout
        assert history_row(server, f.bootstrap, approval)["votes"] == ["alice", "bob"]
        assert f.tokens["alice"] not in first.output + again.output + second.output


# -- 2. roles and revocation -------------------------------------------------------------------


def test_a_viewer_reads_but_its_decision_is_refused_and_kept_in_the_audit_trail(tmp_path):
    f = fleet(tmp_path, {"vera": "viewer"})
    (approval,) = f.approvals
    with served(f.db, f.bootstrap) as server:
        vera = f.tokens["vera"]
        assert pending_ids(server, vera) == [approval]
        assert server.client.get("/api/v1/me", headers=bearer(vera)).json()["role"] == "viewer"
        refused = approve(server, approval, vera)
        assert refused.status_code == 403, refused.text
        assert "viewer" in refused.json()["error"]
        row = history_row(server, vera, approval)
        assert (row["status"], row["votes"]) == ("pending", [])
        (attempt,) = row["refused"]
        vera_id = credential_ids(server, f.bootstrap)["vera"]
        assert attempt["decision"] == "approve"
        assert "vera" in attempt["actor"]
        assert vera_id in json.dumps(attempt)
        assert "may not decide" in attempt["reason"]
    audit = flightlog("audit", f.db)
    assert "vera" in audit.stdout
    assert "may not decide" in audit.stdout


def test_an_approver_may_not_push_control_and_an_admin_may(tmp_path):
    f = fleet(tmp_path, {"alice": "approver", "carol": "admin"})
    run_token = create_run(f.db, "web")
    with served(f.db, f.bootstrap) as server:
        alice, carol = f.tokens["alice"], f.tokens["carol"]
        control = {"type": "pause", "payload": {"why": "test"}}
        wire_push = {"run_id": "web", "type": "pause", "id": "m-wire"}

        refused = server.client.post("/api/v1/runs/web/control", json=control, headers=bearer(alice))
        assert refused.status_code == 403, refused.text
        assert server.client.post("/push-control", json=wire_push, headers=bearer(alice)).status_code == 403
        assert server.client.get("/api/v1/runs/web", headers=bearer(alice)).json()["queue_depth"] == 0

        pushed = server.client.post("/api/v1/runs/web/control", json=control, headers=bearer(carol))
        assert pushed.status_code == 200, pushed.text
        assert server.client.post("/push-control", json=wire_push, headers=bearer(carol)).status_code == 200
        assert server.client.get("/api/v1/runs/web", headers=bearer(carol)).json()["queue_depth"] == 2

        # Each push records the admin who made it (name and credential), in the run's events.
        carol_id = credential_ids(server, carol)["carol"]
        events = server.client.get("/api/v1/console/runs/web/events", headers=bearer(carol)).json()["events"]
        sent_by = [json.dumps(e) for e in events if e["type"] == "ControlQueued"]
        assert len(sent_by) == 2
        assert all(f"carol ({carol_id})" in e for e in sent_by)
    assert run_token not in server.output()


def test_an_approver_may_not_enrol_operators_and_an_admin_may(tmp_path):
    f = fleet(tmp_path, {"alice": "approver", "carol": "admin"})
    with served(f.db, f.bootstrap) as server:
        alice, carol = f.tokens["alice"], f.tokens["carol"]
        newcomer = {"name": "dave", "role": "viewer"}
        assert server.client.get("/api/v1/operators", headers=bearer(alice)).status_code == 403
        assert server.client.get("/api/v1/operators", headers=bearer(carol)).status_code == 200
        refused = server.client.post("/api/v1/operators", json=newcomer, headers=bearer(alice))
        assert refused.status_code == 403, refused.text

        enrolled = server.client.post("/api/v1/operators", json=newcomer, headers=bearer(carol))
        assert enrolled.status_code == 201, enrolled.text
        assert enrolled.headers["cache-control"] == "no-store"
        dave = enrolled.json()["token"]
        assert server.client.get("/api/v1/me", headers=bearer(dave)).json()["name"] == "dave"
        listed = server.client.get("/api/v1/operators", headers=bearer(carol)).json()["operators"]
        assert [(o["name"], o["role"], o["enrolled_by"]) for o in listed][-1] == ("dave", "viewer", "carol")
    assert dave not in server.output()


def test_revoking_an_operator_ends_her_token_and_console_session_at_once(tmp_path):
    f = fleet(tmp_path, {"alice": "approver", "carol": "admin"})
    (approval,) = f.approvals
    with served(f.db, f.bootstrap) as server:
        alice = f.tokens["alice"]
        session = ConsoleSession(server.url, alice)
        try:
            port = server.url.rsplit(":", 1)[1]
            assert session.set_cookie.startswith(f"flightlog_session_{port}=")
            assert "httponly" in session.set_cookie.lower()
            assert "samesite=strict" in session.set_cookie.lower()
            assert session.get("/api/v1/console/me").json() == {
                "name": "alice",
                "credential_id": session.login["credential_id"],
                "role": "approver",
            }
            # The cookie alone is not enough: without the CSRF secret the API is 401 and logout 403.
            assert session.client.get("/api/v1/console/me").status_code == 401
            assert session.client.post("/ui/logout").status_code == 403
            assert server.client.get("/api/v1/me", headers=bearer(alice)).status_code == 200

            revoked = server.client.post(
                "/api/v1/operators/alice/revoke",
                json={"reason": "left the team"},
                headers=bearer(f.tokens["carol"]),
            )
            assert revoked.status_code == 200, revoked.text

            assert server.client.get("/api/v1/me", headers=bearer(alice)).status_code == 401
            assert session.get("/api/v1/console/me").status_code == 401
            assert session.post(f"/api/v1/approvals/{approval}/approve").status_code == 401
            assert approve(server, approval, alice).status_code == 401
            assert history_row(server, f.bootstrap, approval)["votes"] == []
        finally:
            session.close()

        listed = server.client.get("/api/v1/operators", headers=bearer(f.bootstrap)).json()["operators"]
        (row,) = [o for o in listed if o["name"] == "alice"]
        assert row["active"] is False
        assert row["revoked_at"]
        assert row["revoked_by"] == "carol"
        assert next(o for o in listed if o["name"] == "carol")["active"] is True
        # Revoked means gone for good: the same token cannot log in again either.
        assert server.client.post("/ui/login", json={"token": alice}).status_code == 401


# -- 5. guessing is throttled ------------------------------------------------------------------


def _guess(server: ServerProcess, door: str, token: str) -> httpx.Response:
    if door == "bearer":
        return server.client.get("/api/v1/approvals", headers=bearer(token))
    return server.client.post("/ui/login", json={"token": token})


@pytest.mark.parametrize("door", ["bearer", "login"])
def test_guessing_operator_tokens_is_throttled_even_for_the_right_one(tmp_path, door):
    db = new_db(tmp_path / "guess.db")
    run_token = create_run(db, "agent")
    bootstrap = strong_token()
    with served(db, bootstrap) as server:
        guesses = [secrets.token_hex(32) for _ in range(GUESSES)]
        answers = [_guess(server, door, token) for token in guesses]
        statuses = [a.status_code for a in answers]
        allowed = statuses.index(429)
        assert 1 <= allowed <= 10, statuses
        assert statuses[:allowed] == [401] * allowed, statuses
        assert statuses[allowed:] == [429] * (GUESSES - allowed), statuses
        for answer in answers[allowed:]:
            assert int(answer.headers["retry-after"]) >= 1

        # While the address is blocked the right token is refused too: guessing it is worthless.
        right = _guess(server, door, bootstrap)
        assert right.status_code == 429
        assert int(right.headers["retry-after"]) >= 1

        # The runs' wire routes answer as before from the same address.
        report = {"run_id": "agent", "token": run_token, "state": "working"}
        assert server.client.post("/report", json=report).status_code == 200
        heartbeat = {"run_id": "agent", "token": run_token}
        assert server.client.post("/heartbeat", json=heartbeat).status_code == 200
    output = server.output()
    assert len([line for line in server.stderr if BLOCK_LINE in line]) == 1, output
    for token in [*guesses, bootstrap, run_token]:
        assert token not in output


def test_wrong_run_tokens_do_not_block_operators(tmp_path):
    db = new_db(tmp_path / "runs.db")
    create_run(db, "agent")
    bootstrap = strong_token()
    with served(db, bootstrap) as server:
        for _ in range(GUESSES):
            wrong = {"run_id": "agent", "token": secrets.token_hex(16), "state": "working"}
            assert server.client.post("/report", json=wrong).status_code in (401, 403)
        assert server.client.get("/api/v1/approvals", headers=bearer(bootstrap)).status_code == 200
    assert not [line for line in server.stderr if BLOCK_LINE in line]


# -- 7. two servers on one PostgreSQL database -------------------------------------------------


@pytest.mark.postgres
@pytest.mark.slow
def test_enrolment_and_revocation_count_at_once_on_every_server(pg_database):
    bootstrap = strong_token()
    with served(pg_database, bootstrap) as a, served(pg_database, bootstrap) as b:
        enrolled = a.client.post(
            "/api/v1/operators", json={"name": "alice", "role": "approver"}, headers=bearer(bootstrap)
        )
        assert enrolled.status_code == 201, enrolled.text
        alice = enrolled.json()["token"]

        me = b.client.get("/api/v1/me", headers=bearer(alice))
        assert me.status_code == 200, me.text
        assert (me.json()["name"], me.json()["role"]) == ("alice", "approver")
        session = ConsoleSession(a.url, alice)
        try:
            assert session.get("/api/v1/console/me").status_code == 200

            revoked = b.client.post("/api/v1/operators/alice/revoke", json={}, headers=bearer(bootstrap))
            assert revoked.status_code == 200, revoked.text

            assert a.client.get("/api/v1/me", headers=bearer(alice)).status_code == 401
            assert session.get("/api/v1/console/me").status_code == 401
            assert b.client.get("/api/v1/me", headers=bearer(alice)).status_code == 401
        finally:
            session.close()
        listed = a.client.get("/api/v1/operators", headers=bearer(bootstrap)).json()["operators"]
        assert [(o["name"], o["active"], o["revoked_by"]) for o in listed] == [("alice", False, "bootstrap")]
    assert alice not in a.output() + b.output()


@pytest.mark.postgres
@pytest.mark.slow
def test_an_operator_enrolled_on_the_database_counts_at_once_on_both_servers(pg_database):
    bootstrap = strong_token()
    with served(pg_database, bootstrap) as a, served(pg_database, bootstrap) as b:
        alice = enrol(pg_database, "alice", "approver")  # while both serve
        for server in (a, b):
            assert server.client.get("/api/v1/me", headers=bearer(alice)).status_code == 200
        session = ConsoleSession(a.url, alice)
        try:
            revoked = b.client.post("/api/v1/operators/alice/revoke", json={}, headers=bearer(bootstrap))
            assert revoked.status_code == 200, revoked.text
            assert a.client.get("/api/v1/me", headers=bearer(alice)).status_code == 401
            assert session.get("/api/v1/console/me").status_code == 401
        finally:
            session.close()
