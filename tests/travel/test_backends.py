"""What replay and time travel need of a backend, on each: snapshots, typed reads, seq_at."""

from __future__ import annotations

from datetime import timedelta

from eventlog import ManualClock, NewEvent, Snapshot, snapshot_store
from projections import Views
from tools.bench.workload import bursts


def snap(seq: int, name: str = "v", version: int = 1, data: bytes | None = b"{}") -> Snapshot:
    return Snapshot(name, version, seq, f"h{seq}", f"d{seq}", len(data or b""), data)


def seq_of(snapshot: Snapshot | None) -> int | None:
    return None if snapshot is None else snapshot.seq


def test_the_store_puts_finds_lists_prunes_and_deletes(log):
    store = snapshot_store(log)
    assert snapshot_store(log) is store  # one store per log
    assert store.list() == []
    assert store.nearest("v", 1) is None
    for seq in (10, 20, 30):
        store.put(snap(seq))
    store.put(snap(25, version=2))
    assert seq_of(store.nearest("v", 1)) == 30
    assert seq_of(store.nearest("v", 1, at_or_below=29)) == 20
    assert store.nearest("v", 1, at_or_below=9) is None
    assert seq_of(store.nearest("v", 2)) == 25
    got = store.get("v", 1, 20)
    assert got is not None
    assert got.data == b"{}"
    assert [(s.version, s.seq) for s in store.list("v")] == [(1, 10), (1, 20), (1, 30), (2, 25)]
    assert all(s.data is None for s in store.list())  # a listing carries no data

    assert store.prune("v", 1, keep=1) == 2
    pruned = {s.seq: s for s in store.list("v") if s.version == 1}
    assert [pruned[10].pruned, pruned[20].pruned, pruned[30].pruned] == [True, True, False]
    assert pruned[10].digest == "d10"  # the digest outlives the data
    assert store.get("v", 1, 10) is None
    assert store.nearest("v", 1, at_or_below=29) is None

    store.put(snap(20, data=b"[1]"))  # the same name, version and seq: replaced
    again = store.get("v", 1, 20)
    assert again is not None
    assert again.data == b"[1]"
    assert store.delete("v", after_seq=20) == 2  # 30 and v2's 25
    assert store.delete() == 2
    assert store.list() == []


def fill(log, clock: ManualClock, runs: int = 4) -> int:
    total = 0
    for stream, events in bursts(runs, 3, clock):
        log.append(stream, events)
        total += len(events)
    return total


def test_views_store_snapshots_and_start_from_them(log, clock, log_factory):
    head = fill(log, clock)
    views = Views(log, snapshot_every=100)
    assert views.catch_up() == head
    assert {s.seq for s in snapshot_store(log).list()} >= {100, 200, 300}
    digests = views.digests()
    reopened = Views(log_factory(clock=clock))
    assert reopened.catch_up() == head
    assert max(reopened.runner.restored.values()) == 400
    assert reopened.digests() == digests
    assert reopened.digests(at=150) == Views(log, snapshots=None).digests(at=150)


def test_typed_reads_leave_the_other_types_out(log, clock):
    fill(log, clock, runs=2)
    wanted = {"RunHeartbeat", "ApprovalDecided"}
    typed = list(log.read_all(after_seq=20, to_seq=180, types=wanted))
    plain = [r for r in log.read_all(after_seq=20, to_seq=180) if r.type in wanted]
    assert typed == plain
    assert typed


def test_seq_at_finds_the_last_seq_at_or_before_a_time(log, clock):
    start = clock.now()
    for i in range(12):
        log.append(f"note-{i}", [NewEvent("Noted", {"i": i})])
        if i % 3 == 2:
            clock.advance(1)
    assert log.seq_at(start - timedelta(seconds=1)) == 0
    assert log.seq_at(start) == 3
    assert log.seq_at(start + timedelta(seconds=1, milliseconds=1)) == 6
    assert log.seq_at(start + timedelta(hours=1)) == 12
