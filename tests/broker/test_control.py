"""Control messages, SEED-BEHAVIOUR §1.3: push_control, send, send_to, FIFO, the queue bound."""

from __future__ import annotations

import re
from datetime import UTC, datetime

import pytest

from actors import (
    OPERATOR_CONTROL_TYPES,
    Broker,
    ControlMessage,
    ControlQueueFullError,
    ControlQueueShareError,
    OperatorOnlyError,
    RunNotFoundError,
    System,
)
from eventlog import ManualClock

HEX32 = re.compile(r"[0-9a-f]{32}")
LONG_AGO = datetime(2001, 2, 3, 4, 5, 6, tzinfo=UTC)


def message(
    id: str, type: str = "steer", run_id: str = "r1", payload: str | None = '{"n":1}'
) -> ControlMessage:
    return ControlMessage(id, type, run_id, "", payload, LONG_AGO)


# -- push_control ------------------------------------------------------------------------------


def test_push_control_to_an_unknown_run_is_an_error(system: System) -> None:
    head = system.log.head()
    with pytest.raises(RunNotFoundError) as caught:
        system.broker.push_control("ghost", message("m1", run_id="ghost"))
    assert str(caught.value) == "run not found: ghost"
    assert system.log.head() == head


def test_push_control_overwrites_created_at_with_now(broker: Broker, clock: ManualClock) -> None:
    broker.create_run("r1")
    clock.advance(42)
    queued = broker.push_control("r1", message("m1"))
    assert queued.created_at == clock.now()
    view = broker.get_run("r1")
    assert view is not None
    assert view.control_queue == (ControlMessage("m1", "steer", "r1", "", '{"n":1}', clock.now()),)


def test_push_control_keeps_fifo_order(broker: Broker, clock: ManualClock) -> None:
    broker.create_run("r1")
    for i in range(5):
        clock.advance(1)
        broker.push_control("r1", message(f"m{i}", payload=f'{{"n":{i}}}'))
    view = broker.get_run("r1")
    assert view is not None
    assert [m.id for m in view.control_queue] == [f"m{i}" for i in range(5)]
    taken = broker.take_control("r1")
    assert [m.id for m in taken] == [f"m{i}" for i in range(5)]
    assert [m.payload for m in taken] == [f'{{"n":{i}}}' for i in range(5)]
    assert broker.take_control("r1") == []


def test_taking_drains_the_whole_queue_once(system: System) -> None:
    broker = system.broker
    broker.create_run("r1")
    broker.push_control("r1", message("m1"))
    broker.push_control("r1", message("m2"))
    assert len(broker.take_control("r1")) == 2
    assert broker.take_control("r1") == []
    view = broker.get_run("r1")
    assert view is not None
    assert view.control_queue == ()
    delivered = [r for r in system.log.read("run-r1") if r.type == "ControlDelivered"]
    assert [r.data["message_ids"] for r in delivered] == [["m1", "m2"]]


def test_messages_with_the_same_id_are_both_queued_and_delivered(broker: Broker) -> None:
    # The seed's queue is a list: a correlation id used twice gives two messages.
    broker.create_run("r1")
    broker.send("r1", "steer", '{"n":1}', "same")
    broker.send("r1", "steer", '{"n":2}', "same")
    view = broker.get_run("r1")
    assert view is not None
    assert [m.payload for m in view.control_queue] == ['{"n":1}', '{"n":2}']
    assert [m.payload for m in broker.take_control("r1")] == ['{"n":1}', '{"n":2}']
    view = broker.get_run("r1")
    assert view is not None
    assert view.control_queue == ()


def test_push_control_to_a_deleted_run_is_an_error(broker: Broker) -> None:
    broker.create_run("r1")
    broker.delete_run("r1")
    with pytest.raises(RunNotFoundError, match=r"^run not found: r1$"):
        broker.push_control("r1", message("m1"))


def test_pushing_does_not_touch_last_seen(broker: Broker, clock: ManualClock) -> None:
    # last_seen is the agent's liveness: an operator's push says nothing about the agent.
    broker.create_run("r1")
    registered = clock.now()
    clock.advance(10)
    broker.push_control("r1", message("m1"))
    view = broker.get_run("r1")
    assert view is not None
    assert view.last_seen == registered


# -- send --------------------------------------------------------------------------------------


def test_send_uses_the_correlation_id(broker: Broker, clock: ManualClock) -> None:
    broker.create_run("r1")
    broker.send("r1", "steer", '{"text":"go"}', "corr-1")
    view = broker.get_run("r1")
    assert view is not None
    assert view.control_queue == (ControlMessage("corr-1", "steer", "r1", "", '{"text":"go"}', clock.now()),)


def test_send_without_correlation_id_generates_one(broker: Broker) -> None:
    broker.create_run("r1")
    broker.send("r1", "steer", "{}")
    broker.send("r1", "steer", "{}")
    view = broker.get_run("r1")
    assert view is not None
    ids = [m.id for m in view.control_queue]
    assert all(HEX32.fullmatch(i) for i in ids)
    assert ids[0] != ids[1]
    assert all(m.from_run_id == "" for m in view.control_queue)


def test_send_accepts_an_absent_payload(broker: Broker) -> None:
    broker.create_run("r1")
    broker.send("r1", "abort", None, "c1")
    assert [m.payload for m in broker.take_control("r1")] == [None]


def test_send_to_an_unknown_run_is_an_error(broker: Broker) -> None:
    with pytest.raises(RunNotFoundError, match=r"^run not found: ghost$"):
        broker.send("ghost", "steer", "{}")


# -- send_to -----------------------------------------------------------------------------------


def test_send_to_sets_from_run_id_and_checks_only_the_target(broker: Broker, clock: ManualClock) -> None:
    broker.create_run("target")
    # The sender is not registered: send_to does not check it (the HTTP /send handler does).
    broker.send_to("nobody", "target", "agent_message", '{"message":"hi"}', "c9")
    view = broker.get_run("target")
    assert view is not None
    assert view.control_queue == (
        ControlMessage("c9", "agent_message", "target", "nobody", '{"message":"hi"}', clock.now()),
    )


def test_send_to_generates_an_id(broker: Broker) -> None:
    broker.create_run("a")
    broker.create_run("b")
    broker.send_to("a", "b", "agent_message", "{}")
    (msg,) = broker.take_control("b")
    assert HEX32.fullmatch(msg.id)
    assert msg.from_run_id == "a"
    assert msg.run_id == "b"


def test_send_to_an_unknown_target_is_an_error(broker: Broker) -> None:
    broker.create_run("a")
    with pytest.raises(RunNotFoundError) as caught:
        broker.send_to("a", "ghost", "agent_message", "{}")
    assert str(caught.value) == "run not found: ghost"
    assert broker.take_control("a") == []  # nothing went to the sender either


# -- the queue bound ---------------------------------------------------------------------------


def test_a_full_queue_refuses_messages_from_runs_never_the_operator(system: System) -> None:
    broker = system.broker
    broker.queue_limit = 2
    broker.create_run("r1")
    broker.send_to("x", "r1", "note", "{}", "m1")
    broker.send_to("y", "r1", "note", "{}", "m2")
    head = system.log.head()
    with pytest.raises(ControlQueueFullError):
        broker.send_to("z", "r1", "note", "{}", "m3")
    assert system.log.head() == head  # nothing queued
    # The operator's lane: a full queue of other runs' messages never keeps control out.
    broker.send("r1", "steer", "{}", "o1")
    broker.push_control("r1", ControlMessage("o2", "stop", "r1", "", None, sent_by="ada (c1)"))
    assert [m.id for m in broker.take_control("r1")] == ["m1", "m2", "o1", "o2"]
    broker.send_to("z", "r1", "note", "{}", "m5")  # room again once delivered
    assert [m.id for m in broker.take_control("r1")] == ["m5"]


def test_each_sending_run_has_a_share_of_the_queue(system: System) -> None:
    broker = system.broker
    broker.queue_limit = 8  # a quarter each by default: 2
    broker.create_run("r1")
    broker.send_to("x", "r1", "note", "{}", "x1")
    broker.send_to("x", "r1", "note", "{}", "x2")
    with pytest.raises(ControlQueueShareError, match="run x holds its share"):
        broker.send_to("x", "r1", "note", "{}", "x3")
    broker.send_to("y", "r1", "note", "{}", "y1")  # another sender is unaffected
    assert [m.id for m in broker.take_control("r1")] == ["x1", "x2", "y1"]


def test_queue_limit_given_to_the_constructor(system: System, clock: ManualClock) -> None:
    broker = Broker(system.log, clock, system.approvals, system.views, queue_limit=1)
    try:
        broker.create_run("r1")
        broker.send_to("x", "r1", "note", "{}", "m1")
        with pytest.raises(ControlQueueFullError):
            broker.send_to("y", "r1", "note", "{}", "m2")
        view = broker.get_run("r1")
        assert view is not None
        assert [m.id for m in view.control_queue] == ["m1"]
    finally:
        broker.close()


def test_a_full_queue_error_names_no_token(broker: Broker) -> None:
    token = broker.create_run("r1")
    broker.queue_limit = 1
    broker.send_to("x", "r1", "note", "{}")
    with pytest.raises(ControlQueueFullError) as caught:
        broker.send_to("y", "r1", "note", "{}")
    assert token not in str(caught.value)
    assert "r1" in str(caught.value)


@pytest.mark.parametrize("kind", [*sorted(OPERATOR_CONTROL_TYPES), "Permission_Decision", " cancel "])
def test_a_run_may_not_send_what_only_an_operator_sends(system: System, kind: str) -> None:
    broker = system.broker
    broker.create_run("mallory")
    broker.create_run("deployer")
    before = system.log.head().seq
    with pytest.raises(OperatorOnlyError, match="only an operator sends it"):
        broker.send_to("mallory", "deployer", kind, b'{"request_id": "deployer-perm-2", "behavior": "allow"}')
    assert system.log.head().seq == before
    assert broker.get_run("deployer").control_queue == ()  # type: ignore[union-attr]
    broker.send_to("mallory", "deployer", "agent_message", b'{"message": "hi"}')  # messages stay open
    broker.send("deployer", kind, b"{}")  # the operator side's Send still queues it
