"""Ingest routing (§1.4), envelope conversions (§1.5) and enrich_stop_reason (§1.6)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from actors import (
    Broker,
    BrokerError,
    ControlMessage,
    Envelope,
    Finish,
    Reply,
    Report,
    RunNotFoundError,
    System,
    enrich_stop_reason,
)
from eventlog import ManualClock

# -- ingest ------------------------------------------------------------------------------------


def test_a_none_payload_is_refused_before_the_run_is_looked_up(system: System) -> None:
    head = system.log.head()
    for run_id in ("ghost", ""):  # an unknown run still gets the payload error first
        with pytest.raises(BrokerError) as caught:
            system.broker.ingest(run_id, "done", None)
        assert str(caught.value) == "payload must not be nil"
        assert not isinstance(caught.value, RunNotFoundError)
    system.broker.create_run("r1")
    with pytest.raises(BrokerError, match=r"^payload must not be nil$"):
        system.broker.ingest("r1", "working", None)
    assert system.broker.get_run("r1").reports == ()  # type: ignore[union-attr]
    assert system.log.head().seq == head.seq + 1  # only the registration


def test_ingest_into_an_unknown_run_is_an_error(broker: Broker) -> None:
    with pytest.raises(RunNotFoundError) as caught:
        broker.ingest("ghost", "done", "{}")
    assert str(caught.value) == "run not found: ghost"


@pytest.mark.parametrize("kind", ["done", "failed", "blocked"])
def test_finish_kinds_become_finishes(broker: Broker, kind: str) -> None:
    broker.create_run("r1")
    broker.ingest("r1", kind, '{"why":"because"}')
    view = broker.get_run("r1")
    assert view is not None
    assert view.finishes == (Finish("r1", kind, "", (), '{"why":"because"}'),)
    assert view.reports == ()
    assert broker.finish_count("r1") == 1
    assert broker.last_finish_status("r1") == kind


@pytest.mark.parametrize("kind", ["", "working", "thinking", "cancelled", "Done", "status"])
def test_other_kinds_become_reports(broker: Broker, kind: str) -> None:
    broker.create_run("r1")
    broker.ingest("r1", kind, '{"phase":"x"}')
    view = broker.get_run("r1")
    assert view is not None
    assert view.reports == (Report("r1", kind, '{"phase":"x"}'),)
    assert view.finishes == ()
    assert broker.finish_count("r1") == 0


@pytest.mark.parametrize("payload", ["{}", "null", b"{}", b"null", "[]", '"text"'])
def test_empty_json_values_are_payloads(broker: Broker, payload: str | bytes) -> None:
    broker.create_run("r1")
    broker.ingest("r1", "working", payload)
    view = broker.get_run("r1")
    assert view is not None
    text = payload.decode() if isinstance(payload, bytes) else payload
    assert view.reports == (Report("r1", "working", text),)


def test_ingest_keeps_arrival_order_in_each_bucket(broker: Broker) -> None:
    broker.create_run("r1")
    for i, kind in enumerate(["working", "done", "thinking", "failed", "working", "blocked"]):
        broker.ingest("r1", kind, f'{{"i":{i}}}')
    view = broker.get_run("r1")
    assert view is not None
    assert [(r.state, r.payload) for r in view.reports] == [
        ("working", '{"i":0}'),
        ("thinking", '{"i":2}'),
        ("working", '{"i":4}'),
    ]
    assert [(f.status, f.payload) for f in view.finishes] == [
        ("done", '{"i":1}'),
        ("failed", '{"i":3}'),
        ("blocked", '{"i":5}'),
    ]


def test_ingest_updates_last_seen(broker: Broker, clock: ManualClock) -> None:
    broker.create_run("r1")
    clock.advance(30)
    broker.ingest("r1", "working", "{}")
    assert broker.get_run("r1").last_seen == clock.now()  # type: ignore[union-attr]
    clock.advance(30)
    broker.ingest("r1", "done", "{}")
    assert broker.get_run("r1").last_seen == clock.now()  # type: ignore[union-attr]


def test_a_failed_ingest_does_not_update_last_seen(broker: Broker, clock: ManualClock) -> None:
    broker.create_run("r1")
    registered = clock.now()
    clock.advance(30)
    with pytest.raises(BrokerError):
        broker.ingest("r1", "working", None)
    assert broker.get_run("r1").last_seen == registered  # type: ignore[union-attr]


# -- envelopes ---------------------------------------------------------------------------------

WHEN = datetime(2024, 5, 6, 7, 8, 9, 123456, tzinfo=UTC)


def test_report_to_envelope() -> None:
    assert Report("r1", "working", '{"a":1}').to_envelope() == Envelope(
        from_run_id="r1", kind="working", payload='{"a":1}'
    )


@pytest.mark.parametrize(("status", "kind"), [("failed", "failed"), ("done", "done"), ("", "done")])
def test_finish_to_envelope_defaults_an_empty_status_to_done(status: str, kind: str) -> None:
    env = Finish("r1", status, "summary", ("a.py",), '{"b":2}').to_envelope()
    assert env == Envelope(from_run_id="r1", kind=kind, payload='{"b":2}')


def test_reply_to_envelope_has_no_kind() -> None:
    assert Reply("r1", "boss", '{"c":3}').to_envelope() == Envelope(
        from_run_id="r1", to="boss", payload='{"c":3}'
    )


def test_control_message_to_envelope_preserves_created_at() -> None:
    msg = ControlMessage("id-1", "steer", "r1", "r0", '{"d":4}', WHEN)
    env = msg.to_envelope()
    assert env == Envelope(
        to_run_id="r1", kind="steer", correlation_id="id-1", payload='{"d":4}', created_at=WHEN
    )
    assert env.created_at is WHEN
    assert env.from_run_id == ""


def test_envelope_json_omits_empty_fields() -> None:
    assert ControlMessage("id-1", "steer", "r1", created_at=WHEN).to_envelope().to_json() == {
        "from_run_id": "",
        "to_run_id": "r1",
        "kind": "steer",
        "correlation_id": "id-1",
        "created_at": "2024-05-06T07:08:09.123456Z",
    }


# -- enrich_stop_reason ------------------------------------------------------------------------


def test_enrich_without_a_broker_leaves_the_reason(broker: Broker) -> None:
    assert enrich_stop_reason(None, "r1", "") == ""
    assert enrich_stop_reason(None, "r1", "kept") == "kept"


class EveryRunFailed:
    """A stand-in broker on which every run id, even "", has one finish with status "failed"."""

    def finish_count(self, run_id: str) -> int:
        return 1

    def last_finish_status(self, run_id: str) -> str:
        return "failed"


def test_enrich_with_an_empty_run_id_leaves_the_reason() -> None:
    stand_in: Any = EveryRunFailed()
    assert enrich_stop_reason(stand_in, "r1", "") == "failed"  # the stand-in works...
    assert enrich_stop_reason(stand_in, "", "") == ""  # ...but an empty run id is never looked up


def test_enrich_of_an_unknown_run_leaves_the_reason(broker: Broker) -> None:
    assert enrich_stop_reason(broker, "ghost", "") == ""
    assert enrich_stop_reason(broker, "ghost", "kept") == "kept"


def test_enrich_without_finishes_leaves_the_reason_empty(broker: Broker) -> None:
    broker.create_run("r1")
    broker.ingest("r1", "working", "{}")
    assert enrich_stop_reason(broker, "r1", "") == ""


def test_enrich_fills_an_empty_reason_with_the_last_status(broker: Broker) -> None:
    broker.create_run("r1")
    broker.ingest("r1", "done", "{}")
    broker.ingest("r1", "blocked", "{}")
    assert enrich_stop_reason(broker, "r1", "") == "blocked"


def test_enrich_never_overwrites_a_reason(broker: Broker) -> None:
    broker.create_run("r1")
    broker.ingest("r1", "failed", "{}")
    assert enrich_stop_reason(broker, "r1", "user_abort") == "user_abort"


def test_enrich_with_an_empty_last_status_stays_empty(broker: Broker) -> None:
    broker.create_run("r1")
    broker.ingest("r1", "failed", "{}")
    broker.finish(Finish("r1", "", "finished without a status"))
    assert enrich_stop_reason(broker, "r1", "") == ""  # no fall back to the earlier "failed"


def test_enrich_of_a_deleted_run_leaves_the_reason(broker: Broker) -> None:
    broker.create_run("r1")
    broker.ingest("r1", "failed", "{}")
    broker.delete_run("r1")
    assert enrich_stop_reason(broker, "r1", "") == ""
