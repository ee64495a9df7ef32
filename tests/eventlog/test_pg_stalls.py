"""PostgreSQL: a writer stalled inside its transaction holds the others for a bounded time only."""

from __future__ import annotations

import time

import pytest

from eventlog import NewEvent, open_log
from eventlog._postgres import _TAKE_HEAD, WRITER_STALL_BOUND

from .test_postgres import opened, schema, url  # noqa: F401 - fixtures

pytestmark = pytest.mark.postgres


def test_the_writer_session_bounds_stalls_itself(url, opened):  # noqa: F811
    log = open_log(url)
    opened.append(log)
    log.append("run-1", [NewEvent("Started")])
    conn = log._writer  # type: ignore[attr-defined]
    bound = f"{int(WRITER_STALL_BOUND * 1000)}ms"
    for setting in ("idle_in_transaction_session_timeout", "lock_timeout"):
        (value,) = conn.execute("SELECT current_setting(%s)", (setting,)).fetchone()
        assert value in (bound, f"{WRITER_STALL_BOUND:g}s"), (setting, value)


def test_a_writer_stalled_holding_the_head_is_cut_off_and_writes_again(url, opened):  # noqa: F811
    stalled, other = open_log(url), open_log(url)
    opened.extend([stalled, other])
    stalled.append("run-a", [NewEvent("Started")])
    # As a writer frozen between two statements of its transaction: the head row is held.
    conn = stalled._writer  # type: ignore[attr-defined]
    conn.execute("BEGIN")
    conn.execute(_TAKE_HEAD)
    began = time.monotonic()
    (written,) = other.append("run-b", [NewEvent("Started")])
    waited = time.monotonic() - began
    # Without the session's own timeouts this append would wait for as long as the stall lasts.
    assert waited < WRITER_STALL_BOUND * 2 + 1, waited
    assert written.seq == 2
    # The stalled writer's session was ended by the server; its next append reconnects.
    (again,) = stalled.append("run-a", [NewEvent("Resumed")], expect=1)
    assert (again.seq, again.version) == (3, 2)
    assert [r.type for r in other.read_all()] == ["Started", "Started", "Resumed"]
    assert other.verify().ok
