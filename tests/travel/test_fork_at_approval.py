"""Forks that change a decision, through the library: an agent run re-driven from the recording up
to the approval, then live; a broker run forked into a new run whose approval is decided at once."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from actors import (
    ApprovalNotInRunError,
    ApprovalStillPendingError,
    ForkError,
    ScriptedHarness,
    System,
    fork_at_approval,
    fork_origin,
)
from eventlog import NO_STREAM, ManualClock, NewEvent, check_catalogue, decode
from eventlog.events import ForkedFrom, RunForked
from tests.controller.forks import PROMPT, broker_origin, record_origin, timeline
from tools._forks import redrive

LIVE = [
    {"type": "assistant.message", "content": "going on from the changed decision"},
    {"type": "session.idle"},
]
ALICE = {"decided_by": "alice", "identity": "cred-alice", "actor": "operator:alice (cred-alice)"}


@pytest.fixture
def system(tmp_path: Path):
    with System.open(tmp_path / "f.db", clock=ManualClock(), approval_timeout=60, scheduler=False) as s:
        yield s


def fork(system: System, run_id: str, approval_id: str, decision: str | None = None, **kw):
    return fork_at_approval(system, run_id, approval_id, decision, origin="operator", **{**ALICE, **kw})


def origin_approval(system: System, run_id: str) -> str:
    [row] = [r for r in system.views.approval_history() if r.run_id == run_id]
    return row.id


# -- agent (controller) runs ---------------------------------------------------------------------


def test_an_agent_fork_takes_the_other_decision_then_goes_on_live(system):
    origin = record_origin(system)  # its one request was approved by alice
    approval = origin_approval(system, origin.run_id)
    before = list(system.log.read(origin.stream))

    f = fork(system, origin.run_id, approval, reason="what if it had been rejected?")

    assert (f.kind, f.decision, f.recorded, f.approval_id) == ("agent", "reject", "approve", approval)
    assert f.at_seq == origin.points["permission"] - 1  # the history before the request
    opening = decode(next(system.log.read(f.stream, to_version=1)))
    assert isinstance(opening, ForkedFrom)
    assert (opening.approval_id, opening.decision, opening.decided_by, opening.identity) == (
        approval, "reject", "alice", "cred-alice"
    )  # fmt: skip
    live = ScriptedHarness(LIVE)
    done = redrive(system, f.run_id, live, actor="cli:someone-else")

    assert (done.status, done.decisions, done.handed_over) == ("succeeded", ("reject",), True)
    [prompt] = live.prompts
    assert (prompt.run_id, prompt.prompt) == (f.run_id, PROMPT)  # the origin's turn, handed over
    [decided] = [r for r in system.views.approval_history() if r.run_id == f.run_id]
    # Decided by who asked for the fork, with their credential, never by the re-driver.
    assert (decided.status, decided.actor, decided.identity) == ("reject", "alice", "cred-alice")
    kinds = [(e.kind, e.text) for e in system.views.timeline(f.run_id)]
    assert ("message", "going on from the changed decision") in kinds
    # The recorded tool call after the approval is never served: a live harness went on instead.
    assert not [e for e in system.views.timeline(f.run_id) if e.kind == "tool"]
    assert list(system.log.read(origin.stream)) == before  # the origin is only read


def test_without_a_live_harness_the_changed_decision_ends_the_recording(system):
    origin = record_origin(system)
    f = fork(system, origin.run_id, origin_approval(system, origin.run_id), "reject")

    done = redrive(system, f.run_id)

    assert (done.status, done.decisions, done.handed_over) == ("failed", ("reject",), False)
    assert "the fork's decision, after which a live harness goes on (none was given)" in done.diverged


def test_a_fork_may_take_the_recorded_decision_and_the_recording_serves_on(system):
    origin = record_origin(system)
    f = fork(system, origin.run_id, origin_approval(system, origin.run_id), "approve")

    done = redrive(system, f.run_id, ScriptedHarness(LIVE))

    assert (f.decision, f.recorded) == ("approve", "approve")
    assert (done.status, done.decisions, done.handed_over) == ("succeeded", ("approve",), False)
    assert done.served == 5  # the request, the tool's start and result, the answer, idle: all recorded
    assert timeline(system.log, f.run_id)[-1] == timeline(system.log, origin.run_id)[-1]


def test_a_fork_at_an_approval_resumes_the_origins_prompt_only(system):
    origin = record_origin(system)
    f = fork(system, origin.run_id, origin_approval(system, origin.run_id))
    with pytest.raises(ForkError, match="resumes the origin's turn"):
        redrive(system, f.run_id, ScriptedHarness(LIVE), prompt="something else")


# -- what cannot be forked -----------------------------------------------------------------------


def test_an_approval_of_another_run_or_none_at_all_is_refused(system):
    first = record_origin(system, controller_id="one")
    second = record_origin(system, controller_id="two")
    with pytest.raises(ApprovalNotInRunError, match="is not one of run"):
        fork(system, second.run_id, origin_approval(system, first.run_id))
    with pytest.raises(ApprovalNotInRunError):
        fork(system, first.run_id, "no-such-approval")
    assert not [r for r in system.views.agent_runs() if r.forked_from]  # nothing was recorded


def test_a_pending_approval_is_refused_and_so_is_a_decision_that_is_none(system):
    token = system.broker.create_run("waiting")
    assert token
    pending = system.broker.permission_request("waiting", "deploy-1", "deploy", "Deploy", "{}")
    with pytest.raises(ApprovalStillPendingError, match="still pending"):
        fork(system, "waiting", pending)
    system.approvals.resolve(pending, "reject", "bob")
    with pytest.raises(ForkError, match="approve or reject, not 'maybe'"):
        fork(system, "waiting", pending, "maybe")
    with pytest.raises(ForkError, match="needs the operator"):
        fork(system, "waiting", pending, decided_by="")


def test_an_expired_approval_has_no_other_decision_to_take_by_default(system):
    system.broker.create_run("slow")
    expired = system.broker.permission_request("slow", "deploy-1", "deploy", "Deploy", "{}")
    system.approvals.expire_run("slow", "timeout")
    with pytest.raises(ForkError, match="ended 'expired': say which decision"):
        fork(system, "slow", expired)
    assert fork(system, "slow", expired, "approve").decision == "approve"


# -- broker runs ---------------------------------------------------------------------------------


def test_a_broker_fork_is_a_new_run_whose_request_is_decided_already(system):
    run_id, approval = "lg-1", broker_origin(system)
    before = list(system.log.read(f"run-{run_id}"))

    f = fork(system, run_id, approval, reason="ship it")

    assert (f.kind, f.decision, f.recorded, f.request_id) == (
        "broker", "approve", "reject", "deploy-1"
    )  # fmt: skip
    records = list(system.log.read(f.stream))
    assert [r.type for r in records[:4]] == ["RunRegistered", "RunForked", "RunReported", "RunReported"]
    opening = decode(records[1])
    assert isinstance(opening, RunForked)
    assert (opening.origin_run_id, opening.approval_id, opening.decision, opening.decided_by) == (
        run_id, approval, "approve", "alice"
    )  # fmt: skip
    assert f.copied == 2  # the reports before the request; not the finish after it
    assert "RunFinished" not in [r.type for r in records]
    row = system.views.approval(f.fork_approval_id)
    assert row is not None
    assert (row.run_id, row.tool_call_id, row.status, row.actor, row.identity) == (
        f.run_id, "deploy-1", "approve", "alice", "cred-alice"
    )  # fmt: skip
    # The fork's agent files the same request again: it is the decided one, at once.
    again = system.broker.permission_request(f.run_id, "deploy-1", "deploy", "Deploy web", '{"env": "prod"}')
    assert again == f.fork_approval_id
    assert system.broker.authenticate(f.run_id, f.token)
    assert not system.broker.authenticate(run_id, f.token)  # the fork's token is the fork's only
    assert list(system.log.read(f"run-{run_id}")) == before
    assert system.log.verify().ok
    texts = [e.text for e in system.views.timeline(f.run_id)]
    opened = f"Forked from run {run_id} at approval {approval}: approve by alice"
    assert any(t.startswith(opened) for t in texts)


def test_a_broker_forks_copies_name_its_own_approvals_never_the_origins(system):
    broker = system.broker
    broker.create_run("lg-2")
    earlier = broker.permission_request("lg-2", "read-1", "read_file", "Read", "{}")
    system.approvals.resolve(earlier, "approve", "bob")
    broker.approval_decided(earlier)
    later = broker.permission_request("lg-2", "deploy-1", "deploy", "Deploy", "{}")
    system.approvals.resolve(later, "reject", "bob")

    f = fork(system, "lg-2", later)

    copied = [r for r in system.log.read(f.stream) if r.type.startswith("Permission")][:2]
    own = copied[0].data["approval_id"]
    assert own not in ("", earlier)
    assert [(r.type, r.data["request_id"], r.data["approval_id"]) for r in copied] == [
        ("PermissionRequested", "read-1", own),
        ("PermissionDecided", "read-1", own),
    ]
    # The fork's approval of the copied request ended as the origin's did, cast as recorded.
    row = system.views.approval(own)
    assert row is not None
    assert (row.run_id, row.status, row.actor, row.risk) == (f.run_id, "approve", "bob (recorded)", "low")
    # Its answer to the copied request reaches only that approval of its own, never the origin's.
    broker.permission_decision(f.run_id, "read-1", "deny")
    origin_row = system.views.approval(earlier)
    assert origin_row is not None
    assert not origin_row.refused
    assert system.gates.status(f.run_id, "read-1").decision == "approve"  # the recorded outcome stands


def test_a_fork_recorded_before_forks_changed_decisions_reads_as_one_that_changed_none(system):
    """ForkedFrom schema 1 (the old logs' forks) is upcast: no approval, no decision."""
    v1 = {
        "run_id": "old-fork", "origin_run_id": "o", "origin_stream": "controller-o", "at_seq": 1,
        "actor": "alice", "reason": "", "at": "2025-06-01T10:00:00+00:00",
    }  # fmt: skip
    system.log.append("controller-fork-old-fork", [NewEvent("ForkedFrom", v1, schema=1)], expect=NO_STREAM)
    opening = fork_origin(system.log, "old-fork", system.views)
    assert (opening.at_seq, opening.approval_id, opening.decision, opening.decided_by) == (1, "", "", "")
    assert system.log.verify().ok
    assert check_catalogue(system.log.read_all()).ok


def test_a_fork_of_a_run_with_many_decided_requests_tells_it_each_decision_once(system):
    # A run's state remembers its latest 32 decisions: the relay of an older one (each follower
    # relays each decision; a fork decides every copied request again) must still find that the
    # run was told already, in its stream, and tell it nothing twice.
    broker = system.broker
    broker.create_run("lg-3")
    for i in range(40):
        decided = broker.permission_request("lg-3", f"read-{i}", "read_file", "Read", "{}")
        system.approvals.resolve(decided, "approve", "bob")
        broker.approval_decided(decided)
    last = broker.permission_request("lg-3", "deploy-1", "deploy", "Deploy", "{}")
    system.approvals.resolve(last, "reject", "bob")

    f = fork(system, "lg-3", last)

    own = {r.data["request_id"]: r.data["approval_id"] for r in system.log.read(f.stream)
           if r.type == "PermissionRequested"}  # fmt: skip
    for approval_id in own.values():  # as every follower relays every decision, again
        broker.approval_decided(approval_id)
    told = Counter(r.data["request_id"] for r in system.log.read(f.stream) if r.type == "PermissionDecided")
    assert told == dict.fromkeys([*(f"read-{i}" for i in range(40)), "deploy-1"], 1)


def test_a_new_decision_of_a_long_gated_run_reads_no_stream(system, monkeypatch):
    broker = system.broker
    broker.create_run("lg-4")
    for i in range(40):
        decided = broker.permission_request("lg-4", f"read-{i}", "read_file", "Read", "{}")
        system.approvals.resolve(decided, "approve", "bob")
        broker.approval_decided(decided)
    read: list[str] = []
    heard = broker.permissions._heard
    monkeypatch.setattr(broker.permissions, "_heard", lambda run_id, a: read.append(a) or heard(run_id, a))
    new = broker.permission_request("lg-4", "read-40", "read_file", "Read", "{}")
    system.approvals.resolve(new, "approve", "bob")
    broker.approval_decided(new)
    broker.approval_decided(new)  # relayed twice (two followers): still told once
    assert read == []
    told = [r for r in system.log.read("run-lg-4") if r.type == "PermissionDecided"]
    assert [r.data["request_id"] for r in told].count("read-40") == 1
