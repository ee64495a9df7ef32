"""Reading a million-event log takes constant memory: read_all, follow and verify stream it."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
import uuid
from contextlib import closing
from datetime import UTC, datetime
from pathlib import Path

import pytest

from eventlog import GENESIS_HASH, open_log
from eventlog._append import EncodedEvent, chain_rows
from eventlog._chain import make_hasher
from eventlog._clock import to_micros
from eventlog._sqlite_row import INSERT, stored_rows

from . import workers

# A million events are written, then read three times: minutes, not seconds, on a busy machine.
pytestmark = [pytest.mark.slow, pytest.mark.timeout(400)]

EVENTS = 1_000_000
PER_STREAM = 100
CHUNK = 20_000
# Holding every record would take hundreds of MB (300 MB on disk); a streaming reader stays flat.
GROWTH_LIMIT_KIB = 50 * 1024
START = datetime(2026, 1, 1, tzinfo=UTC)


def write_chained(path: Path, count: int) -> None:
    """Insert `count` small events with a correct hash chain, straight through sqlite3 (fast)."""
    open_log(path).close()  # the schema, as the log creates it
    hasher = make_hasher()
    head_seq, head_hash = 0, GENESIS_HASH
    start_us = to_micros(START)
    with closing(sqlite3.connect(path, isolation_level=None)) as conn:
        conn.execute("PRAGMA synchronous = OFF")
        conn.execute("PRAGMA cache_size = -200000")
        conn.execute("BEGIN")
        for first in range(0, count, CHUNK):
            rows = []
            for s in range(first, min(first + CHUNK, count), PER_STREAM):
                events = [
                    EncodedEvent("Tiny", 1, b'{"i":%d}' % i, b"{}", str(u), u.bytes)
                    for i in range(s, min(s + PER_STREAM, count))
                    for u in [uuid.uuid4()]
                ]
                batch = chain_rows(
                    f"run-{s // PER_STREAM}", 0, events, head_seq, head_hash, start_us + s, hasher
                )
                head_seq, head_hash = batch[-1][0], batch[-1][10]
                rows.extend(stored_rows(batch, events))
            conn.executemany(INSERT, rows)
        conn.execute("COMMIT")


@pytest.fixture(scope="module")
def big_log(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("memory") / "big.db"
    write_chained(path, EVENTS)
    return path


def test_the_generated_log_is_a_valid_chain(big_log):
    with open_log(big_log, readonly=True) as log:
        assert log.head().seq == EVENTS
        first = list(log.read("run-0"))
        assert [r.version for r in first] == list(range(1, PER_STREAM + 1))
        assert [r.data["i"] for r in log.read_all(after_seq=EVENTS - 2)] == [EVENTS - 2, EVENTS - 1]


def test_reading_following_and_verifying_take_constant_memory(big_log):
    done = subprocess.run(
        [sys.executable, str(Path(workers.__file__)), "memory", str(big_log)],
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    report = json.loads(done.stdout)
    assert report["counts"] == {"read_all": EVENTS, "follow": EVENTS, "verify": EVENTS}
    assert report["verify_ok"]
    for stage in ("after_read_all", "after_follow", "peak"):
        growth = report[stage] - report["baseline"]
        assert growth < GROWTH_LIMIT_KIB, f"{stage}: peak RSS grew {growth} KiB over {report['baseline']} KiB"
