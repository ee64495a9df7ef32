"""The append path's per-event work, inlined for speed, against the definitions it inlines:
the canonical bytes a hash covers, the NewEvent a catalogue event encodes to, UUIDv7 ids."""

from __future__ import annotations

import itertools
import os
import uuid

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from eventlog import NewEvent, encode
from eventlog._append import chain_rows, encode_events, rows_to_records
from eventlog._chain import canonical_bytes, make_hasher
from eventlog._record import GENESIS_HASH, Record, new_event_keys, uuid_text
from tests.eventlog.test_codec import TEST_EVENTS, Scalars, event_strategy

AWKWARD = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=12)


@settings(max_examples=60, deadline=None)
@given(
    stream=AWKWARD.map(lambda s: f"run-{s}"),
    type_name=AWKWARD,
    event_id=AWKWARD,
    schema=st.integers(min_value=1, max_value=2**31),
    version=st.integers(min_value=0, max_value=2**40),
    key=st.none() | st.binary(min_size=1, max_size=8),
)
def test_chained_hashes_cover_the_canonical_bytes(stream, type_name, event_id, schema, version, key):
    hasher = make_hasher(key)
    events = encode_events(
        [NewEvent(type_name, {"a": [1, "\u2028"]}, {"m": '"'}, event_id=event_id, schema=schema)]
    )
    events += encode_events([NewEvent(type_name, {}, {})])
    rows = chain_rows(stream, version, events, 41, GENESIS_HASH, 1_700_000_000_000_000, hasher)
    prev = GENESIS_HASH
    for row, ev in zip(rows, events, strict=True):
        seq, _, v, *_ = row
        body = canonical_bytes(
            seq, stream, v, ev.type, ev.schema, ev.data_json, ev.meta_json, ev.event_id, row[8]
        )
        assert row[9] == prev
        assert row[10] == hasher(prev, body)
        prev = row[10]
    assert [r[2] for r in rows] == [version + 1, version + 2]


@pytest.mark.parametrize("cls", TEST_EVENTS, ids=lambda c: c.type_name)
@settings(max_examples=40, deadline=None)
@given(data=st.data())
def test_a_catalogue_event_encodes_as_its_new_event(cls, data):
    original = data.draw(event_strategy(cls))
    [fast] = encode_events([original])
    new = encode(original)
    assert (fast.type, fast.schema, fast.meta_json) == (new.type, new.schema, b"{}")
    assert fast.data_json == orjson.dumps(new.data, option=orjson.OPT_SORT_KEYS)
    assert uuid_text(fast.event_key) == fast.event_id  # type: ignore[arg-type]


def test_fresh_ids_are_uuid7_distinct_and_in_time_order():
    keys = new_event_keys(500) + new_event_keys(3)
    assert len(set(keys)) == len(keys)
    for k in keys:
        assert len(k) == 16
        assert k[6] >> 4 == 7  # version 7
        assert k[8] >> 6 == 0b10  # the RFC 9562 variant
    assert all(a[:6] <= b[:6] for a, b in itertools.pairwise(keys))


@pytest.mark.parametrize("order", ["event first", "event between"])
def test_an_id_given_twice_in_a_batch_is_refused_around_catalogue_events(order):
    ev = Scalars("t", 1, 0.5, True)
    twice = [NewEvent("X", event_id="same"), NewEvent("Y", event_id="same")]
    batch = [ev, *twice] if order == "event first" else [twice[0], ev, twice[1]]
    with pytest.raises(ValueError, match="appears twice"):
        encode_events(batch)


def test_records_of_rows_are_records():
    [ev] = encode_events([NewEvent("X", {"b": 1}, {"m": 2})])
    rows = chain_rows("run-1", 0, [ev], 0, GENESIS_HASH, 5, make_hasher())
    [record] = rows_to_records(rows)
    assert type(record) is Record
    assert record == Record(
        1, "run-1", 1, "X", 1, {"b": 1}, b'{"m":2}', ev.event_id, 5, GENESIS_HASH, rows[0][10]
    )
    assert record.meta == {"m": 2}


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_a_forked_child_does_not_hand_out_its_parents_random_bits():
    new_event_keys(1)  # the pool now holds bytes the parent has not handed out yet
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: its next ids, then out without running the parent's cleanup
        os.write(write_end, b"".join(new_event_keys(8)))
        os._exit(0)
    os.close(write_end)
    with os.fdopen(read_end, "rb") as f:
        theirs = f.read()
    os.waitpid(pid, 0)
    mine = b"".join(new_event_keys(8))
    assert len(theirs) == len(mine) == 128
    assert {theirs[i + 6 : i + 16] for i in range(0, 128, 16)}.isdisjoint(
        mine[i + 6 : i + 16] for i in range(0, 128, 16)
    )


@given(raw=st.binary(min_size=16, max_size=16))
def test_uuid_text_is_the_canonical_form(raw):
    assert uuid_text(raw) == str(uuid.UUID(bytes=raw))
