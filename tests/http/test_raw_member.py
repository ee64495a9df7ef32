"""`raw_member` keeps a payload byte for byte; its fast path agrees with the full scan."""

from __future__ import annotations

import orjson
from hypothesis import given
from hypothesis import strategies as st

from tools.http.wire import raw_member

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**63), 2**63 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=8,
)


@given(
    st.dictionaries(st.sampled_from(["payload", "run_id", "x", "pay"]), json_values, max_size=4),
    st.booleans(),
)
def test_the_fast_path_finds_what_the_scan_finds(body, spaced):
    raw = orjson.dumps(body)
    if spaced:  # spacing and indentation must survive as written
        raw = orjson.dumps(body, option=orjson.OPT_INDENT_2)
    parsed = orjson.loads(raw)
    assert raw_member(raw, "payload", parsed) == raw_member(raw, "payload")
    if "payload" in body:
        assert orjson.loads(raw_member(raw, "payload", parsed)) == body["payload"]  # type: ignore[arg-type]


def test_a_nested_or_quoted_payload_is_not_taken_for_the_member():
    raw = b'{"meta": {"payload": 1}, "note": "\\"payload\\": 2", "payload": [1, 2 ]}'
    assert raw_member(raw, "payload", orjson.loads(raw)) == "[1, 2 ]"
    raw = b'{"meta": {"payload": 1}}'
    assert raw_member(raw, "payload", orjson.loads(raw)) is None
    raw = b'{"payload": 1, "payload": {"a": 12345678901234567890123}}'  # the last, as Go keeps it
    assert raw_member(raw, "payload") == '{"a": 12345678901234567890123}'


def test_a_compact_payload_is_kept_as_written_even_where_its_numbers_would_be_written_otherwise():
    # Each parses to what orjson would write shorter: the text as sent must still come back.
    for payload in (b'{"a":1.50}', b"[1.5e3,-0.0,10E1]", b'{"a":[1,{"b":2.000}]}', b'"caf\xc3\xa9 [x]"'):
        for raw in (b'{"run_id":"r","payload":' + payload + b',"x":1}', b'{"payload":' + payload + b"}"):
            assert raw_member(raw, "payload", orjson.loads(raw)) == payload.decode()
    raw = b'{"payload":{"tool":"shell","n":3},"state":"working"}'
    assert raw_member(raw, "payload", orjson.loads(raw)) == '{"tool":"shell","n":3}'
