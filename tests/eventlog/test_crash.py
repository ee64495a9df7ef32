"""Writers SIGKILLed at random moments lose nothing they acknowledged and leave no partial batch.

On SQLite the writers share a file; on PostgreSQL a schema (a killed client's open transaction
is rolled back by the server when its connection drops).
"""

from __future__ import annotations

import random
import signal
import sqlite3
import subprocess
import sys
import threading
from collections import Counter, defaultdict
from contextlib import closing
from pathlib import Path

import pytest

from eventlog import open_log
from tests.conftest import SHARED_BACKENDS

from . import workers

pytestmark = [pytest.mark.slow, pytest.mark.parametrize("backend", SHARED_BACKENDS, indirect=True)]

ROUNDS = 10
WRITERS = 2
WAIT = 20.0


class Writer:
    """A writer process and a thread collecting the batches it acknowledged."""

    def __init__(self, db: str, name: str, kill_after: int) -> None:
        self.name = name
        self.kill_after = kill_after
        self.acked: list[tuple[int, list[str]]] = []
        self.reached = threading.Event()
        if kill_after == 0:
            self.reached.set()
        self.proc = subprocess.Popen(
            [sys.executable, str(Path(workers.__file__)), "crash", db, name, "100000"],
            stdout=subprocess.PIPE,
        )
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            if not line.endswith(b"\n"):
                break  # cut off by the kill: the writer never finished acknowledging it
            batch, *ids = line.decode().split()
            self.acked.append((int(batch), ids))
            if len(self.acked) >= self.kill_after:
                self.reached.set()
        self.reached.set()  # the pipe closed: the process is gone

    def kill(self) -> None:
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(WAIT)
        self._reader.join(WAIT)
        assert self.proc.stdout is not None
        self.proc.stdout.close()
        assert self.proc.returncode == -signal.SIGKILL, f"{self.name} ended on its own"


def check(db: str, backend: str, writers: list[Writer]) -> int:
    if backend == "sqlite-file":
        with closing(sqlite3.connect(db)) as conn:
            assert conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
    with open_log(db) as log:
        result = log.verify()
        assert result.ok, result.reason
        records = list(log.read_all())
    assert result.checked == len(records)
    # Gap-free: no killed transaction left a hole (or a number it had taken) behind.
    assert [r.seq for r in records] == list(range(1, len(records) + 1))
    stored = {r.event_id for r in records}
    for w in writers:
        for batch, ids in w.acked:
            assert set(ids) <= stored, f"{w.name} batch {batch} was acknowledged but is lost"
    batches: dict[tuple[str, int], list] = defaultdict(list)
    for r in records:
        batches[r.data["writer"], r.data["batch"]].append(r)
    for key, recs in batches.items():
        # All or nothing, in one piece: three consecutive events of one stream, k = 0, 1, 2.
        assert [r.data["k"] for r in recs] == [0, 1, 2], f"partial or duplicated batch {key}"
        assert len({r.stream for r in recs}) == 1
        assert [r.version for r in recs] == list(range(recs[0].version, recs[0].version + 3))
        assert [r.seq for r in recs] == list(range(recs[0].seq, recs[0].seq + 3))
    assert not [i for i, n in Counter(r.event_id for r in records).items() if n > 1]
    return len(records)


def test_killed_writers_lose_nothing_acknowledged(db_target, backend):
    db = db_target
    rng = random.Random(20260101)
    total = 0
    for round_ in range(ROUNDS):
        # Some writers die before their first acknowledgement (even while opening the file).
        writers = [Writer(db, f"r{round_}w{n}", rng.choice([0, 1, 3, 8, 20, 40])) for n in range(WRITERS)]
        for w in writers:
            assert w.reached.wait(WAIT), f"{w.name} acknowledged only {len(w.acked)} batches"
            w.kill()
        count = check(db, backend, writers)
        assert count >= total, "records disappeared after a kill"
        total = count
    assert total > 0
