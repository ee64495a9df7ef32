"""Endurance: a stranger's request starts no actor, idle actors stop, a passivated run keeps its state."""

from __future__ import annotations

import threading
import uuid

import pytest

from actors import ApprovalNotPendingError, ApprovalRequest, ControlMessage, System
from actors._directory import PRUNE_FROM

from .conftest import OPERATOR, assert_json, head

IDLE = 60.0  # the default idle period, in seconds of the test's clock
SLACK = 10  # threads a test may see come and go besides the actors (the thread pool's workers)


def live_actors(system: System) -> int:
    return len(system.broker._dir) + len(system._approval_actors)


def known_runs(system: System) -> int:
    """Runs whose state the broker keeps in memory for its hot path."""
    return len(system.broker._known)


def go_idle(system: System, clock) -> None:
    """Move the clock past the idle period and let the scheduler's tick sweep."""
    clock.advance(IDLE + 1)
    system.tick()


def test_two_thousand_strangers_start_no_thread(client, register, system):
    register("real")
    client.post("/heartbeat", json={"run_id": "ghost-warm-up", "token": "nope"})  # the pool's workers
    threads, before = threading.active_count(), head(system)
    paths = [
        "/heartbeat",
        "/report",
        "/finish",
        "/reply",
        "/poll-control",
        "/permission_request",
        "/permission",
    ]
    for i in range(2000):
        body = {"run_id": f"ghost-{uuid.uuid4()}", "token": "nope", "request_id": "x", "to": "y"}
        assert client.post(paths[i % len(paths)], json=body).status_code == 401
    for i in range(50):  # the operator naming unknown runs gets 404s, and starts nothing either
        response = client.post(f"/api/v1/runs/ghost-{i}/control", json={"type": "steer"}, headers=OPERATOR)
        assert response.status_code == 404
    assert threading.active_count() - threads <= SLACK
    assert system.broker._dir.ids() == []  # the real run's writes need no actor either
    assert known_runs(system) == 1  # only the real run's state is kept
    assert head(system) == before


def test_a_run_registered_by_another_process_is_found(client, system, tmp_path):
    # Another System on the same file stands for another process: this one's views learn of
    # the run only from the log, and must not take it for a stranger.
    with System.open(tmp_path / "flightlog.db", scheduler=False) as other:
        token = other.broker.create_run("theirs")
    assert client.post("/heartbeat", json={"run_id": "theirs", "token": token}).status_code == 200
    polled = client.post("/poll-control", json={"run_id": "theirs", "token": token})
    assert polled.json() is None  # nothing queued: null, as the seed


def test_five_hundred_idle_runs_give_their_threads_back(client, register, system, clock):
    client.get("/health")
    baseline = threading.active_count()
    tokens = {f"r{i}": register(f"r{i}") for i in range(500)}
    assert client.post("/heartbeat", json={"run_id": "r7", "token": tokens["r7"]}).status_code == 200
    # One writer thread for every run's writes; a run's in-process reads start its actor.
    assert threading.active_count() <= baseline + 1 + SLACK
    for i in range(0, 500, 2):
        assert system.broker.queue_depth(f"r{i}") == 0
        assert system.broker.take_control(f"r{i}") == []  # a write: the writer's, no thread of its own
    assert threading.active_count() <= baseline + 1 + SLACK
    for i in range(0, 500, 2):
        system.broker.run_state(f"r{i}", fresh=True)  # a read from the log starts the run's actor
    assert threading.active_count() >= baseline + 250  # one thread per live run actor
    clock.advance(IDLE / 2)
    system.tick()
    assert (len(system.broker._dir), known_runs(system)) == (250, 500)  # not idle for long enough yet
    go_idle(system, clock)
    assert (live_actors(system), known_runs(system)) == (0, 0)
    assert threading.active_count() <= baseline + 1 + SLACK


def test_registering_costs_one_append_and_no_thread(client, register, system, clock):
    register("warm-up")  # the writer's thread starts with the first write
    threads, before = threading.active_count(), head(system)
    for i in range(20):
        register(f"one-{i}")
    assert head(system) == before + 20
    assert threading.active_count() == threads
    assert live_actors(system) == 0
    go_idle(system, clock)
    assert known_runs(system) == 0


def test_a_passivated_run_answers_with_its_state_intact(client, register, system, clock):
    token = register("a")
    for i in range(2):
        client.post("/api/v1/runs/a/control", json={"id": f"m{i}", "type": "steer"}, headers=OPERATOR)
    for i in range(3):
        body = {"run_id": "a", "token": token, "state": "working", "payload": {"n": i}}
        assert client.post("/report", json=body).status_code == 200
    body = {"run_id": "a", "token": token, "request_id": "p1", "tool_name": "grep", "description": "ls"}
    assert client.post("/permission_request", json=body).status_code == 200
    [approval] = system.approvals.pending()
    go_idle(system, clock)
    assert live_actors(system) == 0

    # The token still checks out, the queue is as it was, and so are the counts.
    polled = client.post("/poll-control", json={"run_id": "a", "token": token}).json()
    assert [m["id"] for m in polled] == ["m0", "m1"]
    run = assert_json(client.get("/api/v1/runs/a", headers=OPERATOR))
    assert (run["report_count"], run["permission_request_count"], run["queue_depth"]) == (3, 1, 0)
    assert [p["behavior"] for p in run["permission_requests"]] == [""]
    go_idle(system, clock)
    # The permission request and its approval, both refolded, take the run's answer.
    body = {"run_id": "a", "token": token, "request_id": "p1", "behavior": "allow"}
    assert client.post("/permission", json=body).status_code == 200
    assert system.views.approval(approval.id).decision == "approve"
    run = assert_json(client.get("/api/v1/runs/a", headers=OPERATOR))
    assert [p["behavior"] for p in run["permission_requests"]] == ["allow"]
    assert client.post("/poll-control", json={"run_id": "a", "token": "wrong"}).status_code == 401


def test_a_waiting_poll_keeps_its_state(make_client, register, system, clock, monkeypatch):
    # A 60 s poll: had passivation cut the wait short, or lost the push, the poll would not
    # answer with the message within the join below.
    client = make_client(poll_timeout=60.0)
    token = register("a")
    subscribed = threading.Event()
    on_control = system.broker.on_control

    def subscribing(run_id, fn):
        unsubscribe = on_control(run_id, fn)
        subscribed.set()
        return unsubscribe

    monkeypatch.setattr(system.broker, "on_control", subscribing)
    result: list = []
    poller = threading.Thread(
        target=lambda: result.append(client.post("/poll-control", json={"run_id": "a", "token": token}))
    )
    poller.start()
    assert subscribed.wait(10)
    go_idle(system, clock)
    assert system.broker._known.get("a") is not None  # the waiter keeps it
    system.broker.push_control("a", ControlMessage("m1", "steer", "a"))
    poller.join(20)
    assert [m["id"] for m in result[0].json()] == ["m1"]
    go_idle(system, clock)
    assert (live_actors(system), known_runs(system)) == (0, 0)  # nothing waits any more


def test_a_blocking_approval_request_keeps_its_actor(system, clock):
    published = threading.Event()
    system.approvals.subscribe(published.set)
    outcome: list = []
    request = ApprovalRequest(kind="shell", title="t", detail="d", risk="low", payload={})
    waiter = threading.Thread(target=lambda: outcome.append(system.approvals.request(request)))
    waiter.start()
    assert published.wait(10)
    [approval] = system.approvals.pending()
    clock.advance(IDLE + 1)  # idle, but still before the approval's deadline
    system.passivate(clock.now())
    assert system._approval_actors.peek(approval.id) is not None
    system.approvals.resolve(approval.id, "approve", "alice")
    waiter.join(10)
    assert outcome[0].decision == "approve"
    go_idle(system, clock)
    assert live_actors(system) == 0


@pytest.mark.parametrize("idle_timeout", [0.0, -1.0])
def test_the_idle_timeout_must_be_positive(tmp_path, idle_timeout):
    with pytest.raises(ValueError, match="idle_timeout"):
        System.open(tmp_path / "x.db", idle_timeout=idle_timeout)


def test_decided_approvals_leave_no_entry_behind_for_the_idle_period(system):
    # A decided approval's actor stops at once; the directory must not keep its ref (inbox,
    # locks: some KiB each) until the idle sweep, or a busy server grows by one per approval.
    request = ApprovalRequest(kind="shell", title="t", detail="d", risk="low", payload={})
    for _ in range(3 * PRUNE_FROM):
        approval = system.approvals.submit(request)
        system.approvals.resolve(approval.id, "approve", "alice")
    assert len(system._approval_actors) <= PRUNE_FROM
    assert system.views.approval(approval.id).decision == "approve"
    with pytest.raises(ApprovalNotPendingError):  # a late decision: a fresh actor, refolded
        system.approvals.resolve(approval.id, "reject", "bob")
