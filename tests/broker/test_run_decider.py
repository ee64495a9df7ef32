"""The run aggregate's decider, given/when/then: pure, no log, no actor, no clock."""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from datetime import UTC, datetime

import orjson
import pytest

from actors import (
    ControlMessage,
    ControlQueueFullError,
    ControlQueueShareError,
    RunAlreadyRegisteredError,
    RunNotFoundError,
)
from actors.broker.run_decider import (
    DeleteRun,
    Heartbeat,
    QueueControl,
    RecordFinish,
    RecordPermissionDecision,
    RecordReply,
    RecordReport,
    RegisterRun,
    RequestPermission,
    RunState,
    TakeControl,
    decide,
    evolve,
)
from eventlog import Event
from eventlog.events import (
    ControlDelivered,
    ControlQueued,
    PermissionDecided,
    PermissionRequested,
    RunDeleted,
    RunFinished,
    RunHeartbeat,
    RunRegistered,
    RunRegistrationRefreshed,
    RunReplied,
    RunReported,
)

RID = "r1"
NOW = datetime(2026, 3, 4, 5, 6, 7, tzinfo=UTC)
EARLIER = datetime(2026, 1, 1, tzinfo=UTC)
DIGEST = "d" * 64
OTHER = "e" * 64
REGISTERED = RunRegistered(RID, DIGEST, None, EARLIER)


def queued(id: str) -> ControlQueued:
    return ControlQueued(RID, id, "steer", "", "{}", EARLIER)


@dataclass
class Then:
    state: RunState
    command: object

    def then(self, *events: Event) -> None:
        decision = decide(self.state, self.command, NOW)
        assert decision.error is None
        assert list(decision.events) == list(events)

    def then_nothing(self) -> None:
        self.then()

    def then_error(self, kind: type[Exception], message: str) -> None:
        decision = decide(self.state, self.command, NOW)
        assert list(decision.events) == []
        assert isinstance(decision.error, kind)
        assert str(decision.error) == message


class given:  # lower case: it reads as a sentence, given(...).when(...).then(...)
    """The run's state after `events`, folded with the real evolve."""

    def __init__(self, *events: Event) -> None:
        self.state = functools.reduce(evolve, events, RunState(RID))

    def when(self, command: object) -> Then:
        return Then(self.state, command)


# -- registration ------------------------------------------------------------------------------


def test_register_through_the_api_leaves_registered_at_empty() -> None:
    given().when(RegisterRun(DIGEST, over_http=False, exclusive=True)).then(
        RunRegistered(RID, DIGEST, None, NOW)
    )


def test_register_over_http_sets_registered_at() -> None:
    given().when(RegisterRun(DIGEST, over_http=True, exclusive=True)).then(
        RunRegistered(RID, DIGEST, NOW, NOW)
    )


def test_create_of_an_existing_run_is_refused() -> None:
    given(REGISTERED).when(RegisterRun(OTHER, over_http=False, exclusive=True)).then_error(
        RunAlreadyRegisteredError, "run already registered"
    )


def test_ensure_of_an_existing_run_records_nothing() -> None:
    given(REGISTERED).when(RegisterRun(OTHER, over_http=False, exclusive=False)).then_nothing()


def test_http_register_with_the_runs_token_refreshes() -> None:
    given(REGISTERED).when(RegisterRun(DIGEST, over_http=True, exclusive=True)).then(
        RunRegistrationRefreshed(RID, NOW)
    )


@pytest.mark.parametrize("exclusive", [True, False])
def test_http_register_with_another_token_is_refused(exclusive: bool) -> None:
    given(REGISTERED).when(RegisterRun(OTHER, over_http=True, exclusive=exclusive)).then_error(
        RunAlreadyRegisteredError, "run already registered"
    )


def test_a_deleted_run_registers_afresh() -> None:
    given(REGISTERED, RunDeleted(RID, "deleted", EARLIER)).when(
        RegisterRun(OTHER, over_http=False, exclusive=True)
    ).then(RunRegistered(RID, OTHER, None, NOW))


# -- deletion and existence --------------------------------------------------------------------


def test_delete_records_the_deletion() -> None:
    given(REGISTERED).when(DeleteRun("deleted")).then(RunDeleted(RID, "deleted", NOW))


@pytest.mark.parametrize("history", [(), (REGISTERED, RunDeleted(RID, "reset", EARLIER))])
def test_delete_of_an_absent_run_records_nothing(history: tuple[Event, ...]) -> None:
    given(*history).when(DeleteRun("deleted")).then_nothing()


@pytest.mark.parametrize(
    "command",
    [
        Heartbeat(),
        QueueControl(ControlMessage("m", "steer", RID), 0),
        TakeControl(),
        RecordReport("working", "{}"),
        RecordFinish("done", "", (), "{}"),
        RecordReply("boss", None),
        RequestPermission("q", "Bash", "", "", "ap"),
        RecordPermissionDecision("q", "allow", "ap", "alice", EARLIER),
    ],
)
@pytest.mark.parametrize("history", [(), (REGISTERED, RunDeleted(RID, "deleted", EARLIER))])
def test_every_other_command_needs_the_run(history: tuple[Event, ...], command: object) -> None:
    given(*history).when(command).then_error(RunNotFoundError, "run not found: r1")


def test_heartbeat() -> None:
    given(REGISTERED).when(Heartbeat()).then(RunHeartbeat(RID, NOW))


# -- the control queue -------------------------------------------------------------------------


def test_queueing_stamps_now_over_the_messages_time() -> None:
    msg = ControlMessage("m1", "agent_message", RID, "alice", '{"message":"hi"}', EARLIER)
    given(REGISTERED).when(QueueControl(msg, 10)).then(
        ControlQueued(RID, "m1", "agent_message", "alice", '{"message":"hi"}', NOW)
    )


def sent(id: str, by: str) -> ControlQueued:
    """A message run `by` sent to RID (between runs: no operator)."""
    return ControlQueued(RID, id, "note", by, "{}", EARLIER)


def test_a_full_queue_refuses_a_message_between_runs() -> None:
    given(REGISTERED, sent("a", "x"), sent("b", "y")).when(
        QueueControl(ControlMessage("c", "note", RID, "z"), 2)
    ).then_error(ControlQueueFullError, "control queue of run r1 is full (2 undelivered messages)")


def test_operator_control_is_never_refused_by_a_full_queue() -> None:
    # The queue is full of other runs' messages, and of the operator's own: the operator's
    # stop still gets in (its lane is not bounded by traffic between runs).
    history = (REGISTERED, sent("a", "x"), sent("b", "y"), queued("o1"), queued("o2"))
    given(*history).when(QueueControl(ControlMessage("stop", "stop", RID, sent_by="ada (c1)"), 2, 1)).then(
        ControlQueued(RID, "stop", "stop", "", None, NOW, "ada (c1)")
    )
    given(*history).when(QueueControl(ControlMessage("s2", "abort", RID), 2, 1)).then(
        ControlQueued(RID, "s2", "abort", "", None, NOW)
    )


def test_permission_notices_do_not_fill_the_queue_of_messages_between_runs() -> None:
    notices = (ControlQueued(RID, f"n{i}", "permission_decision", "", "{}", EARLIER) for i in range(5))
    given(REGISTERED, *notices).when(QueueControl(ControlMessage("c", "note", RID, "x"), 2)).then(
        ControlQueued(RID, "c", "note", "x", None, NOW)
    )


def test_a_sender_over_its_share_is_refused_and_others_are_not() -> None:
    history = (REGISTERED, sent("a", "x"), sent("b", "x"))
    given(*history).when(QueueControl(ControlMessage("c", "note", RID, "x"), 10, 2)).then_error(
        ControlQueueShareError,
        "run x holds its share of the control queue of run r1 (2 undelivered messages): "
        "wait until r1 takes them",
    )
    given(*history).when(QueueControl(ControlMessage("c", "note", RID, "y"), 10, 2)).then(
        ControlQueued(RID, "c", "note", "y", None, NOW)
    )


def test_delivered_messages_free_their_room() -> None:
    history = (REGISTERED, sent("a", "x"), sent("b", "x"), ControlDelivered(RID, ("a", "b"), EARLIER))
    given(*history).when(QueueControl(ControlMessage("c", "note", RID, "x"), 2, 2)).then(
        ControlQueued(RID, "c", "note", "x", None, NOW)
    )


def test_a_limit_of_zero_is_no_limit() -> None:
    history = (REGISTERED, *(queued(f"m{i}") for i in range(50)))
    given(*history).when(QueueControl(ControlMessage("x", "steer", RID), 0)).then(
        ControlQueued(RID, "x", "steer", "", None, NOW)
    )


def test_taking_an_empty_queue_records_nothing() -> None:
    given(REGISTERED).when(TakeControl()).then_nothing()
    given(REGISTERED, queued("a"), ControlDelivered(RID, ("a",), EARLIER)).when(TakeControl()).then_nothing()


def test_taking_delivers_the_whole_queue_in_order() -> None:
    given(REGISTERED, queued("a"), queued("b"), queued("c")).when(TakeControl()).then(
        ControlDelivered(RID, ("a", "b", "c"), NOW)
    )


def test_the_same_id_queued_twice_is_delivered_twice() -> None:
    given(REGISTERED, queued("a"), queued("a")).when(TakeControl()).then(
        ControlDelivered(RID, ("a", "a"), NOW)
    )


# -- reports, finishes, replies ----------------------------------------------------------------


def test_report() -> None:
    given(REGISTERED).when(RecordReport("", None)).then(RunReported(RID, "", None, NOW))


def test_finish_as_given() -> None:
    given(REGISTERED).when(RecordFinish("", "sum", ("a.py",), '{"x":1}')).then(
        RunFinished(RID, "", "sum", ("a.py",), '{"x":1}', NOW)
    )


def test_reply() -> None:
    given(REGISTERED).when(RecordReply("boss", "{}")).then(RunReplied(RID, "boss", "{}", NOW))


def test_finishes_are_counted_with_the_last_status() -> None:
    state = given(
        REGISTERED,
        RunFinished(RID, "done", "", (), None, EARLIER),
        RunReported(RID, "working", None, EARLIER),
        RunFinished(RID, "blocked", "", (), None, EARLIER),
    ).state
    assert (state.finish_count, state.last_finish_status) == (2, "blocked")
    assert given(REGISTERED, RunDeleted(RID, "x", EARLIER)).state == RunState(RID)


# -- permissions -------------------------------------------------------------------------------


def test_permission_request() -> None:
    given(REGISTERED).when(RequestPermission("q1", "Bash", "list", "ls", "ap1")).then(
        PermissionRequested(RID, "q1", "Bash", "list", "ls", "ap1", NOW)
    )


def test_a_permission_decision_queues_its_notice_in_the_same_commit() -> None:
    asked = PermissionRequested(RID, "q1", "Bash", "", "", "ap1", EARLIER)
    given(REGISTERED, asked).when(RecordPermissionDecision("q1", "deny", "ap1", "alice", EARLIER)).then(
        PermissionDecided(RID, "q1", "deny", "ap1", "alice", EARLIER),
        ControlQueued(RID, "ap1", "permission_decision", "", '{"request_id":"q1","behavior":"deny"}', NOW),
    )


def test_an_answered_approval_is_not_answered_again() -> None:
    asked = PermissionRequested(RID, "q1", "Bash", "", "", "ap1", EARLIER)
    decided = PermissionDecided(RID, "q1", "allow", "ap1", "alice", EARLIER)
    given(REGISTERED, asked, decided).when(
        RecordPermissionDecision("q1", "deny", "ap1", "bob", NOW)
    ).then_nothing()


def test_a_decision_without_an_approval_gets_a_fresh_notice_id() -> None:
    decision = decide(
        given(REGISTERED).state, RecordPermissionDecision("q9", "allow", "", "run:r1", NOW), NOW
    )
    decided, notice = decision.events
    assert decided == PermissionDecided(RID, "q9", "allow", "", "run:r1", NOW)
    assert isinstance(notice, ControlQueued)
    assert re.fullmatch(r"[0-9a-f]{32}", notice.message_id)
    assert orjson.loads(notice.payload or "") == {"request_id": "q9", "behavior": "allow"}


def test_an_unknown_command_is_a_type_error() -> None:
    with pytest.raises(TypeError):
        decide(given(REGISTERED).state, object(), NOW)
