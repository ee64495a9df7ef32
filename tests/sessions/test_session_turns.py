"""Turns through a harness: live state, subscriptions, in-flight waits, compaction, permissions."""

from __future__ import annotations

import threading

import pytest

from actors import (
    TURN_FAILED,
    TURN_INTERRUPTED,
    ChatRequest,
    GroupCompactionUnsupportedError,
    ScriptedHarness,
    SessionError,
    SessionForbiddenError,
    System,
)

from .conftest import COMPACT_SUMMARY, GateHarness, reply

T = 10.0


def ask(system, **fields):
    fields.setdefault("user_id", "alice")
    fields.setdefault("agent_id", "main")
    fields.setdefault("message", "hi")
    return system.sessions.chat(ChatRequest(**fields))


@pytest.fixture
def gate() -> GateHarness:
    return GateHarness()


@pytest.fixture
def gated(log, clock, gate, workspace):
    s = System.open(log, clock=clock, scheduler=False, session_harness=gate, workspace=workspace)
    yield s
    s.close()


# -- live turns ------------------------------------------------------------------------------


def test_a_turn_is_live_until_the_harness_goes_idle(gated, gate):
    session = gated.sessions.new_session("alice", "main")
    assert not gated.sessions.session_live(session.id)
    stream = ask(gated, session_id=session.id)
    assert gate.sent.wait(T)
    assert gated.sessions.session_live(session.id)
    assert gated.views.session(session.id).open_turn == stream.turn_id
    with pytest.raises(TimeoutError):
        gated.sessions.wait_in_flight(timeout=0.05)  # it cannot finish: the gate is shut
    gate.release.set()
    assert [e.data.get("content") for e in stream.collect(timeout=T)] == ["hi", "released", None]
    gated.sessions.wait_in_flight(timeout=T)
    assert not gated.sessions.session_live(session.id)
    assert gated.views.session(session.id).open_turn == ""


def test_a_subscriber_sees_every_turn_of_the_session_whoever_started_it(system):
    session = system.sessions.new_session("alice", "main")
    other = system.sessions.new_session("alice", "main")
    watch, unsubscribe = system.sessions.subscribe_session(session.id)
    ask(system, session_id=session.id, message="one").collect(timeout=T)
    ask(system, session_id=other.id, message="elsewhere").collect(timeout=T)
    ask(system, session_id=session.id, message="two").collect(timeout=T)
    unsubscribe()
    unsubscribe()  # twice is harmless
    seen = [(e.type, e.data.get("content")) for e in watch.collect(timeout=T)]
    assert seen == [
        ("user.message", "one"),
        ("assistant.message", "echo: one"),
        ("session.idle", None),
        ("user.message", "two"),
        ("assistant.message", "echo: two"),
        ("session.idle", None),
    ]


def test_turns_of_one_session_run_one_at_a_time(gated, gate):
    session = gated.sessions.new_session("alice", "main")
    first = ask(gated, session_id=session.id, message="first")
    second = ask(gated, session_id=session.id, message="second")
    assert gate.sent.wait(T)
    # The second turn waits for the first: only one turn is recorded as started so far.
    assert gated.views.session(session.id).turns == 1
    gate.release.set()
    first.collect(timeout=T)
    second.collect(timeout=T)
    history = gated.sessions.history(session.id)
    assert [(t.prompt, t.status) for t in history] == [("first", "succeeded"), ("second", "succeeded")]


def test_closing_interrupts_a_turn_in_flight(log, clock, gate, workspace):
    system = System.open(log, clock=clock, scheduler=False, session_harness=gate, workspace=workspace)
    session = system.sessions.new_session("alice", "main")
    stream = ask(system, session_id=session.id)
    assert gate.sent.wait(T)
    system.close()
    assert gate.aborted == [stream.turn_id]
    assert gate.closed
    events = stream.collect(timeout=T)
    assert events[-1].data["message"] == "the sessions service closed during the turn"
    with System.open(log, clock=clock, scheduler=False) as again:
        (turn,) = again.sessions.history(session.id)
        assert turn.status == TURN_INTERRUPTED
        # The harness went idle after the abort; that event came too late to be recorded.
        assert [e.type for e in turn.events] == ["user.message"]


# -- harness failures ------------------------------------------------------------------------


class Refusing(ScriptedHarness):
    def send(self, run_id, prompt, delivery):
        raise RuntimeError("agent unreachable")


def test_a_prompt_the_harness_refuses_fails_the_turn(log, clock, workspace):
    with System.open(log, clock=clock, scheduler=False, session_harness=Refusing([])) as system:
        stream = ask(system)
        events = stream.collect(timeout=T)
        assert [e.data["message"] for e in events] == ["sending prompt: agent unreachable"]
        (turn,) = system.sessions.history(stream.session_id)
        assert (turn.status, turn.error) == (TURN_FAILED, "sending prompt: agent unreachable")


def test_without_a_harness_the_turn_fails_and_says_why(log, clock):
    with System.open(log, clock=clock, scheduler=False) as system:
        stream = ask(system)
        (event,) = stream.collect(timeout=T)
        assert event.data["message"] == "start harness: no harness is configured for sessions"
        system.sessions.harness = ScriptedHarness([{"type": "session.idle"}], threaded=False)
        assert [e.type for e in ask(system, session_id=stream.session_id).collect(timeout=T)] == [
            "user.message",
            "session.idle",
        ]


# -- compaction ------------------------------------------------------------------------------


def test_compaction_records_the_harness_summary(system, harness):
    stream = ask(system)
    stream.collect(timeout=T)
    summary = system.sessions.compact_session(stream.session_id, user_id="alice", agent_id="main", timeout=T)
    assert summary == COMPACT_SUMMARY
    assert harness.prompts[-1].prompt == "/compact"
    compaction = system.sessions.history(stream.session_id)[-1]
    assert (compaction.entry, compaction.summary) == ("compaction", COMPACT_SUMMARY)
    assert system.views.session(stream.session_id).compactions == 1
    (record,) = [r for r in system.log.read(f"session-{stream.session_id}") if r.type == "SessionCompacted"]
    assert (record.data["summary"], record.data["keep_tail"]) == (COMPACT_SUMMARY, 6)


def test_without_a_compaction_event_the_last_message_is_the_summary(log, clock):
    harness = ScriptedHarness([{"type": "assistant.message", "content": "short"}, {"type": "session.idle"}])
    with System.open(log, clock=clock, scheduler=False, session_harness=harness) as system:
        session = system.sessions.new_session("alice", "main")
        assert (
            system.sessions.compact_session(session.id, user_id="alice", agent_id="main", timeout=T)
            == "short"
        )


def test_a_group_session_is_refused_before_any_harness_runs(system, harness):
    stream = ask(system, group_id="g1")
    stream.collect(timeout=T)
    prompts, head = len(harness.prompts), system.log.head().seq
    with pytest.raises(GroupCompactionUnsupportedError):
        system.sessions.compact_session(stream.session_id, user_id="g1", agent_id="main")
    assert (len(harness.prompts), system.log.head().seq) == (prompts, head)


def test_compaction_checks_the_caller_and_the_outcome(system):
    session = system.sessions.new_session("alice", "main")
    with pytest.raises(SessionForbiddenError):
        system.sessions.compact_session(session.id, user_id="bob", agent_id="main")
    system.sessions.harness = ScriptedHarness([{"type": "session.error", "message": "no"}], threaded=False)
    with pytest.raises(SessionError, match="compact session: no"):
        system.sessions.compact_session(session.id, user_id="alice", agent_id="main", timeout=T)
    assert system.views.session(session.id).compactions == 0


# -- permissions -----------------------------------------------------------------------------


def test_a_permission_request_waits_in_the_approval_queue(log, clock):
    script = [
        {"type": "permission.request", "tool_name": "bash", "title": "Run: ls", "tool_call_id": "c1"},
        {"type": "assistant.message", "content": "ran it", "if": "approve"},
        {"type": "assistant.message", "content": "refused", "if": "reject"},
        {"type": "session.idle"},
    ]
    with System.open(log, clock=clock, scheduler=False, session_harness=ScriptedHarness(script)) as system:
        published = threading.Event()
        unsubscribe = system.approvals.subscribe(published.set)
        stream = ask(system, message="list files")
        while not system.approvals.pending():
            assert published.wait(T), "the permission request never reached the queue"
            published.clear()
        unsubscribe()
        (approval,) = system.approvals.pending()
        assert (approval.run_id, approval.title) == (stream.turn_id, "Run: ls")
        system.approvals.resolve(approval.id, "approve", "operator")
        contents = [e.data.get("content") for e in stream.collect(timeout=T) if e.type == "assistant.message"]
        assert contents == ["ran it"]


def test_passivation_stops_idle_actors_and_closes_idle_harnesses(log, clock):
    made: list[ScriptedHarness] = []

    def factory(request):
        made.append(ScriptedHarness(reply, threaded=False))
        return made[-1]

    with System.open(log, clock=clock, scheduler=False, session_harness=factory) as system:
        first = ask(system)
        first.collect(timeout=T)
        assert len(system.sessions.actors) == 1
        assert system.passivate() >= 1
        assert len(system.sessions.actors) == 0
        assert made[0].closed
        # The next turn refolds the session from the log and gets a new harness.
        ask(system, session_id=first.session_id, message="back").collect(timeout=T)
        assert len(made) == 2
        assert [t.prompt for t in system.sessions.history(first.session_id)] == ["hi", "back"]
