"""Run tokens an operator controls: who created a run, revocation and re-keying.

The attack: a run's token leaks (or a stranger registered the id first); an operator revokes
it and nothing authenticates as the run any more — on every path, in this process and in
another on the same database — until a re-key hands the real agent a new token.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import pytest

from actors import (
    Broker,
    Report,
    RunAlreadyRegisteredError,
    RunNotEnrolledError,
    RunNotFoundError,
    RunRevokedError,
    System,
)
from actors.broker.parking import Parking
from actors.broker.run_decider import (
    RecordReport,
    RegisterRun,
    Rekey,
    RevokeToken,
    RunState,
    decide,
    evolve,
)
from eventlog import Event, EventLog, ManualClock
from eventlog.events import (
    RunRegistered,
    RunRegistrationRefreshed,
    RunRekeyed,
    RunReported,
    RunTokenRevoked,
)

from .conftest import WAIT

RID = "r1"
NOW = datetime(2026, 3, 4, 5, 6, 7, tzinfo=UTC)
EARLIER = datetime(2026, 1, 1, tzinfo=UTC)
DIGEST = "d" * 64
NEW = "e" * 64
CREATED = RunRegistered(RID, DIGEST, None, EARLIER, "operator", "alice", "c-alice")
REVOKED = RunTokenRevoked(RID, "leaked", "alice", "c-alice", EARLIER)


# -- the decider, given/when/then ------------------------------------------------------------


@dataclass
class Then:
    state: RunState
    command: object

    def then(self, *events: Event) -> None:
        decision = decide(self.state, self.command, NOW)
        assert decision.error is None
        assert list(decision.events) == list(events)

    def then_error(self, kind: type[Exception], message: str) -> None:
        decision = decide(self.state, self.command, NOW)
        assert list(decision.events) == []
        assert type(decision.error) is kind
        assert str(decision.error) == message


class given:  # lower case: it reads as a sentence, given(...).when(...).then(...)
    def __init__(self, *events: Event) -> None:
        self.state = functools.reduce(evolve, events, RunState(RID))

    def when(self, command: object) -> Then:
        return Then(self.state, command)


def test_a_created_run_records_who_created_it():
    given().when(RegisterRun(DIGEST, False, True, "operator", "alice", "c-alice")).then(
        RunRegistered(RID, DIGEST, None, NOW, "operator", "alice", "c-alice")
    )


def test_a_self_registration_records_the_address():
    given().when(RegisterRun(DIGEST, True, True, "self", "127.0.0.1")).then(
        RunRegistered(RID, DIGEST, NOW, NOW, "self", "127.0.0.1", "")
    )


def test_where_runs_are_enrolled_a_registration_creates_nothing():
    given().when(RegisterRun(DIGEST, True, True, "self", "10.0.0.9", create=False)).then_error(
        RunNotEnrolledError, "run 'r1' was not created by an operator or an enrolment credential"
    )


def test_where_runs_are_enrolled_the_agent_registers_with_its_token():
    given(CREATED).when(RegisterRun(DIGEST, True, True, "self", create=False)).then(
        RunRegistrationRefreshed(RID, NOW)
    )


def test_revoking_records_who_and_why():
    given(CREATED).when(RevokeToken("leaked", "bob", "c-bob")).then(
        RunTokenRevoked(RID, "leaked", "bob", "c-bob", NOW)
    )


def test_revoking_a_revoked_run_records_nothing():
    given(CREATED, REVOKED).when(RevokeToken("again", "bob", "c-bob")).then()


def test_an_unknown_run_cannot_be_revoked_or_rekeyed():
    given().when(RevokeToken("", "bob", "c-bob")).then_error(RunNotFoundError, "run not found: r1")
    given().when(Rekey(NEW, "bob", "c-bob")).then_error(RunNotFoundError, "run not found: r1")


def test_a_revoked_run_cannot_be_registered_again_with_its_old_token_or_any():
    message = "run already registered: its token was revoked (an operator re-keys it)"
    given(CREATED, REVOKED).when(RegisterRun(DIGEST, True, True)).then_error(RunRevokedError, message)
    given(CREATED, REVOKED).when(RegisterRun(NEW, True, True, "self", "10.0.0.9")).then_error(
        RunRevokedError, message
    )
    given(CREATED, REVOKED).when(RegisterRun(NEW, False, True)).then_error(RunRevokedError, message)
    given(CREATED, REVOKED).when(RegisterRun(NEW, False, False)).then()  # ensure_run: no token


def test_a_revoked_state_holds_no_digest():
    state = given(CREATED, REVOKED).state
    assert (state.exists, state.revoked, state.token_sha256) == (True, True, "")


def test_a_rekey_revives_a_revoked_run_with_the_new_digest_only():
    given(CREATED, REVOKED).when(Rekey(NEW, "bob", "c-bob")).then(RunRekeyed(RID, NEW, "bob", "c-bob", NOW))
    state = given(CREATED, REVOKED, RunRekeyed(RID, NEW, "bob", "c-bob", NOW)).state
    assert (state.revoked, state.token_sha256) == (False, NEW)
    given(CREATED, REVOKED, RunRekeyed(RID, NEW, "bob", "c-bob", NOW)).when(
        RegisterRun(NEW, True, True)
    ).then(RunRegistrationRefreshed(RID, NOW))


def test_a_rekey_replaces_a_live_token_too():
    state = given(CREATED, RunRekeyed(RID, NEW, "bob", "c-bob", NOW)).state
    assert state.token_sha256 == NEW
    rekeyed = RunRekeyed(RID, NEW, "bob", "c-bob", NOW)
    given(CREATED, rekeyed).when(RegisterRun(DIGEST, True, True)).then_error(
        RunAlreadyRegisteredError, "run already registered"
    )


def test_old_records_read_unchanged():
    old = RunRegistered(RID, DIGEST, None, EARLIER)
    assert (old.origin, old.by, old.by_credential) == ("", "", "")
    given(old).when(RecordReport("working", None)).then(RunReported(RID, "working", None, NOW))


# -- the broker, on every backend -------------------------------------------------------------


def as_run(broker: Broker, run_id: str, token: str, write: Report | None = None) -> bool:
    """Whether the hot path takes a write (None: a heartbeat) made with `token`."""
    done = threading.Event()
    call = broker.call_as_run(run_id, token, write, done.set)
    assert done.wait(WAIT)
    authorized, _ = call.result()
    return bool(authorized)


def takes(broker: Broker, run_id: str, token: str) -> bool:
    """Whether a poll's take with `token` is authorized."""
    done = threading.Event()
    call = broker.call_take_as_run(run_id, token, done.set)
    assert done.wait(WAIT)
    authorized, _ = call.result()
    return bool(authorized)


def refused_everywhere(broker: Broker, run_id: str, token: str) -> bool:
    return not (
        broker.authenticate(run_id, token)
        or as_run(broker, run_id, token, Report(run_id, "working"))
        or as_run(broker, run_id, token)
        or takes(broker, run_id, token)
    )


def test_create_run_keeps_its_positional_form_and_records_in_process(system: System):
    token = system.broker.create_run("plain")
    view = system.broker.get_run("plain")
    assert view is not None
    assert (view.origin, view.created_by, view.created_by_credential) == ("local", "", "")
    assert not view.revoked
    assert system.broker.authenticate("plain", token)


def test_who_created_a_run_is_in_its_view_and_the_registry(system: System):
    system.broker.create_run("r1", origin="operator", by="alice", by_credential="c-alice")
    view = system.broker.get_run("r1")
    assert view is not None
    assert (view.origin, view.created_by, view.created_by_credential) == ("operator", "alice", "c-alice")
    system.views.catch_up()
    row = system.views.run("r1")
    assert row is not None
    assert (row.origin, row.created_by, row.created_by_credential, row.revoked) == (
        "operator",
        "alice",
        "c-alice",
        False,
    )


def test_a_revoked_token_authenticates_nothing_at_once(system: System):
    broker = system.broker
    token = broker.create_run("r1", origin="operator", by="alice", by_credential="c-alice")
    assert as_run(broker, "r1", token, Report("r1", "working"))  # the writer knows the run now
    assert takes(broker, "r1", token)
    before = system.log.head().seq
    broker.revoke_run("r1", by="bob", by_credential="c-bob", reason="leaked")
    [revoked] = list(system.log.read_all(after_seq=before))
    assert (revoked.type, revoked.meta["actor"]) == ("RunTokenRevoked", "bob")
    assert revoked.data["reason"] == "leaked"
    assert token not in str(revoked.data)
    assert refused_everywhere(broker, "r1", token)
    with pytest.raises(RunRevokedError):
        broker.register("r1", token)
    assert broker.ensure_run("r1") == (None, False)
    view = broker.get_run("r1")
    assert view is not None
    assert view.revoked
    system.views.catch_up()
    row = system.views.run("r1")
    assert row is not None
    assert row.revoked


def test_a_rekey_hands_out_a_new_token_and_the_old_one_stops(system: System):
    broker = system.broker
    old = broker.create_run("r1")
    assert takes(broker, "r1", old)
    new = broker.rekey_run("r1", by="bob", by_credential="c-bob")
    assert new != old
    assert refused_everywhere(broker, "r1", old)
    assert broker.authenticate("r1", new)
    assert as_run(broker, "r1", new, Report("r1", "working"))
    assert broker.ensure_run("r1") == (new, False)  # this process issued it
    [rekeyed] = [r for r in system.log.read("run-r1") if r.type == "RunRekeyed"]
    assert new not in str(rekeyed.data)
    assert old not in str(rekeyed.data)


def test_a_revoked_run_revives_with_a_rekey(system: System):
    broker = system.broker
    old = broker.create_run("r1")
    broker.revoke_run("r1", by="bob", by_credential="c-bob")
    new = broker.rekey_run("r1", by="bob", by_credential="c-bob")
    assert not broker.authenticate("r1", old)
    assert broker.authenticate("r1", new)
    assert broker.register("r1", new) == new  # its agent registers with the new token
    view = broker.get_run("r1")
    assert view is not None
    assert not view.revoked


def test_unknown_runs_cannot_be_revoked_or_rekeyed(system: System):
    with pytest.raises(RunNotFoundError):
        system.broker.revoke_run("ghost", by="bob", by_credential="c-bob")
    with pytest.raises(RunNotFoundError):
        system.broker.rekey_run("ghost", by="bob", by_credential="c-bob")
    assert system.broker.get_run("ghost") is None


def test_a_registration_that_may_not_create_creates_nothing(system: System):
    before = system.log.head().seq
    with pytest.raises(RunNotEnrolledError):
        system.broker.register("squat", "s" * 32, create=False)
    assert system.log.head().seq == before
    token = system.broker.create_run("real")
    assert system.broker.register("real", token, create=False) == token


def test_a_waiting_poll_hears_of_the_revocation(system: System):
    broker = system.broker
    broker.create_run("r1")
    woke = threading.Event()
    unsubscribe = broker.on_control("r1", woke.set)
    try:
        broker.revoke_run("r1", by="bob", by_credential="c-bob")
        assert woke.wait(WAIT), "a poll waiting on the run was not woken by its revocation"
    finally:
        unsubscribe()


def test_a_revocation_through_another_system_is_refused_at_once(
    log_factory: Callable[..., EventLog], clock: ManualClock
):
    a = System.open(log_factory(clock=clock), clock=clock, scheduler=False)
    b = System.open(log_factory(clock=clock), clock=clock, scheduler=False)
    try:
        token = a.broker.create_run("r1")
        # b knows the run and its token now: its writer and actor hold a fresh state of it.
        assert b.broker.authenticate("r1", token)  # (b's views catch up with the log here)
        assert as_run(b.broker, "r1", token, Report("r1", "working"))
        assert takes(b.broker, "r1", token)
        a.broker.revoke_run("r1", by="bob", by_credential="c-bob")
        # Without waiting for b's follower: a write decided on b's state before the revocation
        # meets the log's version check, and authenticate folds the log first.
        assert not as_run(b.broker, "r1", token, Report("r1", "working"))
        assert not b.broker.authenticate("r1", token)
        assert not any(r.type == "RunReported" and r.seq > 0 for r in _after_revocation(a))
    finally:
        b.close()
        a.close()


def test_a_waiting_poll_in_another_system_hears_of_the_revocation(
    log_factory: Callable[..., EventLog], clock: ManualClock
):
    a = System.open(log_factory(clock=clock), clock=clock, scheduler=False)
    b = System.open(log_factory(clock=clock), clock=clock, scheduler=False)
    try:
        token = a.broker.create_run("r1")
        assert b.broker.authenticate("r1", token)  # (b's views catch up with the log here)
        assert takes(b.broker, "r1", token)
        woke = threading.Event()
        unsubscribe = b.broker.on_control("r1", woke.set)
        try:
            a.broker.revoke_run("r1", by="bob", by_credential="c-bob")
            assert woke.wait(WAIT), "b's follower did not wake b's poll on the revocation"
        finally:
            unsubscribe()
        assert not takes(b.broker, "r1", token)
    finally:
        b.close()
        a.close()


def _after_revocation(system: System) -> list[Any]:
    records = list(system.log.read("run-r1"))
    at = next(r.version for r in records if r.type == "RunTokenRevoked")
    return [r for r in records if r.version > at]


def test_a_push_is_never_handed_to_a_poll_that_came_with_another_token():
    """A poll parked with a token since revoked or re-keyed is not handed what is pushed next."""
    parking = Parking()
    old = parking.park("r1", lambda: None, "a" * 64)
    assert parking.claim("r1", "b" * 64) is None  # the run's token is another one now
    assert parking.claim("r1", "") is None  # a revoked run has none
    assert parking.claim("r1", "a" * 64) is old
