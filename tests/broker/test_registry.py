"""The run registry of SEED-BEHAVIOUR §1.1 and §1.2: tokens, create/ensure/get/delete, counts, reset."""

from __future__ import annotations

import re

import pytest

from actors import Broker, Finish, RunAlreadyRegisteredError, System, make_token
from eventlog import ManualClock

HEX32 = re.compile(r"[0-9a-f]{32}")


# -- make_token --------------------------------------------------------------------------------


def test_make_token_is_32_lowercase_hex() -> None:
    for _ in range(50):
        assert HEX32.fullmatch(make_token())


def test_make_token_is_fresh_each_time() -> None:
    assert len({make_token() for _ in range(200)}) == 200


# -- create_run --------------------------------------------------------------------------------


def test_create_run_returns_a_token_and_registers(broker: Broker) -> None:
    token = broker.create_run("r1")
    assert HEX32.fullmatch(token)
    assert broker.authenticate("r1", token)
    assert broker.run_count() == 1


def test_create_run_twice_is_an_error(broker: Broker) -> None:
    token = broker.create_run("r1")
    with pytest.raises(RunAlreadyRegisteredError) as caught:
        broker.create_run("r1")
    assert str(caught.value) == "run already registered"
    assert broker.authenticate("r1", token)  # the first registration stands
    assert broker.run_count() == 1


def test_create_run_tokens_differ_between_runs(broker: Broker) -> None:
    assert broker.create_run("a") != broker.create_run("b")


def test_create_run_accepts_an_empty_id(broker: Broker) -> None:
    token = broker.create_run("")
    assert HEX32.fullmatch(token)
    view = broker.get_run("")
    assert view is not None
    assert view.run_id == ""
    assert broker.run_count() == 1
    assert broker.authenticate("", token)


def test_create_run_leaves_registered_at_empty_and_sets_last_seen(broker: Broker, clock: ManualClock) -> None:
    broker.create_run("r1")
    view = broker.get_run("r1")
    assert view is not None
    assert view.registered_at is None  # only HTTP /register sets it
    assert view.last_seen == clock.now()
    assert view.control_queue == ()
    assert (view.reports, view.finishes, view.replies) == ((), (), ())
    assert view.permission_requests == {}
    assert view.permission_decisions == {}


def test_http_register_sets_registered_at(broker: Broker, clock: ManualClock) -> None:
    # The contrast to the Go API above: the wire protocol's /register stamps registered_at.
    broker.register("r1")
    view = broker.get_run("r1")
    assert view is not None
    assert view.registered_at == clock.now()


# -- ensure_run --------------------------------------------------------------------------------


def test_ensure_run_creates_then_returns_the_same_token(broker: Broker) -> None:
    token, created = broker.ensure_run("r1")
    assert created is True
    assert token is not None
    assert HEX32.fullmatch(token)
    assert broker.ensure_run("r1") == (token, False)
    assert broker.run_count() == 1


def test_ensure_run_returns_the_token_create_run_issued(broker: Broker) -> None:
    token = broker.create_run("r1")
    assert broker.ensure_run("r1") == (token, False)


def test_ensure_run_in_another_system_cannot_return_the_token(system: System, clock: ManualClock) -> None:
    # Tokens are stored as digests only: a process that did not issue the token cannot hand it back.
    token, created = system.broker.ensure_run("r1")
    assert created
    with System.open(system.log, clock=clock, scheduler=False) as other:
        assert other.broker.ensure_run("r1") == (None, False)
        assert other.broker.authenticate("r1", token or "")
        assert other.broker.run_count() == 1
    assert system.broker.ensure_run("r1") == (token, False)


# -- get_run / delete_run ----------------------------------------------------------------------


def test_get_run_of_an_unknown_run_is_none(broker: Broker) -> None:
    assert broker.get_run("nope") is None


def test_delete_run_removes_the_run(broker: Broker) -> None:
    token = broker.create_run("r1")
    broker.create_run("r2")
    broker.delete_run("r1")
    assert broker.get_run("r1") is None
    assert not broker.exists("r1")
    assert not broker.authenticate("r1", token)
    assert broker.run_count() == 1
    assert broker.run_ids() == ["r2"]


def test_delete_run_of_an_unknown_run_is_a_no_op(system: System) -> None:
    head = system.log.head()
    system.broker.delete_run("nope")
    system.broker.delete_run("nope")
    assert system.log.head() == head  # nothing was appended


def test_delete_run_keeps_the_history_in_the_log(system: System) -> None:
    system.broker.create_run("r1")
    system.broker.ingest("r1", "working", "{}")
    system.broker.delete_run("r1")
    types = [r.type for r in system.log.read("run-r1")]
    assert types == ["RunRegistered", "RunReported", "RunDeleted"]
    assert system.broker.get_run("r1") is None


def test_a_deleted_run_can_be_registered_afresh(broker: Broker) -> None:
    broker.create_run("r1")
    broker.ingest("r1", "done", "{}")
    broker.delete_run("r1")
    token = broker.create_run("r1")
    assert broker.authenticate("r1", token)
    view = broker.get_run("r1")
    assert view is not None
    assert view.finishes == ()  # a new registration starts empty
    assert broker.finish_count("r1") == 0


def test_ensure_run_after_delete_creates_a_new_run(broker: Broker) -> None:
    first, _ = broker.ensure_run("r1")
    broker.delete_run("r1")
    second, created = broker.ensure_run("r1")
    assert created
    assert second != first


# -- run_count / reset -------------------------------------------------------------------------


def test_run_count_counts_registered_runs(broker: Broker) -> None:
    assert broker.run_count() == 0
    for i in range(3):
        broker.create_run(f"r{i}")
    assert broker.run_count() == 3
    broker.ensure_run("r1")
    assert broker.run_count() == 3


def test_reset_drops_every_run_and_records_it(system: System) -> None:
    broker = system.broker
    tokens = [broker.create_run(f"r{i}") for i in range(3)]
    broker.reset()
    assert broker.run_count() == 0
    for i, token in enumerate(tokens):
        assert broker.get_run(f"r{i}") is None
        assert not broker.authenticate(f"r{i}", token)
    resets = [r for r in system.log.read("broker-main") if r.type == "BrokerReset"]
    assert len(resets) == 1
    assert sorted(resets[0].data["run_ids"]) == ["r0", "r1", "r2"]
    assert [r.type for r in system.log.read("run-r0")][-1] == "RunDeleted"
    # The issued tokens are forgotten too: ensure_run creates anew.
    token, created = broker.ensure_run("r0")
    assert created
    assert token not in tokens


def test_reset_of_an_empty_broker_still_records_a_reset(system: System) -> None:
    system.broker.reset()
    assert [r.type for r in system.log.read("broker-main")] == ["BrokerReset"]
    assert system.broker.run_count() == 0


# -- finish_count / last_finish_status ---------------------------------------------------------


def test_finish_count_and_last_status_of_an_unknown_run(broker: Broker) -> None:
    assert broker.finish_count("nope") == 0
    assert broker.last_finish_status("nope") == ""


def test_finish_count_and_last_status_without_finishes(broker: Broker) -> None:
    broker.create_run("r1")
    broker.ingest("r1", "working", "{}")
    assert broker.finish_count("r1") == 0
    assert broker.last_finish_status("r1") == ""


def test_finish_count_and_last_status_follow_the_finishes(broker: Broker) -> None:
    broker.create_run("r1")
    broker.ingest("r1", "done", "{}")
    broker.ingest("r1", "failed", "{}")
    assert broker.finish_count("r1") == 2
    assert broker.last_finish_status("r1") == "failed"
    broker.finish(Finish("r1", "", "no status"))  # HTTP /finish records the status as given
    assert broker.finish_count("r1") == 3
    assert broker.last_finish_status("r1") == ""


def test_finish_count_of_a_deleted_run_is_zero(broker: Broker) -> None:
    broker.create_run("r1")
    broker.ingest("r1", "blocked", "{}")
    broker.delete_run("r1")
    assert broker.finish_count("r1") == 0
    assert broker.last_finish_status("r1") == ""
