"""The event log contract: following, verifying, time and the event catalogue.

Every test here runs on every backend through the public `eventlog` API only (one test
also starts a second OS process, on the SQLite file backend).
"""

from __future__ import annotations

import subprocess
import sys
import threading
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

import eventlog
from eventlog import NewEvent, UnknownEventType, VerifyResult
from eventlog.events import Event, event, upcaster

WAIT = 10.0  # seconds a test waits for something that should take milliseconds
WORKERS = Path(__file__).with_name("workers.py")


@event("ContractNoted")
@dataclass(frozen=True, slots=True)
class Noted(Event):
    """A test event with a datetime, a tuple and an optional field."""

    note: str
    at: datetime
    tags: tuple[str, ...] = ()
    weight: float | None = None


@event("ContractRenamed", schema=2)
@dataclass(frozen=True, slots=True)
class Renamed(Event):
    """Schema 2 split schema 1's `name` into `full_name` and added `reason`."""

    full_name: str
    reason: str


@upcaster("ContractRenamed", 1)
def _renamed_v1_to_v2(data: dict[str, Any]) -> dict[str, Any]:
    return {"full_name": data["name"], "reason": "not recorded before schema 2"}


def ev(n: int) -> NewEvent:
    return NewEvent("Tested", {"n": n})


def skip_single_object(backend: str) -> None:
    if backend == "sqlite-memory":
        pytest.skip("an in-memory SQLite database lives inside one log object")


class Follower:
    """Follows a log on a thread until `count` records arrived or `stop` is set."""

    def __init__(self, log: eventlog.EventLog, after_seq: int, count: int) -> None:
        self.records: list[eventlog.Record] = []
        self.stop = threading.Event()
        self.caught_up = threading.Event()
        self.error: BaseException | None = None
        self._count = count
        self._thread = threading.Thread(target=self._run, args=(log, after_seq), daemon=True)
        self._thread.start()

    def _run(self, log: eventlog.EventLog, after_seq: int) -> None:
        try:
            for record in log.follow(after_seq, stop=self.stop, poll_interval=0.01):
                self.records.append(record)
                if len(self.records) >= self._count:
                    self.caught_up.set()
        except BaseException as e:
            self.error = e

    def finish(self) -> None:
        self.stop.set()
        self._thread.join(WAIT)
        assert not self._thread.is_alive(), "follow() did not end after stop was set"
        assert self.error is None, f"follow() raised {self.error!r}"


def test_follow_yields_new_commits_and_stops(log):
    log.append("run-1", [ev(0), ev(1)])
    follower = Follower(log, after_seq=1, count=4)
    appended = [log.append("run-1", [ev(2)]), log.append("run-2", [ev(3), ev(4)])]
    assert follower.caught_up.wait(WAIT)
    follower.finish()
    assert follower.records == list(log.read_all(after_seq=1))
    assert [r.seq for r in follower.records] == [2, 3, 4, 5]
    assert follower.records[1:] == [rec for batch in appended for rec in batch]


def test_follow_stops_while_waiting_for_commits(log):
    follower = Follower(log, after_seq=0, count=1)
    # Nothing is ever appended: the follower is parked waiting when stop is set.
    follower.finish()
    assert follower.records == []


def test_follow_ends_when_the_log_is_closed(log_factory, clock):
    log = log_factory(clock=clock)
    for b in range(3):
        log.append("run-1", [ev(b * 1000 + i) for i in range(1000)])
    seen = []
    # Closing from inside the loop makes the next page read meet a closed log, every time.
    for record in log.follow(stop=threading.Event()):
        seen.append(record.seq)
        if len(seen) == 10:
            log.close()
    assert seen[:10] == list(range(1, 11))
    assert len(seen) < 3000


def test_follow_sees_commits_through_a_second_log_object(log_factory, backend, clock):
    skip_single_object(backend)
    reader = log_factory(clock=clock)
    writer = log_factory(clock=clock)
    follower = Follower(reader, after_seq=0, count=3)
    writer.append("run-1", [ev(1)])
    writer.append("run-2", [ev(2), ev(3)])
    assert follower.caught_up.wait(WAIT), f"saw only {follower.records}"
    follower.finish()
    assert [r.event_id for r in follower.records] == [r.event_id for r in writer.read_all()]


def test_follow_sees_commits_of_another_process(log, backend):
    if backend != "sqlite-file":
        pytest.skip("another process opens the database by its path: SQLite file only")
    follower = Follower(log, after_seq=0, count=20)
    subprocess.run(
        [sys.executable, str(WORKERS), "append", log.url, "run-remote", "20"], check=True, timeout=60
    )
    assert follower.caught_up.wait(WAIT), f"saw only {len(follower.records)} of 20"
    follower.finish()
    assert [r.data["i"] for r in follower.records] == list(range(20))


def test_verify_an_untouched_log(log):
    assert log.verify() == VerifyResult(True, 0, None, "", log.head())
    for i in range(12):
        log.append(f"run-{i % 4}", [ev(i), ev(-i)])
    head = log.head()
    result = log.verify()
    assert result.ok, result.reason
    assert (result.checked, result.first_bad_seq, result.reason, result.head) == (24, None, "", head)
    middle = next(log.read_all(after_seq=9))
    assert log.verify(anchor=head).ok
    assert log.verify(anchor=(middle.seq, middle.hash)).ok
    progress: list[int] = []
    assert log.verify(progress=progress.append).ok
    assert progress[-1] == 24


def test_verify_with_an_anchor_catches_a_foreign_hash(log):
    for i in range(5):
        log.append("run-1", [ev(i)])
    result = log.verify(anchor=(3, "f" * 64))
    assert not result.ok
    assert result.first_bad_seq == 3
    ahead = log.verify(anchor=(9, log.head().hash))
    assert (ahead.ok, ahead.first_bad_seq) == (False, 6)


def test_hmac_keyed_chain_verifies_only_with_its_key(log_factory, backend, clock):
    keyed = log_factory(clock=clock, hmac_key=b"secret-1")
    recs = keyed.append("run-1", [ev(1), ev(2)]) + keyed.append("run-2", [ev(3)])
    assert keyed.verify().ok
    skip_single_object(backend)
    plain = log_factory(clock=clock)
    wrong = log_factory(clock=clock, hmac_key=b"secret-2")
    for other in (plain, wrong):
        result = other.verify()
        assert not result.ok
        assert result.first_bad_seq == 1
        assert result.reason
    again = log_factory(clock=clock, hmac_key=b"secret-1")
    assert again.verify().ok
    assert [r.hash for r in again.read_all()] == [r.hash for r in recs]


def test_recorded_at_comes_from_the_injected_clock(log, clock):
    first = log.append("run-1", [ev(1)])[0]
    later = clock.advance(hours=3, microseconds=7)
    second = log.append("run-1", [ev(2), ev(3)])
    assert first.recorded_at == datetime(2026, 1, 1, tzinfo=UTC)
    assert [r.recorded_at for r in second] == [later, later]
    assert later.utcoffset() == timedelta(0)
    assert [r.recorded_at for r in log.read_all()] == [first.recorded_at, later, later]


class BackwardsClock:
    """A clock that jumps back an hour every time it is read (an NTP step, a bad host)."""

    def __init__(self) -> None:
        self.start = self._now = datetime(2026, 6, 1, 12, tzinfo=UTC)

    def now(self) -> datetime:
        now = self._now
        self._now -= timedelta(hours=1)
        return now


def test_recorded_at_never_decreases_along_seq(log_factory):
    clock = BackwardsClock()
    log = log_factory(clock=clock)
    for i in range(6):
        log.append(f"run-{i % 2}", [ev(i), ev(i)])
    stamps = [r.recorded_at for r in log.read_all()]
    assert stamps[0] == clock.start
    assert stamps == sorted(stamps)


def test_catalogue_events_append_directly_and_decode(log, clock):
    note = Noted("hello", at=clock.now(), tags=("a", "b"), weight=0.5)
    recs = log.append("note-1", [note, NewEvent("Tested", {"n": 1}), Noted("bye", at=clock.now())])
    assert [r.type for r in recs] == ["ContractNoted", "Tested", "ContractNoted"]
    assert recs[0].schema == 1
    stored = list(log.read("note-1"))
    assert eventlog.decode(stored[0]) == note
    assert eventlog.decode(stored[2]) == Noted("bye", at=clock.now())
    assert type(eventlog.decode(stored[0]).tags) is tuple
    with pytest.raises(UnknownEventType):
        eventlog.decode(stored[1])


def test_encoded_catalogue_events_are_idempotent(log, clock):
    note = Noted("once", at=clock.now())
    first = log.append("note-1", [eventlog.encode(note, meta={"actor": "bob"}, event_id="e-1")])
    again = log.append("note-1", [eventlog.encode(note, meta={"actor": "bob"}, event_id="e-1")])
    assert again == first
    assert first[0].meta == {"actor": "bob"}
    assert first[0].event_id == "e-1"


def test_old_schema_is_upcast_on_read(log):
    log.append("person-1", [NewEvent("ContractRenamed", {"name": "Ada"}, schema=1)])
    log.append("person-1", [Renamed("Grace Hopper", "married")])
    old, new = log.read("person-1")
    assert (old.schema, old.data) == (1, {"name": "Ada"})  # stored as written, never rewritten
    assert new.schema == 2
    assert eventlog.decode(old) == Renamed("Ada", "not recorded before schema 2")
    assert eventlog.decode(new) == Renamed("Grace Hopper", "married")


# -- searching payloads, and a file whole by itself ---------------------------------------------


def test_seqs_containing_finds_payload_text_newest_first_ignoring_case(log_factory):
    log = log_factory()
    log.append("deploy-1", [NewEvent("DeployRequested", {"cmd": "kubectl rollout restart deploy/web"})])
    log.append("deploy-2", [NewEvent("DeployRequested", {"cmd": "echo hello"})])
    log.append("deploy-3", [NewEvent("DeployRequested", {"note": "run KUBECTL again", "n": 3})])
    assert log.seqs_containing("kubectl") == [3, 1]
    assert log.seqs_containing("KubeCTL", limit=1) == [3]
    assert log.seqs_containing("nothing like it") == []
    assert log.seqs_containing("deploy-1") == []  # the data only: not the stream's name


def test_a_checkpointed_log_file_is_whole_by_itself(backend, tmp_path, log_factory):
    log = log_factory()
    log.append("deploy-1", [NewEvent("DeployRequested", {"n": i}) for i in range(5)])
    log.checkpoint()  # a no-op where no write-ahead file sits beside the database
    if backend != "sqlite-file":
        return
    path = Path(log.path)  # type: ignore[attr-defined]
    wal = Path(f"{path}-wal")
    assert not wal.exists() or wal.stat().st_size == 0
    copy = tmp_path / "copy.db"
    copy.write_bytes(path.read_bytes())  # the file alone, as `cp` copies it while the log is open
    with eventlog.open_log(copy, readonly=True) as alone:
        assert alone.head() == log.head()
