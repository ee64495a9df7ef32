"""Session ids: time-ordered UUIDv7 strings from the injected clock (seed §3.6)."""

import uuid
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

import actors.sessions.keys as session_keys
from actors import new_session_id, uuid7_time_millis
from eventlog import ManualClock, to_micros


def millis(clock: ManualClock) -> int:
    return to_micros(clock.now()) // 1000


def test_an_id_is_a_version_7_rfc_uuid_string(clock):
    value = new_session_id(clock)
    parsed = uuid.UUID(value)
    assert str(parsed) == value, "canonical lowercase 8-4-4-4-12 form"
    assert parsed.version == 7
    assert parsed.variant == uuid.RFC_4122


def test_the_id_carries_the_clocks_millisecond(clock):
    clock.advance(0.123456)
    assert uuid7_time_millis(new_session_id(clock)) == millis(clock)


def test_ids_follow_the_clock(clock):
    minted = []
    for _ in range(50):
        minted.append(new_session_id(clock))
        clock.advance(0.001)
    assert minted == sorted(minted)
    assert [uuid7_time_millis(v) for v in minted] == [millis(clock) - 50 + i for i in range(50)]


def test_ids_in_one_millisecond_are_unique_and_increasing(clock):
    # The clock stands still, so only the monotonic tail can order these; random tails
    # alone would put about half of the pairs out of order.
    minted = [new_session_id(clock) for _ in range(5_000)]
    assert len(set(minted)) == len(minted)
    assert minted == sorted(minted)
    assert [uuid.UUID(v).int for v in minted] == sorted(uuid.UUID(v).int for v in minted)


def test_a_sub_millisecond_step_keeps_the_order(clock):
    first = new_session_id(clock)
    clock.advance(microseconds=400)
    second = new_session_id(clock)
    assert first < second


def test_ids_follow_a_clock_that_moves_backwards():
    late = ManualClock(datetime(2026, 6, 1, tzinfo=UTC))
    early = ManualClock(datetime(2026, 1, 1, tzinfo=UTC))
    late_id = new_session_id(late)
    early_id = new_session_id(early)
    assert early_id < late_id
    assert uuid7_time_millis(early_id) == millis(early)


def test_ids_minted_on_many_threads_are_unique(clock):
    with ThreadPoolExecutor(max_workers=8) as pool:
        minted = list(pool.map(lambda _: new_session_id(clock), range(4_000)))
    assert len(set(minted)) == len(minted)


@given(st.datetimes(min_value=datetime(1970, 1, 1), timezones=st.just(UTC)))
def test_any_time_since_1970_round_trips(when):
    value = new_session_id(ManualClock(when))
    assert uuid7_time_millis(value) == to_micros(when) // 1000
    assert uuid.UUID(value).version == 7


@given(
    # Up to ten years before the end of datetime's range, for steps of up to ten years:
    # `when + step` is always a datetime (past year 9999 it would overflow, not be refused).
    st.datetimes(min_value=datetime(1970, 1, 1), max_value=datetime(9989, 1, 1), timezones=st.just(UTC)),
    st.timedeltas(min_value=timedelta(milliseconds=1), max_value=timedelta(days=3650)),
)
def test_a_later_millisecond_always_sorts_later(when, step):
    later = new_session_id(ManualClock(when + step))
    earlier = new_session_id(ManualClock(when))  # minted second, still sorts first
    assert earlier < later


def test_a_time_before_1970_is_refused():
    with pytest.raises(ValueError, match="between 1970"):
        new_session_id(ManualClock(datetime(1969, 12, 31, 23, 59, 59, tzinfo=UTC)))


def test_exhausting_a_millisecond_raises_instead_of_wrapping(clock, monkeypatch):
    monkeypatch.setattr(session_keys, "_last_millis", millis(clock))
    monkeypatch.setattr(session_keys, "_last_tail", (1 << 74) - 1)
    with pytest.raises(OverflowError):
        new_session_id(clock)


def test_uuid7_time_millis_refuses_other_versions():
    with pytest.raises(ValueError, match="not a version 7"):
        uuid7_time_millis(str(uuid.uuid4()))
