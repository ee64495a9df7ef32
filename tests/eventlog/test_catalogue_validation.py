"""Only the catalogue gets in: a stored record fits its event's shape, at a schema this version
knows, or (a type outside the catalogue) sits in a stream flightlog does not own.

The shapes are derived from the dataclasses' type hints, so every event added later is
checked without touching this file; the round-trip property below keeps the checks and the
codec in step (whatever the codec stores, the check accepts).
"""

from __future__ import annotations

import dataclasses
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from eventlog import (
    OWNED_CATEGORIES,
    EventShapeError,
    ManualClock,
    NewEvent,
    OffCatalogueError,
    Record,
    Unreadable,
    check_catalogue,
    fit_record,
    open_log,
    readable,
    record_fault,
)
from eventlog._record import NotJSON
from eventlog._shape import shape_of
from eventlog.events import ControlQueued, Event, RunFinished, catalogue, event, upcaster
from tools.bench.workload import fill

from .test_codec import PRODUCT_EVENTS, ROUND_TRIP, event_strategy

AT = "2026-01-01T10:00:00+00:00"
QUEUED = {
    "run_id": "r1",
    "message_id": "m1",
    "type": "steer",
    "from_run_id": "",
    "payload": None,
    "created_at": AT,
    "sent_by": "alice (c1)",
}
FINISHED = {
    "run_id": "r1",
    "status": "done",
    "summary": "",
    "files_changed": ["a.py"],
    "payload": None,
    "at": AT,
}


def stored(
    type_name: str, data: Any, *, stream: str = "run-r1", schema: int = 1, meta: bytes = b"{}"
) -> Record:
    """A record as a reader gets it from the database (only the fields the checks read matter)."""
    return Record(7, stream, 1, type_name, schema, data, meta, str(uuid.uuid4()), 0, "0" * 64, "1" * 64)


# -- the catalogue's events as the codec stores them --------------------------------------------


@pytest.mark.parametrize("cls", list(PRODUCT_EVENTS.values()), ids=lambda c: c.type_name)
def test_every_catalogue_event_has_a_shape(cls):
    # A field hint the checks do not know raises here, rather than letting a record through.
    shape = shape_of(cls, cls.type_name)
    assert set(shape.fields) == {f.name for f in dataclasses.fields(cls)}


@pytest.mark.parametrize("cls", list(PRODUCT_EVENTS.values()), ids=lambda c: c.type_name)
@ROUND_TRIP
@given(data=st.data())
def test_whatever_the_codec_stores_fits(memory_log, cls, data):
    (record,) = memory_log.append(f"codec-{uuid.uuid4().hex}", [data.draw(event_strategy(cls))])
    assert record_fault(record) == ""
    assert record_fault(record._replace(stream=f"run-{uuid.uuid4().hex}")) == ""


# -- data of the wrong shape ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("type_name", "data", "reason"),
    [
        ("ControlQueued", QUEUED | {"run_id": 5}, "run_id must be a string, got an integer"),
        ("ControlQueued", QUEUED | {"run_id": ["x"]}, "run_id must be a string, got a list"),
        ("ControlQueued", QUEUED | {"payload": 1.5}, "payload must be a string or null, got a number"),
        ("ControlQueued", QUEUED | {"created_at": "yesterday"}, "created_at must be an ISO 8601 time"),
        ("ControlQueued", QUEUED | {"created_at": "2026-01-01T10:00:00"}, "with an offset, got a string"),
        ("ControlQueued", QUEUED | {"created_at": 1767261600}, "created_at must be an ISO 8601 time"),
        ("ControlQueued", QUEUED | {"extra": 1}, "'extra' is not a field of ControlQueued"),
        ("ControlQueued", {k: v for k, v in QUEUED.items() if k != "type"}, "type is missing"),
        ("ControlQueued", [QUEUED], "its data must be a JSON object, got a list"),
        ("RunFinished", FINISHED | {"files_changed": "a.py"}, "files_changed must be a list of strings"),
        ("RunFinished", FINISHED | {"files_changed": [1]}, "files_changed must be a list of strings"),
        (
            "RunFinished",
            FINISHED | {"files_changed": None},
            "files_changed must be a list of strings, got null",
        ),
        ("RunFinished", FINISHED | {"status": True}, "status must be a string, got true"),
    ],
    ids=[
        "int-for-str",
        "list-for-str",
        "float-for-optional-str",
        "not-a-time",
        "naive-time",
        "epoch-time",
        "extra-field",
        "missing-field",
        "not-an-object",
        "str-for-tuple",
        "ints-for-tuple",
        "null-for-tuple",
        "bool-for-str",
    ],
)
def test_data_not_of_the_events_shape_is_named(type_name, data, reason):
    record = stored(type_name, data)
    assert reason in record_fault(record)
    with pytest.raises(OffCatalogueError, match="seq 7") as caught:
        fit_record(record)
    assert caught.value.seq == 7
    assert reason in caught.value.reason


@pytest.mark.parametrize(
    ("type_name", "data"),
    [
        ("ControlQueued", QUEUED),
        ("ControlQueued", {k: v for k, v in QUEUED.items() if k != "sent_by"}),  # older than the field
        ("ControlQueued", QUEUED | {"created_at": "2026-01-01T10:00:00.123456Z"}),
        ("ControlQueued", QUEUED | {"payload": '{"a": 1}'}),
        ("RunFinished", FINISHED | {"files_changed": []}),
    ],
    ids=["as-stored", "default-missing", "zulu-time", "payload-text", "empty-tuple"],
)
def test_data_of_the_events_shape_fits(type_name, data):
    assert record_fault(stored(type_name, data)) == ""
    assert fit_record(stored(type_name, data)).data == data


def test_scalars_are_told_apart_as_json_tells_them():
    @dataclass(frozen=True, slots=True)
    class Counted(Event):
        count: int
        ratio: float
        flag: bool
        extra: dict[str, Any]
        numbers: list[int]

    shape = shape_of(Counted, "Counted")
    fits = {"count": 1, "ratio": 2, "flag": False, "extra": {"a": [1]}, "numbers": [1, 2]}
    assert shape.fault(fits) == ""
    assert shape.fault(fits | {"ratio": 2.5}) == ""
    assert shape.fault(fits | {"count": True}) == "count must be an integer, got true"
    assert shape.fault(fits | {"count": 1.0}) == "count must be an integer, got a number"
    assert shape.fault(fits | {"ratio": False}) == "ratio must be a number, got false"
    assert shape.fault(fits | {"flag": 0}) == "flag must be true or false, got an integer"
    assert shape.fault(fits | {"extra": []}) == "extra must be an object, got a list"
    assert shape.fault(fits | {"numbers": [1, True]}) == "numbers must be a list of integers, got a list"


def test_the_first_fault_is_named_in_the_events_field_order_whatever_the_datas_order():
    bad = QUEUED | {"run_id": 5, "created_at": "soon"}
    sorted_keys = dict(sorted(bad.items()))
    assert record_fault(stored("ControlQueued", bad)) == record_fault(stored("ControlQueued", sorted_keys))
    assert "run_id must be" in record_fault(stored("ControlQueued", sorted_keys))


def test_a_hint_the_checks_do_not_know_fails_loudly():
    @dataclass(frozen=True, slots=True)
    class Odd(Event):
        members: frozenset[str]

    with pytest.raises(TypeError, match=r"Odd\.members: no stored shape"):
        shape_of(Odd, "Odd")


# -- schemas -------------------------------------------------------------------------------------


def test_a_schema_newer_than_the_catalogue_is_refused_as_a_newer_flightlogs():
    reason = record_fault(stored("RunFinished", FINISHED, schema=99))
    assert reason == (
        "RunFinished schema 99 is newer than this flightlog knows (schema 1): a newer flightlog wrote it"
    )


def test_a_schema_that_is_not_a_schema_number_is_refused():
    assert (
        record_fault(stored("RunFinished", FINISHED, schema=0))
        == "RunFinished schema 0 is not a schema number"
    )
    assert record_fault(stored("RunFinished", FINISHED, schema="2")) == (
        "RunFinished schema '2' is not a schema number"
    )


@event("ValidationNoted", schema=3)
@dataclass(frozen=True, slots=True)
class Noted(Event):
    """Schema 3: `tags`; schema 2 had a `tag`; schema 1 had no upcaster to 2 (records of it do not fit)."""

    text: str
    tags: tuple[str, ...]


@upcaster("ValidationNoted", 2)
def _noted_v2_to_v3(data: dict[str, Any]) -> dict[str, Any]:
    data["tags"] = [data.pop("tag")]
    return data


def test_an_old_schema_fits_through_its_upcasters_and_the_upcast_data_is_checked():
    fitted = fit_record(stored("ValidationNoted", {"text": "hi", "tag": "x"}, stream="note-1", schema=2))
    assert (fitted.schema, fitted.data) == (3, {"text": "hi", "tags": ["x"]})
    assert "tags must be a list of strings" in record_fault(
        stored("ValidationNoted", {"text": "hi", "tag": 5}, stream="note-1", schema=2)
    )
    assert record_fault(stored("ValidationNoted", {"text": "hi"}, stream="note-1", schema=2)) == (
        "ValidationNoted schema 2 does not upcast to schema 3 (KeyError)"
    )
    assert record_fault(stored("ValidationNoted", {"text": "hi"}, stream="note-1", schema=1)) == (
        "ValidationNoted schema 1 has no upcaster to schema 3"
    )


# -- types outside the catalogue -----------------------------------------------------------------


@pytest.mark.parametrize("category", sorted(OWNED_CATEGORIES))
def test_a_type_outside_the_catalogue_is_refused_in_flightlogs_own_streams(category):
    reason = record_fault(stored("ApprovalHijacked", {"x": 1}, stream=f"{category}-1"))
    assert reason == (
        f"type 'ApprovalHijacked' is not in the event catalogue, and {category}-<id> streams hold "
        "flightlog's events only"
    )


def test_a_users_own_event_fits_in_a_users_own_stream():
    # docs/security.md: users append their own events, e.g. deploy-42 / DeployRequested.
    assert record_fault(stored("DeployRequested", {"service": "web"}, stream="deploy-42")) == ""
    assert record_fault(stored("DeployRequested", {"service": "web"}, stream="runs-42")) == ""
    assert "its data must be a JSON object" in record_fault(
        stored("DeployRequested", [1], stream="deploy-42")
    )


def test_the_owned_categories_are_those_flightlogs_actors_write(tmp_path):
    # A seeded workload (broker runs, agent runs and their controllers, approvals, sessions)
    # writes only into owned categories; and every aggregate's category is owned.
    with open_log(tmp_path / "w.db", clock=ManualClock(datetime(2026, 1, 1, tzinfo=UTC))) as log:
        fill(log, 2, 7, clock=log.clock)
        written = {r.category for r in log.read_all()}
        assert check_catalogue(log.read_all()).ok
    assert written <= OWNED_CATEGORIES
    from actors.approvals.actor import APPROVALS
    from actors.broker.run_decider import RUNS
    from actors.operators.decider import OPERATORS
    from actors.sessions.actor import SESSIONS
    from actors.sessions.project_decider import PROJECTS
    from actors.sessions.tool_override_decider import TOOL_OVERRIDES

    aggregates = [APPROVALS, RUNS, OPERATORS, SESSIONS, PROJECTS, TOOL_OVERRIDES]
    assert {a.category for a in aggregates} | {"controller", "broker"} <= OWNED_CATEGORIES


# -- the rest of a stored record -----------------------------------------------------------------


def test_a_records_stream_and_meta_are_checked_too():
    assert "is not <category>-<id>" in record_fault(stored("RunFinished", FINISHED, stream="Run_1"))
    assert record_fault(stored("RunFinished", FINISHED, meta=b"[1]")) == (
        "its meta must be a JSON object, got a list"
    )
    assert record_fault(stored("RunFinished", FINISHED, meta=b"{nope")) == "its meta is not JSON"
    assert record_fault(stored("RunFinished", NotJSON(b"{nope"))) == (
        "its data must be a JSON object, got bytes that are not JSON"
    )


def test_hostile_text_in_a_reason_is_quoted_ascii_and_cut():
    # Reasons reach terminals and the Flightlog-Tamper header: nothing there may act or break a line.
    reason = record_fault(stored("Evil\x1b]0;owned\x07\r\nX-Injected: 1" + "A" * 500, {}, stream="run-1"))
    assert reason.isascii()
    assert "\x1b" not in reason
    assert "\r" not in reason
    assert "\n" not in reason
    assert len(reason) < 200
    field = record_fault(stored("RunFinished", FINISHED | {"\u202eevil": 1}))
    assert field == "RunFinished: '\\u202eevil' is not a field of RunFinished"


def test_a_check_counts_every_record_and_keeps_the_first_few():
    records = [stored("RunFinished", FINISHED | {"status": i})._replace(seq=i) for i in range(1, 9)]
    found = check_catalogue([*records, stored("RunFinished", FINISHED)._replace(seq=9)])
    assert (found.ok, found.checked, found.off) == (False, 9, 8)
    assert [f.seq for f in found.first] == [1, 2, 3, 4, 5]
    assert found.summary().startswith(
        "8 record(s) do not fit the event catalogue: seq 1: RunFinished: status"
    )
    assert found.summary().endswith("; 3 more")


# -- readers -------------------------------------------------------------------------------------


def test_readable_skips_what_does_not_fit_and_notes_each_seq_once():
    good = stored("RunFinished", FINISHED)._replace(seq=1)
    bad = stored("RunFinished", FINISHED | {"files_changed": "x"})._replace(seq=2)
    unknown = stored("Hijacked", {}, stream="approval-1")._replace(seq=3)
    unreadable = Unreadable()
    assert list(readable([good, bad, unknown], unreadable)) == [good]
    assert list(readable([bad], unreadable)) == []  # met again: counted once
    assert unreadable.count == 2
    assert [f.seq for f in unreadable.first] == [2, 3]
    assert unreadable.summary().startswith(
        "2 record(s) could not be read and were left out: seq 2: RunFinished"
    )


def test_an_error_while_folding_is_noted_with_its_kind():
    unreadable = Unreadable()
    unreadable.note(stored("RunFinished", FINISHED), KeyError("run_id"))
    assert unreadable.first[0].reason == "'RunFinished': KeyError: \"'run_id'\""


# -- appends -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("data", "schema", "reason"),
    [
        (QUEUED | {"run_id": 5}, 1, "run_id must be a string"),
        (QUEUED | {"created_at": "soon"}, 1, "created_at must be an ISO 8601 time"),
        (QUEUED, 99, "a newer flightlog wrote it"),
    ],
    ids=["wrong-type", "not-a-time", "newer-schema"],
)
def test_an_append_that_borrows_a_catalogue_name_must_fit_it(memory_log, data, schema, reason):
    head = memory_log.head()
    with pytest.raises(EventShapeError, match=reason):
        memory_log.append("run-r1", [NewEvent("ControlQueued", data, schema=schema)])
    assert memory_log.head() == head


def test_catalogue_events_appended_as_dataclasses_fit(memory_log):
    at = datetime(2026, 1, 1, tzinfo=UTC)
    records = memory_log.append(
        "run-r2",
        [ControlQueued("r2", "m", "steer", "", None, at), RunFinished("r2", "done", "", ("a",), None, at)],
    )
    assert [record_fault(r) for r in records] == ["", ""]
    assert orjson.loads(orjson.dumps(records[1].data))["files_changed"] == ["a"]


@pytest.fixture(scope="module")
def memory_log():
    with open_log(":memory:") as log:
        yield log


def test_the_catalogue_has_the_events_named_here():
    names = catalogue()
    assert names["ControlQueued"] is ControlQueued
    assert names["ValidationNoted"] is Noted
