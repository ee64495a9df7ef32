"""Tokens kept as digests only; restarts and a second System on the same database."""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path

from actors import Broker, ControlMessage, System, token_digest
from eventlog import EventLog, ManualClock, StorageError

from .conftest import WAIT, queued_signal, take_eventually


def database_bytes(path: Path) -> bytes:
    return b"".join(p.read_bytes() for p in (path, Path(f"{path}-wal")) if p.exists())


def test_raw_tokens_never_reach_the_database(tmp_path: Path, clock: ManualClock) -> None:
    path = tmp_path / "tokens.db"
    with System.open(path, clock=clock, scheduler=False) as system:
        broker = system.broker
        created = broker.create_run("created")
        ensured, _ = broker.ensure_run("ensured")
        chosen = "caller-chosen-token-0123456789abcdef"
        broker.register("registered", chosen)
        broker.register("registered", chosen)  # a re-register with the token
        broker.send_to("created", "ensured", "agent_message", '{"message":"hi"}')
        broker.ingest("created", "done", "{}")
        tokens = [created, ensured or "", chosen]
        assert all(
            broker.authenticate(r, t)
            for r, t in zip(["created", "ensured", "registered"], tokens, strict=True)
        )
        raw = database_bytes(path)
        assert raw  # the checks below would pass on an empty read
        for token in tokens:
            assert token.encode() not in raw
        digests = {r.data["token_sha256"] for r in system.log.read_all() if r.type == "RunRegistered"}
        assert digests == {token_digest(t) for t in tokens}
    raw = database_bytes(path)
    for token in tokens:
        assert token.encode() not in raw


def test_a_wrong_token_does_not_authenticate(tmp_path: Path, clock: ManualClock) -> None:
    with System.open(tmp_path / "a.db", clock=clock, scheduler=False) as system:
        token = system.broker.create_run("r1")
        assert system.broker.authenticate("r1", token)
        assert not system.broker.authenticate("r1", token_digest(token))  # the digest is no token
        assert not system.broker.authenticate("r1", token.upper())
        assert not system.broker.authenticate("r1", "")
        assert not system.broker.authenticate("r2", token)


def test_a_restart_keeps_runs_queues_and_counts(
    log_factory: Callable[..., EventLog], clock: ManualClock
) -> None:
    first = System.open(log_factory(clock=clock), clock=clock, scheduler=False)
    token = first.broker.create_run("r1")
    first.broker.create_run("r2")
    first.broker.ingest("r1", "done", "{}")
    first.broker.ingest("r1", "failed", '{"why":1}')
    first.broker.send("r1", "steer", '{"n":1}', "m1")
    first.broker.send("r1", "steer", '{"n":2}', "m2")
    first.broker.send("r2", "steer", "{}", "delivered")
    assert [m.id for m in first.broker.take_control("r2")] == ["delivered"]
    first.close()

    second = System.open(log_factory(clock=clock), clock=clock, scheduler=False)
    try:
        broker = second.broker
        assert broker.authenticate("r1", token)
        assert broker.run_count() == 2
        assert broker.finish_count("r1") == 2
        assert broker.last_finish_status("r1") == "failed"
        assert broker.ensure_run("r1") == (None, False)  # the raw token left with the old process
        taken = broker.take_control("r1")
        assert [(m.id, m.payload) for m in taken] == [("m1", '{"n":1}'), ("m2", '{"n":2}')]
        assert broker.take_control("r1") == []
        assert broker.take_control("r2") == []  # delivered before the restart: not again
    finally:
        second.close()


def test_a_message_pushed_through_one_system_is_taken_through_the_other_once(
    log_factory: Callable[..., EventLog], clock: ManualClock
) -> None:
    a = System.open(log_factory(clock=clock), clock=clock, scheduler=False)
    b = System.open(log_factory(clock=clock), clock=clock, scheduler=False)
    try:
        token = a.broker.create_run("r1")
        assert b.broker.authenticate("r1", token)
        assert b.broker.take_control("r1") == []  # b's actor for r1 is now up with an empty queue
        a.broker.push_control("r1", ControlMessage("m1", "steer", "r1", "", '{"x":1}'))
        (msg,) = take_eventually(b.broker, "r1", 1)
        assert (msg.id, msg.payload, msg.created_at) == ("m1", '{"x":1}', clock.now())
        assert a.broker.take_control("r1") == []
        assert b.broker.take_control("r1") == []
        view = a.broker.get_run("r1")
        assert view is not None
        assert view.control_queue == ()
    finally:
        b.close()
        a.close()


def test_racing_takers_in_two_systems_share_each_message_exactly_once(
    log_factory: Callable[..., EventLog], clock: ManualClock
) -> None:
    a = System.open(log_factory(clock=clock), clock=clock, scheduler=False)
    b = System.open(log_factory(clock=clock), clock=clock, scheduler=False)
    n = 40
    taken: list[str] = []
    arrived = threading.Condition()
    done = threading.Event()

    def drain(system: System) -> None:
        while not done.is_set():
            ids = [m.id for m in system.broker.wait_control("r1", 0.05, done)]
            with arrived:
                taken.extend(ids)
                arrived.notify_all()

    try:
        a.broker.create_run("r1")
        threads = [threading.Thread(target=drain, args=(s,), daemon=True) for s in (a, b)]
        for t in threads:
            t.start()
        for i in range(n):
            (a if i % 2 else b).broker.send("r1", "steer", "{}", f"m{i:02}")
        with arrived:
            assert arrived.wait_for(lambda: len(taken) >= n, WAIT), taken
        done.set()
        for t in threads:
            t.join(WAIT)
            assert not t.is_alive()
    finally:
        done.set()
        b.close()
        a.close()
    # A message taken twice would make the list longer than n, or repeat an id.
    assert sorted(taken) == [f"m{i:02}" for i in range(n)]


def test_a_take_that_lost_a_race_returns_what_it_recorded(system: System, clock: ManualClock) -> None:
    # `stale` is a second Broker over the same log that no follower refreshes: its actor still
    # holds the queue as [first] when it takes, so its append conflicts and it decides again.
    stale = Broker(system.log, clock, system.approvals, system.views)
    try:
        stale.create_run("r1")
        stale.send("r1", "steer", '{"n":1}', "dup")
        system.broker.send("r1", "steer", '{"n":2}', "dup")  # another writer, same id
        taken = stale.take_control("r1")
        assert [(m.id, m.payload) for m in taken] == [("dup", '{"n":1}'), ("dup", '{"n":2}')]
        assert stale.take_control("r1") == []
        assert system.broker.take_control("r1") == []
    finally:
        stale.close()


def test_a_failed_read_does_not_stop_a_system_following_another(
    log_factory: Callable[..., EventLog], clock: ManualClock, monkeypatch
) -> None:
    a = System.open(log_factory(clock=clock), clock=clock, scheduler=False)
    b = System.open(log_factory(clock=clock), clock=clock, scheduler=False)
    try:
        a.broker.create_run("r1")
        assert b.broker.take_control("r1") == []  # b's actor for r1 is now up with an empty queue
        follower = next(t for t in b._threads if t.name == "flightlog-follower")
        failed = threading.Event()
        read_all = b.log.read_all

        def failing_once(*args, **kwargs):
            # Only b's follower, and only its next read: the database is away for a moment.
            if threading.current_thread() is follower and not failed.is_set():
                failed.set()
                raise StorageError(b.log.url, "connection lost: the server closed the connection")
            return read_all(*args, **kwargs)

        monkeypatch.setattr(b.log, "read_all", failing_once)
        signal, unsubscribe = queued_signal(b.broker, "r1")
        try:
            a.broker.push_control("r1", ControlMessage("m1", "steer", "r1"))
            # Only b's follower can tell b's broker of a's message, and it reads (and so fails)
            # at least once after the patch before it can see the message.
            assert signal.wait(WAIT), "b stopped following the log after a failed read"
        finally:
            unsubscribe()
        assert failed.is_set()
        assert [m.id for m in b.broker.take_control("r1")] == ["m1"]
    finally:
        b.close()
        a.close()
