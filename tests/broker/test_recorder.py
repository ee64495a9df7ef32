"""The Recorder, SEED-BEHAVIOUR §1.7: a filtered, best-effort mirror of an agent's events."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from actors import AgentEvent, Broker, Recorder, RunView, System
from eventlog import ManualClock


def view_of(broker: Broker, run_id: str = "r1") -> RunView:
    view = broker.get_run(run_id)
    assert view is not None
    return view


def test_a_recorder_without_a_broker_does_nothing() -> None:
    rec = Recorder(None, "r1")
    rec.feed(AgentEvent("session.end", {"stop_reason": "done"}))
    rec.feed(AgentEvent("agent.status", {"phase": "x"}))
    assert rec.dropped_errors == 0


def test_a_recorder_just_stores_its_broker_and_run(broker: Broker) -> None:
    rec = Recorder(broker, "r1")
    assert (rec.broker, rec.run_id) == (broker, "r1")


@pytest.mark.parametrize(
    ("event", "kind"),
    [
        ("agent.status", "status"),
        ("agent.message_chunk", "thinking"),
        ("permission.request", "permission_requested"),
        ("child.question", "child_question"),
    ],
)
def test_events_that_become_reports(broker: Broker, event: str, kind: str) -> None:
    broker.create_run("r1")
    fields = {"phase": "planning", "content": "héllo <b>", "n": 3, "nested": {"ok": True}}
    Recorder(broker, "r1").feed(AgentEvent(event, fields))
    (report,) = view_of(broker).reports
    assert report.state == kind
    assert report.payload is not None
    assert orjson.loads(report.payload) == fields  # the fields round-trip
    assert view_of(broker).finishes == ()


@pytest.mark.parametrize("reason", ["done", "failed", "blocked"])
def test_session_end_with_a_finish_reason_finishes(broker: Broker, reason: str) -> None:
    broker.create_run("r1")
    Recorder(broker, "r1").feed(AgentEvent("session.end", {"stop_reason": reason, "turns": 4}))
    (finish,) = view_of(broker).finishes
    assert (finish.status, finish.summary, finish.files_changed) == (reason, "", ())
    assert orjson.loads(finish.payload or "") == {"stop_reason": reason, "turns": 4}
    assert view_of(broker).reports == ()


@pytest.mark.parametrize("fields", [{}, {"stop_reason": ""}, {"stop_reason": 7}, {"stop_reason": None}])
def test_session_end_without_a_usable_reason_is_done(broker: Broker, fields: dict[str, Any]) -> None:
    broker.create_run("r1")
    Recorder(broker, "r1").feed(AgentEvent("session.end", fields))
    (finish,) = view_of(broker).finishes
    assert finish.status == "done"
    assert orjson.loads(finish.payload or "") == fields


def test_session_end_cancelled_lands_in_reports(broker: Broker) -> None:
    broker.create_run("r1")
    Recorder(broker, "r1").feed(AgentEvent("session.end", {"stop_reason": "cancelled"}))
    view = view_of(broker)
    assert [r.state for r in view.reports] == ["cancelled"]
    assert view.finishes == ()
    assert broker.finish_count("r1") == 0


@pytest.mark.parametrize("event", ["tool.call", "tool.result", "session.start", "", "agent.status.extra"])
def test_other_events_are_dropped(system: System, event: str) -> None:
    system.broker.create_run("r1")
    head = system.log.head()
    rec = Recorder(system.broker, "r1")
    rec.feed(AgentEvent(event, {"x": 1}))
    assert system.log.head() == head  # nothing ingested
    assert rec.dropped_errors == 0


def test_ingest_errors_are_swallowed(broker: Broker) -> None:
    rec = Recorder(broker, "ghost")
    rec.feed(AgentEvent("agent.status", {"x": 1}))
    rec.feed(AgentEvent("session.end", {"stop_reason": "done"}))
    assert rec.dropped_errors == 2
    assert broker.get_run("ghost") is None


def test_fields_that_are_not_json_are_swallowed(broker: Broker) -> None:
    broker.create_run("r1")
    rec = Recorder(broker, "r1")
    rec.feed(AgentEvent("agent.status", {"x": object()}))
    assert rec.dropped_errors == 1
    assert view_of(broker).reports == ()


def test_feeding_a_closed_system_is_swallowed(log_factory: Any, clock: ManualClock) -> None:
    # The seed's "broker not started": the pump must go on even when the broker is gone.
    system = System.open(log_factory(clock=clock), clock=clock, scheduler=False)
    system.broker.create_run("r1")
    rec = Recorder(system.broker, "r1")
    system.close()
    rec.feed(AgentEvent("agent.status", {"x": 1}))
    assert rec.dropped_errors == 1


def test_a_stream_of_events_is_mirrored_in_order(broker: Broker, clock: ManualClock) -> None:
    broker.create_run("r1")
    rec = Recorder(broker, "r1")
    events = [
        AgentEvent("agent.status", {"phase": "start"}),
        AgentEvent("tool.call", {"name": "ls"}),
        AgentEvent("agent.message_chunk", {"content": "thinking..."}),
        AgentEvent("child.question", {"q": "?"}),
        AgentEvent("session.end", {"stop_reason": "failed"}),
    ]
    for event in events:
        clock.advance(1)
        rec.feed(event)
    view = view_of(broker)
    assert [r.state for r in view.reports] == ["status", "thinking", "child_question"]
    assert [f.status for f in view.finishes] == ["failed"]
    assert view.last_seen == clock.now()
